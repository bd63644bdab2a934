package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// The era negotiation (era.go), against mcp-go's own server in each era
// (it checks the 2026-07-28 headers and _meta itself: a mismatch is an
// HTTP 400 with -32020), fakes for what mcp-go's server does not do, and
// the decisions as data.

// dualStreamable serves srv to both eras, as mcp-go does by default.
func dualStreamable(srv *mcpserver.MCPServer) http.Handler {
	return mcpserver.NewStreamableHTTPServer(srv, mcpserver.WithStateful(true))
}

// modernServer is httpServer plus tools with x-mcp-header parameters.
func modernServer(blocked chan<- string) *mcpserver.MCPServer {
	s := httpServer(blocked)
	s.AddTool(mcpgo.NewToolWithRawSchema("region_query", "x-mcp-header parameters.", json.RawMessage(
		`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"},`+
			`"opts":{"type":"object","properties":{"dry":{"type":"boolean","x-mcp-header":"Dry"}}},"query":{"type":"string"}}}`)),
		func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText(req.GetString("region", "")), nil
		})
	// An invalid annotation that mcp-go's server lets through (its check
	// walks properties only): a client on streamable HTTP leaves it out.
	s.AddTool(mcpgo.NewToolWithRawSchema("bad_items_header", "", json.RawMessage(
		`{"type":"object","properties":{"xs":{"type":"array","items":{"type":"string","x-mcp-header":"X"}}}}`)), textTool("no"))
	s.AddTool(mcpgo.NewTool("ask_url"), func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		// The retry: the answer and the state the first round gave.
		if a := mcpserver.ElicitationResponse(req.Params.InputResponses, "github"); a != nil {
			return mcpgo.NewToolResultText(fmt.Sprintf("resumed: %s with %s", a.Action, req.Params.RequestState)), nil
		}
		return mcpserver.NewInputRequestBuilder("state-1").Elicit("github", mcpgo.ElicitationParams{
			Mode: mcpgo.ElicitationModeURL, Message: "Connect GitHub", URL: "https://auth.example/github"}).ToolResult(), nil
	})
	s.AddTool(mcpgo.NewTool("ask_form"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpserver.NewInputRequestBuilder("state-2").Elicit("name", mcpgo.ElicitationParams{
			Mode: mcpgo.ElicitationModeForm, Message: "Your name?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}).ToolResult(), nil
	})
	return s
}

func textTool(text string) mcpserver.ToolHandlerFunc {
	return func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText(text), nil
	}
}

// startModern starts an upstream on a dual-era mcp-go server behind a
// wire recorder.
func startModern(t *testing.T, cfg Config, opts Options) (*Upstream, *wireRecorder, *mcpserver.MCPServer, *testLogs) {
	t.Helper()
	srv := modernServer(nil)
	wire := &wireRecorder{}
	wire.set(dualStreamable(srv))
	ts := httptest.NewServer(wire)
	t.Cleanup(ts.Close)
	cfg.URL = ts.URL + "/mcp"
	u, logs := startHTTP(t, cfg, opts)
	waitReady(t, u)
	return u, wire, srv, logs
}

// body decodes a recorded request's body.
func (r wireReq) decoded(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("request body %s: %v", r.body, err)
	}
	return m
}

// wantMeta is the _meta of every request to a 2026-07-28 server.
var wantMeta = map[string]any{
	"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
	"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{"url": map[string]any{}}},
	"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "mcpotc", "version": "0.0.0"},
}

// logged is a child's stderr line as the text log shows it (quoted).
func logged(line string) string {
	q := strconv.Quote(line)
	return q[1 : len(q)-1]
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestUpstreamEraModernHTTPAtTheWire(t *testing.T) {
	u, wire, _, _ := startModern(t, Config{}, Options{})
	tools := waitTools(t, u, 8) // 9 tools, one with an invalid x-mcp-header annotation left out
	st := u.Status()
	if st.ProtocolVersion != "2026-07-28" || st.Server.Name != "http-upstream" || st.Server.Version != "2.0.0" {
		t.Errorf("status %+v, want protocol 2026-07-28 and the serverInfo of server/discover", st)
	}
	for _, tool := range tools {
		if bytes.Contains(tool, []byte(`"bad_`)) {
			t.Errorf("a tool with an invalid x-mcp-header annotation was listed: %s", tool)
		}
	}
	res, err := u.CallTool(context.Background(), "echo", json.RawMessage(`{"message":"hi","big":123456789012345678901234567890}`),
		map[string]any{"progressToken": 7}, nil)
	if err != nil || resultText(t, res) != "hi" {
		t.Fatalf("echo: %s, %v", res, err)
	}
	res, err = u.CallTool(context.Background(), "region_query", json.RawMessage(`{"region":"Zürich","n":42,"opts":{"dry":true},"query":"q"}`), nil, nil)
	if err != nil || resultText(t, res) != "Zürich" {
		t.Fatalf("region_query: %s, %v", res, err)
	}

	// The wire, as data: no initialize and no session; every request
	// carries the _meta and the headers of 2026-07-28.
	wire.mu.Lock()
	reqs := slices.Clone(wire.reqs)
	wire.mu.Unlock()
	var methods []string
	for _, r := range reqs {
		methods = append(methods, r.rpcMethod)
		if r.httpMethod != http.MethodPost {
			t.Errorf("%s request to a modern server (no GET stream, no DELETE)", r.httpMethod)
			continue
		}
		if s := r.header.Get("Mcp-Session-Id"); s != "" {
			t.Errorf("%s sent Mcp-Session-Id %q", r.rpcMethod, s)
		}
		if got := r.header.Get("Mcp-Protocol-Version"); got != "2026-07-28" {
			t.Errorf("%s: MCP-Protocol-Version %q", r.rpcMethod, got)
		}
		if got := r.header.Get("Mcp-Method"); got != r.rpcMethod {
			t.Errorf("%s: Mcp-Method %q", r.rpcMethod, got)
		}
		params, _ := r.decoded(t)["params"].(map[string]any)
		meta, _ := params["_meta"].(map[string]any)
		for k, v := range wantMeta {
			if asJSON(meta[k]) != asJSON(v) {
				t.Errorf("%s: _meta[%s] = %s, want %s", r.rpcMethod, k, asJSON(meta[k]), asJSON(v))
			}
		}
	}
	if methods[0] != "server/discover" || slices.Contains(methods, "initialize") || slices.Contains(methods, "notifications/initialized") {
		t.Errorf("methods on the wire %v: want server/discover first and no initialize", methods)
	}
	calls := wire.requests("tools/call")
	if len(calls) != 2 {
		t.Fatalf("%d tools/call", len(calls))
	}
	if !bytes.Contains(calls[0].body, []byte(`"arguments":{"message":"hi","big":123456789012345678901234567890}`)) {
		t.Errorf("arguments not verbatim: %s", calls[0].body)
	}
	p0, _ := calls[0].decoded(t)["params"].(map[string]any)
	if m, _ := p0["_meta"].(map[string]any); asJSON(m["progressToken"]) != "7" {
		t.Errorf("the caller's _meta was lost: %s", asJSON(p0["_meta"]))
	}
	want := map[string]string{"Mcp-Name": "echo"}
	for k, v := range want {
		if got := calls[0].header.Get(k); got != v {
			t.Errorf("echo: %s = %q, want %q", k, got, v)
		}
	}
	want = map[string]string{
		"Mcp-Name":         "region_query",
		"Mcp-Param-Region": "=?base64?WsO8cmljaA==?=", // "Zürich", not plain ASCII
		"Mcp-Param-N":      "42",
		"Mcp-Param-Dry":    "true",
	}
	for k, v := range want {
		if got := calls[1].header.Get(k); got != v {
			t.Errorf("region_query: %s = %q, want %q", k, got, v)
		}
	}
	for k := range calls[0].header {
		if strings.HasPrefix(k, "Mcp-Param-") {
			t.Errorf("echo has no x-mcp-header parameter, but %s was sent", k)
		}
	}
}

func TestUpstreamEraConfiguredHeadersCannotForgeProtocolHeaders(t *testing.T) {
	// A configured or per-call header named like a protocol header would
	// make the headers disagree with the body (routing on one, running the
	// other): they are dropped, and the server accepts the requests.
	u, wire, _, _ := startModern(t, Config{Headers: http.Header{
		"Mcp-Method": {"tools/list"}, "Mcp-Name": {"other"}, "Mcp-Param-Region": {"evil"}, "X-Static": {"s"}}}, Options{})
	waitTools(t, u, 8)
	res, err := u.CallTool(context.Background(), "region_query", json.RawMessage(`{"region":"eu"}`), nil,
		http.Header{"Mcp-Name": {"forged"}, "Mcp-Param-Region": {"forged"}})
	if err != nil || resultText(t, res) != "eu" {
		t.Fatalf("region_query: %s, %v", res, err)
	}
	call := wire.requests("tools/call")[0].header
	for k, v := range map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "region_query", "Mcp-Param-Region": "eu", "X-Static": "s"} {
		if got := call.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want [%q]", k, got, v)
		}
	}
}

func TestUpstreamEraHeaderMismatchListsAgainAndRetries(t *testing.T) {
	// The server's tool gains an x-mcp-header parameter after it was listed
	// (and tells nobody: no tools.listChanged). The call without the header
	// is refused with -32020; the upstream lists again and sends it again
	// with the header, once (spec: streamable HTTP, client behavior).
	srv := mcpserver.NewMCPServer("hm", "1.0.0", mcpserver.WithToolCapabilities(false))
	srv.AddTool(mcpgo.NewToolWithRawSchema("q", "", json.RawMessage(`{"type":"object","properties":{"region":{"type":"string"}}}`)), textTool("v1"))
	wire := &wireRecorder{}
	wire.set(dualStreamable(srv))
	ts := httptest.NewServer(wire)
	t.Cleanup(ts.Close)
	u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp"}, Options{listRefresh: &[2]time.Duration{time.Hour, time.Hour}})
	waitReady(t, u)
	waitTools(t, u, 1)
	srv.AddTool(mcpgo.NewToolWithRawSchema("q", "", json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)), textTool("v2"))
	res, err := callTool(t, u, "q", `{"region":"eu"}`)
	if err != nil || resultText(t, res) != "v2" {
		t.Fatalf("call: %s, %v", res, err)
	}
	calls := wire.requests("tools/call")
	if len(calls) != 2 || calls[0].header.Get("Mcp-Param-Region") != "" || calls[1].header.Get("Mcp-Param-Region") != "eu" {
		t.Errorf("%d tools/call; want one without Mcp-Param-Region, then one with it", len(calls))
	}
	if n := len(wire.requests("tools/list")); n < 2 {
		t.Errorf("%d tools/list: the schema was not read again", n)
	}
	// A tool whose header the server still refuses is not retried forever.
	srv.AddTool(mcpgo.NewToolWithRawSchema("q", "", json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Other"}}}`)), textTool("v3"))
	wire.set(headerBreaker{dualStreamable(srv)})
	before := len(wire.requests("tools/call"))
	_, err = callTool(t, u, "q", `{"region":"eu"}`)
	var ue *Error
	if !errors.As(err, &ue) || ue.Code != -32020 {
		t.Errorf("call: %v, want the -32020 *Error", err)
	}
	if n := len(wire.requests("tools/call")) - before; n != 2 {
		t.Errorf("%d tools/call for one call, want 2 (one retry)", n)
	}
}

// headerBreaker drops the Mcp-Param-* headers of every request.
type headerBreaker struct{ h http.Handler }

func (b headerBreaker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for k := range r.Header {
		if strings.HasPrefix(k, "Mcp-Param-") {
			r.Header.Del(k)
		}
	}
	b.h.ServeHTTP(w, r)
}

func TestUpstreamEraLegacyServerFallsBackToInitialize(t *testing.T) {
	wire, ts, _ := newStreamable(t, nil) // refuses 2026-07-28 with -32022 naming legacy versions
	u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp"}, Options{})
	waitReady(t, u)
	waitTools(t, u, 5)
	if _, err := callTool(t, u, "echo", `{"message":"x"}`); err != nil {
		t.Fatal(err)
	}
	if v := u.Status().ProtocolVersion; v != "2025-11-25" {
		t.Errorf("protocol %q, want 2025-11-25", v)
	}
	discover := wire.requests("server/discover")
	init := wire.requests("initialize")
	if len(discover) != 1 || len(init) != 1 {
		t.Fatalf("%d server/discover, %d initialize: want one of each", len(discover), len(init))
	}
	if got := discover[0].header.Get("Mcp-Protocol-Version"); got != "2026-07-28" {
		t.Errorf("the probe's MCP-Protocol-Version %q", got)
	}
	// After the probe the connection is legacy: no modern header or _meta.
	if got := init[0].header.Get("Mcp-Protocol-Version"); got != "" {
		t.Errorf("initialize sent MCP-Protocol-Version %q", got)
	}
	if bytes.Contains(init[0].body, []byte("io.modelcontextprotocol/protocolVersion")) {
		t.Errorf("initialize carries a modern _meta: %s", init[0].body)
	}
	call := wire.requests("tools/call")[0]
	if call.header.Get("Mcp-Method") != "" || call.header.Get("Mcp-Session-Id") == "" || call.header.Get("Mcp-Protocol-Version") != "2025-11-25" {
		t.Errorf("a legacy call's headers: %v", call.header)
	}
}

func TestUpstreamEraPinned(t *testing.T) {
	t.Run("2025-11-25 never probes", func(t *testing.T) {
		u, wire, _, _ := startModern(t, Config{Protocol: ProtocolLegacy}, Options{})
		waitTools(t, u, 9) // legacy: x-mcp-header annotations are not checked
		if n := len(wire.requests("server/discover")); n != 0 {
			t.Errorf("%d server/discover with the protocol pinned to 2025-11-25", n)
		}
		if v := u.Status().ProtocolVersion; v != "2025-11-25" {
			t.Errorf("protocol %q", v)
		}
	})
	t.Run("2026-07-28 against a legacy server", func(t *testing.T) {
		wire, ts, _ := newStreamable(t, nil)
		u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp", Protocol: ProtocolModern}, Options{})
		eventually(t, 10*time.Second, "a reason", func() bool { return strings.Contains(u.Status().Reason, "pinned") })
		want := `the server does not speak MCP 2026-07-28 (server/discover answered -32022 (supported: 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)); protocol is pinned to 2026-07-28: set it to "auto" or "2025-11-25"`
		if got := u.Status().Reason; got != want {
			t.Errorf("reason:\n got %s\nwant %s", got, want)
		}
		if n := len(wire.requests("initialize")); n != 0 {
			t.Errorf("%d initialize with the protocol pinned to 2026-07-28", n)
		}
		if u.Ready() {
			t.Error("ready")
		}
	})
	t.Run("bad value", func(t *testing.T) {
		_, err := Start(context.Background(), &Config{URL: "http://127.0.0.1:1/mcp", Protocol: "2024"}, nil)
		if err == nil || !strings.Contains(err.Error(), `protocol "2024": want "auto", "2026-07-28" or "2025-11-25"`) {
			t.Errorf("err = %v", err)
		}
		_, err = Start(context.Background(), &Config{URL: "http://127.0.0.1:1/sse", Protocol: ProtocolModern}, nil)
		if err == nil || !strings.Contains(err.Error(), "legacy SSE") {
			t.Errorf("SSE pinned to 2026-07-28: err = %v", err)
		}
	})
}

// modernOnlyFake is a 2026-07-28-only server as the TypeScript SDK 2.x
// serves one with legacy: 'reject': initialize (and anything without the
// modern _meta) gets HTTP 400 with -32022 naming 2026-07-28.
type modernOnlyFake struct{ modern http.Handler }

func (f modernOnlyFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte(`"io.modelcontextprotocol/protocolVersion"`)) {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &m)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2025-11-25"}}}`, m.ID)
		return
	}
	f.modern.ServeHTTP(w, r)
}

func TestUpstreamEraModernOnlyServerIsNotTheWrongURL(t *testing.T) {
	ts := httptest.NewServer(modernOnlyFake{dualStreamable(modernServer(nil))})
	t.Cleanup(ts.Close)
	var diagnosed atomic.Int32
	diagnose := func(context.Context, string, int) string {
		diagnosed.Add(1)
		return "is it the server's MCP endpoint?"
	}
	t.Run("auto works", func(t *testing.T) {
		u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp"}, Options{Diagnose: diagnose})
		waitReady(t, u)
		waitTools(t, u, 8)
		if res, err := callTool(t, u, "echo", `{"message":"m"}`); err != nil || resultText(t, res) != "m" {
			t.Errorf("echo: %s, %v", res, err)
		}
	})
	t.Run("pinned to 2025-11-25: says why", func(t *testing.T) {
		u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp", Protocol: ProtocolLegacy}, Options{Diagnose: diagnose})
		eventually(t, 10*time.Second, "a reason", func() bool { return strings.Contains(u.Status().Reason, "speaks only") })
		want := `the server speaks only MCP 2026-07-28: it answered initialize with -32022 (unsupported protocol version); protocol is pinned to 2025-11-25: set it to "auto" or "2026-07-28"`
		if got := u.Status().Reason; got != want {
			t.Errorf("reason:\n got %s\nwant %s", got, want)
		}
	})
	if n := diagnosed.Load(); n != 0 {
		t.Errorf("Diagnose asked %d times: a modern-only server is not a wrong URL", n)
	}
}

func TestUpstreamEraClassifyDiscover(t *testing.T) {
	ok := func(result string) sendResult {
		return sendResult{sent: true, resp: &mcptransport.JSONRPCResponse{Result: json.RawMessage(result)}}
	}
	rpcErr := func(code int, data string) sendResult {
		d := &mcpgo.JSONRPCErrorDetails{Code: code, Message: "m"}
		if data != "" {
			d.Data = json.RawMessage(data)
		}
		return sendResult{sent: true, resp: &mcptransport.JSONRPCResponse{Error: d}}
	}
	status := func(s int, body string) sendResult {
		return sendResult{sent: true, status: s, errBody: []byte(body), err: errors.New("HTTP error")}
	}
	unsupported := func(versions ...string) string {
		return `{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":` + asJSON(versions) + `}}}`
	}
	cases := []struct {
		name     string
		kind     connKind
		r        sendResult
		timedOut bool
		want     eraStep
		version  string
	}{
		{"a DiscoverResult naming the version", kindStreamable, ok(`{"supportedVersions":["2026-07-28","2025-11-25"]}`), false, stepModern, "2026-07-28"},
		{"a DiscoverResult without versions", kindStdio, ok(`{"capabilities":{}}`), false, stepModern, "2026-07-28"},
		{"an empty result (a legacy server's answer to any method)", kindStreamable, ok(`{}`), false, stepLegacy, ""},
		{"a DiscoverResult naming legacy versions only", kindStreamable, ok(`{"supportedVersions":["2025-11-25"]}`), false, stepLegacy, "2025-11-25"},
		{"a DiscoverResult naming unknown versions", kindStreamable, ok(`{"supportedVersions":["2099-01-01"]}`), false, stepFail, ""},
		{"a malformed DiscoverResult", kindStreamable, ok(`{"supportedVersions":"2026-07-28"}`), false, stepFail, ""},
		{"-32601 (stdio)", kindStdio, rpcErr(-32601, ""), false, stepLegacy, ""},
		{"-32602 (stdio, some legacy servers)", kindStdio, rpcErr(-32602, ""), false, stepLegacy, ""},
		{"-32600 in HTTP 200", kindStreamable, rpcErr(-32600, ""), false, stepLegacy, ""},
		{"-32022 naming legacy versions", kindStdio, rpcErr(-32022, `{"supported":["2025-11-25","2025-06-18"]}`), false, stepLegacy, "2025-11-25"},
		{"-32022 naming the version asked", kindStdio, rpcErr(-32022, `{"supported":["2026-07-28"]}`), false, stepFail, ""},
		{"-32022 naming nothing known", kindStdio, rpcErr(-32022, `{"supported":["1999-01-01"]}`), false, stepFail, ""},
		{"-32020 header mismatch", kindStreamable, rpcErr(-32020, ""), false, stepFail, ""},
		{"-32021 missing capability", kindStdio, rpcErr(-32021, `{"capability":"sampling"}`), false, stepFail, ""},
		{"HTTP 400 with -32022 naming legacy versions", kindStreamable, status(400, unsupported("2025-11-25")), false, stepLegacy, "2025-11-25"},
		{"HTTP 404 with -32022 naming legacy versions", kindStreamable, status(404, unsupported("2025-06-18")), false, stepLegacy, "2025-06-18"},
		{"HTTP 400 with -32020", kindStreamable, status(400, `{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"Mcp-Name"}}`), false, stepFail, ""},
		{"HTTP 400 with -32600 (a legacy server wants a session)", kindStreamable, status(400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: No valid session ID"}}`), false, stepLegacy, ""},
		{"HTTP 400, plain text", kindStreamable, status(400, "Bad Request: Mcp-Session-Id header is required"), false, stepLegacy, ""},
		{"HTTP 404, empty", kindStreamable, status(404, ""), false, stepLegacy, ""},
		{"HTTP 405", kindStreamable, status(405, ""), false, stepLegacy, ""},
		{"HTTP 500", kindStreamable, status(500, "oops"), false, stepLegacy, ""},
		{"HTTP 401", kindStreamable, status(401, ""), false, stepFail, ""},
		{"HTTP 403", kindStreamable, status(403, ""), false, stepFail, ""},
		{"stdio: no answer in time", kindStdio, sendResult{sent: true, err: context.DeadlineExceeded}, true, stepLegacy, ""},
		{"HTTP: no answer in time", kindStreamable, sendResult{sent: true, err: context.DeadlineExceeded}, true, stepFail, ""},
		{"unreachable", kindStreamable, sendResult{err: errors.New("connection refused")}, false, stepFail, ""},
		{"stdio child gone", kindStdio, sendResult{sent: true, err: errors.New("transport closed")}, false, stepFail, ""},
	}
	var failures []string
	for _, c := range cases {
		got := classifyDiscover(c.kind, "2026-07-28", c.r, c.timedOut)
		if got.step != c.want || (c.version != "" && got.version != c.version) {
			failures = append(failures, fmt.Sprintf("%s: step %d version %q (%s), want step %d version %q", c.name, got.step, got.version, got.why, c.want, c.version))
		}
	}
	if len(failures) > 0 {
		t.Errorf("classifyDiscover:\n  %s", strings.Join(failures, "\n  "))
	}
}

func TestUpstreamEraStdio(t *testing.T) {
	t.Run("modern", func(t *testing.T) {
		u, logs := startFake(t, Config{Env: []string{fakeEra + "=modern"}}, Options{})
		waitReady(t, u)
		waitTools(t, u, 4)
		if st := u.Status(); st.ProtocolVersion != "2026-07-28" || st.Server.Name != "fake-modern" {
			t.Errorf("status %+v", st)
		}
		res, err := u.CallTool(context.Background(), "meta", json.RawMessage(`{}`), map[string]any{"progressToken": "p1"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var meta map[string]any
		if err := json.Unmarshal([]byte(resultText(t, res)), &meta); err != nil {
			t.Fatalf("meta %s: %v", resultText(t, res), err)
		}
		want := map[string]any{"progressToken": "p1"}
		for k, v := range wantMeta {
			want[k] = v
		}
		if asJSON(meta) != asJSON(want) {
			t.Errorf("the call's _meta:\n got %s\nwant %s", asJSON(meta), asJSON(want))
		}
		// The discover probe and the listing carried the same _meta; a
		// subscriptions/listen stream was opened for tools list changes.
		logs.waitLog(t, logged(`fake: discover {"_meta":`+asJSON(wantMeta)+`}`), 5*time.Second)
		logs.waitLog(t, logged(`fake: tools/list _meta `+asJSON(wantMeta)), 5*time.Second)
		logs.waitLog(t, logged(`fake: listen {"_meta":`+asJSON(wantMeta)+`,"notifications":{"toolsListChanged":true}}`), 5*time.Second)
		if strings.Contains(logs.String(), "initialize") {
			t.Errorf("initialize sent to a modern server:\n%s", logs.String())
		}
		// A change notification makes the list read again.
		if _, err := callTool(t, u, "change_tools", `{}`); err != nil {
			t.Fatal(err)
		}
		waitTools(t, u, 5)
	})
	t.Run("silent on discover: legacy after the probe's bound", func(t *testing.T) {
		start := time.Now()
		u, _ := startFake(t, Config{Env: []string{fakeEra + "=silent"}}, Options{probeWait: 300 * time.Millisecond})
		waitReady(t, u)
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("ready after %v, before the probe's bound", d)
		}
		if v := u.Status().ProtocolVersion; v != "2025-11-25" {
			t.Errorf("protocol %q", v)
		}
		waitTools(t, u, 4)
	})
	t.Run("-32601 on discover: legacy at once", func(t *testing.T) {
		u, _ := startFake(t, Config{}, Options{probeWait: time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := u.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		if v := u.Status().ProtocolVersion; v != "2025-11-25" {
			t.Errorf("protocol %q", v)
		}
	})
	t.Run("modern-only pinned to 2025-11-25", func(t *testing.T) {
		u, _ := startFake(t, Config{Env: []string{fakeEra + "=modern"}, Protocol: ProtocolLegacy}, Options{})
		eventually(t, 10*time.Second, "a reason", func() bool { return strings.Contains(u.Status().Reason, "speaks only") })
		want := `the server speaks only MCP 2026-07-28: it answered initialize with -32022 (unsupported protocol version); protocol is pinned to 2025-11-25: set it to "auto" or "2026-07-28"`
		if got := u.Status().Reason; got != want {
			t.Errorf("reason:\n got %s\nwant %s", got, want)
		}
	})
}

func TestUpstreamEraInputRequired(t *testing.T) {
	check := func(t *testing.T, u *Upstream, urlTool, formTool, meta string) {
		_, err := callTool(t, u, urlTool, `{}`)
		var ue *Error
		if !errors.As(err, &ue) || ue.Code != -32042 {
			t.Fatalf("%s: %v, want the -32042 *Error of 2025-11-25", urlTool, err)
		}
		// The request's params as sent (_meta included), with its key as
		// the elicitationId.
		want := `{"elicitations":[{` + meta + `"elicitationId":"github","message":"Connect GitHub","mode":"url","url":"https://auth.example/github"}]}`
		var got any
		_ = json.Unmarshal(ue.Data, &got)
		if asJSON(got) != want {
			t.Errorf("%s: data\n got %s\nwant %s", urlTool, ue.Data, want)
		}
		_, err = callTool(t, u, formTool, `{}`)
		var ie *InputRequiredError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), `name: a form ("Your name?")`) {
			t.Errorf("%s: %v, want an *InputRequiredError naming the form", formTool, err)
		}
	}
	t.Run("http", func(t *testing.T) {
		u, _, _, _ := startModern(t, Config{}, Options{})
		check(t, u, "ask_url", "ask_form", "")
	})
	t.Run("stdio", func(t *testing.T) {
		u, _ := startFake(t, Config{Env: []string{fakeEra + "=modern"}}, Options{})
		waitReady(t, u)
		check(t, u, "input_url", "input_form", `"_meta":{"carrier":{"kept":true}},`)
		_, err := callTool(t, u, "odd_type", `{}`)
		if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), `resultType "someday"`) {
			t.Errorf("odd_type: %v", err)
		}
	})
}

func TestUpstreamEraListChangedOverSubscription(t *testing.T) {
	waits := make(chan time.Duration, 100)
	u, wire, srv, _ := startModern(t, Config{}, Options{listRefresh: &[2]time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
		waited: func(what string, _ int, d time.Duration) {
			if what == "ttl" {
				waits <- d
			}
		}})
	waitTools(t, u, 8)
	eventually(t, 10*time.Second, "an acknowledged subscriptions/listen", func() bool {
		c := u.current()
		return c != nil && c.listening.Load()
	})
	listen := wire.requests("subscriptions/listen")
	if len(listen) != 1 {
		t.Fatalf("%d subscriptions/listen", len(listen))
	}
	p, _ := listen[0].decoded(t)["params"].(map[string]any)
	if got := asJSON(p["notifications"]); got != `{"toolsListChanged":true}` {
		t.Errorf("listen filter %s", got)
	}
	// Listening: the ttlMs does not make the list be read again.
	before := len(wire.requests("tools/list"))
	time.Sleep(400 * time.Millisecond)
	if after := len(wire.requests("tools/list")); after > before+1 {
		t.Errorf("tools/list read %d times in 400 ms while a listen stream tells of changes", after-before)
	}
	srv.AddTool(mcpgo.NewTool("added_later"), textTool("later"))
	waitTools(t, u, 9)
}

func TestUpstreamEraTTLRefresh(t *testing.T) {
	for _, c := range []struct {
		name   string
		ttl    int64 // ms
		lo, hi time.Duration
		want   time.Duration
	}{
		{"ttl within the bounds", 300, 100 * time.Millisecond, 2 * time.Second, 300 * time.Millisecond},
		{"ttl 0: the lower bound", 0, 200 * time.Millisecond, 2 * time.Second, 200 * time.Millisecond},
		{"a day: the upper bound", 86_400_000, 100 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A server without tools.listChanged: no subscription, the list's
			// ttlMs paces the refresh.
			srv := mcpserver.NewMCPServer("ttl", "1.0.0", mcpserver.WithToolCapabilities(false),
				mcpserver.WithCacheHints(c.ttl, mcpgo.CacheScopePublic))
			srv.AddTool(mcpgo.NewTool("a"), textTool("a"))
			wire := &wireRecorder{}
			wire.set(dualStreamable(srv))
			ts := httptest.NewServer(wire)
			t.Cleanup(ts.Close)
			var mu sync.Mutex
			var waits []time.Duration
			u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp"}, Options{listRefresh: &[2]time.Duration{c.lo, c.hi},
				waited: func(what string, _ int, d time.Duration) {
					if what == "ttl" {
						mu.Lock()
						waits = append(waits, d)
						mu.Unlock()
					}
				}})
			waitReady(t, u)
			eventually(t, 10*time.Second, "three listings", func() bool { return len(wire.requests("tools/list")) >= 3 })
			mu.Lock()
			defer mu.Unlock()
			for _, d := range waits {
				if d < c.want || d > c.want+c.want/10 {
					t.Errorf("refresh after %v, want %v plus up to a tenth", d, c.want)
				}
			}
			if n := len(wire.requests("subscriptions/listen")); n != 0 {
				t.Errorf("%d subscriptions/listen to a server without tools.listChanged", n)
			}
		})
	}
}

func TestUpstreamEraServerDowngradedMidConnection(t *testing.T) {
	// A modern connection whose server is replaced by a legacy one: the
	// call gets -32022 naming legacy versions; it was refused, not run
	// (ErrUnavailable); the connection is closed and the next one probes
	// again, now legacy.
	u, wire, srv, _ := startModern(t, Config{PingInterval: -1}, Options{})
	waitTools(t, u, 8)
	wire.set(legacyStreamable(srv))
	_, err := callTool(t, u, "echo", `{"message":"x"}`)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "refused protocol version 2026-07-28") {
		t.Fatalf("call after the downgrade: %v, want ErrUnavailable", err)
	}
	eventually(t, 10*time.Second, "a legacy connection", func() bool {
		return u.Ready() && u.Status().ProtocolVersion == "2025-11-25"
	})
	if res, err := callTool(t, u, "echo", `{"message":"y"}`); err != nil || resultText(t, res) != "y" {
		t.Errorf("call on the new connection: %s, %v", res, err)
	}
	if n := len(wire.requests("server/discover")); n < 2 {
		t.Errorf("%d server/discover: the reconnection did not probe again", n)
	}
}

func TestUpstreamEraModernHTTPCancelClosesTheStream(t *testing.T) {
	blocked := make(chan string, 1)
	srv := modernServer(blocked)
	wire := &wireRecorder{}
	wire.set(dualStreamable(srv))
	ts := httptest.NewServer(wire)
	t.Cleanup(ts.Close)
	u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp"}, Options{})
	waitReady(t, u)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	if _, err := u.CallTool(ctx, "block", nil, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	select {
	case <-blocked:
	case <-time.After(5 * time.Second):
		t.Fatal("the tool's context did not end when the call's stream closed")
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(wire.requests("notifications/cancelled")); n != 0 {
		t.Errorf("%d notifications/cancelled over 2026-07-28 HTTP (closing the stream is the cancellation)", n)
	}
}

func TestUpstreamEraWithModernMeta(t *testing.T) {
	meta := json.RawMessage(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)
	for _, c := range []struct{ in, want string }{
		{``, `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`},
		{`{"cursor":"c"}`, `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"cursor":"c"}`},
		{`{"name":"t","arguments":{"n":123456789012345678901234567890,"s":"<&>"},"_meta":{"progressToken":1,"io.modelcontextprotocol/protocolVersion":"1999-01-01"}}`,
			`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":1},"arguments":{"n":123456789012345678901234567890,"s":"\u003c\u0026\u003e"},"name":"t"}`},
		{`{"_meta":null}`, `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`},
	} {
		got, err := withModernMeta(json.RawMessage(c.in), meta)
		if err != nil || string(got) != c.want {
			t.Errorf("withModernMeta(%s) = %s, %v\n want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`[]`, `"x"`, `{"_meta":[1]}`} {
		if _, err := withModernMeta(json.RawMessage(bad), meta); err == nil {
			t.Errorf("withModernMeta(%s): no error", bad)
		}
	}
}

func TestUpstreamEraParamHeaderTool(t *testing.T) {
	for _, c := range []struct {
		schema string
		tool   bool   // headers to mirror
		err    string // "" when valid
	}{
		{`{"type":"object","properties":{"q":{"type":"string"}}}`, false, ""},
		{`{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"Region"}}}`, true, ""},
		{`{"type":"object","properties":{"o":{"type":"object","properties":{"r":{"type":"integer","x-mcp-header":"R"}}}}}`, true, ""},
		{`{"type":"object","properties":{"r":{"type":"number","x-mcp-header":"R"}}}`, false, "primitive types"},
		{`{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"R"},"b":{"type":"string","x-mcp-header":"r"}}}`, false, "duplicate"},
		{`{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"a b"}}}`, false, "invalid character"},
		{`{"type":"object","properties":{"xs":{"type":"array","items":{"type":"string","x-mcp-header":"X"}}}}`, false, "inputSchema.properties.xs.items: x-mcp-header"},
		{`{"type":"object","anyOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}`, false, "inputSchema.anyOf[0].properties.a: x-mcp-header"},
		{`{"type":"object","$defs":{"d":{"type":"string","x-mcp-header":"D"}},"properties":{"a":{"$ref":"#/$defs/d"}}}`, false, "inputSchema.$defs.d: x-mcp-header"},
		{`{"type":"string","x-mcp-header":"Root"}`, false, "inputSchema: x-mcp-header"},
		{`{"type":"object","properties":{"a":{"type":"string","default":{"x-mcp-header":"data"}}}}`, false, ""},
	} {
		tool, err := paramHeaderTool("t", json.RawMessage(c.schema))
		switch {
		case c.err == "" && err != nil, c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: err %v, want %q", c.schema, err, c.err)
		case (tool != nil) != c.tool:
			t.Errorf("%s: tool %v, want one: %v", c.schema, tool, c.tool)
		}
	}
}

func TestUpstreamEraListRefreshBounds(t *testing.T) {
	lo, hi := 15*time.Second, 30*time.Minute
	for _, c := range []struct {
		ttl  int64
		want time.Duration
	}{{-1, lo}, {0, lo}, {1, lo}, {60_000, time.Minute}, {1 << 62, hi}} {
		for range 20 {
			if d := listRefresh(c.ttl, lo, hi); d < c.want || d > c.want+c.want/10 {
				t.Fatalf("listRefresh(%d) = %v, want %v plus up to a tenth", c.ttl, d, c.want)
			}
		}
	}
}

// An argument mirrored into a header cannot add a header or split the
// request: a value with CR, LF or non-ASCII goes base64-encoded
// (=?base64?…?=), and the server, which decodes and compares it with the
// body, accepts the call.
func TestUpstreamEraParamHeaderInjection(t *testing.T) {
	u, wire, _, _ := startModern(t, Config{}, Options{})
	waitTools(t, u, 8)
	evil := "eu\r\nX-Evil: 1\r\n\r\nGET / HTTP/1.1"
	args, _ := json.Marshal(map[string]any{"region": evil})
	res, err := u.CallTool(context.Background(), "region_query", args, nil, nil)
	if err != nil || resultText(t, res) != evil {
		t.Fatalf("region_query: %s, %v", res, err)
	}
	call := wire.requests("tools/call")[0]
	if got := call.header.Get("Mcp-Param-Region"); !strings.HasPrefix(got, "=?base64?") || strings.ContainsAny(got, "\r\n") {
		t.Errorf("Mcp-Param-Region = %q, want a base64 sentinel", got)
	}
	if got := call.header.Get("X-Evil"); got != "" {
		t.Errorf("an argument added a header: X-Evil %q", got)
	}
}

// A 2026-07-28 server that names itself at the top of its server/discover
// result (as initialize did; the TypeScript SDK 2.x and the conformance
// runner's servers), not in _meta, gets its name: before, the bridge read
// only _meta and the server was nameless (serve-otc's toolkit "_", two such
// servers colliding). One in _meta still does; _meta wins when both.
func TestUpstreamEraDiscoverServerInfoAtTop(t *testing.T) {
	for _, tc := range []struct{ name, info, want string }{
		{"top level", `"serverInfo":{"name":"top-server","version":"3.1.0"}`, "top-server 3.1.0"},
		{"_meta", `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"meta-server","version":"1.2.0"}}`, "meta-server 1.2.0"},
		{"both", `"serverInfo":{"name":"top-server","version":"3.1.0"},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"meta-server","version":"1.2.0"}}`, "meta-server 1.2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := dualStreamable(modernServer(nil))
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				var req struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				_ = json.Unmarshal(body, &req)
				if req.Method == "server/discover" {
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},%s}}`, req.ID, tc.info)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				inner.ServeHTTP(w, r)
			}))
			t.Cleanup(ts.Close)
			u, _ := startLogged(t, Config{URL: ts.URL + "/mcp", RestartBackoffMin: 20 * time.Millisecond, RestartBackoffMax: 100 * time.Millisecond}, Options{}, true)
			waitReady(t, u)
			st := u.Status()
			if got := st.Server.Name + " " + st.Server.Version; st.ProtocolVersion != "2026-07-28" || got != tc.want || u.Name() != strings.Fields(tc.want)[0] {
				t.Errorf("server %q (name %q, protocol %s), want %q", got, u.Name(), st.ProtocolVersion, tc.want)
			}
		})
	}
}
