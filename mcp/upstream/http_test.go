package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/mcpotc/mcpotc/internal/conntest"
)

// rawSchema has keywords that mcp-go's typed Tool drops when a client
// decodes tools/list (top-level description, anyOf, $defs).
const rawSchema = `{"type":"object","description":"top-level description","anyOf":[{"required":["a"]},{"required":["b"]}],"$defs":{"n":{"type":"integer","maximum":123456789012345678901234567890}},"properties":{"a":{"$ref":"#/$defs/n"},"b":{"type":"string"}}}`

// wireRecorder sits between the upstream and an HTTP MCP server: it records the
// requests it sees and the body of each tools/list answer, and can swap the
// server behind it.
type wireRecorder struct {
	h atomic.Pointer[http.Handler]

	mu        sync.Mutex
	reqs      []wireReq
	toolsList [][]byte
}

type wireReq struct {
	httpMethod, rpcMethod string
	header                http.Header
	body                  []byte
}

func (w *wireRecorder) set(h http.Handler) { w.h.Store(&h) }

func (w *wireRecorder) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(body, &m)
	w.mu.Lock()
	w.reqs = append(w.reqs, wireReq{r.Method, m.Method, r.Header.Clone(), body})
	w.mu.Unlock()
	cw := &captureWriter{ResponseWriter: rw}
	(*w.h.Load()).ServeHTTP(cw, r)
	if m.Method == "tools/list" {
		w.mu.Lock()
		w.toolsList = append(w.toolsList, cw.bytes())
		w.mu.Unlock()
	}
}

// requests returns the recorded requests of JSON-RPC method rpc.
func (w *wireRecorder) requests(rpc string) []wireReq {
	return lockedFilter(&w.mu, &w.reqs, func(r wireReq) bool { return r.rpcMethod == rpc })
}

// lockedFilter returns, holding mu, the items of *list that keep accepts.
func lockedFilter[T any](mu *sync.Mutex, list *[]T, keep func(T) bool) []T {
	mu.Lock()
	defer mu.Unlock()
	var out []T
	for _, x := range *list {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

type captureWriter struct {
	http.ResponseWriter
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *captureWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.buf.Write(p)
	c.mu.Unlock()
	return c.ResponseWriter.Write(p)
}

func (c *captureWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *captureWriter) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

// httpServer is an mcp-go server for the HTTP tests. Its block tool
// reports on blocked when its context ends.
func httpServer(blocked chan<- string) *mcpserver.MCPServer {
	s := mcpserver.NewMCPServer("http-upstream", "2.0.0", mcpserver.WithToolCapabilities(true))
	s.AddTool(mcpgo.NewToolWithRawSchema("raw_schema", "A tool whose schema has keywords.", json.RawMessage(rawSchema)),
		func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText("ok"), nil
		})
	s.AddTool(mcpgo.NewTool("echo", mcpgo.WithString("message")),
		func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText(req.GetString("message", "")), nil
		})
	s.AddTool(mcpgo.NewTool("block"),
		func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			select {
			case <-ctx.Done():
				if blocked != nil {
					blocked <- "handler context ended"
				}
				return nil, ctx.Err()
			case <-time.After(20 * time.Second):
				return mcpgo.NewToolResultText("not cancelled"), nil
			}
		})
	s.AddTool(mcpgo.NewTool("url_elicit"),
		func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			res, err := s.RequestURLElicitation(ctx, mcpserver.ClientSessionFromContext(ctx), "el-9", "https://example.com/login", "Log in")
			if err != nil {
				return mcpgo.NewToolResultError(err.Error()), nil
			}
			return mcpgo.NewToolResultText(string(res.Action)), nil
		})
	s.AddTool(mcpgo.NewTool("needs_auth"),
		func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return nil, mcpgo.URLElicitationRequiredError{Elicitations: []mcpgo.ElicitationParams{
				{Mode: mcpgo.ElicitationModeURL, ElicitationID: "a1", URL: "https://auth.example/a1", Message: "Authorize"},
			}}
		})
	return s
}

func startHTTP(t *testing.T, cfg Config, opts Options) (*Upstream, *testLogs) {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "http"
	}
	if cfg.RestartBackoffMin == 0 {
		cfg.RestartBackoffMin, cfg.RestartBackoffMax = 20*time.Millisecond, 100*time.Millisecond
	}
	return startLogged(t, cfg, opts, true)
}

// legacyStreamable serves srv over streamable HTTP with sessions, as a
// 2025-11-25 server: it refuses 2026-07-28 (-32022 naming the legacy
// versions), so that an upstream under auto opens it with initialize.
func legacyStreamable(srv *mcpserver.MCPServer) *mcpserver.StreamableHTTPServer {
	return mcpserver.NewStreamableHTTPServer(srv, mcpserver.WithStateful(true),
		mcpserver.WithStreamableHTTPProtocolVersions(mcpgo.LegacyProtocolVersions()...))
}

func newStreamable(t *testing.T, blocked chan<- string) (*wireRecorder, *httptest.Server, *mcpserver.MCPServer) {
	t.Helper()
	srv := httpServer(blocked)
	wire := &wireRecorder{}
	wire.set(legacyStreamable(srv))
	ts := httptest.NewServer(wire)
	t.Cleanup(ts.Close)
	return wire, ts, srv
}

func TestUpstreamHTTPToolsRawAtTheWire(t *testing.T) {
	wire, ts, _ := newStreamable(t, nil)
	u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp"}, Options{})
	waitReady(t, u)
	tools := waitTools(t, u, 5)
	if got := u.ServerInfo(); got.Name != "http-upstream" || got.Version != "2.0.0" {
		t.Errorf("ServerInfo = %+v", got)
	}
	wire.mu.Lock()
	bodies := bytes.Join(wire.toolsList, nil)
	wire.mu.Unlock()
	var raw json.RawMessage
	for _, tool := range tools {
		// Each tool is exactly a piece of what the server sent.
		if !bytes.Contains(bodies, tool) {
			t.Errorf("tool not found verbatim in the tools/list answer: %s", tool)
		}
		if bytes.Contains(tool, []byte(`"raw_schema"`)) {
			raw = tool
		}
	}
	var tool struct {
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if err := json.Unmarshal(raw, &tool); err != nil {
		t.Fatalf("raw_schema tool %s: %v", raw, err)
	}
	if string(tool.InputSchema) != rawSchema {
		t.Errorf("inputSchema:\n got %s\nwant %s", tool.InputSchema, rawSchema)
	}
}

func TestUpstreamHTTPArgumentsAndHeadersAtTheWire(t *testing.T) {
	wire, ts, _ := newStreamable(t, nil)
	u, _ := startHTTP(t, Config{
		URL:     ts.URL + "/mcp",
		Headers: http.Header{"X-Static": {"s1"}, "Authorization": {"Bearer static"}, "Mcp-Session-Id": {"forced"}},
	}, Options{})
	waitReady(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := `{"message":"hi","big":123456789012345678901234567890}`
	res, err := u.CallTool(ctx, "echo", json.RawMessage(args), nil,
		http.Header{"Authorization": {"Bearer per-call"}, "Mcp-Session-Id": {"evil"}})
	if err != nil {
		t.Fatal(err)
	}
	if resultText(t, res) != "hi" {
		t.Errorf("result %s", res)
	}
	if _, err := u.CallTool(ctx, "echo", json.RawMessage(`{"message":"2"}`), nil, nil); err != nil {
		t.Fatal(err)
	}
	calls := wire.requests("tools/call")
	if len(calls) != 2 {
		t.Fatalf("%d tools/call requests", len(calls))
	}
	if !bytes.Contains(calls[0].body, []byte(`"arguments":`+args)) {
		t.Errorf("arguments not verbatim on the wire: %s", calls[0].body)
	}
	first, second := calls[0].header, calls[1].header
	if got := first.Get("Authorization"); got != "Bearer per-call" {
		t.Errorf("per-call Authorization = %q", got)
	}
	if got := second.Get("Authorization"); got != "Bearer static" {
		t.Errorf("static Authorization = %q", got)
	}
	init := wire.requests("initialize")[0].header
	for _, h := range []http.Header{first, second, init} {
		if h.Get("X-Static") != "s1" {
			t.Errorf("X-Static missing: %v", h)
		}
		if s := h.Get("Mcp-Session-Id"); s == "evil" || s == "forced" {
			t.Errorf("Mcp-Session-Id overridden: %q", s)
		}
	}
	if first.Get("Mcp-Session-Id") == "" || first.Get("Mcp-Protocol-Version") != "2025-11-25" {
		t.Errorf("protocol headers: %v", first)
	}
}

func TestUpstreamHTTPSessionDroppedReinitializes(t *testing.T) {
	wire, ts, srv := newStreamable(t, nil)
	lists := make(chan int, 10)
	u, logs := startHTTP(t, Config{URL: ts.URL + "/mcp"},
		Options{OnToolsChanged: func(tools []json.RawMessage) { lists <- len(tools) }})
	waitReady(t, u)
	// The first listing is done before the session goes away (else it may
	// itself meet the 404 and be the one listing that follows).
	select {
	case <-lists:
	case <-time.After(10 * time.Second):
		t.Fatal("tool list not read at start")
	}
	if _, err := callTool(t, u, "echo", `{"message":"before"}`); err != nil {
		t.Fatal(err)
	}
	// A new server instance: the session the upstream holds is unknown now
	// (404), as after a server restart.
	wire.set(legacyStreamable(srv))
	res, err := callTool(t, u, "echo", `{"message":"after"}`)
	if err != nil {
		t.Fatalf("call after the session was dropped: %v", err)
	}
	if resultText(t, res) != "after" {
		t.Errorf("result %s", res)
	}
	if n := len(wire.requests("initialize")); n != 2 {
		t.Errorf("%d initialize requests, want 2", n)
	}
	if n := len(wire.requests("tools/call")); n != 3 {
		t.Errorf("%d tools/call requests, want 3 (one refused with 404, then retried)", n)
	}
	if !u.Ready() || u.Status().Restarts != 0 {
		t.Errorf("status %+v", u.Status())
	}
	logs.waitLog(t, "re-initialized", time.Second)
	// The tool list is read again on the new session.
	select {
	case <-lists:
	case <-time.After(10 * time.Second):
		t.Fatal("tool list not read again after re-initialization")
	}
}

func TestUpstreamHTTPUnreachableThenRecovers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	u, _ := startHTTP(t, Config{URL: "http://" + addr + "/mcp?key=SECRET"}, Options{})
	eventually(t, 5*time.Second, "unreachable", func() bool {
		return strings.HasPrefix(u.Status().Reason, "unreachable: ")
	})
	if u.Ready() {
		t.Fatal("ready")
	}
	st := u.Status()
	if strings.Contains(st.Reason, "SECRET") || !strings.Contains(st.Reason, "connection refused") {
		t.Errorf("reason = %q", st.Reason)
	}
	start := time.Now()
	_, err = callTool(t, u, "echo", `{}`)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("ErrUnavailable after %s", d)
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("error leaks the URL query: %v", err)
	}

	// The server comes up on that address.
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	srv := &http.Server{Handler: legacyStreamable(httpServer(nil))}
	go srv.Serve(ln)
	defer srv.Close()
	waitReady(t, u)
	res, err := callTool(t, u, "echo", `{"message":"back"}`)
	if err != nil || resultText(t, res) != "back" {
		t.Fatalf("after recovery: %s, %v", res, err)
	}
}

func TestUpstreamHTTPServerGoneDetectedByPing(t *testing.T) {
	_, ts, _ := newStreamable(t, nil)
	u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp", PingInterval: 50 * time.Millisecond}, Options{})
	waitReady(t, u)
	ts.CloseClientConnections()
	ts.Close()
	eventually(t, 5*time.Second, "not ready", func() bool { return !u.Ready() })
	if r := u.Status().Reason; !strings.Contains(r, "unreachable") {
		t.Errorf("reason = %q", r)
	}
}

func TestUpstreamHTTPCancelSendsNotification(t *testing.T) {
	blocked := make(chan string, 1)
	wire, ts, _ := newStreamable(t, blocked)
	u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp"}, Options{})
	waitReady(t, u)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := u.CallTool(ctx, "block", nil, nil, http.Header{"Authorization": {"Bearer per-call"}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %s", d)
	}
	select {
	case <-blocked:
	case <-time.After(5 * time.Second):
		t.Fatal("the tool's context did not end")
	}
	var notes []wireReq
	eventually(t, 5*time.Second, "notifications/cancelled", func() bool {
		notes = wire.requests("notifications/cancelled")
		return len(notes) == 1
	})
	call := wire.requests("tools/call")[0]
	var c, n struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	_ = json.Unmarshal(call.body, &c)
	_ = json.Unmarshal(notes[0].body, &n)
	if string(n.Params.RequestID) != string(c.ID) {
		t.Errorf("cancelled requestId %s, call id %s", n.Params.RequestID, c.ID)
	}
	if got := notes[0].header.Get("Authorization"); got != "Bearer per-call" {
		t.Errorf("notifications/cancelled Authorization = %q", got)
	}
}

func TestUpstreamHTTPElicitationAndURLRequired(t *testing.T) {
	_, ts, _ := newStreamable(t, nil)
	got := make(chan Elicitation, 1)
	u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp"}, Options{OnElicitation: func(e Elicitation) { got <- e }})
	waitReady(t, u)
	res, err := callTool(t, u, "url_elicit", "")
	if err != nil {
		t.Fatal(err)
	}
	if resultText(t, res) != "cancel" {
		t.Errorf("elicitation answered %s", res)
	}
	select {
	case e := <-got:
		if e.Mode != "url" || e.URL != "https://example.com/login" || e.ElicitationID != "el-9" || e.Action != "cancel" {
			t.Errorf("reported %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("elicitation not reported")
	}

	_, err = callTool(t, u, "needs_auth", "")
	var ue *Error
	if !errors.As(err, &ue) || ue.Code != -32042 || !bytes.Contains(ue.Data, []byte(`"url":"https://auth.example/a1"`)) {
		t.Errorf("err = %v (%+v)", err, ue)
	}
}

func TestUpstreamHTTPStatusErrors(t *testing.T) {
	status := atomic.Int32{}
	status.Store(http.StatusUnauthorized)
	_, ts, _ := newStreamable(t, nil)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			http.Error(w, "no", int(status.Load()))
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, ts.URL+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			w.Write(buf[:n])
			w.(http.Flusher).Flush()
			if err != nil {
				return
			}
		}
	}))
	// Closed after the upstream's Close (cleanups run last first): Close
	// waits for requests in flight, and the upstream, restarted after the
	// 500, may hold a GET stream through the proxy until it is closed.
	t.Cleanup(proxy.Close)
	u, _ := startHTTP(t, Config{URL: proxy.URL + "/mcp", PingInterval: -1}, Options{})
	waitReady(t, u)
	for _, tc := range []struct {
		status int
		class  error
	}{
		{http.StatusUnauthorized, ErrUnauthorized},
		{http.StatusForbidden, ErrUnauthorized},
		{http.StatusTooManyRequests, ErrUnavailable},
		{http.StatusServiceUnavailable, ErrUnavailable},
		{http.StatusInternalServerError, ErrLost},
	} {
		status.Store(int32(tc.status))
		_, err := callTool(t, u, "echo", `{}`)
		if !errors.Is(err, tc.class) {
			t.Errorf("HTTP %d: err = %v, want %v", tc.status, err, tc.class)
		}
	}
}

func TestUpstreamLegacySSE(t *testing.T) {
	srv := httpServer(nil)
	var sse *mcpserver.SSEServer
	var streams atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			streams.Add(1)
		}
		sse.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close) // after the upstream's Close, which ends the stream
	sse = mcpserver.NewSSEServer(srv, mcpserver.WithBaseURL(ts.URL))
	u, _ := startHTTP(t, Config{URL: ts.URL + "/sse"}, Options{})
	waitReady(t, u)
	tools := waitTools(t, u, 5)
	found := false
	for _, tool := range tools {
		found = found || bytes.Contains(tool, []byte(rawSchema))
	}
	if !found {
		t.Errorf("raw schema not kept over SSE: %s", tools)
	}
	res, err := callTool(t, u, "echo", `{"message":"over sse"}`)
	if err != nil || resultText(t, res) != "over sse" {
		t.Fatalf("%s, %v", res, err)
	}
	_, err = callTool(t, u, "needs_auth", "")
	var ue *Error
	if !errors.As(err, &ue) || ue.Code != -32042 {
		t.Errorf("err = %v", err)
	}
	if u.kind != kindSSE {
		t.Errorf("kind = %v", u.kind)
	}

	// The stream breaks: the upstream connects again.
	ts.CloseClientConnections()
	eventually(t, 5*time.Second, "a second SSE stream", func() bool { return streams.Load() >= 2 })
	waitReady(t, u)
	res, err = callTool(t, u, "echo", `{"message":"again"}`)
	if err != nil || resultText(t, res) != "again" {
		t.Fatalf("after reconnecting: %s, %v", res, err)
	}
	if st := u.Status(); st.Restarts != 1 {
		t.Errorf("status %+v", st)
	}
}

func TestUpstreamHTTPRedactsErrors(t *testing.T) {
	err := fmt.Errorf("failed: %w", &url.Error{Op: "Post", URL: "http://user:pw@h/mcp?key=SECRET", Err: errors.New("connection refused")})
	if s := safeError(err); strings.Contains(s, "SECRET") || strings.Contains(s, "user") || !strings.Contains(s, "refused") {
		t.Errorf("safeError = %q", s)
	}
}

func TestUpstreamHTTPConcurrentCalls(t *testing.T) {
	_, ts, _ := newStreamable(t, nil)
	u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp"}, Options{})
	waitReady(t, u)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			want := fmt.Sprintf("m%d", i)
			res, err := callTool(t, u, "echo", `{"message":"`+want+`"}`)
			if err != nil || resultText(t, res) != want {
				t.Errorf("echo %d: %s, %v", i, res, err)
			}
		})
	}
	wg.Wait()
}

// rawSSEServer is a minimal legacy HTTP+SSE MCP server. During a call it
// sends two server→client requests, the first with the same id as the call
// itself (servers number their requests on their own).
func rawSSEServer(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	var stream chan string
	answers := make(chan string, 4)
	push := func(s string) {
		mu.Lock()
		ch := stream
		mu.Unlock()
		ch <- s
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sse", func(w http.ResponseWriter, r *http.Request) {
		ch := make(chan string, 16)
		mu.Lock()
		stream = ch
		mu.Unlock()
		serveEvents(w, r, ": a comment\n\nevent: endpoint\ndata: /message?sessionId=s1\n\n", ch, func(w io.Writer, ev string) {
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", ev)
		})
	})
	mux.HandleFunc("POST /message", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		w.WriteHeader(http.StatusAccepted)
		switch {
		case m.Method == "":
			answers <- r.Header.Get("X-Static") + " " + string(body)
		case m.ID == nil:
		case m.Method == "initialize":
			push(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw-sse","version":"0.1.0"}}}`, m.ID))
		case m.Method == "tools/list":
			push(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"elicit","inputSchema":{"type":"object"}}]}}`, m.ID))
		case m.Method == "tools/call":
			go func() {
				push(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"elicitation/create","params":{"mode":"url","elicitationId":"e0","url":"https://example.com/sse","message":"Open it"}}`, m.ID))
				push(`{"jsonrpc":"2.0","id":"s-2","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`)
				var got []string
				for range 2 {
					select {
					case a := <-answers:
						got = append(got, a)
					case <-time.After(5 * time.Second):
						got = append(got, "no answer")
					}
				}
				text, _ := json.Marshal(strings.Join(got, "\n"))
				push(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%s}]}}`, m.ID, text))
			}()
		default:
			push(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, m.ID))
		}
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

// serveEvents answers r with an event stream: first, then each of events
// as write puts it, flushed one by one, until the client goes away.
func serveEvents[E any](w http.ResponseWriter, r *http.Request, first string, events <-chan E, write func(io.Writer, E)) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, first)
	w.(http.Flusher).Flush()
	for {
		select {
		case ev := <-events:
			write(w, ev)
			w.(http.Flusher).Flush()
		case <-r.Context().Done():
			return
		}
	}
}

func TestUpstreamLegacySSEServerRequestsAnswered(t *testing.T) {
	ts := rawSSEServer(t)
	got := make(chan Elicitation, 1)
	u, _ := startHTTP(t, Config{URL: ts.URL + "/sse", Headers: http.Header{"X-Static": {"s"}}},
		Options{OnElicitation: func(e Elicitation) { got <- e }})
	waitReady(t, u)
	if u.ServerInfo().Name != "raw-sse" {
		t.Errorf("ServerInfo = %+v", u.ServerInfo())
	}
	res, err := callTool(t, u, "elicit", "")
	if err != nil {
		t.Fatal(err)
	}
	// Answered concurrently: in either order.
	answers := strings.Split(resultText(t, res), "\n")
	slices.Sort(answers)
	if len(answers) != 2 || !strings.HasPrefix(answers[1], `s {"id":`) || !strings.Contains(answers[1], `"result":{"action":"cancel"}`) ||
		!strings.HasPrefix(answers[0], `s {"error":{"code":-32601,`) || !strings.Contains(answers[0], `"id":"s-2"`) {
		t.Errorf("answers = %q", answers)
	}
	select {
	case e := <-got:
		if e.URL != "https://example.com/sse" || e.Action != "cancel" {
			t.Errorf("reported %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not reported")
	}
}

// mcp-go's transport lines go out at debug level, their error under the
// key "error" and without the URL's query.
func TestUpstreamTransportLogger(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(debugHandler{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})})
	l.Error("failed to send close request", "err", &url.Error{Op: "Delete", URL: "http://h/mcp?key=SECRET", Err: errors.New("connection refused")}, "status", 500)
	got := buf.String()
	if !strings.Contains(got, `level=DEBUG msg="failed to send close request" error="Delete http://h/mcp: connection refused" status=500`) ||
		strings.Contains(got, "SECRET") || strings.Contains(got, " err=") {
		t.Errorf("logged %s", got)
	}
}

// The default client keeps the connections of a burst of calls to an HTTP
// upstream for the next one: a second burst as large as the first dials
// nothing new.
func TestUpstreamHTTPKeepsBurstConnections(t *testing.T) {
	b := conntest.NewBurst(200) // more calls in flight than a pool of a few dozen keeps
	s := mcpserver.NewMCPServer("burst-upstream", "1.0.0", mcpserver.WithToolCapabilities(true))
	s.AddTool(mcpgo.NewTool("gate"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		if err := b.Hold(ctx); err != nil {
			return nil, err
		}
		return mcpgo.NewToolResultText("ok"), nil
	})
	ts := httptest.NewUnstartedServer(legacyStreamable(s))
	ts.Config.ConnState = b.ConnState
	ts.Start()
	t.Cleanup(ts.Close)
	u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp"}, Options{})
	waitReady(t, u)
	b.KeepsConnections(t, func(ctx context.Context) error {
		_, err := u.CallTool(ctx, "gate", json.RawMessage(`{}`), nil, nil)
		return err
	})
}
