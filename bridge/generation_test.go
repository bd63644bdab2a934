package bridge

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/policy"
	"github.com/mcpotc/mcpotc/mcp/mcpsample"
	"github.com/mcpotc/mcpotc/mcp/upstream"
)

// A reload publishes the catalog and its controls as one value (docs/operations.md,
// Reload without restart; issue 34 item 4). Two configurations: in A the tool is not
// served at all, and every caller sees every tool; in B it is served, to
// admins only. Neither lets an anonymous caller see or call it, and none
// of its lists and calls may, whatever moment of a reload they hit:
// reloadHook stretches the moment between the configuration's swap and
// its publication (where the old code had published the new catalog but
// not yet its controls), and lists and calls from there and from
// goroutines that run throughout.

// withReloadHook sets reloadHook for the test.
func withReloadHook(t *testing.T, hook func()) {
	t.Helper()
	prev := reloadHook
	reloadHook = hook
	t.Cleanup(func() { reloadHook = prev })
}

// reloadRace runs check from inside the reload (reloadHook), from two
// goroutines throughout, and after each of 20 reloads that alternate
// between configuration B (toB) and A.
func reloadRace(t *testing.T, check func(where string), reload func(toB bool) error) {
	t.Helper()
	withReloadHook(t, func() { check("during a reload") })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				check("concurrently")
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for i := range 20 {
		if err := reload(i%2 == 0); err != nil {
			t.Fatal(err)
		}
		check("after a reload")
	}
}

func TestOTCFrontReloadPublishesCatalogWithControls(t *testing.T) {
	ctx := context.Background()
	anyone := func(tools ...string) *Controls {
		rules := []policy.Rule{{Claims: map[string][]string{"groups": {"admins"}}, Tools: []string{"*"}}}
		rules = append(rules, policy.Rule{Anyone: true, Tools: tools})
		a, err := policy.NewAccess(rules)
		if err != nil {
			t.Fatal(err)
		}
		return &Controls{Access: a}
	}
	server := func(deny ...string) MCPServer {
		return MCPServer{Toolkit: "Sample", Deny: deny, Config: upstream.Config{Name: "sample", InProcess: upstream.Piped(mcpsample.ServeStdio)}}
	}
	cfgA := OTCFrontConfig{Upstreams: []MCPServer{server("fail")}, Controls: anyone("*")}
	cfgB := OTCFrontConfig{Upstreams: []MCPServer{server()}, Controls: anyone("Sample.echo", "Sample.add", "Sample.slow")}
	f, err := NewOTCFront(ctx, cfgA.Upstreams, &OTCFrontOptions{Logger: zerolog.Nop(), Controls: cfgA.Controls})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	do := func(method, path, body string) (int, string) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("OXP-Version", "1.0")
		r.RemoteAddr = "192.0.2.7:4000" // anonymous
		f.Handler().ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	waitListed(ctx, []*upConn{f.upstreams()[0].upConn}, ReloadListWait)
	if code, body := do(http.MethodGet, "/tools", ""); code != 200 || !strings.Contains(body, `"Sample.echo@`) {
		t.Fatalf("GET /tools = %d %s", code, body)
	}
	var mu sync.Mutex
	var leaks []string
	// check lists and calls as the anonymous caller: the hidden tool is
	// never listed, and its call never runs (400: not served).
	check := func(where string) {
		if code, body := do(http.MethodGet, "/tools", ""); code != 200 || strings.Contains(body, "Sample.fail") || !strings.Contains(body, "Sample.echo") {
			mu.Lock()
			leaks = append(leaks, where+": GET /tools = "+body)
			mu.Unlock()
		}
		if code, body := do(http.MethodPost, "/tools/call", `{"request":{"tool_id":"Sample.fail","input":{"message":"x"}}}`); code != http.StatusBadRequest {
			mu.Lock()
			leaks = append(leaks, where+": call of Sample.fail = "+body)
			mu.Unlock()
		}
	}
	reloadRace(t, check, func(toB bool) error {
		if toB {
			return f.Reload(ctx, cfgB)
		}
		return f.Reload(ctx, cfgA)
	})
	if len(leaks) > 0 {
		t.Fatalf("%d lists or calls showed a tool neither configuration lets them see; first: %s", len(leaks), leaks[0])
	}
	// The honest flow: an admin sees it under B (TestOTCFrontControls
	// covers tokens); the anonymous caller still calls what it may.
	if code, body := do(http.MethodPost, "/tools/call", `{"request":{"tool_id":"Sample.echo","input":{"message":"hi"}}}`); code != 200 || !strings.Contains(body, "hi") {
		t.Errorf("call of Sample.echo = %d %s", code, body)
	}
}

func TestMCPFrontReloadPublishesCatalogWithControls(t *testing.T) {
	ctx := context.Background()
	aServer, bServer := &recordingOTC{}, &recordingOTC{}
	aServer.set(toolDef("A.Open@1.0.0", "A_Open"))
	bServer.set(toolDef("B.Admin@1.0.0", "B_Admin"))
	a := otcUpstreamOn(t, "a", "", aServer)
	b := otcUpstreamOn(t, "b", "", bServer)
	a.Revision, b.Revision = "r1", "r1"
	controls := func(tools ...string) *Controls {
		acc, err := policy.NewAccess([]policy.Rule{
			{Claims: map[string][]string{"groups": {"admins"}}, Tools: []string{"*"}},
			{Anyone: true, Tools: tools},
		})
		if err != nil {
			t.Fatal(err)
		}
		return &Controls{Access: acc}
	}
	// A: no B_Admin served, everyone sees everything; B: B_Admin served, to admins.
	cfgA := MCPFrontConfig{Upstreams: []OTCServer{a}, Controls: controls("*")}
	cfgB := MCPFrontConfig{Upstreams: []OTCServer{a, b}, Controls: controls("A_*")}
	f, err := NewMCPFront(ctx, cfgA.Upstreams, &MCPFrontOptions{Logger: zerolog.Nop(), Controls: cfgA.Controls})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var leaks []string
	check := func(where string) {
		list, _ := json.Marshal(mcpMessage(t, f, 1, "tools/list", `{}`))
		if strings.Contains(string(list), "B_Admin") || !strings.Contains(string(list), "A_Open") {
			mu.Lock()
			leaks = append(leaks, where+": tools/list = "+string(list))
			mu.Unlock()
		}
		if call := mcpMessage(t, f, 2, "tools/call", `{"name":"B_Admin","arguments":{}}`); call["error"] == nil {
			b, _ := json.Marshal(call)
			mu.Lock()
			leaks = append(leaks, where+": tools/call B_Admin = "+string(b))
			mu.Unlock()
		}
	}
	reloadRace(t, check, func(toB bool) error {
		if toB {
			return f.Reload(ctx, cfgB)
		}
		return f.Reload(ctx, cfgA)
	})
	if len(leaks) > 0 {
		t.Fatalf("%d lists or calls showed a tool neither configuration lets them see; first: %s", len(leaks), leaks[0])
	}
	if n := len(bServer.calls()); n != 0 {
		t.Errorf("B_Admin ran %d times for an anonymous caller", n)
	}
	// The honest flow: the tool the caller may call runs.
	if call := mcpMessage(t, f, 3, "tools/call", `{"name":"A_Open","arguments":{}}`); call["result"] == nil {
		t.Errorf("tools/call A_Open = %v", call)
	}
}
