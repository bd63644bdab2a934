package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/bridge/policy"
	"github.com/mcpotc/mcpotc/internal/wiretest"
	"github.com/mcpotc/mcpotc/mapping"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/mcp/mcpsample"
	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
)

// recordingOTC is an OTC server whose catalog the test sets; it records
// the tool ids it is called with and answers each call with its id.
type recordingOTC struct {
	mu     sync.Mutex
	tools  []string
	called []string
}

func (s *recordingOTC) set(tools ...string) {
	s.mu.Lock()
	s.tools = tools
	s.mu.Unlock()
}

func (s *recordingOTC) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.called)
}

func (s *recordingOTC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path == "/tools" {
		io.WriteString(w, `{"$schema":"urn:oxp:1.0","items":[`+strings.Join(s.tools, ",")+`]}`)
		return
	}
	var req struct {
		Request struct {
			ToolID string `json:"tool_id"`
			CallID string `json:"call_id"`
		} `json:"request"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	s.called = append(s.called, req.Request.ToolID)
	fmt.Fprintf(w, `{"$schema":"urn:oxp:1.0","result":{"call_id":%q,"success":true,"value":%q}}`, req.Request.CallID, req.Request.ToolID)
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), substr)
}

func mcpMessage(t *testing.T, f *MCPFront, id int, method, params string) map[string]any {
	t.Helper()
	frame := f.Server().HandleMessage(context.Background(), []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)))
	var m map[string]any
	if err := json.Unmarshal(frame, &m); err != nil {
		t.Fatalf("%s: %s", method, frame)
	}
	return m
}

// Tool overrides on the MCP front: a renamed tool is listed under its new
// name, title and description and its calls reach the original id; its
// old name and a hidden tool are unknown; the overrides hold across
// catalog changes; an override of a tool the upstream does not list is
// logged once, again only once it came back and went.
func TestMCPFrontOverrides(t *testing.T) {
	ctx := context.Background()
	otcServer := &recordingOTC{}
	otcServer.set(toolDef("A.One@1.0.0", "A_One"), toolDef("A.Two@1.0.0", "A_Two"), toolDef("A.Three@1.0.0", "A_Three"))
	up := otcUpstreamOn(t, "a", "a_", otcServer)
	up.Tools = policy.Overrides{
		"A_One":  {Name: "first", Title: "The first", Description: "Does one thing."},
		"A_Two":  {Hidden: true},
		"A_Gone": {Description: "not listed"},
	}
	logs := &syncBuffer{}
	f, err := NewMCPFront(ctx, []OTCServer{up}, &MCPFrontOptions{Logger: zerolog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string, want ...string) {
		t.Helper()
		if got := toolNames(f); !slices.Equal(got, want) {
			t.Fatalf("%s: tools %v, want %v", when, got, want)
		}
		for _, tool := range f.Server().Tools() {
			if tool.Name == "a_first" && (tool.Title != "The first" || tool.Description != "Does one thing.") {
				t.Errorf("%s: a_first is %q / %q", when, tool.Title, tool.Description)
			}
		}
	}
	check("at start", "a_A_Three", "a_first")
	res := mcpMessage(t, f, 1, "tools/call", `{"name":"a_first","arguments":{}}`)
	if calls := otcServer.calls(); !slices.Equal(calls, []string{"A.One@1.0.0"}) || !strings.Contains(fmt.Sprint(res["result"]), "A.One@1.0.0") {
		t.Errorf("calling a_first: %v, the upstream got %v", res, calls)
	}
	for _, name := range []string{"a_A_One", "a_A_Two", "A_Two"} {
		got := mcpMessage(t, f, 2, "tools/call", `{"name":"`+name+`","arguments":{}}`)
		e, _ := got["error"].(map[string]any)
		if e["code"] != float64(-32602) || e["message"] != "tool '"+name+"' not found: tool not found" {
			t.Errorf("calling %s: %v", name, got)
		}
	}
	if calls := otcServer.calls(); len(calls) != 1 {
		t.Errorf("the upstream was called %v", calls)
	}
	const missing = `"tool":"A_Gone","message":"tool override: the upstream does not list this tool`
	otcServer.set(toolDef("A.One@1.0.0", "A_One"), toolDef("A.Two@1.0.0", "A_Two"), toolDef("A.Three@1.0.0", "A_Three"), toolDef("A.Four@1.0.0", "A_Four"))
	if err := f.refresh(ctx, false); err != nil {
		t.Fatal(err)
	}
	check("after a new tool", "a_A_Four", "a_A_Three", "a_first")
	if err := f.refresh(ctx, false); err != nil { // unchanged
		t.Fatal(err)
	}
	check("after an unchanged listing", "a_A_Four", "a_A_Three", "a_first")
	if n := logs.count(missing); n != 1 {
		t.Errorf("the override of A_Gone was logged %d times, want once", n)
	}
	otcServer.set(toolDef("A.One@1.0.0", "A_One"), toolDef("A.Gone@1.0.0", "A_Gone"))
	_ = f.refresh(ctx, false)
	otcServer.set(toolDef("A.One@1.0.0", "A_One"))
	_ = f.refresh(ctx, false)
	if n := logs.count(missing); n != 2 {
		t.Errorf("after A_Gone came and went, the override was logged %d times in all, want twice", n)
	}
	check("at the end", "a_first")
}

// The MCP front's access policy and rate limits, over streamable HTTP as
// an OAuth protected resource (the verifier here says who each token is):
// each caller lists and calls only what the rules grant it — bob cannot
// see or call the admins' tools, alice of another issuer is not alice —;
// a call over a limit is an isError result with the wait, in the caller's
// own buckets only; the refusals are counted.
func TestMCPFrontAccessAndLimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	otcServer := &recordingOTC{}
	otcServer.set(toolDef("A.Admin@1.0.0", "A_Admin"), toolDef("A.Open@1.0.0", "A_Open"), toolDef("A.Mine@1.0.0", "A_Mine"))
	access, err := policy.NewAccess([]policy.Rule{
		{Claims: map[string][]string{"groups": {"admins"}}, Tools: []string{"*"}},
		{Issuer: "https://op.test/", Subject: "alice", Tools: []string{"A_Mine"}},
		{Authenticated: true, Tools: []string{"A_Open"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	limits, _ := policy.NewLimits(nil, []policy.ToolRate{{Tools: []string{"A_Open"}, Rate: policy.Rate{Requests: 2, Per: time.Minute}}})
	mt := metrics.New()
	f, err := NewMCPFront(ctx, []OTCServer{otcUpstreamOn(t, "a", "", otcServer)},
		&MCPFrontOptions{Logger: zerolog.Nop(), Metrics: mt, Controls: &Controls{Access: access, Limits: limits}})
	if err != nil {
		t.Fatal(err)
	}
	const resource = "http://mcp.test/mcp"
	who := map[string]*front.Identity{
		"alice-token":   {Issuer: "https://op.test", Subject: "alice", Claims: map[string]any{"groups": []any{"staff"}}},
		"admin-token":   {Issuer: "https://op.test", Subject: "root", Claims: map[string]any{"groups": []any{"admins"}}},
		"bob-token":     {Issuer: "https://op.test", Subject: "bob", Claims: map[string]any{"groups": "staff", "sub": "alice"}},
		"mallory-token": {Issuer: "https://other.test", Subject: "alice", Claims: map[string]any{"groups": []any{"staff"}}},
	}
	srv := httptest.NewServer(f.Server().StreamableHTTPHandler(&front.HTTPOptions{Stateless: true, DisableLocalhostProtection: true, Resource: &front.ResourceAuth{
		Resource: resource, AuthorizationServers: []string{"https://op.test", "https://other.test"},
		Verify: func(_ context.Context, token string) (*front.Identity, error) {
			id, ok := who[token]
			if !ok {
				return nil, front.ErrInvalidToken
			}
			c := *id
			c.Audience = []string{resource}
			return &c, nil
		},
	}}))
	defer srv.Close()
	post := func(token, method, params string) string {
		t.Helper()
		status, _, body := wiretest.MCPHTTP(t, ctx, http.MethodPost, srv.URL+"/mcp",
			fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params),
			http.Header{"Authorization": {"Bearer " + token}, "Mcp-Protocol-Version": {"2025-11-25"}})
		if status != http.StatusOK {
			t.Fatalf("%s as %s: %d %s", method, token, status, body)
		}
		return body
	}
	listed := func(token string) []string {
		var frame struct {
			Result struct {
				Tools []struct{ Name string } `json:"tools"`
			} `json:"result"`
		}
		_ = json.Unmarshal([]byte(post(token, "tools/list", `{}`)), &frame)
		var names []string
		for _, tool := range frame.Result.Tools {
			names = append(names, tool.Name)
		}
		return names
	}
	for token, want := range map[string][]string{
		"admin-token":   {"A_Admin", "A_Mine", "A_Open"},
		"alice-token":   {"A_Mine", "A_Open"},
		"bob-token":     {"A_Open"},
		"mallory-token": {"A_Open"},
	} {
		if got := listed(token); !slices.Equal(got, want) {
			t.Errorf("%s lists %v, want %v", token, got, want)
		}
	}
	unknown := strings.ReplaceAll(post("bob-token", "tools/call", `{"name":"A_Nope","arguments":{}}`), "A_Nope", "NAME")
	for _, name := range []string{"A_Admin", "A_Mine"} {
		for _, token := range []string{"bob-token", "mallory-token"} {
			if got := strings.ReplaceAll(post(token, "tools/call", `{"name":"`+name+`","arguments":{}}`), name, "NAME"); got != unknown {
				t.Errorf("%s calling %s: %s\nwant the unknown tool's %s", token, name, got, unknown)
			}
		}
	}
	// bob passing on a chained OTC front's context that names root: the
	// principal is the token's, not what a call carries.
	forged := fmt.Sprintf(`{"name":"A_Admin","arguments":{},"_meta":{%q:{"tool_id":"A.Admin@1.0.0","context":{"user_id":"root"}}}}`, mapping.MetaOTCRequest)
	if got := strings.ReplaceAll(post("bob-token", "tools/call", forged), "A_Admin", "NAME"); got != unknown {
		t.Errorf("bob calling A_Admin with a forwarded context naming root: %s", got)
	}
	if calls := otcServer.calls(); len(calls) != 0 {
		t.Fatalf("refused calls reached the upstream: %v", calls)
	}
	if got := post("alice-token", "tools/call", `{"name":"A_Mine","arguments":{}}`); !strings.Contains(got, "A.Mine@1.0.0") {
		t.Errorf("alice calling A_Mine: %s", got)
	}
	// Limits: bob spends his two calls of A_Open; his third is refused with
	// the wait; alice still has hers.
	for i := 0; i < 2; i++ {
		if got := post("bob-token", "tools/call", `{"name":"A_Open","arguments":{}}`); !strings.Contains(got, "A.Open@1.0.0") {
			t.Fatalf("bob's call %d of A_Open: %s", i+1, got)
		}
	}
	var refused struct {
		Result struct {
			IsError bool `json:"isError"`
			Content []struct{ Text string }
			Meta    map[string]struct {
				RetryAfterMS int64  `json:"retry_after_ms"`
				Limit        string `json:"limit"`
			} `json:"_meta"`
		} `json:"result"`
	}
	_ = json.Unmarshal([]byte(post("bob-token", "tools/call", `{"name":"A_Open","arguments":{}}`)), &refused)
	meta := refused.Result.Meta[MetaRateLimit]
	if !refused.Result.IsError || len(refused.Result.Content) != 1 ||
		refused.Result.Content[0].Text != "Rate limit reached: this caller may call A_Open 2 calls per minute. Try again in 30 seconds." ||
		meta.Limit != "tool" || meta.RetryAfterMS <= 29_000 || meta.RetryAfterMS > 30_000 {
		t.Errorf("bob's third call: %+v", refused.Result)
	}
	if got := post("alice-token", "tools/call", `{"name":"A_Open","arguments":{}}`); !strings.Contains(got, "A.Open@1.0.0") {
		t.Errorf("alice's call of A_Open after bob's refusal: %s", got)
	}
	if n := len(otcServer.calls()); n != 4 {
		t.Errorf("the upstream got %d calls, want 4", n)
	}
	text := scrape(t, mt)
	for _, line := range []string{
		`mcpotc_rate_limited_total{front="mcp",limit="tool",tool="A_Open",upstream="a"} 1`,
		`mcpotc_calls_total{front="mcp",outcome="rate_limited",tool="A_Open",upstream="a"} 1`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	// New controls: no policy; every tool for bob.
	f.SetControls(nil)
	if got := listed("bob-token"); len(got) != 3 {
		t.Errorf("without controls bob lists %v", got)
	}
}

// The OTC front: overrides of the MCP server's tools (renamed, hidden,
// one the server does not list), the access policy on a JWT caller's
// claims (GET /tools per caller, hidden = unknown), and a rate limit
// answered 429 with Retry-After.
func TestOTCFrontControls(t *testing.T) {
	secret := []byte("controls-test-secret")
	access, err := policy.NewAccess([]policy.Rule{
		{Claims: map[string][]string{"groups": {"admins"}}, Tools: []string{"*"}},
		{Authenticated: true, Tools: []string{"Sample.say"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	limits, _ := policy.NewLimits(&policy.Rate{Requests: 100, Per: time.Minute},
		[]policy.ToolRate{{Tools: []string{"Sample.say"}, Rate: policy.Rate{Requests: 2, Per: time.Hour}}})
	mt := metrics.New()
	logs := &syncBuffer{}
	f, err := NewOTCFront(context.Background(), []MCPServer{{Toolkit: "Sample",
		Tools:  policy.Overrides{"echo": {Name: "say", Title: "Say", Description: "Says it back."}, "fail": {Hidden: true}, "gone": {Title: "x"}},
		Config: upstream.Config{Name: "sample", InProcess: upstream.Piped(mcpsample.ServeStdio)}}},
		&OTCFrontOptions{Logger: zerolog.New(logs), Metrics: mt, Server: otc.Options{JWTSecret: secret}, Controls: &Controls{Access: access, Limits: limits}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	token := func(sub string, groups ...string) string {
		s, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "groups": groups, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
		return "Bearer " + s
	}
	admin, bob := token("root", "admins"), token("bob", "staff")
	do := func(auth, method, path, body string) (int, http.Header, map[string]any) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("OXP-Version", "1.0")
		r.Header.Set("Authorization", auth)
		f.Handler().ServeHTTP(w, r)
		var m map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return w.Code, w.Header(), m
	}
	ids := func(auth string) []string {
		_, _, m := do(auth, http.MethodGet, "/tools", "") // 503 while the server starts
		items, _ := m["items"].([]any)
		var out []string
		for _, it := range items {
			d := it.(map[string]any)
			out = append(out, d["id"].(string))
			if strings.HasPrefix(d["id"].(string), "Sample.say@") && d["description"] != "Says it back." {
				t.Errorf("Sample.say's description: %v", d["description"])
			}
		}
		return out
	}
	for deadline := time.Now().Add(10 * time.Second); len(ids(admin)) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
	}
	if got := ids(admin); !slices.Equal(got, []string{"Sample.add@1.0.0", "Sample.say@1.0.0", "Sample.slow@1.0.0"}) {
		t.Errorf("the admin lists %v", got)
	}
	if got := ids(bob); !slices.Equal(got, []string{"Sample.say@1.0.0"}) {
		t.Errorf("bob lists %v", got)
	}
	call := func(auth, tool, input string) (int, http.Header, map[string]any) {
		return do(auth, http.MethodPost, "/tools/call", `{"tool_id":"`+tool+`","input":`+input+`}`)
	}
	// bob guessing: the admins' tool, the hidden one, the old name — all
	// the unknown tool's answer.
	_, _, nope := call(bob, "Sample.nope", `{}`)
	for _, tool := range []string{"Sample.add", "Sample.fail", "Sample.echo"} {
		status, _, got := call(bob, tool, `{"a":1,"b":2}`)
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(nope)
		if status != http.StatusBadRequest || strings.ReplaceAll(string(g), tool, "T") != strings.ReplaceAll(string(w), "Sample.nope", "T") {
			t.Errorf("bob calling %s: %d %s\nwant %s", tool, status, g, w)
		}
	}
	if status, _, got := call(admin, "Sample.add", `{"a":1,"b":2}`); status != 200 || got["success"] != true {
		t.Errorf("the admin calling Sample.add: %d %v", status, got)
	}
	for i := 0; i < 2; i++ {
		if status, _, got := call(bob, "Sample.say", `{"message":"hi"}`); status != 200 || got["value"] != "hi" {
			t.Fatalf("bob's call %d of Sample.say (echo): %d %v", i+1, status, got)
		}
	}
	status, hdr, got := call(bob, "Sample.say", `{"message":"hi"}`)
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") != "1800" || hdr.Get("x-should-retry") != "true" ||
		got["message"] != "Rate limit reached: this caller may call Sample.say 2 calls per hour. Try again in 1800 seconds." {
		t.Errorf("bob's third call: %d %v %v", status, hdr, got)
	}
	if status, _, _ := call(admin, "Sample.say", `{"message":"hi"}`); status != 200 {
		t.Errorf("the admin's call after bob's refusal: %d", status)
	}
	text := scrape(t, mt)
	for _, line := range []string{
		`mcpotc_rate_limited_total{front="otc",limit="tool",tool="Sample.say",upstream="sample"} 1`,
		`mcpotc_calls_total{front="otc",outcome="rate_limited",tool="Sample.say",upstream="sample"} 1`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	if n := logs.count("tool override: the upstream does not list this tool"); n != 1 {
		t.Errorf("the override of gone was logged %d times, want once", n)
	}
}

// Callers that did not authenticate are one principal per client address
// (an IPv6 address by its /64): one address spending its limit leaves
// another's whole; another address of the same /64 is the same caller.
func TestOTCFrontLimitPerAddress(t *testing.T) {
	limits, _ := policy.NewLimits(&policy.Rate{Requests: 1, Per: time.Hour}, nil)
	f, err := NewOTCFront(context.Background(), []MCPServer{{Toolkit: "Sample", Config: upstream.Config{Name: "sample", InProcess: upstream.Piped(mcpsample.ServeStdio)}}},
		&OTCFrontOptions{Logger: zerolog.Nop(), Controls: &Controls{Limits: limits}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	waitOTCReady(t, f)
	call := func(addr string) int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/tools/call", strings.NewReader(`{"tool_id":"Sample.echo","input":{"message":"hi"}}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("OXP-Version", "1.0")
		r.RemoteAddr = addr
		f.Handler().ServeHTTP(w, r)
		return w.Code
	}
	for _, tc := range []struct {
		addr string
		want int
	}{
		{"192.0.2.1:1000", 200},
		{"192.0.2.1:2000", 429}, // the same address, another port
		{"192.0.2.2:1000", 200},
		{"[2001:db8:1:2::1]:1000", 200},
		{"[2001:db8:1:2:ffff::9]:1000", 429}, // the same /64
		{"[2001:db8:1:3::1]:1000", 200},
	} {
		if got := call(tc.addr); got != tc.want {
			t.Errorf("a call from %s: %d, want %d", tc.addr, got, tc.want)
		}
	}
}

// Behind a trusted proxy (otc.Options.TrustedProxies) a caller that did
// not authenticate is the client X-Forwarded-For names, so one client
// spending its limit leaves the others behind the proxy theirs. The
// attacks fail: an address a client writes in X-Forwarded-For through the
// proxy is left of the one the proxy appends, and a client that is not a
// trusted proxy has its X-Forwarded-For ignored, so neither earns a fresh
// bucket.
func TestOTCFrontLimitBehindTrustedProxy(t *testing.T) {
	limits, _ := policy.NewLimits(&policy.Rate{Requests: 1, Per: time.Hour}, nil)
	f, err := NewOTCFront(context.Background(), []MCPServer{{Toolkit: "Sample", Config: upstream.Config{Name: "sample", InProcess: upstream.Piped(mcpsample.ServeStdio)}}},
		&OTCFrontOptions{Logger: zerolog.Nop(), Controls: &Controls{Limits: limits},
			Server: otc.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	waitOTCReady(t, f)
	call := func(peer, xff string) int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/tools/call", strings.NewReader(`{"tool_id":"Sample.echo","input":{"message":"hi"}}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("OXP-Version", "1.0")
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		r.RemoteAddr = peer
		f.Handler().ServeHTTP(w, r)
		return w.Code
	}
	for _, tc := range []struct {
		peer, xff string
		want      int
	}{
		{"10.0.0.1:1000", "192.0.2.1", 200},
		{"10.0.0.1:1001", "192.0.2.1", 429},               // the same client, through the proxy
		{"10.0.0.1:1002", "192.0.2.2", 200},               // another client behind it
		{"10.0.0.1:1003", "198.51.100.9, 192.0.2.1", 429}, // 192.0.2.1 wrote an address of its own
		{"10.0.0.1:1004", "", 200},                        // the proxy itself
		{"192.0.2.3:1000", "198.51.100.1", 200},           // no proxy: the peer, XFF ignored
		{"192.0.2.3:1001", "198.51.100.2", 429},           // a fresh forged address does not help
	} {
		if got := call(tc.peer, tc.xff); got != tc.want {
			t.Errorf("a call from %s with X-Forwarded-For %q: %d, want %d", tc.peer, tc.xff, got, tc.want)
		}
	}
}
