package front

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/internal/wiretest"
)

func TestFrontDecodeReadsValidMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, id, method, params string }{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `1`, "ping", ``},
		{`{"jsonrpc":"2.0","id":-1.5e3,"method":"ping","params":null}`, `-1.5e3`, "ping", ``},
		{` {"jsonrpc":"2.0","id":"x","method":"tools\/call","params":{"a":[1]}}`, `"x"`, "tools/call", `{"a":[1]}`},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, ``, "notifications/initialized", ``},
		{`{"method":"a","jsonrpc":"2.0","method":"ping","id":2}`, `2`, "ping", ``}, // the last of a key counts
	} {
		m, e := decode([]byte(tc.body))
		if e != nil {
			t.Errorf("%s: %d %s", tc.body, e.Code, e.Message)
			continue
		}
		if string(m.id) != tc.id || m.method != tc.method || string(m.params) != tc.params || m.response {
			t.Errorf("%s: id %s method %q params %s response %v", tc.body, m.id, m.method, m.params, m.response)
		}
	}
	for _, body := range []string{`{"jsonrpc":"2.0","id":null,"result":{}}`, `{"jsonrpc":"2.0","id":{"a":1},"error":{}}`} {
		if m, e := decode([]byte(body)); e != nil || !m.response {
			t.Errorf("%s: not read as a response (%v)", body, e)
		}
	}
	for body, code := range map[string]int{`{"jsonrpc":`: -32700, `"text"`: -32600, ``: -32700, `[]`: -32600,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`: -32600, `{"jsonrpc":"2.0","id":true,"method":"ping"}`: -32600,
		`{"jsonrpc":"2.0","id":1,"method":7}`: -32600, `{"jsonrpc":"2.0","id":1}`: -32600} {
		if _, e := decode([]byte(body)); e == nil || e.Code != code {
			t.Errorf("%q: %v, want code %d", body, e, code)
		}
	}
}

// Over streamable HTTP (in and out of a session, 2026-07-28 too) and the
// legacy SSE message endpoint: 400 and the -32600 frame, nothing else.
func TestFrontHTTPInvalidRequests(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	srv, h := startFrontHTTP(t, f, nil) // closed after the SSE stream (cleanups run last first)
	url := srv.URL + StreamablePath
	c := &httpTestClient{url: url, version: "2025-11-25"}
	initialize(t, c)
	sse := startFrontSSE(t, srv.URL, "")
	initialize(t, sse)
	// An echo of the invalid ids on the SSE stream would arrive here.
	echoes := []<-chan json.RawMessage{sse.d.expect(map[string]any{"a": float64(1)}), sse.d.expect([]any{float64(1)}),
		sse.d.expect(true), sse.d.expect(false), sse.d.expect(nil), sse.d.expect(float64(1)), sse.d.expect(float64(2))}
	sessions := h.Sessions()

	modern := http.Header{"Mcp-Protocol-Version": {mcpgo.ProtocolVersion20260728}, "Mcp-Method": {"ping"}}
	check := func(t *testing.T, status int, header http.Header, body, want string) {
		t.Helper()
		ct, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
		if status != http.StatusBadRequest || ct != "application/json" {
			t.Errorf("%d %s %q, want 400 JSON", status, ct, body)
		}
		sameJSON(t, []byte(body), want)
	}
	for _, tc := range wiretest.InvalidRequests {
		t.Run(tc.Name, func(t *testing.T) {
			status, header, body := rawRequest(t, context.Background(), http.MethodPost, url, tc.Frame,
				http.Header{"Mcp-Session-Id": {c.session}, "Mcp-Protocol-Version": {"2025-11-25"}})
			check(t, status, header, body, tc.Want)
			status, header, body = rawRequest(t, context.Background(), http.MethodPost, url, tc.Frame, nil)
			check(t, status, header, body, tc.Want)
			status, header, body = rawRequest(t, context.Background(), http.MethodPost, url, tc.Frame, modern)
			check(t, status, header, body, tc.Want)
			status, header, body = rawRequest(t, context.Background(), http.MethodPost, srv.URL+sse.endpoint, tc.Frame, nil)
			check(t, status, header, body, tc.Want)
		})
	}
	t.Run("an initialize with an invalid id opens no session", func(t *testing.T) {
		status, header, body := rawRequest(t, context.Background(), http.MethodPost, url,
			`{"jsonrpc":"2.0","id":{},"method":"initialize","params":`+initParams+`}`, nil)
		check(t, status, header, body, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or a number, not an object"}}`)
		if header.Get("Mcp-Session-Id") != "" || h.Sessions() != sessions {
			t.Errorf("session %q, %d sessions, want %d", header.Get("Mcp-Session-Id"), h.Sessions(), sessions)
		}
	})
	// The session and the stream still work, and nothing reached mcp-go.
	sameJSON(t, callTool(t, c, 3, "tools/call", callParams("add", `{"a":1,"b":2}`)),
		`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"3"}],"structuredContent":{"sum":3}}}`)
	sameJSON(t, callTool(t, sse, 3, "ping", `{}`), `{"jsonrpc":"2.0","id":3,"result":{}}`)
	for _, ch := range echoes {
		select {
		case f := <-ch:
			t.Errorf("mcp-go answered an invalid message on the SSE stream: %s", f)
		default:
		}
	}
}

// Over stdio: each invalid line is answered in order with the -32600
// frame, and serving goes on. Not parallel: one stdio session per process.
func TestFrontStdioInvalidRequests(t *testing.T) {
	f, _ := testFront(t, nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- f.ServeStdio(context.Background(), inR, outW)
		outW.Close()
	}()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stdout ended")
			}
			return l
		case <-time.After(wait):
			t.Fatal("no frame on stdout")
		}
		return ""
	}
	write := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	write(string(request(1, "initialize", initParams)))
	if l := next(); !strings.Contains(l, `"id":1,"result"`) {
		t.Fatalf("initialize: %s", l)
	}
	write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, tc := range wiretest.InvalidRequests {
		write(tc.Frame)
	}
	write(`{"jsonrpc":"2.0","id":99,"method":"ping"}`)
	for _, tc := range wiretest.InvalidRequests {
		l := next()
		if !jsonEqual([]byte(l), []byte(tc.Want)) {
			t.Errorf("%s:\n got: %s\nwant: %s", tc.Name, l, tc.Want)
		}
	}
	sameJSON(t, []byte(next()), `{"jsonrpc":"2.0","id":99,"result":{}}`)
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("ServeStdio did not return after EOF")
	}
	for l := range lines {
		t.Errorf("unexpected frame: %s", l)
	}
}

// A body that trickles in is cut with 408 after BodyTimeout, at the wire;
// a normal body, one sent in parts within the time, and a call that runs
// longer than BodyTimeout still work.
func TestFrontHTTPBodyTimeout(t *testing.T) {
	t.Parallel()
	f, p := testFront(t, nil)
	h := f.StreamableHTTPHandler(&HTTPOptions{BodyTimeout: time.Second, Stateless: true})
	srv := httptest.NewServer(h)
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	body := string(request(1, "tools/call", callParams("add", `{"a":1,"b":2}`)))
	head := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n" +
		"Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2025-11-25\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body))

	// send writes the body one piece per tick after the headers, and
	// returns the response read from the wire.
	send := func(t *testing.T, pieces []string, tick time.Duration) (*http.Response, string) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(3 * wait))
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for _, piece := range pieces {
				select {
				case <-stop:
					return
				case <-time.After(tick):
				}
				if _, err := io.WriteString(conn, piece); err != nil {
					return // the server hung up: expected once it answered 408
				}
			}
		}()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("reading the response: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	t.Run("one byte every 300 ms", func(t *testing.T) {
		pieces := strings.Split(body, "") // ~30 s at 300 ms a byte
		resp, got := send(t, pieces, 300*time.Millisecond)
		if resp.StatusCode != http.StatusRequestTimeout || got != "request timeout: the body was not received within 1s\n" ||
			!resp.Close {
			t.Errorf("%d close=%v %q", resp.StatusCode, resp.Close, got)
		}
	})
	t.Run("in two parts within the time", func(t *testing.T) {
		resp, got := send(t, []string{body[:10], body[10:]}, 200*time.Millisecond)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %q", resp.StatusCode, got)
		}
		sameJSON(t, []byte(got), `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"3"}],"structuredContent":{"sum":3}}}`)
	})
	t.Run("a call that outlasts the body timeout", func(t *testing.T) {
		c := &httpTestClient{url: srv.URL + StreamablePath, version: "2025-11-25"}
		call := c.send(t, 2, "tools/call", callParams("wait", `{"tag":"bt"}`))
		expectTag(t, p.started, "bt")
		time.Sleep(1500 * time.Millisecond) // past the body's deadline: the call must not be cancelled by it
		select {
		case tag := <-p.cancelled:
			t.Fatalf("call %s cancelled", tag)
		default:
		}
		close(p.release)
		sameJSON(t, await(t, call), `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"released bt"}]}}`)
	})
}

// --allowed-host: a reverse proxy's host name is admitted in Host and
// Origin on a loopback listener; other names still get 403.
func TestFrontHTTPAllowedHosts(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	plain, _ := startFrontHTTP(t, f, nil)
	proxied, _ := startFrontHTTP(t, f, &HTTPOptions{AllowedHosts: []string{"proxy.example", "[::2]"}})
	do := func(base, method, path, host, origin string) (int, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(string(request(1, "initialize", initParams))))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if method == http.MethodGet { // an SSE stream: the status is enough
			return resp.StatusCode, ""
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, base, method, path, host, origin string
		status                                 int
		body                                   string
	}{
		{"without the flag", plain.URL, http.MethodPost, StreamablePath, "proxy.example", "", 403,
			"forbidden: Host \"proxy.example\" is not a local host (see --allowed-host)\n"},
		{"with the flag", proxied.URL, http.MethodPost, StreamablePath, "proxy.example", "", 200, ""},
		{"any port, any case", proxied.URL, http.MethodPost, StreamablePath, "PROXY.example:8443", "https://proxy.example", 200, ""},
		{"an IPv6 name", proxied.URL, http.MethodPost, StreamablePath, "[::2]:80", "", 200, ""},
		{"SSE", proxied.URL, http.MethodGet, SSEPath, "proxy.example", "", 200, ""},
		{"loopback still local", proxied.URL, http.MethodPost, StreamablePath, "localhost:1", "http://127.0.0.5", 200, ""},
		{"another host", proxied.URL, http.MethodPost, StreamablePath, "evil.example", "", 403,
			"forbidden: Host \"evil.example\" is not a local host (see --allowed-host)\n"},
		{"a sub-domain", proxied.URL, http.MethodPost, StreamablePath, "a.proxy.example", "", 403,
			"forbidden: Host \"a.proxy.example\" is not a local host (see --allowed-host)\n"},
		{"another origin", proxied.URL, http.MethodPost, StreamablePath, "proxy.example", "https://evil.example", 403,
			"forbidden: Origin \"https://evil.example\" is not a local origin (see --allowed-host)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := do(tc.base, tc.method, tc.path, tc.host, tc.origin)
			if status != tc.status || (tc.body != "" && body != tc.body) {
				t.Errorf("%d %q, want %d %q", status, body, tc.status, tc.body)
			}
			if status == http.StatusOK && tc.method == http.MethodPost && !strings.Contains(body, `"protocolVersion":"2025-11-25"`) {
				t.Errorf("initialize answered %s", body)
			}
		})
	}
}
