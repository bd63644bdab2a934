package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/audit"
	"github.com/mcpotc/mcpotc/bridge/policy"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/mcp/mcpsample"
	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
)

// sampleMCPURL serves the built-in sample MCP server over streamable HTTP
// and returns its URL: an upstream whose configuration two reloads can
// give alike (an in-process one is always a new connection).
func sampleMCPURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(mcpsample.NewServer().StreamableHTTPHandler(nil))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// urlUpstream is an upstream at url whose Close abandons the calls still
// in flight after 100 ms: a call a reload let finish was waited for by the
// front, not by Close.
func urlUpstream(name, toolkit, url string) MCPServer {
	return MCPServer{Toolkit: toolkit, Config: upstream.Config{Name: name, URL: url, CallTimeout: 10 * time.Second, DrainTimeout: 100 * time.Millisecond}}
}

// servedIDs are the sorted tool ids of GET /tools (with the API key
// apiKey, when the front wants one).
func servedIDs(t *testing.T, f *OTCFront, apiKey ...string) []string {
	t.Helper()
	var list struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/tools", nil)
	for _, k := range apiKey {
		r.Header.Set("OXP-API-Key", k)
	}
	f.Handler().ServeHTTP(w, r)
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range list.Items {
		out = append(out, it.ID)
	}
	slices.Sort(out)
	return out
}

func waitIDs(t *testing.T, f *OTCFront, want ...string) {
	t.Helper()
	waitIDsWith(t, f, nil, want...)
}

func waitIDsWith(t *testing.T, f *OTCFront, apiKey []string, want ...string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := servedIDs(t, f, apiKey...)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("served %q, want %q", got, want)
		}
	}
}

func otcCall(t *testing.T, f *OTCFront, body string) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/tools/call", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	f.Handler().ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

var sampleIDs = []string{"add", "echo", "fail", "slow"}

func kitIDs(kit string, tools ...string) []string {
	var out []string
	for _, n := range tools {
		out = append(out, kit+"."+n+"@1.0.0")
	}
	return out
}

// Reload swaps what the configuration decides, whole: an allow list on a
// server whose connection is configured alike keeps that connection; a
// server added is connected and listed before Reload returns; a server
// removed, or whose connection changed, is closed once its call in flight
// is done, and that call succeeds. A configuration the start would refuse
// (two servers of one toolkit) is refused and changes nothing.
func TestOTCFrontReload(t *testing.T) {
	defer func(d time.Duration) { retireSettle = d }(retireSettle)
	retireSettle = 100 * time.Millisecond
	urlA, urlB := sampleMCPURL(t), sampleMCPURL(t)
	var logs syncBuffer
	f, err := NewOTCFront(context.Background(), []MCPServer{urlUpstream("a", "A", urlA)}, &OTCFrontOptions{Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	waitIDs(t, f, kitIDs("A", sampleIDs...)...)
	connA := f.upstreams()[0].up

	// An allow list, and a server added.
	a := urlUpstream("a", "A", urlA)
	a.Allow = []string{"add"}
	if err := f.Reload(context.Background(), OTCFrontConfig{Upstreams: []MCPServer{a, urlUpstream("b", "B", urlB)}}); err != nil {
		t.Fatal(err)
	}
	if got, want := servedIDs(t, f), append(kitIDs("A", "add"), kitIDs("B", sampleIDs...)...); !slices.Equal(got, want) {
		t.Fatalf("served after Reload returned: %q, want %q", got, want)
	}
	if f.upstreams()[0].up != connA {
		t.Error("an allow list reconnected the server: its connection is configured alike")
	}
	if s := connA.Status(); !s.Ready {
		t.Errorf("the kept connection: %+v", s)
	}

	// Refused: two servers of one toolkit. Nothing changes.
	err = f.Reload(context.Background(), OTCFrontConfig{Upstreams: []MCPServer{urlUpstream("a", "Same", urlA), urlUpstream("c", "Same", urlB)}})
	if err == nil || !strings.Contains(err.Error(), `two MCP servers have the toolkit name "Same"`) {
		t.Fatalf("a configuration with two servers of one toolkit: %v", err)
	}
	if got, want := servedIDs(t, f), append(kitIDs("A", "add"), kitIDs("B", sampleIDs...)...); !slices.Equal(got, want) {
		t.Fatalf("served after a refused reload: %q, want %q", got, want)
	}

	// A call in flight on B, then a configuration without B and with A on
	// another URL: the call ends on the configuration it started with.
	connB := f.upstreams()[1].up
	done := make(chan [2]any, 1)
	go func() {
		code, body := otcCall(t, f, `{"tool_id":"B.slow","input":{"seconds":1}}`)
		done <- [2]any{code, body}
	}()
	time.Sleep(200 * time.Millisecond) // the call is in flight
	if err := f.Reload(context.Background(), OTCFrontConfig{Upstreams: []MCPServer{urlUpstream("a", "A", urlB)}}); err != nil {
		t.Fatal(err)
	}
	if got, want := servedIDs(t, f), kitIDs("A", sampleIDs...); !slices.Equal(got, want) {
		t.Fatalf("served after the second reload: %q, want %q", got, want)
	}
	if f.upstreams()[0].up == connA {
		t.Error("a new URL kept the old connection")
	}
	res := <-done
	if res[0] != http.StatusOK || !strings.Contains(res[1].(string), `"success":true`) {
		t.Fatalf("the call in flight on a removed server: %v %v", res[0], res[1])
	}
	for _, c := range []*upstream.Upstream{connA, connB} {
		for deadline := time.Now().Add(5 * time.Second); c.Status().Reason != "closed"; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("a replaced connection is not closed: %+v", c.Status())
			}
		}
	}
	if code, body := otcCall(t, f, `{"tool_id":"A.echo","input":{"message":"hi"}}`); code != http.StatusOK || !strings.Contains(body, `"success":true`) {
		t.Fatalf("a call on the new configuration: %d %s", code, body)
	}
	if !strings.Contains(logs.String(), `"removed":["b"]`) || !strings.Contains(logs.String(), `"changed":["a"]`) {
		t.Errorf("the reload's log line does not say what changed:\n%s", logs.String())
	}
}

// A call that picked its tool from the old catalog an instant before the
// swap still runs on the old connection: under steady load, a reload that
// replaces the connection fails no call.
func TestOTCFrontReloadUnderLoad(t *testing.T) {
	urlA, urlB := sampleMCPURL(t), sampleMCPURL(t)
	f, err := NewOTCFront(context.Background(), []MCPServer{urlUpstream("a", "A", urlA)}, &OTCFrontOptions{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	waitIDs(t, f, kitIDs("A", sampleIDs...)...)
	var (
		mu       sync.Mutex
		calls    int
		failures []string
		wg       sync.WaitGroup
	)
	stop := make(chan struct{})
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, body := otcCall(t, f, `{"tool_id":"A.add","input":{"a":1,"b":2}}`)
				mu.Lock()
				calls++
				if code != http.StatusOK || !strings.Contains(body, `"success":true`) {
					failures = append(failures, body)
				}
				mu.Unlock()
			}
		})
	}
	for i := range 4 {
		url := []string{urlB, urlA}[i%2]
		time.Sleep(100 * time.Millisecond)
		if err := f.Reload(context.Background(), OTCFrontConfig{Upstreams: []MCPServer{urlUpstream("a", "A", url)}}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	if len(failures) > 0 || calls == 0 {
		t.Fatalf("%d of %d calls failed across 4 reloads: %.500s", len(failures), calls, failures)
	}
	t.Logf("%d calls, 4 reloads that replaced the connection, 0 failed", calls)
}

// The MCP front's Reload: an upstream added is listed before Reload
// returns; one of the same name and revision keeps its catalog (it is not
// listed again); a tool name two upstreams would expose refuses the
// configuration, as at the start, and nothing changes.
func TestMCPFrontReload(t *testing.T) {
	ctx := context.Background()
	one := &switchable{}
	one.set(http.StatusOK, `[`+toolDef("A.One@1.0.0", "A_One")+`]`)
	two := &switchable{}
	two.set(http.StatusOK, `[`+toolDef("B.Two@1.0.0", "B_Two")+`]`)
	clash := &switchable{}
	clash.set(http.StatusOK, `[`+toolDef("X.One@1.0.0", "A_One")+`]`)
	a := otcUpstreamOn(t, "a", "", one)
	a.Revision = "r1"
	f, err := NewMCPFront(ctx, []OTCServer{a}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kept := f.upstreams[0]
	// The kept upstream's server now fails: a reload that keeps it keeps
	// its tools.
	one.set(http.StatusServiceUnavailable, `[]`)
	if err := f.Reload(ctx, MCPFrontConfig{Upstreams: []OTCServer{a, otcUpstreamOn(t, "b", "", two)}}); err != nil {
		t.Fatal(err)
	}
	if got := toolNames(f); strings.Join(got, ",") != "A_One,B_Two" {
		t.Fatalf("tools after adding b: %v", got)
	}
	if f.upstreams[0] != kept {
		t.Error("an upstream of the same name and revision was made anew")
	}
	err = f.Reload(ctx, MCPFrontConfig{Upstreams: []OTCServer{a, otcUpstreamOn(t, "c", "", clash)}})
	if err == nil || !strings.Contains(err.Error(), `tool name "A_One" is exposed twice`) {
		t.Fatalf("a reload with a clash: %v", err)
	}
	if got := toolNames(f); strings.Join(got, ",") != "A_One,B_Two" || len(f.upstreams) != 2 {
		t.Fatalf("tools after a refused reload: %v", got)
	}
	b := otcUpstreamOn(t, "b", "", two)
	if err := f.Reload(ctx, MCPFrontConfig{Upstreams: []OTCServer{b, b}}); err == nil || !strings.Contains(err.Error(), `two upstreams are named "b"`) {
		t.Fatalf("a reload naming b twice: %v", err)
	}
	// A new revision is listed afresh: a is down, so its tools go.
	a.Revision = "r2"
	if err := f.Reload(ctx, MCPFrontConfig{Upstreams: []OTCServer{a, b}}); err != nil {
		t.Fatal(err)
	}
	if got := toolNames(f); strings.Join(got, ",") != "B_Two" {
		t.Fatalf("tools after a new revision of a server that is down: %v", got)
	}
}

// The audit lines of the OTC front: a call names the caller's principal,
// its user, the upstream, the tool, the outcome, the status and the
// argument names (opted in) — and no value from the call's context or
// input.
func TestOTCFrontAuditLines(t *testing.T) {
	var buf syncBuffer
	al := audit.New(&buf, nil)
	f, err := NewOTCFront(context.Background(), []MCPServer{urlUpstream("a", "A", sampleMCPURL(t))},
		&OTCFrontOptions{Logger: zerolog.Nop(), Audit: al, AuditArgNames: true, Server: otc.Options{APIKey: "THE-API-KEY"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	waitIDsWith(t, f, []string{"THE-API-KEY"}, kitIDs("A", sampleIDs...)...)
	for _, body := range []string{
		`{"tool_id":"A.echo","call_id":"c-1","input":{"message":"ARG-VALUE"},"context":{"user_id":"alice","secrets":[{"id":"s","value":"SECRET-VALUE"}],"authorization":[{"id":"p","token":"TOKEN-VALUE"}]}}`,
		`{"tool_id":"A.nope","call_id":"c-2","input":{},"context":{"user_id":"alice"}}`,
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/tools/call", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("OXP-API-Key", "THE-API-KEY")
		f.Handler().ServeHTTP(w, r)
	}
	if err := al.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, secret := range []string{"ARG-VALUE", "SECRET-VALUE", "TOKEN-VALUE", "THE-API-KEY"} {
		if strings.Contains(text, secret) {
			t.Errorf("the audit log holds %s:\n%s", secret, text)
		}
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), text)
	}
	want := []map[string]any{
		{"audit": "call", "front": "otc", "principal": "api-key", "user_id": "alice", "upstream": "a", "tool": "A.echo@1.0.0",
			"outcome": "ok", "status": 200.0, "call_id": "c-1", "args": []any{"message"}},
		{"audit": "call", "front": "otc", "principal": "api-key", "user_id": "alice", "tool": "A.nope",
			"outcome": "unknown_tool", "status": 400.0, "call_id": "c-2"},
	}
	for i, l := range lines {
		var got map[string]any
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatal(err)
		}
		if _, ok := got["duration_ms"].(float64); !ok || got["time"] == nil {
			t.Errorf("line %d has no time or duration: %s", i, l)
		}
		delete(got, "duration_ms")
		delete(got, "time")
		if !jsonEqual(got, want[i]) {
			t.Errorf("line %d\n got %v\nwant %v", i, got, want[i])
		}
	}
}

// The MCP front's audit line names the caller's principal, the upstream,
// the tool, the call_id sent upstream and the argument names.
func TestMCPFrontAuditLines(t *testing.T) {
	var buf syncBuffer
	al := audit.New(&buf, nil)
	srv := realOTCServer(t, nil)
	client, _ := otc.NewClient(srv.URL, nil)
	f, err := NewMCPFront(context.Background(), []OTCServer{{Name: "sample", Client: client, Secrets: map[string]string{"TWILIO_API_KEY": "CONFIGURED-SECRET"}}},
		&MCPFrontOptions{Audit: al, AuditArgNames: true})
	if err != nil {
		t.Fatal(err)
	}
	h := f.Server().StreamableHTTPHandler(&front.HTTPOptions{Stateless: true, BearerToken: "BEARER-TOKEN"})
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Calculator_Add","arguments":{"a":2,"b":31337}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Nope","arguments":{"x":"ARG-VALUE"}}}`,
	} {
		req := httptest.NewRequest(http.MethodPost, front.StreamablePath, strings.NewReader(msg))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Authorization", "Bearer BEARER-TOKEN")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	_ = al.Close(context.Background())
	text := buf.String()
	for _, secret := range []string{"31337", "ARG-VALUE", "CONFIGURED-SECRET", "BEARER-TOKEN"} {
		if strings.Contains(text, secret) {
			t.Errorf("the audit log holds %s:\n%s", secret, text)
		}
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), text)
	}
	var call, unknown map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &call)
	_ = json.Unmarshal([]byte(lines[1]), &unknown)
	if call["principal"] != "bearer" || call["upstream"] != "sample" || call["tool"] != "Calculator_Add" || call["outcome"] != "ok" ||
		call["call_id"] == nil || !jsonEqual(call["args"], []any{"a", "b"}) {
		t.Errorf("call line: %v", call)
	}
	if unknown["tool"] != "Nope" || unknown["outcome"] != "unknown_tool" || unknown["upstream"] != nil || unknown["args"] != nil {
		t.Errorf("unknown tool line: %v", unknown)
	}
}

// AuditRefusals writes a line for each 401, and each 403 with a Bearer
// challenge, with the answer's own reason and never the credential; other
// answers write none. The principal is the client's address: the peer's,
// whatever X-Forwarded-For says, unless the peer is a trusted proxy.
func TestAuditRefusals(t *testing.T) {
	for _, tc := range []struct {
		trusted []netip.Prefix
		want    string
	}{
		{nil, "addr:192.0.2.1"}, // httptest's peer; its X-Forwarded-For is a forgery
		{[]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, "addr:192.0.2.1"},
		{[]netip.Prefix{netip.MustParsePrefix("192.0.2.1/32")}, "addr:203.0.113.9"},
	} {
		auditRefusals(t, tc.trusted, tc.want)
	}
}

func auditRefusals(t *testing.T, trusted []netip.Prefix, principal string) {
	var buf syncBuffer
	al := audit.New(&buf, nil)
	h := AuditRefusals(al, "mcp", trusted, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/401":
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized: the token has expired", http.StatusUnauthorized)
		case "/otc":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"message":"Unauthorized: the API key is not valid"}`))
		case "/scope":
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope"`)
			http.Error(w, "forbidden: the token lacks the scope mcp:tools", http.StatusForbidden)
		case "/rebinding":
			http.Error(w, "forbidden: Host", http.StatusForbidden)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}))
	for _, path := range []string{"/401", "/otc", "/scope", "/rebinding", "/ok"} {
		r := httptest.NewRequest(http.MethodPost, path, nil)
		r.Header.Set("Authorization", "Bearer THE-TOKEN")
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	_ = al.Close(context.Background())
	text := buf.String()
	if strings.Contains(text, "THE-TOKEN") {
		t.Fatalf("the credential is in the audit log:\n%s", text)
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	want := []string{"POST /401: unauthorized: the token has expired", "POST /otc: Unauthorized: the API key is not valid",
		"POST /scope: forbidden: the token lacks the scope mcp:tools"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), text)
	}
	for i, l := range lines {
		var got map[string]any
		_ = json.Unmarshal([]byte(l), &got)
		if got["audit"] != "authorization" || got["outcome"] != "refused" || got["detail"] != want[i] || got["principal"] != principal {
			t.Errorf("trusted proxies %v, line %d: %v, want the principal %s", trusted, i, got, principal)
		}
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// A reload after Close is refused: nothing it would connect outlives the
// front.
func TestOTCFrontReloadAfterClose(t *testing.T) {
	url := sampleMCPURL(t)
	f, err := NewOTCFront(context.Background(), []MCPServer{urlUpstream("a", "A", url)}, &OTCFrontOptions{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	err = f.Reload(context.Background(), OTCFrontConfig{Upstreams: []MCPServer{urlUpstream("b", "B", url)}})
	if err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Reload after Close: %v", err)
	}
	if ups := f.upstreams(); len(ups) != 1 || ups[0].Config.Name != "a" {
		t.Fatalf("a reload after Close changed the state: %d upstreams", len(ups))
	}
}

// A reload replaces the access policy with the upstreams (issue 29: the
// controls are part of the configuration a reload swaps): a policy that
// grants everyone only B_* hides A_One from the list, and a reload
// without one shows it again.
func TestMCPFrontReloadReplacesControls(t *testing.T) {
	ctx := context.Background()
	one := &switchable{}
	one.set(http.StatusOK, `[`+toolDef("A.One@1.0.0", "A_One")+`,`+toolDef("B.Two@1.0.0", "B_Two")+`]`)
	a := otcUpstreamOn(t, "a", "", one)
	a.Revision = "r1"
	f, err := NewMCPFront(ctx, []OTCServer{a}, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := func() string {
		var names []string
		res, _ := mcpMessage(t, f, 1, "tools/list", `{}`)["result"].(map[string]any)
		tools, _ := res["tools"].([]any)
		for _, tl := range tools {
			names = append(names, tl.(map[string]any)["name"].(string))
		}
		sort.Strings(names)
		return strings.Join(names, ",")
	}
	if got := listed(); got != "A_One,B_Two" {
		t.Fatalf("before: %s", got)
	}
	access, err := policy.NewAccess([]policy.Rule{{Anyone: true, Tools: []string{"B_*"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Reload(ctx, MCPFrontConfig{Upstreams: []OTCServer{a}, Controls: &Controls{Access: access}}); err != nil {
		t.Fatal(err)
	}
	if got := listed(); got != "B_Two" {
		t.Errorf("with the reloaded policy: %s, want B_Two", got)
	}
	if err := f.Reload(ctx, MCPFrontConfig{Upstreams: []OTCServer{a}}); err != nil {
		t.Fatal(err)
	}
	if got := listed(); got != "A_One,B_Two" {
		t.Errorf("after a reload without a policy: %s", got)
	}
}
