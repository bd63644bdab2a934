package otc_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/otctest"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/otcsample"
)

// TestIdempotencyGmailNotReplayedToAnotherCaller: a second caller reusing
// the call_id of a Gmail.GetEmails call (sample toolkit) gets a 400, never
// the first caller's emails: without a token (missing requirements), and
// with another token (the call's context differs).
func TestIdempotencyGmailNotReplayedToAnotherCaller(t *testing.T) {
	h, err := otcsample.New(nil).Handler(&otc.Options{IdempotencyTTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	call := func(context string) (int, map[string]any) {
		return otctest.PostCall(t, srv.URL, []byte(`{"tool_id":"Gmail.GetEmails","call_id":"gmail-1","input":{}`+context+`}`))
	}
	status, first := call(`,"context":{"authorization":[{"id":"google","token":"token-of-alice"}]}`)
	if status != 200 || first["success"] != true {
		t.Fatalf("alice: %d %v", status, first)
	}
	if status, got := call(``); status != 400 || got["value"] != nil {
		t.Errorf("no token, same call_id: %d %v; want 400 without alice's emails", status, got)
	}
	status, got := call(`,"context":{"authorization":[{"id":"google","token":"token-of-mallory"}]}`)
	if status != 400 || got["value"] != nil || !strings.Contains(got["message"].(string), "already used") {
		t.Errorf("another token, same call_id: %d %v; want 400 without alice's emails", status, got)
	}
	// Alice's own repeat is replayed.
	if status, again := call(`,"context":{"authorization":[{"id":"google","token":"token-of-alice"}]}`); status != 200 || again["duration"] != first["duration"] {
		t.Errorf("alice's repeat: %d %v", status, again)
	}
}
