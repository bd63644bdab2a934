//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// scaleMCPSession: the official Go SDK client opens one 2025-11-25 session
// through HAProxy, which spreads its requests round robin over three
// serve-mcp replicas started as the README says (--session-key-env, no
// stickiness, no shared store), and makes 1,000 calls in it, restart
// called halfway (a replica killed and started again): none fails, every
// replica serves some (the restarted one after its restart), the session
// id stays the one initialize gave.
func scaleMCPSession(t *testing.T, url string, reps []*scaleReplica, count *scaleCounter, restart func()) {
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
		if i == calls/2 {
			restart()
		}
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
	// Replica 0's count starts again with its restart.
	per := make([]int, len(reps))
	for i, r := range reps {
		per[i] = strings.Count(r.p.Stderr(), served)
		if i > 0 {
			per[i] -= before[i]
		}
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
	t.Logf("scale-out: one MCP session (protocol 2025-11-25, official Go SDK client) through HAProxy over 3 serve-mcp replicas, replica 0 killed (SIGKILL) and restarted after call 500: %d calls, %d executions, %d errors; calls served by replica (replica 0 after its restart): %v", calls, execs, errs, per)
}

// scaleKillUnderLoad: 64 OTC callers through HAProxy, each making calls
// with call_ids of its own one after the other and repeating a call (same
// call_id) when the answer says it may (a connection error, a 502/503/504
// from HAProxy, x-should-retry: true), while replica victim is killed with
// SIGKILL. At least 99.9 % of the calls are answered; no call_id runs
// twice: a call the killed replica had claimed (the MCP server may have
// run it, its answer died with the replica) is answered "The outcome of
// this call is unknown" once the dead replica's lease ended, and only a
// call started before the kill can be one.
func scaleKillUnderLoad(t *testing.T, lb, toolID string, victim *scaleReplica, count *scaleCounter) {
	const callers, ms, maxAttempts = 64, 50, 40
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	type outcome struct {
		id       string
		start    time.Time
		answered bool
		attempts int
		took     time.Duration
		last     scaleAnswer
	}
	var mu sync.Mutex
	var outcomes []outcome
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				o := outcome{id: fmt.Sprintf("kill-%d-%d", i, n), start: start}
				for backoff := 50 * time.Millisecond; o.attempts < maxAttempts && ctx.Err() == nil; backoff = min(2*backoff, time.Second) {
					o.attempts++
					o.last = scaleCall(ctx, lb, toolID, o.id, o.id, ms)
					if o.answered = o.last.value() != ""; o.answered {
						break
					}
					if o.last.err == nil && o.last.status != http.StatusBadGateway && o.last.status != http.StatusServiceUnavailable &&
						o.last.status != http.StatusGatewayTimeout && o.last.header.Get("x-should-retry") != "true" {
						break // an answer that says not to repeat
					}
					time.Sleep(backoff)
				}
				o.took = time.Since(start)
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(2 * time.Second)
	killed := time.Now()
	if err := syscall.Kill(victim.p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.p.Done()
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	valued, unknown, unknownRan, retried, twice := 0, 0, 0, 0, 0
	var slowest time.Duration
	for _, o := range outcomes {
		switch {
		case o.answered:
			valued++
		case o.last.err == nil && o.last.body["message"] == "The outcome of this call is unknown":
			unknown++
			slowest = max(slowest, o.took)
			if started, _ := count.get(o.id); started == 1 {
				unknownRan++
			}
			if !o.start.Before(killed) {
				t.Errorf("%s: outcome unknown, but it started after the kill: %v", o.id, o.last)
			}
		default:
			t.Logf("%s not answered after %d attempts: %v", o.id, o.attempts, o.last)
		}
		if o.attempts > 1 {
			retried++
		}
		started, _ := count.get(o.id)
		if started > 1 {
			twice++
			t.Errorf("%s ran %d times", o.id, started)
		}
		if started == 0 && o.answered {
			t.Errorf("%s answered, the tool never ran", o.id)
		}
	}
	calls := len(outcomes)
	answered := valued + unknown
	if calls == 0 || float64(answered) < 0.999*float64(calls) {
		t.Errorf("%d of %d calls answered, want ≥ 99.9 %%", answered, calls)
	}
	t.Logf("scale-out: 64 callers through HAProxy, one of 3 replicas killed (SIGKILL) after 2 s, 3 s more of load: %d calls, %d answered (%.2f %%): %d with the tool's value, "+
		"%d \"outcome unknown\" (claimed by the killed replica at the kill, %d of them had reached the tool; answered after at most %v, once its leases ended); %d repeated by their client; %d double executions",
		calls, answered, 100*float64(answered)/float64(max(calls, 1)), valued, unknown, unknownRan, slowest.Round(100*time.Millisecond), retried, twice)
}
