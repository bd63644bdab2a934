package policy_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/bridge/policy"
	"github.com/mcpotc/mcpotc/bridge/state"
	"github.com/mcpotc/mcpotc/internal/redistest"
)

// Limiter.Admit under a caller's context that has ended (the caller hung
// up) decides nothing: Decision.Gone, no token taken, and the shared
// store (a real redis-server) is not reported down. Both fronts admit
// through it (serve-otc's Options.Admit, serve-mcp's tool handler). A
// caller still there gets its 2 calls from the shared bucket, then a
// refusal. (Before: the store's "context canceled" was read as the store
// down — onDown told, the call counted in the local bucket and admitted.)
func TestAdmitCallerGoneIsNotStoreDown(t *testing.T) {
	r, err := state.Open(redistest.Start(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	limits, _ := policy.NewLimits(&policy.Rate{Requests: 2, Per: time.Hour}, nil)
	var downs []error
	l := policy.NewLimiter(limits, r, nil, func(err error) { downs = append(downs, err) })
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 5 {
		if d := l.Admit(gone, "mallory", "up", "tool"); !d.Gone || d.Wait != 0 {
			t.Fatalf("admission %d of a caller gone: %+v, want Gone", i+1, d)
		}
	}
	if len(downs) != 0 {
		t.Errorf("the store was reported down %d times: %v", len(downs), downs)
	}
	for i := range 2 {
		if d := l.Admit(context.Background(), "mallory", "up", "tool"); d.Gone || d.Wait != 0 {
			t.Errorf("mallory's call %d: %+v, want admitted", i+1, d)
		}
	}
	if d := l.Admit(context.Background(), "mallory", "up", "tool"); d.Wait <= 0 || d.Limit != policy.LimitPrincipal {
		t.Errorf("mallory's third call: %+v, want refused by the principal limit", d)
	}
	if len(downs) != 0 {
		t.Errorf("the store was reported down: %v", downs)
	}
}
