package bridge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/sample"
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
	f, err := NewMCPFront(context.Background(), []OTCUpstream{{Name: "sample", Client: client}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", f.Front().StreamableHTTPHandler(nil))
	sse := f.Front().SSEHandler(nil)
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
	h, err := sample.New(nil).Handler(opts)
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
	tests := []struct {
		name, url string
		want      string
	}{
		{"an MCP endpoint", mcpSrv.URL + "/mcp", "404 Not Found; " + mcpSrv.URL + "/mcp is an MCP server, not an OTC one: MCP hosts use it directly, and `mcpotc serve-otc --mcp " + mcpSrv.URL + "/mcp` serves it to OTC clients"},
		{"an MCP server's root", mcpSrv.URL, mcpSrv.URL + " is an MCP server's address (MCP answers at " + mcpSrv.URL + "/mcp), not an OTC one"},
		{"a legacy SSE endpoint", mcpSrv.URL + "/sse", mcpSrv.URL + "/sse is an MCP server, not an OTC one"},
		{"a wrong path", keyed.URL + "/v1", "is " + keyed.URL + "/v1 the OTC server's base URL? The bridge appends /tools and /tools/call to it"},
		{"no credentials", keyed.URL, "401 Unauthorized: Unauthorized: send the API key in the OXP-API-Key header or a bearer token; the OTC server refused the bridge's credentials: give them with api_key_env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, err := otc.NewClient(tt.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			f, err := NewMCPFront(context.Background(), []OTCUpstream{{Name: "u", Client: client}}, &MCPFrontOptions{Logger: zerolog.Nop()})
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
			f, err := NewOTCFront(context.Background(), []MCPUpstream{{Config: upstream.Config{Name: "u", URL: tt.url}}}, &OTCFrontOptions{Logger: zerolog.Nop()})
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
