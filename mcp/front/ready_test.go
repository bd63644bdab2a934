package front

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// GET /health and GET /ready: open probes; /ready answers HTTPOptions.Ready,
// else Health's answer, else 404 like any unknown path.
func TestHTTPProbes(t *testing.T) {
	health := func(context.Context) (bool, any) { return false, map[string]string{"status": "unavailable"} }
	ready := func(context.Context) (bool, any) { return true, map[string]string{"status": "ok"} }
	for _, tc := range []struct {
		name         string
		opts         HTTPOptions
		method, path string
		status       int
		body         string
	}{
		{"health", HTTPOptions{Health: health, BearerToken: "t"}, "GET", "/health", 503, `{"status":"unavailable"}` + "\n"},
		{"ready falls back to health", HTTPOptions{Health: health, BearerToken: "t"}, "GET", "/ready", 503, `{"status":"unavailable"}` + "\n"},
		{"ready", HTTPOptions{Health: health, Ready: ready, BearerToken: "t"}, "GET", "/ready", 200, `{"status":"ok"}` + "\n"},
		{"ready, POST", HTTPOptions{Ready: ready}, "POST", "/ready", 405, `{"message":"POST is not allowed on /ready; use GET"}` + "\n"},
		{"no probes", HTTPOptions{}, "GET", "/ready", 404, `{"message":"not found: GET /ready (this MCP server serves POST, GET and DELETE /mcp (streamable HTTP))"}` + "\n"},
	} {
		h := New("t", "0", nil).StreamableHTTPHandler(&tc.opts)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		if w.Code != tc.status || w.Body.String() != tc.body {
			t.Errorf("%s: %s %s = %d %q, want %d %q", tc.name, tc.method, tc.path, w.Code, w.Body, tc.status, tc.body)
		}
		if tc.status == http.StatusMethodNotAllowed && w.Header().Get("Allow") != "GET" {
			t.Errorf("%s: Allow %q", tc.name, w.Header().Get("Allow"))
		}
	}
}
