package front

import (
	"encoding/json"
	"net/http"
	"strings"
)

// NotFound answers a request for a path the MCP front does not serve: 404
// with a JSON body that names the request and the routes served, as the
// OTC front's 404 does, so that a wrong URL says what the right one is. A
// request for an OTC route (GET /tools, POST /tools/call) is also told
// that this is an MCP server.
func NotFound(w http.ResponseWriter, r *http.Request, routes []string) {
	msg := "not found: " + r.Method + " " + r.URL.Path + " (this MCP server serves " + strings.Join(routes, ", ") + ")"
	switch r.URL.Path {
	case "/tools", "/tools/call", "/call":
		msg += "; " + r.URL.Path + " is an OTC route: MCP clients use " + StreamablePath + ", and OTC clients call the OTC server whose tools this bridge serves"
	}
	b, _ := json.Marshal(map[string]string{"message": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write(append(b, '\n'))
}

// routes lists what the handler serves, for NotFound.
func (h *HTTPHandler) routes() []string {
	var out []string
	if h.serveMCP {
		out = append(out, "POST, GET and DELETE "+StreamablePath+" (streamable HTTP)")
	}
	if h.serveSSE {
		out = append(out, "GET "+SSEPath+" and POST "+SSEMessagePath+" (legacy SSE)")
	}
	if h.opts.Health != nil {
		out = append(out, "GET "+HealthPath)
	}
	if h.opts.Ready != nil || h.opts.Health != nil {
		out = append(out, "GET "+ReadyPath)
	}
	if a := h.opts.Resource; a != nil {
		out = append(out, "GET "+a.metadataPaths()[0])
	}
	return out
}
