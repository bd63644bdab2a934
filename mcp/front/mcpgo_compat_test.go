package front

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// Canaries of the streamable HTTP workarounds in mcpgo_compat.go: each
// asserts, of a bare mcp-go v1.2.1 server, the behaviour its workaround
// exists for. When one fails, mcp-go has changed: the workaround may go.
// (The other canaries: TestFrontCanaryMCPGoServesInvalidIDs,
// TestFrontCanaryMCPGoKeepsEndedSessionIDs,
// TestFrontCanaryMCPGoSweeperLeavesStreamOpen.)

func canaryServer(t *testing.T, opts ...mcpserver.StreamableHTTPOption) string {
	t.Helper()
	s := mcpserver.NewMCPServer("canary", "1.0.0", mcpserver.WithToolCapabilities(true))
	opts = append(opts, mcpserver.WithDisableLocalhostProtection(true))
	srv := httptest.NewServer(mcpserver.NewStreamableHTTPServer(s, opts...))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL + StreamablePath
}

// canaryDo sends one request; a GET that opens a stream is answered as
// soon as its headers are in (the stream is then closed).
func canaryDo(t *testing.T, method, url, body string, header http.Header) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && method == http.MethodGet {
		return resp.StatusCode, "(a stream)"
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// rejectSession: mcp-go opens a standalone stream for a GET without
// Mcp-Session-Id, and for one that names a session it never made.
func TestFrontCanaryMCPGoStreamsForAnySession(t *testing.T) {
	t.Parallel()
	url := canaryServer(t, mcpserver.WithStateful(true))
	for _, h := range []http.Header{nil, {"Mcp-Session-Id": {"never-made"}}} {
		if status, body := canaryDo(t, http.MethodGet, url, "", h); status != http.StatusOK || body != "(a stream)" {
			t.Errorf("GET with %v: mcp-go now answers %d %s: reconsider rejectSession", h, status, body)
		}
	}
}

// serveStreamable: a stateless mcp-go server opens a standalone stream
// too, one that belongs to no session.
func TestFrontCanaryMCPGoStatelessStream(t *testing.T) {
	t.Parallel()
	url := canaryServer(t, mcpserver.WithStateLess(true))
	if status, body := canaryDo(t, http.MethodGet, url, "", nil); status != http.StatusOK || body != "(a stream)" {
		t.Errorf("stateless GET: mcp-go now answers %d %s: reconsider the 405 in serveStreamable", status, body)
	}
}

// preparePost: mcp-go answers a request without Mcp-Session-Id 404, which
// tells a client that its session ended, where 400 is due.
func TestFrontCanaryMCPGoSessionlessRequest404(t *testing.T) {
	t.Parallel()
	url := canaryServer(t, mcpserver.WithStateful(true))
	status, body := canaryDo(t, http.MethodPost, url, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		http.Header{"Mcp-Protocol-Version": {"2025-11-25"}})
	if status != http.StatusNotFound {
		t.Errorf("tools/list without a session: mcp-go now answers %d %s: reconsider preparePost", status, body)
	}
}

// fillNotificationVersion: mcp-go asks a 2026-07-28 notification for the
// _meta protocol version that the protocol asks of requests only.
func TestFrontCanaryMCPGoNotificationNeedsMetaVersion(t *testing.T) {
	t.Parallel()
	url := canaryServer(t)
	header := http.Header{"Mcp-Protocol-Version": {mcpgo.ProtocolVersion20260728}, "Mcp-Method": {"notifications/cancelled"}}
	status, body := canaryDo(t, http.MethodPost, url, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, header)
	if status != http.StatusBadRequest {
		t.Errorf("notification without _meta version: mcp-go now answers %d %s: reconsider fillNotificationVersion", status, body)
	}
}

// Canary for mcp-go v1.2.1 (requestid.go): a tool handler gets no JSON-RPC
// id, but its request shares Params.Meta with the one BeforeCallTool saw,
// through which the front hands it the id. Also: the entry is gone once
// the call ended, with a result or an error.
func TestFrontCanaryMCPGoHandlerSharesMeta(t *testing.T) {
	f := New("canary", "1.0.0", nil)
	var got []any
	f.Server().AddTool(mcpgo.NewTool("id"), func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		id, ok := f.RequestID(req)
		got = append(got, id, ok)
		if req.GetString("fail", "") != "" {
			return nil, errors.New("failed")
		}
		return mcpgo.NewToolResultText("ok"), nil
	})
	ctx := context.Background()
	f.Server().HandleMessage(ctx, request(1, "initialize", initParams))
	f.Server().HandleMessage(ctx, request("call-7", "tools/call", `{"name":"id","arguments":{}}`))
	f.Server().HandleMessage(ctx, request(8, "tools/call", `{"name":"id","arguments":{"fail":"yes"},"_meta":{"progressToken":"p"}}`))
	if fmt.Sprint(got) != "[call-7 true 8 true]" {
		t.Errorf("ids seen by the handler: %v, want [call-7 true 8 true]", got)
	}
	n := 0
	f.ids.m.Range(func(any, any) bool { n++; return true })
	if n != 0 {
		t.Errorf("%d ids kept after the calls ended", n)
	}
}
