//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// scaleMCPSession: the official Go SDK client opens one 2025-11-25 session
// through HAProxy, which spreads its requests round robin over three
// serve-mcp replicas started as the README says (--session-key-env, no
// stickiness, no shared store), and makes 1,000 calls in it: none fails,
// every replica serves some, the session id stays the one initialize gave.
func scaleMCPSession(t *testing.T, url string, reps []*scaleReplica, count *scaleCounter) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const served = `"message":"call"` // serve-mcp's log line of a call
	before := make([]int, len(reps))
	for i, r := range reps {
		before[i] = strings.Count(r.p.Stderr(), served)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "scale-out", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url}, &sdk.ClientSessionOptions{ProtocolVersion: proto20251125})
	if err != nil {
		t.Fatalf("connect through HAProxy: %v", err)
	}
	defer cs.Close()
	session := cs.ID()
	if !strings.HasPrefix(session, "mcp-s1.") {
		t.Fatalf("session id %q: want a signed one (mcp-s1.…)", session)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var name string
	for _, tl := range tools.Tools {
		if strings.HasSuffix(tl.Name, "work") {
			name = tl.Name
		}
	}
	if name == "" {
		t.Fatalf("no work tool through serve-mcp: %v", tools.Tools)
	}

	const calls = 1000
	errs := 0
	for i := range calls {
		key := fmt.Sprintf("mcp-%d", i)
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: map[string]any{"key": key, "ms": 0}})
		var text string
		if err == nil && len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*sdk.TextContent); ok {
				text = tc.Text
			}
		}
		if err != nil || res.IsError || !strings.HasPrefix(text, "key="+key+" run=") {
			errs++
			if errs <= 5 {
				t.Errorf("call %d: %v %q", i, err, text)
			}
		}
	}
	execs := 0
	for i := range calls {
		started, _ := count.get(fmt.Sprintf("mcp-%d", i))
		execs += started
	}
	per := make([]int, len(reps))
	for i, r := range reps {
		per[i] = strings.Count(r.p.Stderr(), served) - before[i]
		if per[i] == 0 {
			t.Errorf("serve-mcp replica %d served none of the calls: HAProxy should spread them", i)
		}
	}
	if cs.ID() != session {
		t.Errorf("the session id changed: %q, then %q", session, cs.ID())
	}
	if execs != calls {
		t.Errorf("%d executions for %d calls", execs, calls)
	}
	t.Logf("scale-out: one MCP session (protocol 2025-11-25, official Go SDK client) through HAProxy over 3 serve-mcp replicas: %d calls, %d executions, %d errors; calls served by replica: %v", calls, execs, errs, per)
}
