//go:build e2e

package e2e

// End-to-end tests of `mcpotc serve-mcp` (the MCP front) through the built
// binary, with MCP clients that are not mcp-go: the official Go SDK
// (github.com/modelcontextprotocol/go-sdk) for most assertions, the official
// conformance runner, raw HTTP where exact statuses matter, and the official
// TypeScript SDK (testdata/mcpfront_client.mjs) as a second, independent
// client. Every test runs over stdio and over streamable HTTP at /mcp, and
// where the protocol era matters, with a 2025-11-25 (initialize, sessions)
// and a 2026-07-28 (server/discover, stateless) client.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	proto20251125 = "2025-11-25" // initialize handshake, Mcp-Session-Id
	proto20260728 = "2026-07-28" // server/discover, stateless

	// callTimeout bounds one MCP request of a test.
	callTimeout = 20 * time.Second
	// exitBound bounds how long a bridge may take to exit once told to.
	exitBound = 10 * time.Second
)

var (
	transports  = []string{"stdio", "http"}
	protocols   = []string{proto20251125, proto20260728}
	sampleTools = []string{"Calculator_Add", "Doorbell_Ring", "Gmail_GetEmails", "SMS_Send", "System_GetTimestamp"}
)

// runParallel runs body as a parallel subtest called name, with a context
// that ends after timeout.
func runParallel(t *testing.T, name string, timeout time.Duration, body func(t *testing.T, ctx context.Context)) {
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		body(t, ctx)
	})
}

// forEachTransportProtocol runs body as a parallel subtest
// "transport/protocol" (see runParallel) for every transport and protocol.
func forEachTransportProtocol(t *testing.T, timeout time.Duration, body func(t *testing.T, ctx context.Context, transport, protocol string)) {
	for _, transport := range transports {
		for _, protocol := range protocols {
			runParallel(t, transport+"/"+protocol, timeout, func(t *testing.T, ctx context.Context) {
				body(t, ctx, transport, protocol)
			})
		}
	}
}

// --- the bridge under test ----------------------------------------------------

// mcpBridge is a running `mcpotc serve-mcp`.
type mcpBridge struct {
	p         *proc
	transport string
	url       string // http: the streamable HTTP endpoint (…/mcp); sse: …/sse
	stdout    *procStdoutReader
}

// startBridge starts `mcpotc serve-mcp ARGS…` with --transport and, for
// http, --listen on a free loopback port, and waits until it listens.
func startBridge(t *testing.T, ctx context.Context, transport string, args []string, env []string) *mcpBridge {
	t.Helper()
	bin := buildMcpotc(t)
	b := &mcpBridge{transport: transport}
	full := append([]string{"serve-mcp", "--transport", transport}, args...)
	var base string
	if transport != "stdio" {
		port := freePort(t)
		full = append(full, "--listen", "127.0.0.1:"+strconv.Itoa(port))
		base = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	b.p = startProcess(t, ctx, bin, full, env)
	switch transport {
	case "http", "sse":
		// Not waitHTTP: a GET of /mcp or /sse answers with an event stream
		// that it would read until its client timeout.
		b.url = base + map[string]string{"http": "/mcp", "sse": "/sse"}[transport]
		waitListening(t, b.p, strings.TrimPrefix(base, "http://"), 30*time.Second)
	default:
		b.stdout = &procStdoutReader{p: b.p, closed: make(chan struct{})}
	}
	return b
}

// waitListening waits until addr accepts TCP connections; it fails the test
// when p exits first or after timeout.
func waitListening(t *testing.T, p *proc, addr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s within %v: %v", p.name, addr, timeout, err)
		}
		select {
		case <-p.Done():
			t.Fatalf("%s exited before listening on %s: %v", p.name, addr, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// clientOpts choose how a Go SDK client connects.
type clientOpts struct {
	protocol       string // ClientSessionOptions.ProtocolVersion
	urlElicitation bool   // declare capabilities.elicitation.url
	bearer         string // http: sent as Authorization: Bearer
	onListChanged  func() // ToolListChangedHandler
}

// connect connects a Go SDK client to the bridge.
func (b *mcpBridge) connect(t *testing.T, ctx context.Context, o clientOpts) *sdk.ClientSession {
	t.Helper()
	cs, err := b.tryConnect(ctx, o)
	if err != nil {
		t.Fatalf("go-sdk connect over %s (protocol %s): %v", b.transport, o.protocol, err)
	}
	t.Cleanup(func() { closeSession(t, cs) })
	if got := cs.InitializeResult().ProtocolVersion; got != o.protocol {
		t.Errorf("negotiated protocol %s, want %s", got, o.protocol)
	}
	return cs
}

func (b *mcpBridge) tryConnect(ctx context.Context, o clientOpts) (*sdk.ClientSession, error) {
	copts := &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{},
		// Input-required results (2026-07-28) come back to the test as they are.
		MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true},
	}
	if o.urlElicitation {
		copts.Capabilities.Elicitation = &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}
	}
	if o.onListChanged != nil {
		copts.ToolListChangedHandler = func(context.Context, *sdk.ToolListChangedRequest) { o.onListChanged() }
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "mcpotc-e2e-go-sdk", Version: "0.0.0"}, copts)
	hc := &http.Client{Transport: http.DefaultTransport}
	if o.bearer != "" {
		hc.Transport = bearerRoundTripper{token: o.bearer, base: http.DefaultTransport}
	}
	var tr sdk.Transport
	switch b.transport {
	case "stdio":
		tr = &sdk.IOTransport{Reader: b.stdout, Writer: b.p.Stdin}
	case "sse":
		tr = &sdk.SSEClientTransport{Endpoint: b.url, HTTPClient: hc}
	default:
		tr = &sdk.StreamableClientTransport{Endpoint: b.url, HTTPClient: hc}
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if b.transport == "sse" {
		// The Go SDK's SSE client holds its event stream with Connect's
		// context: one that ends after Connect would end the session.
		cctx = ctx
	}
	return client.Connect(cctx, tr, &sdk.ClientSessionOptions{ProtocolVersion: o.protocol})
}

// closeSession closes a client session, bounded.
func closeSession(t *testing.T, cs *sdk.ClientSession) {
	done := make(chan error, 1)
	go func() { done <- cs.Close() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Errorf("go-sdk ClientSession.Close did not return within 10s")
	}
}

// stopIfStdio is stopStdio for a stdio bridge; it does nothing for another.
func (b *mcpBridge) stopIfStdio(t *testing.T, cs *sdk.ClientSession) {
	t.Helper()
	if b.transport == "stdio" {
		b.stopStdio(t, cs)
	}
}

// stopStdio ends a stdio bridge as a host does (closes its stdin), checks
// that it exits 0 in time, and that its stdout held nothing but JSON-RPC.
func (b *mcpBridge) stopStdio(t *testing.T, cs *sdk.ClientSession) {
	t.Helper()
	start := time.Now()
	exitedAt := make(chan time.Duration, 1)
	go func() { <-b.p.Done(); exitedAt <- time.Since(start) }()
	closeSession(t, cs) // closes the bridge's stdin
	if err := b.p.Wait(exitBound); err != nil {
		t.Errorf("serve-mcp (stdio) after stdin closed: %v (want exit 0)", err)
	}
	t.Logf("stdio bridge exited %v after its stdin was closed", (<-exitedAt).Round(time.Millisecond))
	assertOnlyJSONRPC(t, b.p.Stdout())
}

// procStdoutReader reads a process's stdout lines (see proc.ReadLine) as a
// byte stream, for the Go SDK's IOTransport; the raw bytes stay in the
// proc's stdout tail for assertOnlyJSONRPC.
type procStdoutReader struct {
	p      *proc
	buf    []byte
	closed chan struct{}
	once   sync.Once
}

func (r *procStdoutReader) Read(b []byte) (int, error) {
	for len(r.buf) == 0 {
		select {
		case <-r.closed:
			return 0, io.EOF
		default:
		}
		line, err := r.p.ReadLine(100 * time.Millisecond)
		if err != nil {
			if strings.HasPrefix(err.Error(), "stdout closed") {
				return 0, io.EOF
			}
			continue // no line yet
		}
		r.buf = append([]byte(line), '\n')
	}
	n := copy(b, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *procStdoutReader) Close() error {
	r.once.Do(func() { close(r.closed) })
	return nil
}

// assertOnlyJSONRPC checks that every line of a stdio server's stdout is one
// JSON-RPC 2.0 message: a request or notification (method), or a response
// (id and exactly one of result and error).
func assertOnlyJSONRPC(t *testing.T, out string) {
	t.Helper()
	if strings.HasPrefix(out, "[…") {
		t.Fatalf("stdout tail was truncated; cannot check every line")
	}
	if out == "" {
		t.Errorf("stdout is empty: no JSON-RPC at all")
		return
	}
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("stdout does not end with a newline: a partial frame: %q", truncate(out[max(0, len(out)-200):], 200))
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, line := range lines {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("stdout line %d is not JSON: %v: %q", i+1, err, truncate(line, 300))
			continue
		}
		if string(m["jsonrpc"]) != `"2.0"` {
			t.Errorf("stdout line %d: jsonrpc is %s, not \"2.0\": %s", i+1, m["jsonrpc"], truncate(line, 300))
		}
		_, hasMethod := m["method"]
		_, hasID := m["id"]
		_, hasResult := m["result"]
		_, hasError := m["error"]
		if !hasMethod && !(hasID && hasResult != hasError) {
			t.Errorf("stdout line %d is neither a request, a notification nor a response: %s", i+1, truncate(line, 300))
		}
	}
	t.Logf("stdout: %d lines, all JSON-RPC 2.0", len(lines))
}

type bearerRoundTripper struct {
	token string
	base  http.RoundTripper
}

func (b bearerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// --- calls and results --------------------------------------------------------------

func callTool(t *testing.T, ctx context.Context, cs *sdk.ClientSession, name string, args any) (*sdk.CallToolResult, error) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return cs.CallTool(cctx, &sdk.CallToolParams{Name: name, Arguments: args})
}

// mustCall calls a tool and fails the test on a JSON-RPC error.
func mustCall(t *testing.T, ctx context.Context, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := callTool(t, ctx, cs, name, args)
	if err != nil {
		t.Fatalf("tools/call %s %v: %v", name, args, err)
	}
	return res
}

// wantRPCError calls a tool and returns the JSON-RPC error it must fail with.
func wantRPCError(t *testing.T, ctx context.Context, cs *sdk.ClientSession, name string, args any, code int64) *jsonrpc.Error {
	t.Helper()
	res, err := callTool(t, ctx, cs, name, args)
	if err == nil {
		t.Fatalf("tools/call %s %v: a result (%s), want JSON-RPC error %d", name, args, jsonString(res), code)
	}
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("tools/call %s %v: %v (%T), want a JSON-RPC error %d", name, args, err, err, code)
	}
	if we.Code != code {
		t.Errorf("tools/call %s %v: JSON-RPC error %d %q, want code %d", name, args, we.Code, we.Message, code)
	}
	return we
}

func listTools(t *testing.T, ctx context.Context, cs *sdk.ClientSession) []*sdk.Tool {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var tools []*sdk.Tool
	for tool, err := range cs.Tools(cctx, nil) { // follows every cursor
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		tools = append(tools, tool)
	}
	return tools
}

func toolNames(tools []*sdk.Tool) []string {
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// textOf is the text of every text block, joined by newlines.
func textOf(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

// asData round-trips v through JSON: maps, slices, float64s, strings.
func asData(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return out
}

func mustData(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(fmt.Sprintf("bad expected JSON %s: %v", s, err))
	}
	return v
}

// withoutKeys removes the given keys from every object in v.
func withoutKeys(v any, keys ...string) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if !slices.Contains(keys, k) {
				out[k] = withoutKeys(e, keys...)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = withoutKeys(e, keys...)
		}
		return out
	}
	return v
}

// --- 1. the sample toolkit, embedded ------------------------------------------------

// wantSampleSchemas are the sample tools' input and output schemas as data,
// descriptions aside ("" : no outputSchema).
var wantSampleSchemas = map[string][2]string{
	"Calculator_Add": {
		`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`,
		`{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}`,
	},
	"Doorbell_Ring": {
		`{"type":"object","properties":{"doorbell_id":{"type":"string"}},"required":["doorbell_id"]}`,
		``,
	},
	"System_GetTimestamp": {
		`{"type":"object"}`,
		`{"type":"object","properties":{"timestamp":{"type":"string","format":"date-time"}},"required":["timestamp"]}`,
	},
	"Gmail_GetEmails": {
		`{"type":"object","properties":{"query":{"type":"string"}},"required":[]}`,
		`{"type":"object","properties":{"emails":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"subject":{"type":"string"},"snippet":{"type":"string"}},"required":["id","subject","snippet"]}}},"required":["emails"]}`,
	},
	"SMS_Send": {
		`{"type":"object","properties":{"to":{"type":"string"},"message":{"type":"string"}},"required":["to","message"]}`,
		`{"type":"object","properties":{"status":{"type":"string"}},"required":["status"]}`,
	},
}

var wantSampleOTCIDs = map[string]string{
	"Calculator_Add":      "Calculator.Add@1.1.0",
	"Doorbell_Ring":       "Doorbell.Ring@0.1.0",
	"System_GetTimestamp": "System.GetTimestamp@1.0.0",
	"Gmail_GetEmails":     "Gmail.GetEmails@1.2.0",
	"SMS_Send":            "SMS.Send@0.1.2",
}

// checkSampleTools asserts the sample toolkit's tools as data.
func checkSampleTools(t *testing.T, tools []*sdk.Tool) {
	t.Helper()
	if got := toolNames(tools); !slices.Equal(got, sampleTools) {
		t.Fatalf("tools/list names = %q, want %q", got, sampleTools)
	}
	for _, tool := range tools {
		want := wantSampleSchemas[tool.Name]
		if got := withoutKeys(asData(t, tool.InputSchema), "description"); !reflect.DeepEqual(got, mustData(want[0])) {
			t.Errorf("%s inputSchema (descriptions aside) = %s, want %s", tool.Name, jsonString(got), want[0])
		}
		if want[1] == "" {
			if tool.OutputSchema != nil {
				t.Errorf("%s has outputSchema %s, want none", tool.Name, jsonString(tool.OutputSchema))
			}
		} else if got := withoutKeys(asData(t, tool.OutputSchema), "description"); !reflect.DeepEqual(got, mustData(want[1])) {
			t.Errorf("%s outputSchema (descriptions aside) = %s, want %s", tool.Name, jsonString(got), want[1])
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		if want := strings.ReplaceAll(tool.Name, "_", " "); tool.Title != want {
			t.Errorf("%s title = %q, want %q", tool.Name, tool.Title, want)
		}
		var meta struct {
			OTC struct {
				ID string `json:"id"`
			} `json:"mcpotc/otc-tool"`
		}
		_ = json.Unmarshal([]byte(jsonString(tool.Meta)), &meta)
		if meta.OTC.ID != wantSampleOTCIDs[tool.Name] {
			t.Errorf("%s _meta[mcpotc/otc-tool].id = %q, want %q", tool.Name, meta.OTC.ID, wantSampleOTCIDs[tool.Name])
		}
	}
	// Calculator_Add requires a and b, both numbers: read the schema as a client would.
	for _, tool := range tools {
		if tool.Name != "Calculator_Add" {
			continue
		}
		s, _ := asData(t, tool.InputSchema).(map[string]any)
		props, _ := s["properties"].(map[string]any)
		for _, p := range []string{"a", "b"} {
			if pt, _ := props[p].(map[string]any)["type"].(string); pt != "number" {
				t.Errorf("Calculator_Add property %s has type %q, want number", p, pt)
			}
		}
		if req := asData(t, s["required"]); !reflect.DeepEqual(req, []any{"a", "b"}) {
			t.Errorf("Calculator_Add required = %v, want [a b]", req)
		}
	}
}

var authorizeURL = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/sample/oauth/authorize\?state=[A-Za-z0-9-]+`)

// checkAuthorizeURL checks that an authorization URL from the sample is
// one a user could open: it answers 2xx.
func checkAuthorizeURL(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	if !authorizeURL.MatchString(u) {
		t.Errorf("authorization URL %q is not the sample's authorize URL", u)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(cctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("opening the authorization URL %s: %v", u, err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Errorf("opening the authorization URL %s: HTTP %d", u, resp.StatusCode)
	}
}

// checkSampleCalls makes the acceptance calls on a client without URL
// elicitation.
func checkSampleCalls(t *testing.T, ctx context.Context, cs *sdk.ClientSession) {
	t.Helper()
	// Calculator_Add {a:10,b:5} → structuredContent {"sum":15} and a text block.
	res := mustCall(t, ctx, cs, "Calculator_Add", map[string]any{"a": 10, "b": 5})
	if res.IsError {
		t.Errorf("Calculator_Add 10+5: isError: %s", textOf(res))
	}
	if got := asData(t, res.StructuredContent); !reflect.DeepEqual(got, mustData(`{"sum":15}`)) {
		t.Errorf("Calculator_Add 10+5: structuredContent = %s, want {\"sum\":15}", jsonString(res.StructuredContent))
	}
	if len(res.Content) != 1 {
		t.Errorf("Calculator_Add 10+5: %d content blocks, want 1 text block: %s", len(res.Content), jsonString(res.Content))
	} else if tc, ok := res.Content[0].(*sdk.TextContent); !ok {
		t.Errorf("Calculator_Add 10+5: content[0] is %T, want text", res.Content[0])
	} else if !reflect.DeepEqual(mustDataOr(tc.Text), mustData(`{"sum":15}`)) {
		t.Errorf("Calculator_Add 10+5: text block %q is not the JSON of {\"sum\":15}", tc.Text)
	}

	// {a:10,b:"infinity"} → -32602 naming b.
	we := wantRPCError(t, ctx, cs, "Calculator_Add", map[string]any{"a": 10, "b": "infinity"}, jsonrpc.CodeInvalidParams)
	if !regexp.MustCompile(`\bb\b`).MatchString(we.Message) {
		t.Errorf("invalid b: message %q does not name b", we.Message)
	}
	t.Logf("invalid b: %d %q data %s", we.Code, we.Message, we.Data)

	// An unknown tool → -32602.
	we = wantRPCError(t, ctx, cs, "No_Such_Tool", map[string]any{}, jsonrpc.CodeInvalidParams)
	t.Logf("unknown tool: %d %q", we.Code, we.Message)

	// Doorbell_Ring doorbell1 → isError "Doorbell ID not found".
	res = mustCall(t, ctx, cs, "Doorbell_Ring", map[string]any{"doorbell_id": "doorbell1"})
	if !res.IsError || !strings.Contains(textOf(res), "Doorbell ID not found") {
		t.Errorf("Doorbell_Ring doorbell1: isError=%v text %q, want isError with \"Doorbell ID not found\"", res.IsError, textOf(res))
	}
	// A known doorbell rings.
	res = mustCall(t, ctx, cs, "Doorbell_Ring", map[string]any{"doorbell_id": "doorbell42"})
	if res.IsError {
		t.Errorf("Doorbell_Ring doorbell42: isError: %s", textOf(res))
	}

	// System_GetTimestamp → an RFC 3339 timestamp.
	res = mustCall(t, ctx, cs, "System_GetTimestamp", nil)
	ts, _ := asData(t, res.StructuredContent).(map[string]any)["timestamp"].(string)
	if _, err := time.Parse(time.RFC3339, ts); err != nil || res.IsError {
		t.Errorf("System_GetTimestamp: %s: timestamp %q: %v", jsonString(res), ts, err)
	}

	// Gmail_GetEmails without URL elicitation → isError naming the URL.
	res = mustCall(t, ctx, cs, "Gmail_GetEmails", map[string]any{})
	u := authorizeURL.FindString(textOf(res))
	if !res.IsError || u == "" {
		t.Errorf("Gmail_GetEmails (no URL elicitation): isError=%v text %q, want isError with the authorization URL", res.IsError, textOf(res))
	} else {
		checkAuthorizeURL(t, ctx, u)
	}
}

func mustDataOr(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	return v
}

// checkURLElicitation calls Gmail_GetEmails on a client that declared URL
// elicitation: -32042 with data.elicitations[0].url before 2026-07-28; an
// input_required result asking for the same URL elicitation on 2026-07-28
// (which reserves -32042).
func checkURLElicitation(t *testing.T, ctx context.Context, cs *sdk.ClientSession, protocol string) {
	t.Helper()
	if protocol == proto20260728 {
		res := mustCall(t, ctx, cs, "Gmail_GetEmails", map[string]any{})
		if !res.NeedsInput() || len(res.InputRequests) != 1 {
			t.Fatalf("Gmail_GetEmails (2026-07-28, URL elicitation): %s, want an input_required result with one URL elicitation", jsonString(res))
		}
		for key, ir := range res.InputRequests {
			ep, ok := ir.(*sdk.ElicitParams)
			if !ok || ep.Mode != "url" {
				t.Fatalf("inputRequests[%s] = %T %s, want a URL-mode elicitation", key, ir, jsonString(ir))
			}
			t.Logf("input_required: %s: %s", key, ep.URL)
			checkAuthorizeURL(t, ctx, ep.URL)
		}
		return
	}
	we := wantRPCError(t, ctx, cs, "Gmail_GetEmails", map[string]any{}, -32042)
	var data struct {
		Elicitations []struct {
			Mode          string `json:"mode"`
			ElicitationID string `json:"elicitationId"`
			URL           string `json:"url"`
			Message       string `json:"message"`
		} `json:"elicitations"`
	}
	if err := json.Unmarshal(we.Data, &data); err != nil || len(data.Elicitations) == 0 {
		t.Fatalf("-32042 data %s: %v, want {\"elicitations\":[…]}", we.Data, err)
	}
	e := data.Elicitations[0]
	if e.Mode != "url" || e.ElicitationID == "" || e.Message == "" {
		t.Errorf("-32042 elicitations[0] = %+v, want mode url, an elicitationId and a message", e)
	}
	t.Logf("-32042 %q: elicitations[0].url %s", we.Message, e.URL)
	checkAuthorizeURL(t, ctx, e.URL)
}

// TestE2EMCPFrontSample: `mcpotc serve-mcp` with no flags serves the sample
// toolkit; tools, results and errors as the acceptance says, over stdio and
// streamable HTTP, for a 2025-11-25 and a 2026-07-28 client.
func TestE2EMCPFrontSample(t *testing.T) {
	buildMcpotc(t)
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/modelcontextprotocol/go-sdk" {
				t.Logf("client: %s %s", d.Path, d.Version)
			}
		}
	}
	forEachTransportProtocol(t, 90*time.Second, func(t *testing.T, ctx context.Context, transport, protocol string) {
		t.Run("tools and calls", func(t *testing.T) {
			b := startBridge(t, ctx, transport, nil, nil)
			cs := b.connect(t, ctx, clientOpts{protocol: protocol})
			if cs.InitializeResult().Capabilities.Tools == nil {
				t.Errorf("no tools capability: %s", jsonString(cs.InitializeResult()))
			}
			checkSampleTools(t, listTools(t, ctx, cs))
			checkSampleCalls(t, ctx, cs)
			b.stopIfStdio(t, cs)
		})
		t.Run("URL elicitation", func(t *testing.T) {
			b := startBridge(t, ctx, transport, nil, nil)
			cs := b.connect(t, ctx, clientOpts{protocol: protocol, urlElicitation: true})
			checkURLElicitation(t, ctx, cs, protocol)
			b.stopIfStdio(t, cs)
		})
	})
}

// --- 2. in front of a separate sample-otc -----------------------------------------

// startSampleOTC starts `mcpotc sample-otc` on 127.0.0.1:port and waits for it.
func startSampleOTC(t *testing.T, ctx context.Context, port int) *proc {
	t.Helper()
	p := startProcess(t, ctx, buildMcpotc(t), []string{"sample-otc", "--listen", "127.0.0.1:" + strconv.Itoa(port)}, nil)
	p.waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/health", port), 30*time.Second)
	return p
}

// normalResult is a call result as data, without what differs from call
// to call: the OTC call id and duration, authorization URLs, timestamps.
func normalResult(t *testing.T, res *sdk.CallToolResult, err error) any {
	t.Helper()
	if err != nil {
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			return map[string]any{"go error": err.Error()}
		}
		// The embedded sample is the upstream "sample"; an --otc upstream is
		// named by its host:port.
		msg := upstreamName.ReplaceAllString(authorizeURL.ReplaceAllString(we.Message, "<URL>"), "upstream <name>")
		return map[string]any{"code": we.Code, "message": msg, "data": normalJSON(we.Data)}
	}
	v := asData(t, res).(map[string]any)
	if meta, ok := v["_meta"].(map[string]any); ok {
		if c, ok := meta["mcpotc/otc-call"].(map[string]any); ok {
			for _, k := range []string{"call_id", "duration"} {
				if _, ok := c[k]; ok {
					c[k] = "<" + k + ">"
				}
			}
		}
	}
	b, _ := json.Marshal(v)
	s := upstreamName.ReplaceAllString(authorizeURL.ReplaceAllString(string(b), "<URL>"), "upstream <name>")
	s = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`).ReplaceAllString(s, "<time>")
	return mustData(s)
}

var upstreamName = regexp.MustCompile(`upstream (sample|127\.0\.0\.1:[0-9]+)\b`)

func normalJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return mustData(authorizeURL.ReplaceAllString(string(raw), "<URL>"))
}

// sampleCallSet is what TestE2EMCPFrontUpstream compares between the
// embedded sample and an --otc upstream.
var sampleCallSet = []struct {
	name string
	args any
}{
	{"Calculator_Add", map[string]any{"a": 10, "b": 5}},
	{"Calculator_Add", map[string]any{"a": 10, "b": "infinity"}},
	{"Calculator_Add", map[string]any{"a": 9007199254740993, "b": 1}},
	{"No_Such_Tool", map[string]any{}},
	{"Doorbell_Ring", map[string]any{"doorbell_id": "doorbell1"}},
	{"Doorbell_Ring", map[string]any{"doorbell_id": "doorbell42"}},
	{"System_GetTimestamp", map[string]any{}},
	{"Gmail_GetEmails", map[string]any{}},
	// SMS_Send needs a secret neither is given: each says how to give it,
	// which differs (checked after the set).
}

// TestE2EMCPFrontUpstream: `serve-mcp --otc URL` in front of a separate
// `mcpotc sample-otc` behaves as the embedded default; when the upstream
// stops, calls fail at once with -32603, and when it comes back on the same
// port, calls and the tool list recover without restarting the bridge.
func TestE2EMCPFrontUpstream(t *testing.T) {
	buildMcpotc(t)
	forEachTransportProtocol(t, 90*time.Second, func(t *testing.T, ctx context.Context, transport, protocol string) {
		port := freePort(t)
		upstream := fmt.Sprintf("http://127.0.0.1:%d", port)
		sample := startSampleOTC(t, ctx, port)

		embedded := startBridge(t, ctx, transport, nil, nil)
		ecs := embedded.connect(t, ctx, clientOpts{protocol: protocol})
		fronted := startBridge(t, ctx, transport, []string{"--otc", upstream, "--refresh", "1s"}, nil)
		fcs := fronted.connect(t, ctx, clientOpts{protocol: protocol})

		// Same tool list, as data.
		wantTools := asData(t, listTools(t, ctx, ecs))
		gotTools := asData(t, listTools(t, ctx, fcs))
		if !reflect.DeepEqual(gotTools, wantTools) {
			t.Errorf("tools/list in front of sample-otc differs from the embedded sample:\n got %s\nwant %s", jsonString(gotTools), jsonString(wantTools))
		}
		// Same results, modulo call ids, durations, URLs and times.
		for _, c := range sampleCallSet {
			r, err := callTool(t, ctx, ecs, c.name, c.args)
			want := normalResult(t, r, err)
			r, err = callTool(t, ctx, fcs, c.name, c.args)
			got := normalResult(t, r, err)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("tools/call %s %v:\n got (--otc)    %s\nwant (embedded) %s", c.name, c.args, jsonString(got), jsonString(want))
			}
		}
		// A secret neither was given: the embedded sample, which takes no
		// configuration, says how to try the tool; --otc names its upstream.
		sms := map[string]any{"to": "+15550100", "message": "hi"}
		const needs = `the OTC tool SMS.Send@0.1.2 needs secret "TWILIO_API_KEY" (config: secrets.TWILIO_API_KEY): `
		if we := wantRPCError(t, ctx, ecs, "SMS_Send", sms, jsonrpc.CodeInternalError); !strings.HasPrefix(we.Message, needs+"the built-in sample toolkit takes no configuration; to try this tool, run `mcpotc sample-otc`") {
			t.Errorf("SMS_Send, embedded sample: %q", we.Message)
		}
		if we := wantRPCError(t, ctx, fcs, "SMS_Send", sms, jsonrpc.CodeInternalError); we.Message != needs+"configure it for upstream "+strings.TrimPrefix(upstream, "http://") {
			t.Errorf("SMS_Send, --otc: %q", we.Message)
		}

		// The upstream stops: a clean -32603, at once.
		if err := sample.Stop(); err != nil {
			t.Logf("sample-otc stopped: %v", err)
		}
		start := time.Now()
		we := wantRPCError(t, ctx, fcs, "Calculator_Add", map[string]any{"a": 1, "b": 2}, jsonrpc.CodeInternalError)
		took := time.Since(start)
		t.Logf("upstream down: %d %q after %v", we.Code, we.Message, took.Round(time.Millisecond))
		if took > 5*time.Second {
			t.Errorf("the call with the upstream down took %v, want a prompt error", took)
		}
		if strings.Contains(we.Message, "127.0.0.1") || strings.Contains(we.Message, "connection refused") {
			t.Logf("note: the -32603 message shows transport detail: %q", we.Message)
		}
		// The catalog is kept while the upstream is down.
		time.Sleep(1500 * time.Millisecond) // more than one --refresh
		if got := asData(t, listTools(t, ctx, fcs)); !reflect.DeepEqual(got, wantTools) {
			t.Errorf("tools/list with the upstream down: %s, want the last catalog kept", jsonString(toolNames(listTools(t, ctx, fcs))))
		}

		// It comes back on the same port: calls and list recover.
		startSampleOTC(t, ctx, port)
		start = time.Now()
		deadline := time.Now().Add(15 * time.Second)
		for {
			r, err := callTool(t, ctx, fcs, "Calculator_Add", map[string]any{"a": 1, "b": 2})
			if err == nil && !r.IsError {
				if got := asData(t, r.StructuredContent); !reflect.DeepEqual(got, mustData(`{"sum":3}`)) {
					t.Errorf("after recovery: Calculator_Add 1+2 = %s", jsonString(r))
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("calls did not recover within 15s of the upstream's return: %v %s", err, jsonString(r))
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("calls recovered %v after the upstream's restart", time.Since(start).Round(time.Millisecond))
		waitStderr(t, fronted.p, `"upstream catalog available again"`, 10*time.Second)
		if got := asData(t, listTools(t, ctx, fcs)); !reflect.DeepEqual(got, wantTools) {
			t.Errorf("tools/list after recovery differs:\n got %s\nwant %s", jsonString(got), jsonString(wantTools))
		}
		embedded.stopIfStdio(t, ecs)
		fronted.stopIfStdio(t, fcs)
	})
}

// TestE2EMCPFrontUpstreamLate: a bridge started before its upstream lists no
// tools and answers a call "starting, retry", then lists the upstream's
// tools once it is up (within --refresh), and tells the client
// (notifications/tools/list_changed).
func TestE2EMCPFrontUpstreamLate(t *testing.T) {
	buildMcpotc(t)
	forEachTransportProtocol(t, 60*time.Second, func(t *testing.T, ctx context.Context, transport, protocol string) {
		port := freePort(t)
		b := startBridge(t, ctx, transport, []string{"--otc", fmt.Sprintf("http://127.0.0.1:%d", port), "--refresh", "1s"}, nil)
		changed := make(chan struct{}, 16)
		cs := b.connect(t, ctx, clientOpts{protocol: protocol, onListChanged: func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}})
		if names := toolNames(listTools(t, ctx, cs)); len(names) != 0 {
			t.Errorf("tools/list with the upstream down: %q, want none", names)
		}
		// Within --startup-wait of the start, a tool not listed yet may be
		// coming: "starting, retry" (-32007), never "not found".
		we := wantRPCError(t, ctx, cs, "Calculator_Add", map[string]any{"a": 1, "b": 2}, -32007)
		if !strings.Contains(we.Message, "The bridge is starting") {
			t.Errorf("before the upstream is up: %d %q, want the start-up answer", we.Code, we.Message)
		}

		startSampleOTC(t, ctx, port)
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Errorf("no notifications/tools/list_changed within 10s of the upstream coming up")
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			names := toolNames(listTools(t, ctx, cs))
			if slices.Equal(names, sampleTools) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("tools/list = %q 10s after the upstream came up, want %q", names, sampleTools)
			}
			time.Sleep(200 * time.Millisecond)
		}
		res := mustCall(t, ctx, cs, "Calculator_Add", map[string]any{"a": 1, "b": 2})
		if got := asData(t, res.StructuredContent); !reflect.DeepEqual(got, mustData(`{"sum":3}`)) {
			t.Errorf("Calculator_Add 1+2 = %s", jsonString(res))
		}
		b.stopIfStdio(t, cs)
	})
}

// waitStderr waits until the process's stderr contains s.
func waitStderr(t *testing.T, p *proc, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.Stderr(), s) {
		if time.Now().After(deadline) {
			t.Errorf("no %s in %s's stderr within %v", s, p.name, timeout)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// --- 3. the official conformance runner ------------------------------------------

func TestE2EMCPFrontConformance(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	peerBin(t, "conformance")
	b := startBridge(t, ctx, "http", nil, nil)
	for _, scenario := range []string{"server-initialize", "ping", "tools-list"} {
		t.Run(scenario, func(t *testing.T) {
			start := time.Now()
			out, stderr, err := runPeer(t, 60*time.Second, "conformance", "server", "--url", b.url, "--scenario", scenario)
			if err != nil {
				t.Fatalf("conformance server --url %s --scenario %s: %v\n--- stdout:\n%s\n--- stderr:\n%s", b.url, scenario, err, out, stderr)
			}
			if !strings.Contains(out, "0 failed") {
				t.Errorf("conformance %s: exit 0 but no \"0 failed\":\n%s\n%s", scenario, out, stderr)
			}
			t.Logf("conformance %s passed in %v: %s", scenario, time.Since(start).Round(time.Millisecond), lastLine(out))
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// --- 4. signals and stdin EOF with a call in flight -------------------------------

// slowOTC is an OTC upstream (oxp-1.0) with one tool, Slow.Wait, whose calls
// take delay. started receives each call's tag when it arrives; cancelled,
// when the bridge gives up on it (its request context ends first).
type slowUpstream struct {
	*httptest.Server
	started   chan string
	cancelled chan string
}

func slowOTC(t *testing.T, delay time.Duration) *slowUpstream {
	t.Helper()
	u := &slowUpstream{started: make(chan string, 16), cancelled: make(chan string, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /tools", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"$schema":"urn:oxp:1.0","tools":[{"id":"Slow.Wait@1.0.0","name":"Slow_Wait","description":"Waits, then answers.","version":"1.0.0",`+
			`"input_schema":{"type":"object","properties":{"tag":{"type":"string"}}},`+
			`"output_schema":{"type":"object","properties":{"tag":{"type":"string"},"slept_ms":{"type":"number"}},"required":["slept_ms"]}}]}`)
	})
	mux.HandleFunc("POST /tools/call", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Request struct {
				ToolID string `json:"tool_id"`
				CallID string `json:"call_id"`
				Input  struct {
					Tag string `json:"tag"`
				} `json:"input"`
			} `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, `{"message":"bad body"}`, http.StatusBadRequest)
			return
		}
		tag := body.Request.Input.Tag
		u.started <- tag
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			u.cancelled <- tag
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"$schema": "urn:oxp:1.0", "result": map[string]any{
			"call_id": body.Request.CallID, "duration": float64(delay.Milliseconds()), "success": true,
			"value": map[string]any{"tag": tag, "slept_ms": delay.Milliseconds()},
		}})
	})
	u.Server = httptest.NewServer(mux)
	t.Cleanup(u.Server.Close)
	return u
}

func waitTag(t *testing.T, ch chan string, what string, timeout time.Duration) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(timeout):
		t.Fatalf("%s: not within %v", what, timeout)
	}
}

// TestE2EMCPFrontShutdown: a slow call in flight completes, and the bridge
// exits 0 promptly, on SIGTERM (http and stdio) and on stdin EOF (stdio).
func TestE2EMCPFrontShutdown(t *testing.T) {
	buildMcpotc(t)
	const delay = time.Second
	for _, c := range []struct{ transport, how string }{
		{"http", "SIGTERM"}, {"stdio", "stdin EOF"}, {"stdio", "SIGTERM"},
	} {
		for _, protocol := range protocols {
			runParallel(t, c.transport+"/"+c.how+"/"+protocol, 60*time.Second, func(t *testing.T, ctx context.Context) {
				up := slowOTC(t, delay)
				b := startBridge(t, ctx, c.transport, []string{"--otc", up.URL}, nil)
				cs := b.connect(t, ctx, clientOpts{protocol: protocol})
				if names := toolNames(listTools(t, ctx, cs)); !slices.Equal(names, []string{"Slow_Wait"}) {
					t.Fatalf("tools/list = %q, want [Slow_Wait]", names)
				}

				type outcome struct {
					res *sdk.CallToolResult
					err error
					at  time.Time
				}
				done := make(chan outcome, 1)
				go func() {
					r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "Slow_Wait", Arguments: map[string]any{"tag": "in-flight"}})
					done <- outcome{r, err, time.Now()}
				}()
				waitTag(t, up.started, "the call reaching the upstream", 15*time.Second)
				stopAt := time.Now()
				switch c.how {
				case "SIGTERM":
					if err := syscall.Kill(b.p.Pid(), syscall.SIGTERM); err != nil {
						t.Fatal(err)
					}
				case "stdin EOF":
					b.p.Stdin.Close()
				}

				var o outcome
				select {
				case o = <-done:
				case <-time.After(15 * time.Second):
					t.Fatalf("the in-flight call got no answer within 15s of %s", c.how)
				}
				if o.err != nil {
					t.Errorf("the call in flight at %s failed: %v", c.how, o.err)
				} else if got := asData(t, o.res.StructuredContent); o.res.IsError || !reflect.DeepEqual(got, mustData(`{"tag":"in-flight","slept_ms":1000}`)) {
					t.Errorf("the call in flight at %s: %s, want structuredContent {\"tag\":\"in-flight\",\"slept_ms\":1000}", c.how, jsonString(o.res))
				}
				err := b.p.Wait(exitBound)
				exited := time.Since(stopAt)
				t.Logf("%s: call answered %v after it, process exited %v after it (%v)",
					c.how, o.at.Sub(stopAt).Round(time.Millisecond), exited.Round(time.Millisecond), err)
				if err != nil {
					t.Errorf("serve-mcp --transport %s after %s: %v, want exit 0", c.transport, c.how, err)
				}
				if exited > delay+3*time.Second {
					t.Errorf("serve-mcp --transport %s exited %v after %s, want within %v", c.transport, exited, c.how, delay+3*time.Second)
				}
				if c.transport == "stdio" {
					assertOnlyJSONRPC(t, b.p.Stdout())
				}
			})
		}
	}
}

// TestE2EMCPFrontCommandTransport: the Go SDK's own CommandTransport, as a
// host runs a stdio server: its Close (closing stdin, SIGTERM only after
// TerminateDuration) must see exit 0 before it needs to signal.
func TestE2EMCPFrontCommandTransport(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := execCommandNoLeak(t, buildMcpotc(t), "serve-mcp")
	var stderr tailText
	stderr.max = outputTail
	cmd.Stderr = &stderr
	client := sdk.NewClient(&sdk.Implementation{Name: "mcpotc-e2e-go-sdk", Version: "0.0.0"}, nil)
	cctx, ccancel := context.WithTimeout(ctx, callTimeout)
	defer ccancel()
	const terminate = 8 * time.Second
	cs, err := client.Connect(cctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: terminate}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	t.Logf("CommandTransport: protocol %s, server %s %s", cs.InitializeResult().ProtocolVersion, cs.InitializeResult().ServerInfo.Name, cs.InitializeResult().ServerInfo.Version)
	checkSampleTools(t, listTools(t, ctx, cs))
	res := mustCall(t, ctx, cs, "Calculator_Add", map[string]any{"a": 10, "b": 5})
	if got := asData(t, res.StructuredContent); !reflect.DeepEqual(got, mustData(`{"sum":15}`)) {
		t.Errorf("Calculator_Add: %s", jsonString(res))
	}
	start := time.Now()
	if err := cs.Close(); err != nil {
		t.Errorf("ClientSession.Close (closes stdin, waits for exit): %v, want exit 0", err)
	}
	if took := time.Since(start); took >= terminate {
		t.Errorf("Close took %v: the server did not exit on stdin EOF and had to be signalled", took)
	} else {
		t.Logf("exit 0 %v after stdin closed", took.Round(time.Millisecond))
	}
	if stderr.seen() || strings.Contains(stderr.String(), "WARNING: DATA RACE") {
		t.Errorf("data race:\n%s", stderr.String())
	}
}

// --- 5. logs and secrets -------------------------------------------------------------

const (
	secretValue = "supersecretvalue"
	tokenValue  = "supersecretgoogletoken"
	bearerValue = "supersecretbearer"
)

// TestE2EMCPFrontLogs: one JSON log line per call on stderr, with call_id,
// tool_id and duration; configured secrets and tokens reach the upstream
// (SMS_Send and Gmail_GetEmails succeed) and never appear on stdout or stderr.
func TestE2EMCPFrontLogs(t *testing.T) {
	buildMcpotc(t)
	for _, transport := range transports {
		runParallel(t, transport, 60*time.Second, func(t *testing.T, ctx context.Context) {
			port := freePort(t)
			sample := startSampleOTC(t, ctx, port)
			cfg := filepath.Join(t.TempDir(), "mcpotc.json")
			writeJSON(t, cfg, map[string]any{"upstreams": []any{map[string]any{
				"name":          "sample",
				"url":           fmt.Sprintf("http://127.0.0.1:%d", port),
				"secrets":       map[string]string{"TWILIO_API_KEY": "TEST_TWILIO_ENV"},
				"authorization": map[string]string{"google": "TEST_GOOGLE_ENV"},
				"call_timeout":  "30s",
			}}})
			env := []string{"TEST_TWILIO_ENV=" + secretValue, "TEST_GOOGLE_ENV=" + tokenValue, "TEST_BEARER_ENV=" + bearerValue}
			args := []string{"--config", cfg}
			o := clientOpts{protocol: proto20251125}
			if transport == "http" {
				args = append(args, "--bearer-token-env", "TEST_BEARER_ENV")
				o.bearer = bearerValue
			}
			b := startBridge(t, ctx, transport, args, env)
			cs := b.connect(t, ctx, o)

			callIDs := map[string]string{} // call_id from _meta → tool_id
			calls := 0
			record := func(res *sdk.CallToolResult, toolID string) {
				calls++
				var meta struct {
					Call struct {
						CallID string `json:"call_id"`
					} `json:"mcpotc/otc-call"`
				}
				_ = json.Unmarshal([]byte(jsonString(res.Meta)), &meta)
				if meta.Call.CallID != "" {
					callIDs[meta.Call.CallID] = toolID
				}
			}
			res := mustCall(t, ctx, cs, "SMS_Send", map[string]any{"to": "+15550100", "message": "hello"})
			if res.IsError || !reflect.DeepEqual(asData(t, res.StructuredContent), mustData(`{"status":"queued"}`)) {
				t.Errorf("SMS_Send with the configured secret: %s, want structuredContent {\"status\":\"queued\"}", jsonString(res))
			}
			record(res, "SMS.Send@0.1.2")
			res = mustCall(t, ctx, cs, "Gmail_GetEmails", map[string]any{"query": "x"})
			if emails, _ := asData(t, res.StructuredContent).(map[string]any)["emails"].([]any); res.IsError || len(emails) != 2 {
				t.Errorf("Gmail_GetEmails with the configured token: %s, want two sample emails", jsonString(res))
			}
			record(res, "Gmail.GetEmails@1.2.0")
			res = mustCall(t, ctx, cs, "Calculator_Add", map[string]any{"a": 1, "b": 2})
			record(res, "Calculator.Add@1.1.0")
			res = mustCall(t, ctx, cs, "Doorbell_Ring", map[string]any{"doorbell_id": "doorbell1"})
			record(res, "Doorbell.Ring@0.1.0")
			wantRPCError(t, ctx, cs, "Calculator_Add", map[string]any{"a": 1, "b": "x"}, jsonrpc.CodeInvalidParams)
			calls++ // logged too, without a result call_id

			// Stop the bridge, then read everything it wrote.
			if transport == "stdio" {
				b.stopStdio(t, cs)
			} else {
				closeSession(t, cs)
				if err := syscall.Kill(b.p.Pid(), syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				if err := b.p.Wait(exitBound); err != nil {
					t.Errorf("serve-mcp after SIGTERM: %v", err)
				}
			}
			sample.Stop()

			stderr := b.p.Stderr()
			var callLines []map[string]any
			for i, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Errorf("stderr line %d is not a JSON log line: %q", i+1, truncate(line, 300))
					continue
				}
				if m["message"] == "call" {
					callLines = append(callLines, m)
				}
			}
			if len(callLines) != calls {
				t.Errorf("%d \"call\" log lines for %d calls:\n%s", len(callLines), calls, stderr)
			}
			seen := map[string]bool{}
			for _, m := range callLines {
				id, _ := m["call_id"].(string)
				toolID, _ := m["tool_id"].(string)
				_, durOK := m["duration"].(float64)
				if id == "" || toolID == "" || !durOK {
					t.Errorf("call log line without call_id, tool_id or a numeric duration: %s", jsonString(m))
				}
				if seen[id] {
					t.Errorf("call_id %s logged twice", id)
				}
				seen[id] = true
				if want, ok := callIDs[id]; ok && want != toolID {
					t.Errorf("call %s logged with tool_id %s, want %s", id, toolID, want)
				}
			}
			for id, toolID := range callIDs {
				if !seen[id] {
					t.Errorf("the call_id %s of a %s result is in no log line", id, toolID)
				}
			}
			for _, secret := range []string{secretValue, tokenValue, bearerValue} {
				for what, s := range map[string]string{"bridge stderr": stderr, "bridge stdout": b.p.Stdout(), "sample-otc stderr": sample.Stderr(), "sample-otc stdout": sample.Stdout()} {
					if strings.Contains(s, secret) {
						t.Errorf("%q appears in the %s", secret, what)
					}
				}
			}
			t.Logf("%d call log lines, e.g. %s", len(callLines), jsonString(callLines[0]))
		})
	}
}

// execCommandNoLeak is exec.Command in a process group of its own that dies
// with the test binary and is killed on test cleanup (for transports that
// start the command themselves, such as the Go SDK's CommandTransport).
func execCommandNoLeak(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	t.Cleanup(func() {
		if cmd.Process != nil && groupAlive(cmd.Process.Pid) {
			t.Errorf("%s (pid %d) still running at cleanup: killed", name, cmd.Process.Pid)
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	return cmd
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// --- 6. --bearer-token-env -----------------------------------------------------------

// TestE2EMCPFrontBearer: with --bearer-token-env, HTTP requests without the
// token, or with another, get 401; the Go SDK client sending it connects.
func TestE2EMCPFrontBearer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const token = "e2e-bearer-token-value"
	b := startBridge(t, ctx, "http", []string{"--bearer-token-env", "MCPOTC_E2E_BEARER"}, []string{"MCPOTC_E2E_BEARER=" + token})

	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
	for _, c := range []struct {
		name, method, auth string
		want               int
	}{
		{"POST without a token", http.MethodPost, "", 401},
		{"POST with another token", http.MethodPost, "Bearer not-" + token, 401},
		{"POST with a Basic header", http.MethodPost, "Basic " + token, 401},
		{"GET without a token", http.MethodGet, "", 401},
		{"POST with the token", http.MethodPost, "Bearer " + token, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			defer rcancel()
			var body io.Reader
			if c.method == http.MethodPost {
				body = strings.NewReader(initBody)
			}
			req, _ := http.NewRequestWithContext(rctx, c.method, b.url, body)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != c.want {
				t.Errorf("%s %s: HTTP %d %q, want %d", c.method, b.url, resp.StatusCode, got, c.want)
			}
			if c.want == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer WWW-Authenticate challenge: %q", resp.Header.Get("WWW-Authenticate"))
			}
			if c.want == 401 && strings.Contains(string(got), token) {
				t.Errorf("the 401 body shows the token: %q", got)
			}
		})
	}

	for _, protocol := range protocols {
		t.Run("go-sdk/"+protocol, func(t *testing.T) {
			if _, err := b.tryConnect(ctx, clientOpts{protocol: protocol}); err == nil {
				t.Errorf("the Go SDK client connected without the bearer token")
			} else {
				t.Logf("without the token: %v", err)
			}
			if _, err := b.tryConnect(ctx, clientOpts{protocol: protocol, bearer: "wrong"}); err == nil {
				t.Errorf("the Go SDK client connected with a wrong bearer token")
			}
			cs := b.connect(t, ctx, clientOpts{protocol: protocol, bearer: token})
			checkSampleTools(t, listTools(t, ctx, cs))
			res := mustCall(t, ctx, cs, "Calculator_Add", map[string]any{"a": 10, "b": 5})
			if got := asData(t, res.StructuredContent); !reflect.DeepEqual(got, mustData(`{"sum":15}`)) {
				t.Errorf("Calculator_Add with the token: %s", jsonString(res))
			}
		})
	}
	if strings.Contains(b.p.Stderr(), token) || strings.Contains(b.p.Stdout(), token) {
		t.Errorf("the bearer token appears in the bridge's output")
	}
}

// --- more of the front's documented behaviour ---------------------------------------

// TestE2EMCPFrontCancelAndTimeout: a call the client cancels, and one that
// exceeds --call-timeout, end the upstream request too; the timeout is
// JSON-RPC -32001.
func TestE2EMCPFrontCancelAndTimeout(t *testing.T) {
	buildMcpotc(t)
	forEachTransportProtocol(t, 60*time.Second, func(t *testing.T, ctx context.Context, transport, protocol string) {
		up := slowOTC(t, 30*time.Second)
		b := startBridge(t, ctx, transport, []string{"--otc", up.URL, "--call-timeout", "500ms"}, nil)
		cs := b.connect(t, ctx, clientOpts{protocol: protocol})

		// --call-timeout: -32001, and the upstream request ends.
		start := time.Now()
		we := wantRPCError(t, ctx, cs, "Slow_Wait", map[string]any{"tag": "timeout"}, -32001)
		took := time.Since(start)
		t.Logf("--call-timeout 500ms: %d %q after %v", we.Code, we.Message, took.Round(time.Millisecond))
		if took > 5*time.Second {
			t.Errorf("the timed-out call answered after %v, want about 500ms", took)
		}
		waitTag(t, up.started, "the timed-out call reaching the upstream", time.Second)
		waitTag(t, up.cancelled, "the upstream request of the timed-out call ending", 5*time.Second)

		// Client cancellation.
		cctx, ccancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: "Slow_Wait", Arguments: map[string]any{"tag": "cancel"}})
			errc <- err
		}()
		waitTag(t, up.started, "the cancelled call reaching the upstream", 10*time.Second)
		ccancel()
		select {
		case err := <-errc:
			if err == nil {
				t.Errorf("the cancelled call returned a result")
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the cancelled call did not return within 10s")
		}
		waitTag(t, up.cancelled, "the upstream request of the cancelled call ending", 5*time.Second)
		waitStderr(t, b.p, `"outcome":"cancelled by the client"`, 5*time.Second)

		// The session still works.
		lctx, lcancel := context.WithTimeout(ctx, callTimeout)
		defer lcancel()
		res, err := cs.ListTools(lctx, nil)
		// Over HTTP at 2026-07-28 the Go SDK also sends
		// notifications/cancelled, with the Mcp-Protocol-Version
		// header and no _meta (a notification's _meta has no
		// required fields): anything but 202 ends its session.
		switch {
		case err != nil:
			t.Errorf("tools/list after the cancellation: %v", err)
		case !slices.Equal(toolNames(res.Tools), []string{"Slow_Wait"}):
			t.Errorf("tools/list after the cancellation: %q", toolNames(res.Tools))
		}
		b.stopIfStdio(t, cs)
	})
}

// TestE2EMCPFrontInputErrorsResult: --input-errors result answers an invalid
// input with an isError result naming the parameter (SEP-1303 style).
func TestE2EMCPFrontInputErrorsResult(t *testing.T) {
	buildMcpotc(t)
	for _, transport := range transports {
		runParallel(t, transport, 60*time.Second, func(t *testing.T, ctx context.Context) {
			b := startBridge(t, ctx, transport, []string{"--input-errors", "result"}, nil)
			cs := b.connect(t, ctx, clientOpts{protocol: proto20251125})
			res := mustCall(t, ctx, cs, "Calculator_Add", map[string]any{"a": 10, "b": "infinity"})
			if !res.IsError || !regexp.MustCompile(`\bb\b`).MatchString(textOf(res)) {
				t.Errorf("--input-errors result: %s, want isError naming b", jsonString(res))
			}
			// An unknown tool stays a JSON-RPC error.
			wantRPCError(t, ctx, cs, "No_Such_Tool", map[string]any{}, jsonrpc.CodeInvalidParams)
			b.stopIfStdio(t, cs)
		})
	}
}

// TestE2EMCPFrontSSE: --transport sse serves the same tools and errors to
// the Go SDK's legacy SSE client.
func TestE2EMCPFrontSSE(t *testing.T) {
	buildMcpotc(t)
	for _, protocol := range protocols {
		runParallel(t, protocol, 60*time.Second, func(t *testing.T, ctx context.Context) {
			b := startBridge(t, ctx, "sse", nil, nil)
			cs := b.connect(t, ctx, clientOpts{protocol: protocol})
			checkSampleTools(t, listTools(t, ctx, cs))
			checkSampleCalls(t, ctx, cs)
		})
	}
}

// TestE2EMCPFrontTypeScriptSDK: the official TypeScript SDK's client
// (testdata/mcpfront_client.mjs) sees the same tools, results and JSON-RPC
// codes, over stdio and streamable HTTP, with and without URL elicitation.
func TestE2EMCPFrontTypeScriptSDK(t *testing.T) {
	bin := buildMcpotc(t)
	node := nodeBin(t)
	script, err := filepath.Abs(filepath.Join("testdata", "mcpfront_client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if b, err := os.ReadFile(filepath.Join(peersDir(t), "@modelcontextprotocol", "sdk", "package.json")); err != nil || json.Unmarshal(b, &pkg) != nil {
		missingPeer(t, "@modelcontextprotocol/sdk is not installed among the peers (%v)", err)
	}
	t.Logf("client: @modelcontextprotocol/sdk %s under node at %s", pkg.Version, node)
	for _, transport := range transports {
		for _, urlElicit := range []bool{false, true} {
			name := transport + "/plain"
			if urlElicit {
				name = transport + "/url-elicitation"
			}
			runParallel(t, name, 60*time.Second, func(t *testing.T, ctx context.Context) {
				target := bin
				if transport == "http" {
					target = startBridge(t, ctx, "http", nil, nil).url
				}
				env := []string{"MCPOTC_PEERS=" + peersDir(t), "MCPOTC_TS_TRANSPORT=" + transport, "MCPOTC_TS_TARGET=" + target}
				if urlElicit {
					env = append(env, "MCPOTC_TS_URL_ELICIT=1")
				}
				p := startProcess(t, ctx, node, []string{script}, append(peerEnv(t), env...))
				p.Stdin.Close()
				if err := p.Wait(45 * time.Second); err != nil {
					t.Fatalf("node %s: %v\n%s", script, err, p.Stderr())
				}
				var out struct {
					ProtocolVersion *string             `json:"protocolVersion"`
					ServerInfo      *sdk.Implementation `json:"serverInfo"`
					Tools           []*sdk.Tool         `json:"tools"`
					Calls           []struct {
						Name   string          `json:"name"`
						Result json.RawMessage `json:"result"`
						Error  *struct {
							Code    *int64          `json:"code"`
							Message string          `json:"message"`
							Data    json.RawMessage `json:"data"`
						} `json:"error"`
					} `json:"calls"`
					Fatal      string `json:"fatal"`
					CloseError string `json:"closeError"`
				}
				if err := json.Unmarshal([]byte(p.Stdout()), &out); err != nil {
					t.Fatalf("the TypeScript client's report: %v: %q", err, p.Stdout())
				}
				if out.Fatal != "" {
					t.Fatalf("TypeScript client: %s", out.Fatal)
				}
				if out.CloseError != "" {
					t.Errorf("TypeScript client close: %s", out.CloseError)
				}
				if out.ServerInfo == nil || out.ServerInfo.Name != "mcpotc" {
					t.Errorf("serverInfo %s, want name mcpotc", jsonString(out.ServerInfo))
				}
				checkSampleTools(t, out.Tools)
				if len(out.Calls) != 6 {
					t.Fatalf("%d calls in the report, want 6", len(out.Calls))
				}
				result := func(i int) *sdk.CallToolResult {
					c := out.Calls[i]
					if c.Error != nil {
						t.Errorf("%s: error %s", c.Name, jsonString(c.Error))
						return &sdk.CallToolResult{}
					}
					var r sdk.CallToolResult
					if err := json.Unmarshal(c.Result, &r); err != nil {
						t.Fatalf("%s: result %s: %v", c.Name, c.Result, err)
					}
					return &r
				}
				rpcError := func(i int, code int64) string {
					c := out.Calls[i]
					if c.Error == nil || c.Error.Code == nil || *c.Error.Code != code {
						t.Errorf("%s %s: %s %s, want JSON-RPC error %d", c.Name, jsonString(c.Error), c.Result, jsonString(c.Error), code)
						return ""
					}
					return c.Error.Message
				}
				if r := result(0); !reflect.DeepEqual(asData(t, r.StructuredContent), mustData(`{"sum":15}`)) || !reflect.DeepEqual(mustDataOr(textOf(r)), mustData(`{"sum":15}`)) {
					t.Errorf("Calculator_Add 10+5: %s", out.Calls[0].Result)
				}
				if msg := rpcError(1, jsonrpc.CodeInvalidParams); !regexp.MustCompile(`\bb\b`).MatchString(msg) {
					t.Errorf("invalid b: message %q does not name b", msg)
				}
				rpcError(2, jsonrpc.CodeInvalidParams)
				if r := result(3); !r.IsError || !strings.Contains(textOf(r), "Doorbell ID not found") {
					t.Errorf("Doorbell_Ring doorbell1: %s", out.Calls[3].Result)
				}
				if r := result(4); r.IsError || r.StructuredContent == nil {
					t.Errorf("System_GetTimestamp: %s", out.Calls[4].Result)
				}
				if urlElicit {
					rpcError(5, -32042)
					var data struct {
						Elicitations []struct {
							URL string `json:"url"`
						} `json:"elicitations"`
					}
					if out.Calls[5].Error != nil {
						_ = json.Unmarshal(out.Calls[5].Error.Data, &data)
					}
					switch {
					case len(data.Elicitations) == 0:
						t.Errorf("-32042 without elicitations: %s", jsonString(out.Calls[5].Error))
					case transport == "stdio":
						// The bridge (and its sample) ended with the client.
						if !authorizeURL.MatchString(data.Elicitations[0].URL) {
							t.Errorf("-32042 elicitations[0].url %q is not the sample's authorize URL", data.Elicitations[0].URL)
						}
					default:
						checkAuthorizeURL(t, ctx, data.Elicitations[0].URL)
					}
				} else if r := result(5); !r.IsError || authorizeURL.FindString(textOf(r)) == "" {
					t.Errorf("Gmail_GetEmails (no URL elicitation): %s, want isError with the authorization URL", out.Calls[5].Result)
				}
				pv := "(stdio: not reported)"
				if out.ProtocolVersion != nil {
					pv = *out.ProtocolVersion
				}
				t.Logf("TypeScript SDK client over %s: protocol %s, %d tools, %d calls checked", transport, pv, len(out.Tools), len(out.Calls))
			})
		}
	}
}

// TestE2EMCPFrontHTTPSessions: streamable HTTP sessions on the wire (raw
// HTTP): DELETE ends a session, its stream and later requests naming it
// (404), and SIGTERM afterwards exits 0 promptly.
func TestE2EMCPFrontHTTPSessions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := startBridge(t, ctx, "http", nil, nil)
	post := func(sid, body string) (*http.Response, string) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		req, _ := http.NewRequestWithContext(rctx, http.MethodPost, b.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", proto20251125)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", body, err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp, string(got)
	}
	resp, body := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: HTTP %d, Mcp-Session-Id %q: %s", resp.StatusCode, sid, body)
	}
	if resp, body := post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Errorf("notifications/initialized: HTTP %d %s, want 202", resp.StatusCode, body)
	}

	// The session's standalone stream.
	gctx, gcancel := context.WithCancel(ctx)
	defer gcancel()
	greq, _ := http.NewRequestWithContext(gctx, http.MethodGet, b.url, nil)
	greq.Header.Set("Accept", "text/event-stream")
	greq.Header.Set("Mcp-Session-Id", sid)
	greq.Header.Set("Mcp-Protocol-Version", proto20251125)
	gresp, err := http.DefaultClient.Do(greq)
	if err != nil {
		t.Fatalf("GET stream: %v", err)
	}
	if gresp.StatusCode != 200 || !strings.HasPrefix(gresp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET stream: HTTP %d %s", gresp.StatusCode, gresp.Header.Get("Content-Type"))
	}
	streamEnded := make(chan struct{})
	go func() {
		defer close(streamEnded)
		io.Copy(io.Discard, gresp.Body)
		gresp.Body.Close()
	}()

	// DELETE ends the session.
	dreq, _ := http.NewRequestWithContext(ctx, http.MethodDelete, b.url, nil)
	dreq.Header.Set("Mcp-Session-Id", sid)
	dreq.Header.Set("Mcp-Protocol-Version", proto20251125)
	dresp, err := http.DefaultClient.Do(dreq)
	if err != nil {
		t.Fatalf("DELETE: %v", err)
	}
	dresp.Body.Close()
	if dresp.StatusCode/100 != 2 {
		t.Errorf("DELETE: HTTP %d, want 2xx", dresp.StatusCode)
	}
	select {
	case <-streamEnded:
	case <-time.After(2 * time.Second):
		t.Errorf("the session's GET stream is still open 2s after DELETE ended the session")
	}
	if resp, body := post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST naming the deleted session: HTTP %d %s, want 404", resp.StatusCode, truncate(body, 200))
	}
	for _, s := range []string{sid, "mcp-session-never-issued", ""} {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, b.url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", proto20251125)
		want := http.StatusBadRequest // no session id: "SHOULD respond … with HTTP 400"
		if s != "" {
			req.Header.Set("Mcp-Session-Id", s)
			want = http.StatusNotFound // "MUST respond … with HTTP 404"
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("GET naming session %q: %v", s, err)
		} else {
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("GET naming an ended, never-issued or no session (%q): HTTP %d %s, want %d", s, resp.StatusCode, resp.Header.Get("Content-Type"), want)
			}
		}
		rcancel()
	}

	// SIGTERM: a prompt exit 0, whatever the client left open.
	if err := syscall.Kill(b.p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case <-b.p.Done():
	case <-time.After(3 * time.Second):
		t.Errorf("3s after SIGTERM the bridge still runs: it waits for the GET stream of a session that DELETE ended")
		gcancel() // the client lets go of the stream
	}
	err = b.p.Wait(exitBound)
	t.Logf("exited %v after SIGTERM: %v", time.Since(start).Round(time.Millisecond), err)
	if err != nil {
		t.Errorf("serve-mcp after SIGTERM: %v, want exit 0", err)
	}
}
