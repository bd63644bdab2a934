package otc

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// rejectRebinding answers 403 to a request that arrived on a loopback
// address but names a host that is not local in Host or Origin: a web page
// that rebound its own name to 127.0.0.1 (DNS rebinding) must not reach the
// tools of a server that trusts its loopback listener. Local is localhost,
// 127.0.0.0/8 and ::1 with any port, and Options.AllowedHosts. An absent
// Origin is fine (not a browser, or a same-origin GET). The MCP front
// applies the same rule.
func (h *Handler) rejectRebinding(w http.ResponseWriter, r *http.Request) bool {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil || !isLoopback(local.String()) {
		return false
	}
	if !h.localHost(r.Host) {
		writeJSON(w, http.StatusForbidden, map[string]string{"message": fmt.Sprintf("forbidden: Host %q is not a loopback host (see --allowed-host)", r.Host)})
		return true
	}
	if origin := r.Header.Get("Origin"); origin != "" && !OriginListed(h.opts.AllowedOrigins, origin) {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !h.localHost(u.Host) {
			writeJSON(w, http.StatusForbidden, map[string]string{"message": fmt.Sprintf("forbidden: Origin %q is not a loopback origin (see --allowed-host)", origin)})
			return true
		}
	}
	return false
}

// OriginListed reports whether origin is one of origins (scheme, host and
// port, compared case-insensitively; a trailing slash ignored) or origins
// holds "*". The MCP front's HTTP handler applies the same rule.
func OriginListed(origins []string, origin string) bool {
	origin = strings.TrimSuffix(origin, "/")
	for _, o := range origins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

// localHost reports whether hostport (a host with or without a port) is a
// loopback host or one of Options.AllowedHosts (a name matches with any
// port; a name with a port only that port), case-insensitively.
func (h *Handler) localHost(hostport string) bool {
	if isLoopback(hostport) {
		return true
	}
	host := hostOnly(hostport)
	for _, a := range h.opts.AllowedHosts {
		if _, _, err := net.SplitHostPort(a); err == nil {
			if strings.EqualFold(a, hostport) {
				return true
			}
		} else if strings.EqualFold(strings.Trim(a, "[]"), host) {
			return true
		}
	}
	return false
}

// hostOnly is hostport without its port (and IPv6 brackets).
func hostOnly(hostport string) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	return strings.Trim(host, "[]")
}

// isLoopback reports whether hostport is localhost or a loopback IP
// address, with or without a port.
func isLoopback(hostport string) bool {
	host := hostOnly(hostport)
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
