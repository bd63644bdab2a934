package bridge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcpotc/mcpotc/internal/httpguard"
)

// CORS is off by default: a browser page of another origin cannot read
// either front's answers. Each --cors-origin admits one origin (docs/operations.md,
// CORS): its preflight is answered here, before any credential is asked
// for (a browser sends none with it), and its requests get the headers
// that let the page read the answer, including those a client needs from
// it (Mcp-Session-Id, WWW-Authenticate, …). Credentials go in
// Authorization or an API key header, never in cookies, so
// Access-Control-Allow-Credentials is never sent. The fronts' DNS-rebinding
// check admits the same origins (front.HTTPOptions.AllowedOrigins,
// otc.Options.AllowedOrigins).

// corsExposed are the response headers a page may read.
const corsExposed = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate, Retry-After, OXP-Version, Location"

// corsMethods are the methods the fronts serve.
const corsMethods = "GET, POST, DELETE"

// corsMaxAge is how long, in seconds, a browser may cache a preflight.
const corsMaxAge = "600"

// maxCORSRequestHeaders bounds Access-Control-Request-Headers echoed back.
const maxCORSRequestHeaders = 1024

// CORS wraps h with CORS for origins; with none it returns h unchanged.
func CORS(origins []string, h http.Handler) http.Handler {
	if len(origins) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Add("Vary", "Origin")
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if !httpguard.OriginListed(origins, origin) {
			if preflight {
				writeJSONError(w, http.StatusForbidden, fmt.Sprintf("forbidden: Origin %q is not admitted (see --cors-origin)", origin))
				return
			}
			h.ServeHTTP(w, r) // no CORS headers: the browser keeps the answer from the page
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", origin)
		if !preflight {
			w.Header().Set("Access-Control-Expose-Headers", corsExposed)
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Add("Vary", "Access-Control-Request-Method")
		w.Header().Add("Vary", "Access-Control-Request-Headers")
		w.Header().Set("Access-Control-Allow-Methods", corsMethods)
		if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
			if !headerNames(req) {
				writeJSONError(w, http.StatusBadRequest, "bad Access-Control-Request-Headers")
				return
			}
			w.Header().Set("Access-Control-Allow-Headers", req)
		}
		w.Header().Set("Access-Control-Max-Age", corsMaxAge)
		w.WriteHeader(http.StatusNoContent)
	})
}

// headerNames tells whether s is a bounded, comma-separated list of HTTP
// header names (RFC 9110 tokens), safe to echo.
func headerNames(s string) bool {
	if len(s) > maxCORSRequestHeaders {
		return false
	}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			return false
		}
		for _, c := range name {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
				return false
			}
		}
	}
	return true
}

// writeJSONError answers status with {"message": msg}, the shape both
// fronts use for HTTP-level refusals.
func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}
