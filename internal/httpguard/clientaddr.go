package httpguard

import (
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddr is the address of r's client: the connection's peer or, when
// that peer is in trusted (reverse proxies), the last address of
// X-Forwarded-For that is not a trusted proxy, read from the right, as each
// proxy appends the address it received the request from. A malformed
// entry stops the walk: the proxy that passed it on is the client then.
// Without trusted, X-Forwarded-For is never read: any client can write it.
// The zero Addr when the peer is no IP address (a pipe).
func ClientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	addr := PeerAddr(r.RemoteAddr)
	if len(trusted) == 0 || !Trusted(addr, trusted) {
		return addr
	}
	values := r.Header.Values("X-Forwarded-For")
	for i := len(values) - 1; i >= 0; i-- {
		hops := strings.Split(values[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			hop := PeerAddr(strings.TrimSpace(hops[j]))
			if !hop.IsValid() {
				return addr
			}
			addr = hop
			if !Trusted(addr, trusted) {
				return addr
			}
		}
	}
	return addr
}

// ClientHost is ClientAddr as text, or, when the peer is no IP address,
// the host of r.RemoteAddr as written: a caller's address in a principal
// or an audit line.
func ClientHost(r *http.Request, trusted []netip.Prefix) string {
	if a := ClientAddr(r, trusted); a.IsValid() {
		return a.String()
	}
	return HostOnly(r.RemoteAddr)
}

// Trusted reports whether a is in one of the prefixes.
func Trusted(a netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if a.IsValid() && p.Contains(a) {
			return true
		}
	}
	return false
}

// PeerAddr reads an address, with or without a port; an IPv4-mapped IPv6
// address is read as IPv4, and a zone is dropped. The zero Addr when s is
// none.
func PeerAddr(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().WithZone("").Unmap()
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}
	}
	return a.WithZone("").Unmap()
}
