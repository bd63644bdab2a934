package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/callid"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/otc"
)

// idemUpstream is an OTC server whose tools count their runs and record
// what they were sent.
type idemUpstream struct {
	mu      sync.Mutex
	runs    int
	seen    []otc.CallToolRequest
	release chan struct{} // Slow.Run waits for it
	srv     *httptest.Server
}

func newIdemUpstream(t *testing.T, keepCallIDs bool) *idemUpstream {
	t.Helper()
	u := &idemUpstream{release: make(chan struct{})}
	run := func(ctx context.Context, c *otc.Call) (json.RawMessage, error) {
		if c.Tool.ID == "Slow.Run@1.0.0" {
			select {
			case <-u.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		u.mu.Lock()
		defer u.mu.Unlock()
		u.runs++
		u.seen = append(u.seen, *c.Request)
		return json.RawMessage(fmt.Sprintf(`{"run":%d}`, u.runs)), nil
	}
	strict := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"where"}},"required":["path"],"additionalProperties":false}`)
	own := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"where"},"idempotency_key":{"type":"string","description":"the tool's own"}}}`)
	var tools []otc.Tool
	for _, d := range []struct {
		id     string
		schema json.RawMessage
	}{{"Files.Write@1.0.0", strict}, {"Own.Keyed@1.0.0", own}, {"Slow.Run@1.0.0", strict}} {
		key, version, _ := strings.Cut(d.id, "@")
		tools = append(tools, otc.Tool{Definition: otc.ToolDefinition{ID: d.id, Name: strings.ReplaceAll(key, ".", "_"), Description: "d", Version: version,
			InputSchema: d.schema}, Func: run})
	}
	opts := &otc.Options{}
	if keepCallIDs {
		opts.IdempotencyTTL = time.Minute
	}
	h, err := otc.NewHandler(tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	u.srv = httptest.NewServer(h)
	t.Cleanup(u.srv.Close)
	return u
}

func (u *idemUpstream) stats() (int, []otc.CallToolRequest) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs, append([]otc.CallToolRequest(nil), u.seen...)
}

// idemFront is an MCP front over u, behind a trusted proxy (loopback), so
// that each test client is the address its X-Forwarded-For names.
func idemFront(t *testing.T, u *idemUpstream) string {
	t.Helper()
	client, err := otc.NewClient(u.srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewMCPFront(context.Background(), []OTCServer{{Name: "u", Client: client}}, &MCPFrontOptions{CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.Server().StreamableHTTPHandler(&front.HTTPOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
	t.Cleanup(srv.Close)
	return srv.URL + front.StreamablePath
}

// idemClient is one MCP client, seen by the front as the address xff.
type idemClient struct {
	url, xff, session string
}

func newIdemClient(t *testing.T, url, xff string) *idemClient {
	c := &idemClient{url: url, xff: xff}
	_, c.session = c.post(t, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "t", "version": "0"}})
	return c
}

func (c *idemClient) post(t *testing.T, method string, params any) (map[string]any, string) {
	t.Helper()
	return mcpPostWith(t, c.url, c.session, method, params, http.Header{"X-Forwarded-For": {c.xff}})
}

// call makes a tools/call and returns its result's text and isError (a
// JSON-RPC error fails the test).
func (c *idemClient) call(t *testing.T, tool string, args map[string]any) (text string, isError bool) {
	t.Helper()
	m, _ := c.post(t, "tools/call", map[string]any{"name": tool, "arguments": args})
	res, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("tools/call %s %v: %v", tool, args, m)
	}
	content, _ := res["content"].([]any)
	if len(content) > 0 {
		text, _ = content[0].(map[string]any)["text"].(string)
	}
	isError, _ = res["isError"].(bool)
	return text, isError
}

// An idempotency_key the tool does not declare is taken out of the input
// and becomes the OTC call_id, scoped to the caller: a repeat gets the
// first answer without a second run (the OTC server keeps no call_ids: the
// front's own store answers), the same key with other input is an isError
// the model reads, another caller's same key is its own, a tool that
// declares the argument gets it, and a key that is not a string is said so.
func TestIdempotencyKey(t *testing.T) {
	u := newIdemUpstream(t, false)
	url := idemFront(t, u)
	a, b := newIdemClient(t, url, "203.0.113.5"), newIdemClient(t, url, "203.0.113.6")

	first, isErr := a.call(t, "Files_Write", map[string]any{"path": "/a", "idempotency_key": "k1"})
	if isErr || first != `{"run":1}` {
		t.Fatalf("first call with a key: %q isError=%v (a strict schema refused the key?)", first, isErr)
	}
	runs, seen := u.stats()
	if runs != 1 || string(seen[0].Input) != `{"path":"/a"}` || seen[0].CallID == "k1" || !strings.HasSuffix(seen[0].CallID, "-k1") ||
		!strings.HasPrefix(seen[0].CallID, "p") || len(seen[0].CallID) > callid.MaxBytes {
		t.Fatalf("the upstream got %+v (%d runs), want the input without the key and the key scoped to the caller as call_id", seen, runs)
	}
	if again, isErr := a.call(t, "Files_Write", map[string]any{"path": "/a", "idempotency_key": "k1"}); isErr || again != first {
		t.Errorf("repeat: %q isError=%v, want the first answer %q", again, isErr, first)
	}
	if runs, _ := u.stats(); runs != 1 {
		t.Errorf("a repeat ran the tool again: %d runs", runs)
	}

	// The same key for another call: refused, readable, not run.
	text, isErr := a.call(t, "Files_Write", map[string]any{"path": "/b", "idempotency_key": "k1"})
	if !isErr || !strings.Contains(text, `idempotency_key "k1" was already used for a different call`) || !strings.Contains(text, "this call was not run") {
		t.Errorf("same key, other input: %q isError=%v", text, isErr)
	}
	// Another caller's k1 is another key.
	if text, isErr := b.call(t, "Files_Write", map[string]any{"path": "/b", "idempotency_key": "k1"}); isErr || text != `{"run":2}` {
		t.Errorf("another caller, same key: %q isError=%v, want its own run", text, isErr)
	}
	runs, seen = u.stats()
	if runs != 2 || seen[1].CallID == seen[0].CallID || !strings.HasSuffix(seen[1].CallID, "-k1") {
		t.Errorf("two callers' k1 reached the upstream as %q and %q (%d runs)", seen[0].CallID, seen[1].CallID, runs)
	}

	// No key: every call runs, with a call_id of its own.
	a.call(t, "Files_Write", map[string]any{"path": "/a"})
	a.call(t, "Files_Write", map[string]any{"path": "/a"})
	runs, seen = u.stats()
	if runs != 4 || seen[2].CallID == seen[3].CallID {
		t.Errorf("calls without a key: %d runs, call_ids %q %q", runs, seen[2].CallID, seen[3].CallID)
	}

	// A tool that declares idempotency_key gets it as an argument.
	a.call(t, "Own_Keyed", map[string]any{"path": "/a", "idempotency_key": "mine"})
	a.call(t, "Own_Keyed", map[string]any{"path": "/a", "idempotency_key": "mine"})
	runs, seen = u.stats()
	if runs != 6 || !strings.Contains(string(seen[4].Input), `"idempotency_key":"mine"`) || strings.HasSuffix(seen[4].CallID, "-mine") {
		t.Errorf("a tool's own idempotency_key: %d runs, sent %s with call_id %q", runs, seen[4].Input, seen[4].CallID)
	}

	// A key that is not a usable string.
	for _, bad := range []any{5, "", strings.Repeat("x", callid.MaxBytes+1)} {
		text, isErr := a.call(t, "Files_Write", map[string]any{"path": "/a", "idempotency_key": bad})
		if !isErr || !strings.Contains(text, "idempotency_key must be a string of 1 to 256 bytes") {
			t.Errorf("idempotency_key %.20v: %q isError=%v", bad, text, isErr)
		}
	}
	if runs, _ := u.stats(); runs != 6 {
		t.Errorf("a bad key ran the tool: %d runs", runs)
	}
}

// Repeats that arrive while the first call runs wait for its answer: one
// run for all of them.
func TestIdempotencyKeyConcurrentRepeats(t *testing.T) {
	u := newIdemUpstream(t, false)
	a := newIdemClient(t, idemFront(t, u), "203.0.113.5")
	var wg sync.WaitGroup
	texts := make([]string, 4)
	for i := range texts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			texts[i], _ = a.call(t, "Slow_Run", map[string]any{"path": "/a", "idempotency_key": "once"})
		}()
	}
	time.Sleep(200 * time.Millisecond) // all four in: one runs, three wait
	close(u.release)
	wg.Wait()
	runs, _ := u.stats()
	for _, text := range texts {
		if text != `{"run":1}` {
			t.Errorf("answers %q, want the one run's answer for all", texts)
			break
		}
	}
	if runs != 1 {
		t.Errorf("%d runs for four calls with one key", runs)
	}
}

// Two replicas of the front do not share their stores: the OTC server's
// own call_id store (serve-otc) answers the repeat that reaches the other
// replica, and its refusal of the same key for another call is the same
// isError result.
func TestIdempotencyKeyAcrossReplicas(t *testing.T) {
	u := newIdemUpstream(t, true)
	one, two := newIdemClient(t, idemFront(t, u), "203.0.113.5"), newIdemClient(t, idemFront(t, u), "203.0.113.5")
	first, _ := one.call(t, "Files_Write", map[string]any{"path": "/a", "idempotency_key": "k2"})
	if again, isErr := two.call(t, "Files_Write", map[string]any{"path": "/a", "idempotency_key": "k2"}); isErr || again != first {
		t.Errorf("the repeat at the other replica: %q isError=%v, want %q", again, isErr, first)
	}
	text, isErr := two.call(t, "Files_Write", map[string]any{"path": "/b", "idempotency_key": "k2"})
	if !isErr || !strings.Contains(text, `idempotency_key "k2" was already used for a different call`) {
		t.Errorf("same key, other input, at the other replica: %q isError=%v", text, isErr)
	}
	if runs, _ := u.stats(); runs != 1 {
		t.Errorf("%d runs, want 1", runs)
	}
}

// The store is bounded per caller and in time: a caller's oldest answers
// go first, never another caller's; answers expire after the TTL; a
// caller's running calls have a bound of their own.
func TestIdemStoreBounds(t *testing.T) {
	now := time.Unix(0, 0)
	s := newIdemStore(time.Minute, func() time.Time { return now })
	ok := func(n int) func() (*otc.CallToolResponse, error) {
		return func() (*otc.CallToolResponse, error) {
			return &otc.CallToolResponse{Success: true, Value: json.RawMessage(fmt.Sprint(n))}, nil
		}
	}
	ctx := context.Background()
	var print [32]byte
	if _, _, err := s.do(ctx, "y-0", "y", print, ok(0)); err != nil {
		t.Fatal(err)
	}
	for i := range idemMaxPerPrincipal + 1 {
		if _, _, err := s.do(ctx, fmt.Sprintf("x-%d", i), "x", print, ok(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := s.kept(); n != idemMaxPerPrincipal+1 {
		t.Errorf("%d answers kept, want %d of x and 1 of y", n, idemMaxPerPrincipal)
	}
	ran := false
	if _, replayed, _ := s.do(ctx, "x-0", "x", print, func() (*otc.CallToolResponse, error) { ran = true; return ok(0)() }); replayed || !ran {
		t.Errorf("x's oldest answer was not the one dropped")
	}
	if _, replayed, _ := s.do(ctx, "y-0", "y", print, ok(0)); !replayed {
		t.Errorf("y's answer was dropped for x's")
	}
	now = now.Add(time.Minute + time.Second)
	if _, replayed, _ := s.do(ctx, "y-0", "y", print, ok(0)); replayed {
		t.Errorf("an answer outlived the TTL")
	}

	// Running: at most idemMaxRunningPerPrincipal for one caller.
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range idemMaxRunningPerPrincipal {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _ = s.do(ctx, fmt.Sprintf("r-%d", i), "r", print, func() (*otc.CallToolResponse, error) { <-release; return ok(i)() })
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := s.store.Running("r")
		if n == idemMaxRunningPerPrincipal || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, _, err := s.do(ctx, "r-extra", "r", print, ok(0)); err != errIdemBusy {
		t.Errorf("caller r's call beyond its running bound: %v, want errIdemBusy", err)
	}
	if _, _, err := s.do(ctx, "q-1", "q", print, ok(0)); err != nil {
		t.Errorf("another caller while r is at its bound: %v", err)
	}
	close(release)
	wg.Wait()
}
