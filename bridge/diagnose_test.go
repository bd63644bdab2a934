package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/otcsample"
)

// realMCPServer serves the MCP front (mcp-go's streamable HTTP at /mcp and
// legacy SSE at /sse) over the sample OTC toolkit: a real MCP server to point
// wrong URLs at.
func realMCPServer(t *testing.T) *httptest.Server {
	t.Helper()
	otcSrv := realOTCServer(t, nil)
	client, err := otc.NewClient(otcSrv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewMCPFront(context.Background(), []OTCServer{{Name: "sample", Client: client}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", f.Server().StreamableHTTPHandler(nil))
	sse := f.Server().SSEHandler(nil)
	mux.Handle("/sse", sse)
	mux.Handle("/message", sse)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sse.Shutdown(ctx, srv.Config)
		srv.Close()
	})
	return srv
}

// realOTCServer serves the sample OTC toolkit (with an API key when opts
// says so).
func realOTCServer(t *testing.T, opts *otc.Options) *httptest.Server {
	t.Helper()
	h, err := otcsample.New(nil).Handler(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TestMCPFrontExplainsWrongOTCURLs points the MCP front's OTC upstream at
// the wrong things and checks what its listing error says to do.
func TestMCPFrontExplainsWrongOTCURLs(t *testing.T) {
	mcpSrv := realMCPServer(t)
	keyed := realOTCServer(t, &otc.Options{APIKey: "k"})
	open := realOTCServer(t, nil)
	// A loopback port nothing listens on (it was free a moment ago).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	tests := []struct {
		name, url string
		want      string
	}{
		{"an MCP endpoint", mcpSrv.URL + "/mcp", "404 Not Found; " + mcpSrv.URL + "/mcp is an MCP server, not an OTC one: MCP hosts use it directly, and `mcpotc serve-otc --mcp " + mcpSrv.URL + "/mcp` serves it to OTC clients"},
		{"an MCP server's root", mcpSrv.URL, mcpSrv.URL + " is an MCP server's address (MCP answers at " + mcpSrv.URL + "/mcp), not an OTC one"},
		{"a legacy SSE endpoint", mcpSrv.URL + "/sse", mcpSrv.URL + "/sse is an MCP server, not an OTC one"},
		{"a wrong path", keyed.URL + "/v1", "is " + keyed.URL + "/v1 the OTC server's base URL? The bridge appends /tools and /tools/call to it, and no shorter path of it answers GET /tools"},
		{"a path below the base URL", open.URL + "/api", "404 Not Found: not found: GET /api/tools (OTC serves GET /health, GET /ready, GET /tools, POST /tools/call); the OTC server's base URL is " + open.URL + " (it answers GET " + open.URL + "/tools): give that to --otc (url in the config file)"},
		{"two segments below", open.URL + "/api/v1/?q=1", "the OTC server's base URL is " + open.URL + " (it answers GET " + open.URL + "/tools)"},
		{"nothing listening", closed, "connection refused; nothing listens at " + closed + ": start the OTC server there (the built-in sample: `mcpotc sample-otc`), or give its URL to --otc"},
		{"no credentials", keyed.URL, "401 Unauthorized: Unauthorized: send the API key in the OXP-API-Key header or a bearer token; the OTC server refused the bridge's credentials: give them with api_key_env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, err := otc.NewClient(tt.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			f, err := NewMCPFront(context.Background(), []OTCServer{{Name: "u", Client: client}}, &MCPFrontOptions{Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			got := f.upstreams[0].err
			if got == nil || !strings.Contains(got.Error(), tt.want) {
				t.Errorf("listing error = %v\nwant it to contain %q", got, tt.want)
			}
		})
	}
}

// TestOTCFrontExplainsWrongMCPURLs points the OTC front's MCP upstream at
// the wrong things and checks the reason /health gives.
func TestOTCFrontExplainsWrongMCPURLs(t *testing.T) {
	mcpSrv := realMCPServer(t)
	otcSrv := realOTCServer(t, nil)
	tests := []struct {
		name, url string
		want      string
	}{
		{"an MCP server's root", mcpSrv.URL, "POST " + mcpSrv.URL + " answered initialize with HTTP 404: MCP answers at " + mcpSrv.URL + "/mcp: use that URL"},
		{"an OTC server", otcSrv.URL, otcSrv.URL + " is an OTC tool server, not an MCP one: OTC clients call it directly, and `mcpotc serve-mcp --otc " + otcSrv.URL + "` serves it to MCP clients"},
		{"nothing known", otcSrv.URL + "/nothing", "is it the server's MCP endpoint? Streamable HTTP servers usually answer at /mcp, legacy SSE servers at /sse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewOTCFront(context.Background(), []MCPServer{{Config: upstream.Config{Name: "u", URL: tt.url}}}, &OTCFrontOptions{Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = f.Close(context.Background()) })
			deadline := time.Now().Add(10 * time.Second)
			var reason string
			for time.Now().Before(deadline) {
				_, body := f.health(context.Background())
				reason = body.(map[string]any)["upstreams"].(map[string]string)["u"]
				if strings.Contains(reason, "HTTP") {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !strings.Contains(reason, tt.want) {
				t.Errorf("reason = %q\nwant it to contain %q", reason, tt.want)
			}
		})
	}
}

// TestMCPFrontSaysWhenAnUpstreamServesNothing: an upstream that was never
// listed serves no tool, and the log says so at error level (with the URL
// and what to do); one that was listed and then fails keeps its tools, at
// warn.
func TestMCPFrontSaysWhenAnUpstreamServesNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	lines := func(buf *bytes.Buffer) []map[string]any {
		var out []map[string]any
		for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
			var m map[string]any
			if json.Unmarshal(l, &m) == nil {
				out = append(out, m)
			}
		}
		return out
	}

	var buf bytes.Buffer
	client, err := otc.NewClient(dead, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewMCPFront(context.Background(), []OTCServer{{Name: "u", Client: client}}, &MCPFrontOptions{Logger: zerolog.New(&buf)})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.upstreams[0].tools); n != 0 {
		t.Fatalf("%d tools from a dead upstream", n)
	}
	found := false
	for _, l := range lines(&buf) {
		if l["upstream"] == "u" && strings.Contains(l["message"].(string), "catalog unavailable") {
			found = true
			want := "upstream catalog unavailable: none of its tools is served until it answers GET /tools (asked again every 30s)"
			if l["level"] != "error" || l["message"] != want || l["url"] != dead || !strings.Contains(l["error"].(string), "nothing listens at "+dead) {
				t.Errorf("the line about a dead upstream: %v\nwant level error, message %q, url %s, and an error saying nothing listens there", l, want, dead)
			}
		}
	}
	if !found {
		t.Errorf("no log line about the dead upstream: %s", buf.String())
	}

	// Listed once, then down: its tools are kept, and the line says so.
	srv := realOTCServer(t, nil)
	buf.Reset()
	client, err = otc.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err = NewMCPFront(context.Background(), []OTCServer{{Name: "u", Client: client}}, &MCPFrontOptions{Logger: zerolog.New(&buf)})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if err := f.refresh(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	found = false
	for _, l := range lines(&buf) {
		if l["upstream"] == "u" && strings.Contains(l["message"].(string), "catalog unavailable") {
			found = true
			if l["level"] != "warn" || l["message"] != "upstream catalog unavailable; keeping its last tools" {
				t.Errorf("the line about an upstream that was listed: %v", l)
			}
		}
	}
	if !found || len(f.upstreams[0].tools) == 0 {
		t.Errorf("an upstream listed once, then down: %d tools kept; log %s", len(f.upstreams[0].tools), buf.String())
	}
}
