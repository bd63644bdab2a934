package front

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/internal/wiretest"
)

// httpTestClient is a raw streamable HTTP client in one session.
type httpTestClient struct {
	url     string
	token   string
	session string
	version string // Mcp-Protocol-Version once initialized
}

// reply is one HTTP answer, with its JSON-RPC frames: the JSON body,
// or the data of each event of an SSE body.
type reply struct {
	status      int
	header      http.Header
	contentType string
	body        []byte
	frames      []json.RawMessage
}

func (c *httpTestClient) post(t *testing.T, ctx context.Context, body []byte, header http.Header) (reply, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	r := reply{status: resp.StatusCode, header: resp.Header}
	r.contentType, _, _ = mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if r.body, err = io.ReadAll(resp.Body); err != nil {
		return r, err
	}
	switch r.contentType {
	case "application/json":
		r.frames = []json.RawMessage{bytes.TrimSpace(r.body)}
	case "text/event-stream":
		r.frames = eventData(r.body)
	}
	return r, nil
}

// eventData returns the data of each event of an SSE body.
func eventData(body []byte) []json.RawMessage {
	var frames []json.RawMessage
	var data [][]byte
	for rest := body; len(rest) > 0; {
		line, next, _ := bytes.Cut(rest, []byte("\n"))
		line, rest = bytes.TrimSuffix(line, []byte("\r")), next
		if len(line) == 0 {
			if len(data) > 0 {
				frames = append(frames, bytes.Join(data, []byte("\n")))
			}
			data = nil
		} else if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(v, []byte(" ")))
		}
	}
	return frames
}

// sameID tells whether two ids decoded from JSON are the same.
func sameID(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// frame returns the frame that answers id.
func (r reply) frame(t *testing.T, id any) json.RawMessage {
	t.Helper()
	for _, f := range r.frames {
		var m struct {
			ID     any    `json:"id"`
			Method string `json:"method"`
		}
		if json.Unmarshal(f, &m) == nil && m.Method == "" && sameID(m.ID, id) {
			return f
		}
	}
	t.Fatalf("no response for %v: %d %s", id, r.status, r.body)
	return nil
}

func (c *httpTestClient) send(t *testing.T, id any, method, params string) <-chan json.RawMessage {
	ch := make(chan json.RawMessage, 1)
	go func() {
		r, err := c.post(t, context.Background(), request(id, method, params), nil)
		if err != nil {
			t.Error(err)
			return
		}
		if r.status != http.StatusOK {
			t.Errorf("%s: status %d: %s", method, r.status, r.body)
			return
		}
		if method == "initialize" {
			c.session = r.header.Get("Mcp-Session-Id")
		}
		for _, f := range r.frames {
			var m struct{ ID any }
			if json.Unmarshal(f, &m) == nil && sameID(m.ID, id) {
				ch <- f
			}
		}
	}()
	return ch
}

func (c *httpTestClient) notify(t *testing.T, method, params string) {
	r, err := c.post(t, context.Background(), notification(method, params), nil)
	if err != nil || r.status != http.StatusAccepted {
		t.Errorf("%s: %v %d %s", method, err, r.status, r.body)
	}
}

func startFrontHTTP(t *testing.T, f *Server, opts *HTTPOptions) (*httptest.Server, *HTTPHandler) {
	t.Helper()
	h := f.HTTPHandler(opts)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, h
}

// startFrontSession starts f's HTTP handler with opts and a streamable
// HTTP client of it, initialized.
func startFrontSession(t *testing.T, f *Server, opts *HTTPOptions) (*httptest.Server, *HTTPHandler, *httpTestClient) {
	t.Helper()
	srv, h := startFrontHTTP(t, f, opts)
	c := &httpTestClient{url: srv.URL + StreamablePath}
	initialize(t, c)
	return srv, h, c
}

func TestFrontStreamableHTTP(t *testing.T) {
	t.Parallel()
	f, p := testFront(t, nil)
	_, _, c := startFrontSession(t, f, nil)
	if c.session == "" {
		t.Fatal("stateful initialize returned no session id")
	}
	c.version = "2025-11-25"
	runScenarios(t, c, p)
}

// The same call answered as JSON, and as SSE when the handler notifies
// first: the notification is untouched, the answer rewritten.
func TestFrontStreamableHTTPFraming(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	_, _, c := startFrontSession(t, f, nil)
	c.version = "2025-11-25"

	const want = `{"jsonrpc":"2.0","id":%d,"error":{"code":-32602,"message":"invalid arguments: b: Must be a number","data":{"parameter_errors":{"b":"Must be a number"}}}}`
	r, err := c.post(t, context.Background(), request(2, "tools/call", callParams("progress_then_invalid", `{}`)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusOK || r.contentType != "application/json" || len(r.frames) != 1 {
		t.Fatalf("want one JSON frame: %d %s %q", r.status, r.contentType, r.body)
	}
	sameJSON(t, r.frames[0], fmt.Sprintf(want, 2))

	params := `{"name":"progress_then_invalid","arguments":{},"_meta":{"progressToken":"p3"}}`
	r, err = c.post(t, context.Background(), request(3, "tools/call", params), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusOK || r.contentType != "text/event-stream" || len(r.frames) != 2 {
		t.Fatalf("want two SSE events: %d %s %q", r.status, r.contentType, r.body)
	}
	sameJSON(t, r.frames[0], `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p3","progress":1,"total":2}}`)
	sameJSON(t, r.frames[1], fmt.Sprintf(want, 3))
	if !bytes.HasPrefix(r.body, []byte("event: message\ndata: ")) || !bytes.HasSuffix(r.body, []byte("\n\n")) {
		t.Errorf("SSE framing changed: %q", r.body)
	}
}

// callModern sends a 2026-07-28 request: no session, protocol version and
// capabilities in _meta, the standard headers.
func callModern(t *testing.T, ctx context.Context, c *httpTestClient, id any, name, args, caps string) (reply, error) {
	t.Helper()
	params := fmt.Sprintf(`{"name":%q,"arguments":%s,"_meta":{%q:%q,%q:%s}}`, name, args,
		mcpgo.MetaKeyProtocolVersion, mcpgo.ProtocolVersion20260728, mcpgo.MetaKeyClientCapabilities, caps)
	header := http.Header{"Mcp-Protocol-Version": {mcpgo.ProtocolVersion20260728}}
	for k, v := range mcpgo.StandardHeaders(mcpgo.ProtocolVersion20260728, mcpgo.MethodToolsCall, json.RawMessage(params)) {
		header.Set(k, v)
	}
	return c.post(t, ctx, request(id, "tools/call", params), header)
}

func TestFrontStreamableHTTPModern(t *testing.T) {
	t.Parallel()
	f, p := testFront(t, nil)
	srv, _ := startFrontHTTP(t, f, nil)
	c := &httpTestClient{url: srv.URL + StreamablePath}
	const urlCaps = `{"elicitation":{"url":{}}}`

	for _, tc := range []struct {
		name, tool, args string
		status           int
		want             string
	}{
		{"invalid params", "invalid", `{"b":"x"}`, http.StatusBadRequest,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid arguments: b: Must be a number","data":{"parameter_errors":{"b":"Must be a number"}}}}`},
		{"timeout", "timeout", `{}`, http.StatusOK,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"request timed out"}}`},
		{"plain error", "fail", `{}`, http.StatusOK,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"upstream exploded"}}`},
		{"unknown tool", "nope", `{}`, http.StatusBadRequest,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"tool 'nope' not found: tool not found"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := callModern(t, context.Background(), c, 1, tc.tool, tc.args, urlCaps)
			if err != nil {
				t.Fatal(err)
			}
			if r.status != tc.status || r.contentType != "application/json" {
				t.Errorf("status %d %s, want %d JSON", r.status, r.contentType, tc.status)
			}
			sameJSON(t, r.frame(t, 1), tc.want)
		})
	}

	t.Run("url elicitation is a multi round-trip request", func(t *testing.T) {
		r, err := callModern(t, context.Background(), c, 2, "authorize", `{}`, urlCaps)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Result struct {
				ResultType    string          `json:"resultType"`
				InputRequests json.RawMessage `json:"inputRequests"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r.frame(t, 2), &got); err != nil || got.Result.ResultType != "input_required" {
			t.Fatalf("%d %s", r.status, r.body)
		}
		// 2026-07-28's URL params: mode, message, url (no elicitationId).
		sameJSON(t, got.Result.InputRequests, `{"google":{"method":"elicitation/create","params":`+
			`{"mode":"url","message":"Authorize Google","url":"https://auth.example/google"}}}`)
	})

	t.Run("client capabilities come from _meta", func(t *testing.T) {
		for caps, want := range map[string]string{urlCaps: "true", `{"elicitation":{"form":{}}}`: "false", `{}`: "false"} {
			r, err := callModern(t, context.Background(), c, 3, "caps", `{}`, caps)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Result struct {
					Content []struct{ Text string } `json:"content"`
				} `json:"result"`
			}
			if json.Unmarshal(r.frame(t, 3), &got) != nil || len(got.Result.Content) != 1 || got.Result.Content[0].Text != want {
				t.Errorf("caps %s: %s", caps, r.body)
			}
		}
	})

	t.Run("disconnect cancels the handler", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = callModern(t, ctx, c, 4, "block", `{"tag":"m4"}`, urlCaps)
		}()
		expectTag(t, p.started, "m4")
		cancel()
		expectTag(t, p.cancelled, "m4")
		<-done
	})

	t.Run("concurrent requests reusing one id", func(t *testing.T) {
		// Stateless clients may all use id 1: each POST has its own bookkeeping.
		errs := make(chan error, 20)
		for i := range 20 {
			go func() {
				code := -32000 - i
				r, err := callModern(t, context.Background(), c, 1, "coded",
					fmt.Sprintf(`{"code":%d,"delay_ms":%d,"tag":"s%d"}`, code, i%5, i), urlCaps)
				if err == nil && !jsonEqual(r.frames[0], fmt.Appendf(nil,
					`{"jsonrpc":"2.0","id":1,"error":{"code":%d,"message":"code %d for s%d","data":{"tag":"s%d"}}}`, code, code, i, i)) {
					err = fmt.Errorf("request %d got %s", i, r.body)
				}
				errs <- err
			}()
		}
		for range 20 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
}

func TestFrontStreamableHTTPStateless(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	_, _, c := startFrontSession(t, f, &HTTPOptions{Stateless: true})
	if c.session != "" {
		t.Fatalf("stateless initialize returned session %q", c.session)
	}
	for i, sc := range scenarios[:7] { // those that need no client capabilities
		sameJSON(t, callTool(t, c, i+2, "tools/call", sc.params), fmt.Sprintf(sc.want, fmt.Sprint(i+2)))
	}
	// Without a session, initialize's capabilities are forgotten.
	sameJSON(t, callTool(t, c, 20, "tools/call", callParams("authorize", `{}`)),
		`{"jsonrpc":"2.0","id":20,"result":{"content":[{"type":"text","text":"open https://auth.example/google, then retry"}],"isError":true}}`)
}

func TestFrontHTTPBearerToken(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	srv, _ := startFrontHTTP(t, f, &HTTPOptions{BearerToken: "s3cret"})

	for _, tc := range []struct {
		name, method, path, auth string
		status                   int
		challenge                string
	}{
		{"no token", http.MethodPost, StreamablePath, "", http.StatusUnauthorized, `Bearer realm="mcp"`},
		{"wrong token", http.MethodPost, StreamablePath, "Bearer s3cre", http.StatusUnauthorized, `Bearer realm="mcp", error="invalid_token"`},
		{"other scheme", http.MethodPost, StreamablePath, "Basic czNjcmV0", http.StatusUnauthorized, `Bearer realm="mcp"`},
		{"sse without token", http.MethodGet, SSEPath, "", http.StatusUnauthorized, `Bearer realm="mcp"`},
		{"message without token", http.MethodPost, SSEMessagePath + "?sessionId=x", "", http.StatusUnauthorized, `Bearer realm="mcp"`},
		{"right token", http.MethodPost, StreamablePath, "Bearer s3cret", http.StatusOK, ""},
		{"scheme is case-insensitive", http.MethodPost, StreamablePath, "bearer s3cret", http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, challenge, body := sendInitialize(t, tc.method, srv.URL+tc.path, map[string]string{"Authorization": tc.auth})
			if status != tc.status || challenge != tc.challenge {
				t.Errorf("got %d %q, want %d %q: %s", status, challenge, tc.status, tc.challenge, body)
			}
			if bytes.Contains(body, []byte("s3cre")) {
				t.Errorf("the answer echoes the token: %s", body)
			}
		})
	}

	t.Run("the handler sees the caller's token", func(t *testing.T) {
		c := &httpTestClient{url: srv.URL + StreamablePath, token: "s3cret"}
		initialize(t, c)
		sameJSON(t, callTool(t, c, 2, "tools/call", callParams("whoami", `{}`)),
			`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"token s3cret"}]}}`)
	})
}

// sendInitialize sends an initialize request with method to url, as JSON
// with the headers of header that are not empty, and returns the answer's
// status, WWW-Authenticate challenge and body.
func sendInitialize(t *testing.T, method, url string, header map[string]string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(string(request(1, "initialize", initParams))))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body
}

func TestFrontHTTPCallerTokenWithoutAuth(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	srv, _ := startFrontHTTP(t, f, nil)
	for token, want := range map[string]string{"upstream-token": "token upstream-token", "": "no token"} {
		c := &httpTestClient{url: srv.URL + StreamablePath, token: token}
		initialize(t, c)
		sameJSON(t, callTool(t, c, 2, "tools/call", callParams("whoami", `{}`)),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":%q}]}}`, want))
	}
}

func TestFrontHTTPRebindingProtection(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	srv, _ := startFrontHTTP(t, f, nil)
	open, _ := startFrontHTTP(t, f, &HTTPOptions{DisableLocalhostProtection: true})

	do := func(base, method, path, host, origin string) int {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(string(request(1, "initialize", initParams))))
		req.Header.Set("Content-Type", "application/json")
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name, method, path, host, origin string
		status                           int
	}{
		{"foreign host", http.MethodPost, StreamablePath, "evil.example", "", http.StatusForbidden},
		{"foreign host with port", http.MethodPost, StreamablePath, "evil.example:8080", "", http.StatusForbidden},
		{"foreign origin", http.MethodPost, StreamablePath, "", "http://evil.example", http.StatusForbidden},
		{"null origin", http.MethodPost, StreamablePath, "", "null", http.StatusForbidden},
		{"foreign host on sse", http.MethodGet, SSEPath, "evil.example", "", http.StatusForbidden},
		{"foreign origin on message", http.MethodPost, SSEMessagePath + "?sessionId=x", "", "http://evil.example", http.StatusForbidden},
		{"localhost", http.MethodPost, StreamablePath, "localhost:1234", "http://localhost:5173", http.StatusOK},
		{"127.0.0.1", http.MethodPost, StreamablePath, "127.0.0.1", "https://127.0.0.1:9", http.StatusOK},
		{"[::1]", http.MethodPost, StreamablePath, "[::1]:80", "http://[::1]:3000", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := do(srv.URL, tc.method, tc.path, tc.host, tc.origin); got != tc.status {
				t.Errorf("got %d, want %d", got, tc.status)
			}
		})
	}
	t.Run("disabled", func(t *testing.T) {
		if got := do(open.URL, http.MethodPost, StreamablePath, "evil.example", "http://evil.example"); got != http.StatusOK {
			t.Errorf("got %d", got)
		}
	})
	t.Run("not on loopback", func(t *testing.T) {
		// No local address in the context: the request did not come in on
		// a loopback address, so it is not checked.
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, StreamablePath, strings.NewReader(string(request(1, "initialize", initParams))))
		req.Host = "mcp.example.com"
		req.Header.Set("Content-Type", "application/json")
		f.HTTPHandler(nil).ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("got %d: %s", rec.Code, rec.Body)
		}
	})
}

// Shutdown ends the standalone streamable HTTP stream and refuses new ones.
func TestFrontStreamableHTTPShutdownClosesStreams(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	srv, h, c := startFrontSession(t, f, nil)

	req, _ := http.NewRequest(http.MethodGet, c.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", err, resp)
	}
	ended := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, resp.Body); close(ended) }()

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := h.Shutdown(ctx, srv.Config); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	expectEnded(t, ended, "the GET stream")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, StreamablePath, nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("new stream after Shutdown: %d", rec.Code)
	}
}

func TestFrontHTTPMessageBound(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	_, _, c := startFrontSession(t, f, &HTTPOptions{MaxMessageBytes: 512})
	c.version = "2025-11-25"
	big := callParams("add", fmt.Sprintf(`{"a":1,"b":2,"pad":%q}`, strings.Repeat("x", 600)))
	r, err := c.post(t, context.Background(), request(2, "tools/call", big), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusBadRequest || len(r.frames) != 1 || !bytes.Contains(r.frames[0], []byte(`"code":-32700`)) {
		t.Errorf("got %d %s", r.status, r.body)
	}
	sameJSON(t, callTool(t, c, 3, "tools/call", callParams("add", `{"a":1,"b":2}`)),
		`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"3"}],"structuredContent":{"sum":3}}}`)
}

func TestFrontHTTPHandlerTransports(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	for _, tc := range []struct {
		name     string
		h        *HTTPHandler
		mcp, sse int
	}{
		{"both", f.HTTPHandler(nil), http.StatusOK, http.StatusOK},
		{"streamable", f.StreamableHTTPHandler(nil), http.StatusOK, http.StatusNotFound},
		{"sse", f.SSEHandler(nil), http.StatusNotFound, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.h)
			defer srv.Close()
			r, err := (&httpTestClient{url: srv.URL + StreamablePath}).post(t, context.Background(), request(1, "initialize", initParams), nil)
			if err != nil || r.status != tc.mcp {
				t.Errorf("POST %s: %v %d", StreamablePath, err, r.status)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+SSEPath, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != tc.sse {
				t.Errorf("GET %s: %v %v", SSEPath, err, resp)
			}
			if err == nil {
				cancel()
				resp.Body.Close()
			}
		})
	}
}

// rawRequest sends one HTTP request to a streamable HTTP endpoint and reads
// its answer, for at most wait (an event stream that stays open).
func rawRequest(t *testing.T, ctx context.Context, method, url, body string, header http.Header) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return wiretest.MCPHTTP(t, ctx, method, url, body, header)
}

// openStream opens the standalone GET stream of session; the channel
// is closed once the server has ended it.
func openStream(t *testing.T, url, session string) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET stream: %v", err)
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("GET stream: %d %s", resp.StatusCode, ct)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
	return ended
}

func deleteSession(t *testing.T, url, session string) int {
	t.Helper()
	status, _, _ := rawRequest(t, context.Background(), http.MethodDelete, url, "",
		http.Header{"Mcp-Session-Id": {session}, "Mcp-Protocol-Version": {"2025-11-25"}})
	return status
}

func expectEnded(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait):
		t.Fatalf("%s is still open", what)
	}
}

// A 2026-07-28 notification needs no _meta (the official Go SDK sends
// notifications/cancelled with only the Mcp-Protocol-Version header);
// mcp-go answered 400 -32602, and the SDK then closed its session.
func TestFrontStreamableHTTPModernNotificationWithoutMeta(t *testing.T) {
	t.Parallel()
	f, p := testFront(t, nil)
	srv, _ := startFrontHTTP(t, f, nil)
	url := srv.URL + StreamablePath
	modern := func(method string) http.Header {
		return http.Header{"Mcp-Protocol-Version": {mcpgo.ProtocolVersion20260728}, "Mcp-Method": {method}}
	}

	t.Run("notifications/cancelled is accepted and cancels the call", func(t *testing.T) {
		c := &httpTestClient{url: url}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // only if the notification did not cancel the call
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = callModern(t, ctx, c, 2, "block", `{"tag":"n2"}`, `{}`)
		}()
		expectTag(t, p.started, "n2")
		status, _, body := rawRequest(t, context.Background(), http.MethodPost, url,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`,
			modern("notifications/cancelled"))
		if status != http.StatusAccepted || body != "" {
			t.Fatalf("notifications/cancelled: %d %q, want 202 and no body", status, body)
		}
		expectTag(t, p.cancelled, "n2")
		<-done
	})

	for _, tc := range []struct{ name, body string }{
		{"no params", `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`},
		{"params without _meta", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"gone","reason":"x"}}`},
		{"_meta without the version", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"_meta":{"k":1}}}`},
		{"_meta with the version", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var method struct{ Method string }
			_ = json.Unmarshal([]byte(tc.body), &method)
			if status, _, body := rawRequest(t, context.Background(), http.MethodPost, url, tc.body, modern(method.Method)); status != http.StatusAccepted {
				t.Errorf("%d %s, want 202", status, body)
			}
		})
	}

	t.Run("a _meta version is never replaced", func(t *testing.T) {
		status, _, body := rawRequest(t, context.Background(), http.MethodPost, url,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`,
			modern("notifications/cancelled"))
		if status != http.StatusBadRequest || !strings.Contains(body, "does not match") {
			t.Errorf("mismatched versions: %d %s, want mcp-go's 400", status, body)
		}
	})

	t.Run("requests still need _meta", func(t *testing.T) {
		status, _, body := rawRequest(t, context.Background(), http.MethodPost, url,
			`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`, modern("tools/list"))
		if status != http.StatusBadRequest || !strings.Contains(body, "-32602") {
			t.Errorf("request without _meta: %d %s, want 400 -32602", status, body)
		}
	})
}

// DELETE ends the session's GET stream too; mcp-go forgot the session but
// left the stream open.
func TestFrontStreamableHTTPDeleteClosesStream(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	srv, _, c := startFrontSession(t, f, nil)
	c.version = "2025-11-25"
	first, second := openStream(t, c.url, c.session), openStream(t, c.url, c.session)

	other := &httpTestClient{url: c.url}
	initialize(t, other)
	kept := openStream(t, c.url, other.session)

	if status := deleteSession(t, c.url, c.session); status != http.StatusOK {
		t.Fatalf("DELETE: %d", status)
	}
	expectEnded(t, first, "the deleted session's GET stream")
	expectEnded(t, second, "the deleted session's second GET stream")
	select {
	case <-kept:
		t.Error("another session's GET stream ended")
	case <-time.After(50 * time.Millisecond):
	}
	r, err := c.post(t, context.Background(), request(2, "tools/list", `{}`), nil)
	if err != nil || r.status != http.StatusNotFound {
		t.Errorf("POST in the deleted session: %v %d %s", err, r.status, r.body)
	}
	other.version = "2025-11-25"
	sameJSON(t, callTool(t, other, 2, "tools/call", callParams("add", `{"a":1,"b":2}`)),
		`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"3"}],"structuredContent":{"sum":3}}}`)
	if n := watched(srv); n != 1 {
		t.Errorf("%d sessions with watched streams, want 1", n)
	}
}

// watched is the number of sessions whose GET streams the handler
// behind srv watches.
func watched(srv *httptest.Server) int {
	ids := srv.Config.Handler.(*HTTPHandler).ids
	ids.mu.Lock()
	defer ids.mu.Unlock()
	return len(ids.streams)
}

// Shutdown ends idle GET streams at once, those of deleted sessions too,
// and still lets the calls in flight finish within its grace.
func TestFrontStreamableHTTPShutdownAfterDelete(t *testing.T) {
	t.Parallel()
	f, p := testFront(t, nil)
	srv, h, deleted := startFrontSession(t, f, nil)
	deletedStream := openStream(t, deleted.url, deleted.session)
	if status := deleteSession(t, deleted.url, deleted.session); status != http.StatusOK {
		t.Fatalf("DELETE: %d", status)
	}

	c := &httpTestClient{url: srv.URL + StreamablePath}
	initialize(t, c)
	c.version = "2025-11-25"
	idle := openStream(t, c.url, c.session)
	call := c.send(t, 2, "tools/call", callParams("wait", `{"tag":"w2"}`))
	expectTag(t, p.started, "w2")

	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	defer cancel()
	start := time.Now()
	shut := make(chan error, 1)
	go func() { shut <- h.Shutdown(ctx, srv.Config) }()

	expectEnded(t, idle, "the idle GET stream")
	expectEnded(t, deletedStream, "the deleted session's GET stream")
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned before the call in flight ended: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(p.release)
	sameJSON(t, await(t, call),
		`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"released w2"}]}}`)
	select {
	case err := <-shut:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("Shutdown did not return once the call ended")
	}
	if took := time.Since(start); took > wait {
		t.Errorf("Shutdown took %v", took)
	}
}

// A stateful handler wants a live session on every request but initialize
// (and responses): 400 without Mcp-Session-Id, 404 for an unknown or ended
// one. mcp-go opened a GET stream for any id or none, and answered a POST
// without one 404.
func TestFrontStreamableHTTPSessionRequired(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	srv, _ := startFrontHTTP(t, f, nil)
	stateless, _ := startFrontHTTP(t, f, &HTTPOptions{Stateless: true})
	bounded, _ := startFrontHTTP(t, f, &HTTPOptions{MaxMessageBytes: 512})
	url := srv.URL + StreamablePath

	ended := &httpTestClient{url: url}
	initialize(t, ended)
	if status := deleteSession(t, url, ended.session); status != http.StatusOK {
		t.Fatalf("DELETE: %d", status)
	}
	live := &httpTestClient{url: url}
	initialize(t, live)

	const legacy = "2025-11-25"
	hdr := func(session, version string) http.Header {
		h := http.Header{}
		if session != "" {
			h.Set("Mcp-Session-Id", session)
		}
		if version != "" {
			h.Set("Mcp-Protocol-Version", version)
		}
		return h
	}
	modernCall := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{%q:%q,%q:{}}}}`,
		mcpgo.MetaKeyProtocolVersion, mcpgo.ProtocolVersion20260728, mcpgo.MetaKeyClientCapabilities)
	modernHdr := hdr("", mcpgo.ProtocolVersion20260728)
	modernHdr.Set("Mcp-Method", "tools/list")
	big := fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"pad":%q}}`, strings.Repeat("x", 600))

	for _, tc := range []struct {
		name, method, url, body string
		header                  http.Header
		status                  int
		contentType             string
	}{
		{"GET without a session", http.MethodGet, url, "", hdr("", legacy), 400, "text/plain"},
		{"GET without a session or version", http.MethodGet, url, "", hdr("", ""), 400, "text/plain"},
		{"GET naming a never-issued session", http.MethodGet, url, "", hdr("mcp-session-never-issued", legacy), 404, "text/plain"},
		{"GET naming an ended session", http.MethodGet, url, "", hdr(ended.session, legacy), 404, "text/plain"},
		{"GET of a 2026-07-28 client", http.MethodGet, url, "", hdr("", mcpgo.ProtocolVersion20260728), 405, "text/plain"},
		{"GET with an unknown version", http.MethodGet, url, "", hdr(live.session, "1999-01-01"), 400, "text/plain"},
		{"DELETE without a session", http.MethodDelete, url, "", hdr("", legacy), 400, "text/plain"},
		{"DELETE naming a never-issued session", http.MethodDelete, url, "", hdr("mcp-session-never-issued", legacy), 404, "text/plain"},
		{"DELETE naming an ended session", http.MethodDelete, url, "", hdr(ended.session, legacy), 404, "text/plain"},
		{"POST without a session", http.MethodPost, url, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, hdr("", legacy), 400, "text/plain"},
		{"POST of a notification without a session", http.MethodPost, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr("", ""), 400, "text/plain"},
		{"POST naming a never-issued session", http.MethodPost, url, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, hdr("mcp-session-never-issued", legacy), 404, "text/plain"},
		{"POST naming an ended session", http.MethodPost, url, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, hdr(ended.session, legacy), 404, "text/plain"},
		{"POST in a live session", http.MethodPost, url, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, hdr(live.session, legacy), 200, "application/json"},
		{"initialize without a session", http.MethodPost, url, string(request(1, "initialize", initParams)), hdr("", ""), 200, "application/json"},
		{"a ping response without a session", http.MethodPost, url, `{"jsonrpc":"2.0","id":5,"result":{}}`, hdr("", legacy), 202, ""},
		{"a 2026-07-28 request without a session", http.MethodPost, url, modernCall, modernHdr, 200, "application/json"},
		{"a body over the bound without a session", http.MethodPost, bounded.URL + StreamablePath, big, hdr("", legacy), 400, "application/json"},
		{"a 2026-07-28 body over the bound", http.MethodPost, bounded.URL + StreamablePath, big, modernHdr, 400, "application/json"},
		{"stateless: POST without a session", http.MethodPost, stateless.URL + StreamablePath, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, hdr("", legacy), 200, "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, header, body := rawRequest(t, context.Background(), tc.method, tc.url, tc.body, tc.header)
			ct, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
			if status != tc.status || ct != tc.contentType {
				t.Errorf("%d %s %q, want %d %s", status, ct, body, tc.status, tc.contentType)
			}
			if tc.body == big && !strings.Contains(body, `"code":-32700`) {
				t.Errorf("over the bound: %s, want mcp-go's parse error", body)
			}
		})
	}

	t.Run("stateless: GET is 405, no shared standalone stream", func(t *testing.T) {
		// mcp-go would open a stream in one session "" shared by every
		// client; the transport lets a server without one answer 405.
		for _, hd := range []http.Header{hdr("", legacy), hdr("", ""), hdr("mcp-session-x", legacy)} {
			status, header, body := rawRequest(t, context.Background(), http.MethodGet, stateless.URL+StreamablePath, "", hd)
			if status != http.StatusMethodNotAllowed || header.Get("Allow") != "POST" || !strings.Contains(body, "stateless") {
				t.Errorf("%v: %d Allow=%q %q", hd, status, header.Get("Allow"), body)
			}
		}
	})
	if n := watched(srv); n != 0 {
		t.Errorf("%d sessions with watched streams after every GET ended, want 0", n)
	}
}

// A call still running when Shutdown's ctx ends is ended and answered on its
// POST before the connection closes: the frame CodeShuttingDown (200, as
// every JSON-RPC error of the revision) with Retry-After; every request is
// then done, so Shutdown returns nil.
func TestFrontStreamableHTTPShutdownAnswersLongCall(t *testing.T) {
	t.Parallel()
	f, p := testFront(t, nil)
	srv, h, c := startFrontSession(t, f, nil)
	c.version = "2025-11-25"
	got := make(chan reply, 1)
	go func() {
		r, err := c.post(t, context.Background(), request(2, "tools/call", callParams("block", `{"tag":"b2"}`)), nil)
		if err != nil {
			r.body = []byte(err.Error())
		}
		got <- r
	}()
	expectTag(t, p.started, "b2")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := h.Shutdown(ctx, srv.Config); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	r := <-got
	if r.status != http.StatusOK || r.header.Get("Retry-After") != "2" || len(r.frames) != 1 {
		t.Fatalf("got %d Retry-After %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	sameJSON(t, r.frames[0], shuttingDownFrame(2))
}
