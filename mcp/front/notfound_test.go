package front

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A path the MCP front does not serve is 404 with a JSON body naming the
// request and the routes served (an OTC route also says this is an MCP
// server); the routes themselves answer as before, and a request without
// the bearer token is still 401 first.
func TestNotFoundListsRoutes(t *testing.T) {
	health := func(context.Context) (bool, any) { return true, map[string]string{"status": "ok"} }
	f := New("t", "0", nil)
	for _, tc := range []struct {
		name         string
		h            http.Handler
		method, path string
		header       map[string]string
		status       int
		body         string
	}{
		{"the root, streamable HTTP with probes", f.StreamableHTTPHandler(&HTTPOptions{Health: health}), "GET", "/", nil, 404,
			`{"message":"not found: GET / (this MCP server serves POST, GET and DELETE /mcp (streamable HTTP), GET /health, GET /ready)"}`},
		{"an OTC route", f.StreamableHTTPHandler(&HTTPOptions{Health: health}), "GET", "/tools", nil, 404,
			`{"message":"not found: GET /tools (this MCP server serves POST, GET and DELETE /mcp (streamable HTTP), GET /health, GET /ready); /tools is an OTC route: MCP clients use /mcp, and OTC clients call the OTC server whose tools this bridge serves"}`},
		{"both transports", f.HTTPHandler(nil), "POST", "/tools/call", nil, 404,
			`{"message":"not found: POST /tools/call (this MCP server serves POST, GET and DELETE /mcp (streamable HTTP), GET /sse and POST /message (legacy SSE)); /tools/call is an OTC route: MCP clients use /mcp, and OTC clients call the OTC server whose tools this bridge serves"}`},
		{"SSE only", f.SSEHandler(nil), "GET", "/mcp", nil, 404,
			`{"message":"not found: GET /mcp (this MCP server serves GET /sse and POST /message (legacy SSE))"}`},
		{"no token: 401 before any 404", f.StreamableHTTPHandler(&HTTPOptions{BearerToken: "secret"}), "GET", "/nowhere", nil, 401, "unauthorized"},
		{"with the token", f.StreamableHTTPHandler(&HTTPOptions{BearerToken: "secret"}), "GET", "/nowhere", map[string]string{"Authorization": "Bearer secret"}, 404,
			`{"message":"not found: GET /nowhere (this MCP server serves POST, GET and DELETE /mcp (streamable HTTP))"}`},
		{"the MCP route still answers", f.StreamableHTTPHandler(nil), "POST", "/mcp",
			map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}, 200, `"protocolVersion":"2025-11-25"`},
	} {
		var body *strings.Reader
		if tc.path == "/mcp" && tc.method == "POST" {
			body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`)
		} else {
			body = strings.NewReader("")
		}
		r := httptest.NewRequest(tc.method, tc.path, body)
		for k, v := range tc.header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		tc.h.ServeHTTP(w, r)
		got := strings.TrimSpace(w.Body.String())
		ok := w.Code == tc.status && got == tc.body
		if tc.status != 404 {
			ok = w.Code == tc.status && strings.Contains(got, tc.body)
		} else if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.name, ct)
		}
		if !ok {
			t.Errorf("%s: %s %s = %d %s\nwant %d %s", tc.name, tc.method, tc.path, w.Code, got, tc.status, tc.body)
		}
	}
}
