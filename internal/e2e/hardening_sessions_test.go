//go:build e2e

package e2e

// End-to-end tests of the MCP front's sessions and request hardening
// (issue 9, points 2–4 on the MCP side) through the built binary: session
// bound and idle expiry, --stateless with the official Go SDK client,
// -32600 for invalid ids and batches over HTTP and stdio, 408 for a body
// that trickles in, and --allowed-host.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpotc/mcpotc/internal/conntest"
	"github.com/mcpotc/mcpotc/internal/wiretest"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"0"}}}`

// postMessage sends one POST to the streamable HTTP endpoint url and returns
// status, headers and body.
func postMessage(t *testing.T, url, body string, header http.Header) (int, http.Header, string) {
	t.Helper()
	return httpDo(t, http.MethodPost, url, body, header)
}

func httpDo(t *testing.T, method, url, body string, header http.Header) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return wiretest.MCPHTTP(t, ctx, method, url, body, header)
}

func sameJSON(t *testing.T, what, got, want string) {
	t.Helper()
	if !reflect.DeepEqual(mustDataOr(got), mustData(want)) {
		t.Errorf("%s:\n got: %s\nwant: %s", what, got, want)
	}
}

const tooMany = `{"jsonrpc":"2.0","id":null,"error":{"code":-32003,"message":"too many sessions: the server holds its maximum of 3 sessions; retry later, or end an unused session with DELETE"}}`

// --max-sessions 3, every session in use (it made a call): the 4th
// initialize is 503 with the JSON-RPC error and Retry-After; DELETE makes
// room, and so does idle expiry (--session-idle-ttl), after which the
// expired session is 404. Sessions that never made a call are ended to
// admit new clients instead (TestE2EHardeningSessionsNeverUsed).
func TestE2EHardeningSessionsBound(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := startBridge(t, ctx, "http", []string{"--max-sessions", "3", "--session-idle-ttl", "2s"}, nil)
	initialize := func() string {
		t.Helper()
		status, header, body := postMessage(t, b.url, initializeBody, nil)
		id := header.Get("Mcp-Session-Id")
		if status != http.StatusOK || id == "" || !strings.Contains(body, `"protocolVersion":"2025-11-25"`) {
			t.Fatalf("initialize: %d session %q: %s", status, id, body)
		}
		status, _, body = postMessage(t, b.url, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			http.Header{"Mcp-Session-Id": {id}, "Mcp-Protocol-Version": {"2025-11-25"}})
		if status != http.StatusOK {
			t.Fatalf("tools/list in a new session: %d %s", status, body)
		}
		return id
	}
	refused := func(what string) {
		t.Helper()
		status, header, body := postMessage(t, b.url, initializeBody, nil)
		if status != http.StatusServiceUnavailable || header.Get("Retry-After") != "5" || header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d Retry-After=%q %q: %s", what, status, header.Get("Retry-After"), header.Get("Content-Type"), body)
		}
		sameJSON(t, what, body, tooMany)
	}
	sessions := []string{initialize(), initialize(), initialize()}
	refused("the 4th initialize")

	status, _, body := httpDo(t, http.MethodDelete, b.url, "", http.Header{"Mcp-Session-Id": {sessions[0]}, "Mcp-Protocol-Version": {"2025-11-25"}})
	if status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	sessions[0] = initialize()
	refused("initialize when full again")

	// Nobody uses the sessions any more: all expire within 2×TTL (mcp-go
	// sweeps every TTL/2, at least every second); then initialize works
	// again.
	deadline := time.Now().Add(15 * time.Second)
	for {
		status, header, _ := postMessage(t, b.url, initializeBody, nil)
		if status == http.StatusOK && header.Get("Mcp-Session-Id") != "" {
			break
		}
		if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("initialize after the idle TTL: %d", status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	status, _, body = postMessage(t, b.url, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		http.Header{"Mcp-Session-Id": {sessions[1]}, "Mcp-Protocol-Version": {"2025-11-25"}})
	if status != http.StatusNotFound {
		t.Errorf("POST in an expired session: %d %s", status, body)
	}
}

// sessionRecorder records the Mcp-Session-Id headers a client sends and
// receives, and the status of every GET.
type sessionRecorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen []string
	gets []int
}

func (r *sessionRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	if id := req.Header.Get("Mcp-Session-Id"); id != "" {
		r.seen = append(r.seen, "sent "+id)
	}
	if err == nil {
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			r.seen = append(r.seen, "received "+id)
		}
		if req.Method == http.MethodGet {
			r.gets = append(r.gets, resp.StatusCode)
		}
	}
	return resp, err
}

// --stateless: the official Go SDK client (protocol 2025-11-25) connects,
// lists and calls tools without a session id; none is ever issued; a raw
// tools/call with no initialize before works too; GET is 405.
func TestE2EHardeningSessionsStateless(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := startBridge(t, ctx, "http", []string{"--stateless", "--max-sessions", "1"}, nil)

	rec := &sessionRecorder{base: http.DefaultTransport}
	client := sdk.NewClient(&sdk.Implementation{Name: "mcpotc-e2e-go-sdk", Version: "0.0.0"}, nil)
	cctx, ccancel := context.WithTimeout(ctx, callTimeout)
	defer ccancel()
	// Two clients at once, beyond --max-sessions 1: nothing is held.
	var css []*sdk.ClientSession
	for range 2 {
		cs, err := client.Connect(cctx, &sdk.StreamableClientTransport{Endpoint: b.url, HTTPClient: &http.Client{Transport: rec}},
			&sdk.ClientSessionOptions{ProtocolVersion: proto20251125})
		if err != nil {
			t.Fatalf("go-sdk connect: %v", err)
		}
		t.Cleanup(func() { closeSession(t, cs) })
		css = append(css, cs)
	}
	for _, cs := range css {
		if got := toolNames(listTools(t, ctx, cs)); !reflect.DeepEqual(got, sampleTools) {
			t.Errorf("tools: %v", got)
		}
		res := mustCall(t, ctx, cs, "Calculator_Add", map[string]any{"a": 2, "b": 3})
		if got := textOf(res); got != `{"sum":5}` {
			t.Errorf("Calculator_Add: %q", got)
		}
	}
	rec.mu.Lock()
	if len(rec.seen) != 0 {
		t.Errorf("session ids on the wire: %v", rec.seen)
	}
	for _, s := range rec.gets {
		if s != http.StatusMethodNotAllowed {
			t.Errorf("GET answered %d, want 405", s)
		}
	}
	rec.mu.Unlock()

	status, header, body := postMessage(t, b.url,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"Calculator_Add","arguments":{"a":1,"b":2}}}`,
		http.Header{"Mcp-Protocol-Version": {"2025-11-25"}})
	if status != http.StatusOK || header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("tools/call without initialize: %d session %q: %s", status, header.Get("Mcp-Session-Id"), body)
	}
	if !strings.Contains(body, `"id":7`) || !strings.Contains(body, `"structuredContent":{"sum":3}`) {
		t.Errorf("tools/call without initialize: %s", body)
	}
	status, header, body = httpDo(t, http.MethodGet, b.url, "", http.Header{"Mcp-Protocol-Version": {"2025-11-25"}})
	if status != http.StatusMethodNotAllowed || header.Get("Allow") != "POST" {
		t.Errorf("GET: %d Allow=%q %s", status, header.Get("Allow"), body)
	}
}

// -32600 for ids that are not strings or numbers and for batches, over
// streamable HTTP (400) and stdio, frames compared as data.
func TestE2EHardeningSessionsInvalidRequests(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Run("http", func(t *testing.T) {
		b := startBridge(t, ctx, "http", nil, nil)
		_, header, _ := postMessage(t, b.url, initializeBody, nil)
		session := http.Header{"Mcp-Session-Id": {header.Get("Mcp-Session-Id")}, "Mcp-Protocol-Version": {"2025-11-25"}}
		for _, tc := range wiretest.InvalidRequests {
			for _, h := range []http.Header{session, nil} {
				status, header, body := postMessage(t, b.url, tc.Frame, h)
				if status != http.StatusBadRequest || header.Get("Content-Type") != "application/json" {
					t.Errorf("%s: %d %q", tc.Name, status, header.Get("Content-Type"))
				}
				sameJSON(t, tc.Name, body, tc.Want)
			}
		}
	})
	t.Run("stdio", func(t *testing.T) {
		b := startBridge(t, ctx, "stdio", nil, nil)
		b.p.rpcCall(t, 1, "initialize", mustData(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"0"}}`), callTimeout)
		b.p.rpcNotify(t, "notifications/initialized", nil)
		for _, tc := range wiretest.InvalidRequests {
			if err := b.p.WriteLine(tc.Frame); err != nil {
				t.Fatal(err)
			}
			line, err := b.p.ReadLine(callTimeout)
			if err != nil {
				t.Fatalf("%s: no answer: %v", tc.Name, err)
			}
			sameJSON(t, tc.Name, line, tc.Want)
		}
		// Serving goes on.
		if got := b.p.rpcCall(t, 2, "ping", nil, callTimeout); string(got) != "{}" {
			t.Errorf("ping: %s", got)
		}
	})
}

// --body-timeout 1s: a body sent one byte every 300 ms is cut with 408 at
// the wire; a request with a normal body still works.
func TestE2EHardeningSessionsBodyTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := startBridge(t, ctx, "http", []string{"--body-timeout", "1s"}, nil)
	addr := strings.TrimSuffix(strings.TrimPrefix(b.url, "http://"), "/mcp")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(callTimeout))
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n",
		addr, len(initializeBody))
	stop := conntest.Trickle(conn, initializeBody, 300*time.Millisecond)
	defer stop()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || string(body) != "request timeout: the body was not received within 1s\n" {
		t.Errorf("slow body: %d %q", resp.StatusCode, body)
	}
	if status, header, body := postMessage(t, b.url, initializeBody, nil); status != http.StatusOK || header.Get("Mcp-Session-Id") == "" {
		t.Errorf("normal body: %d %s", status, body)
	}
	if !strings.Contains(b.p.Stderr(), "request body not received in time") {
		t.Errorf("no log line for the slow body:\n%s", b.p.Stderr())
	}
}

// --allowed-host: Host: proxy.example is 403 without the flag, 200 with it.
func TestE2EHardeningSessionsAllowedHost(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	do := func(url, host string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(initializeBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	plain := startBridge(t, ctx, "http", nil, nil)
	proxied := startBridge(t, ctx, "http", []string{"--allowed-host", "proxy.example", "--allowed-host", "other.example", "--allowed-host", "[fd00::1]", "--allowed-host", "port.example:8443"}, nil)
	if status, body := do(plain.url, "proxy.example"); status != http.StatusForbidden ||
		body != "forbidden: Host \"proxy.example\" is not a local host (see --allowed-host)\n" {
		t.Errorf("without the flag: %d %q", status, body)
	}
	for _, host := range []string{"proxy.example", "other.example:443", "[fd00::1]:8443", "port.example:8443"} {
		if status, body := do(proxied.url, host); status != http.StatusOK || !strings.Contains(body, `"protocolVersion":"2025-11-25"`) {
			t.Errorf("with the flag, Host %s: %d %s", host, status, body)
		}
	}
	for _, host := range []string{"evil.example", "port.example", "port.example:443"} {
		if status, _ := do(proxied.url, host); status != http.StatusForbidden {
			t.Errorf("Host %s with the flag: %d, want 403", host, status)
		}
	}
}

// Bad values of the new flags are usage errors (exit code 2) that say why.
func TestE2EHardeningSessionsFlagErrors(t *testing.T) {
	bin := buildMcpotc(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--transport", "sse", "--stateless"}, "--stateless needs --transport http"},
		{[]string{"--transport", "http", "--allowed-host", "proxy.example:http"}, `invalid value "proxy.example:http" for flag -allowed-host: want a host name such as mcp.example.com, or mcp.example.com:443 to admit one port only`},
		{[]string{"--transport", "http", "--allowed-host", "https://proxy.example"}, "want a host name such as mcp.example.com"},
		{[]string{"--transport", "http", "--allowed-host", "[not-ip]"}, "want a host name such as mcp.example.com"},
		{[]string{"--transport", "http", "--cors-origin", "app.example.com"}, `invalid value "app.example.com" for flag -cors-origin: use an origin such as https://app.example.com`},
		{[]string{"--cors-origin", "https://app.example.com"}, "--listen and --cors-origin need --transport http or sse"},
		{[]string{"--transport", "http", "--max-sessions", "-1"}, "--max-sessions must not be negative"},
		{[]string{"--transport", "http", "--session-idle-ttl", "-1s"}, "--session-idle-ttl must not be negative"},
		{[]string{"--transport", "http", "--body-timeout", "0s"}, "--body-timeout must be positive"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		cmd := exec.CommandContext(ctx, bin, append([]string{"serve-mcp", "--listen", "127.0.0.1:0"}, tc.args...)...)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: %v\n%s\nwant exit 2 and %q", tc.args, err, out, tc.want)
		}
	}
}
