package httpguard

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Rebinding is the DNS-rebinding guard of a server that trusts its
// loopback listener: a web page that rebound its own name to 127.0.0.1
// must not reach the server's tools. A request that arrived on a loopback
// address must name a local host in Host and, when it has an Origin, a
// local origin or one of the allowed origins. Local is localhost,
// 127.0.0.0/8 and ::1 with any port, and the allowed hosts. An absent
// Origin is fine (not a browser, or a same-origin GET). A request that
// arrived on any other address is not checked. The zero value admits
// loopback hosts only. Each front words its own 403.
type Rebinding struct {
	hosts   map[string]bool // allowed hosts, lower case: "name" (any port) or "name:port"
	origins []string
}

// NewRebinding returns the guard for allowedHosts (host names, or
// name:port to admit that port only; an IPv6 address in brackets) and
// allowedOrigins (browser origins that may call the server, or "*": see
// OriginListed).
func NewRebinding(allowedHosts, allowedOrigins []string) *Rebinding {
	g := &Rebinding{hosts: make(map[string]bool, len(allowedHosts)), origins: allowedOrigins}
	for _, name := range allowedHosts {
		if _, _, err := net.SplitHostPort(name); err == nil {
			g.hosts[strings.ToLower(name)] = true // only with this port
		} else {
			g.hosts[strings.ToLower(strings.Trim(name, "[]"))] = true
		}
	}
	return g
}

// Refusal is what a request named that the guard refuses: Header is
// "Host" or "Origin", Value what it held.
type Refusal struct {
	Header, Value string
}

// Noun names what was refused in an answer's text: "host" or "origin".
func (r *Refusal) Noun() string {
	if r.Header == "Origin" {
		return "origin"
	}
	return "host"
}

// Check returns nil when r may pass, else what it named that is not
// local. See Rebinding.
func (g *Rebinding) Check(r *http.Request) *Refusal {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil || !Loopback(local.String()) {
		return nil
	}
	if !g.LocalHost(r.Host) {
		return &Refusal{Header: "Host", Value: r.Host}
	}
	if origin := r.Header.Get("Origin"); origin != "" && !OriginListed(g.origins, origin) {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !g.LocalHost(u.Host) {
			return &Refusal{Header: "Origin", Value: origin}
		}
	}
	return nil
}

// LocalHost reports whether hostport (a host with or without a port) is a
// loopback host or an allowed host: a name matches with any port, a
// name:port only that port, case-insensitively.
func (g *Rebinding) LocalHost(hostport string) bool {
	if Loopback(hostport) {
		return true
	}
	host := strings.ToLower(HostOnly(hostport))
	return host != "" && (g.hosts[host] || g.hosts[strings.ToLower(hostport)])
}

// OriginListed reports whether origin is one of origins (scheme, host and
// port, compared case-insensitively; a trailing slash ignored) or origins
// holds "*".
func OriginListed(origins []string, origin string) bool {
	origin = strings.TrimSuffix(origin, "/")
	for _, o := range origins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

// Loopback reports whether hostport (a host with or without a port) is
// localhost or a loopback IP address.
func Loopback(hostport string) bool {
	host := HostOnly(hostport)
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// HostOnly is hostport without its port and IPv6 brackets: the host of a
// Host header or of a RemoteAddr.
func HostOnly(hostport string) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	return strings.Trim(host, "[]")
}
