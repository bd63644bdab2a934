package front

import (
	"context"
	"net/http"
	"net/netip"

	"github.com/mcpotc/mcpotc/internal/callid"
	"github.com/mcpotc/mcpotc/internal/httpguard"
	"github.com/mcpotc/mcpotc/internal/principal"
)

// Who sent a request (docs/mcp-front.md,
// Principals; docs/mapping.md, Forwarded context)
//
// Every request a Server serves carries its caller in its context: who the
// transport says sent it, what its sessions count against, and whether it
// is the chain peer — the one caller trusted to pass on another caller's
// OTC context (an mcpotc OTC front in front of this one, which forwards
// its own caller's user id, tokens and call_id in a tools/call's _meta):
//
//   - stdio: the process that started the front; it is the chain peer.
//   - HTTP with HTTPOptions.BearerToken: whoever holds the token (one
//     party, as the token is one); the chain peer.
//   - HTTP with HTTPOptions.Resource (OAuth): the token's issuer and
//     subject; the chain peer only when HTTPOptions.Forwarders names it.
//   - HTTP without either: the client's address; a chain peer only when
//     the connection's own peer (r.RemoteAddr) is a loopback address (a
//     process of this host, as stdio's parent is) that is not one of
//     HTTPOptions.TrustedProxies. An address X-Forwarded-For names is
//     never read for it: a client behind a trusted proxy that writes
//     "X-Forwarded-For: 127.0.0.1" is not the chain peer, and neither is
//     anything a trusted proxy relays (it relays others' requests). A
//     reverse proxy on the same host that is not a trusted proxy makes
//     every client local, so put a bearer token or OAuth in front of
//     such a listener.
//
// A call_id passed on from a caller is sent upstream as it is only when
// that caller is a chain peer and no other principal could be one
// (stdio, the bearer token's holder, loopback callers without
// authentication, or the single OAuth forwarder listed); otherwise it is
// scoped by the caller's principal (ScopedCallID), so two callers' keys
// never meet at the OTC server, which sees one caller: this front.

// callerKey holds a request's *caller in its context.
type callerKey struct{}

// caller is who sent a request, as its transport established it.
type caller struct {
	// principal names the caller: an OAuth identity's principal, "bearer"
	// (the token's holder), "stdio", or "addr:" and the client address.
	principal string
	// sessions is what its sessions count against (HTTPOptions.
	// MaxSessionsPerClient): the OAuth principal, else the client address.
	sessions string
	// forwarder: it is a chain peer.
	forwarder bool
	// sole: no other principal can be a chain peer.
	sole bool
}

// stdioCaller is the caller of every request served over stdio.
var stdioCaller = &caller{principal: principal.Stdio, sessions: principal.Stdio, forwarder: true, sole: true}

func callerFrom(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	return c
}

// Forwarder reports whether the current request comes from the chain
// peer: the caller trusted to pass on another caller's OTC context (see docs/mapping.md,
// Forwarded context). False when the request did
// not arrive through a Server transport.
func Forwarder(ctx context.Context) bool {
	c := callerFrom(ctx)
	return c != nil && c.forwarder
}

// Principal names the caller of the current request as the front binds
// what is the caller's: "stdio", "bearer" (the bearer token's holder), an
// OAuth token's issuer and subject ("iss:" the issuer's length ":" the
// issuer "|sub:" the subject), or "addr:" and the client's address. ""
// when the request did not arrive through a Server transport.
func Principal(ctx context.Context) string {
	if c := callerFrom(ctx); c != nil {
		return c.principal
	}
	return ""
}

// ScopedCallID is the call_id to send upstream for a call_id that the
// caller of the current request passed on: as it is when the caller is
// the only principal that can be a chain peer (callid.Pass: unless it has
// the shape of a scoped id, which is then scoped in its turn, so that the
// chain peer cannot send another caller's scoped id), else prefixed with
// a hash of the caller's principal ("p" and 24 hex digits, then "-"), so
// that two callers' call_ids never meet at the OTC server. The same caller and
// call_id always give the same id (an idempotency key stays one); the
// result is at most 256 bytes when callID is (a longer callID is replaced
// by its SHA-256 after the prefix).
func ScopedCallID(ctx context.Context, callID string) string {
	c := callerFrom(ctx)
	if c != nil && c.forwarder && c.sole {
		return callid.Pass(callID)
	}
	principal := "none"
	if c != nil {
		principal = c.principal
	}
	return callid.Scope(principal, callID)
}

// caller works out who sent r over HTTP, id being its verified token's
// identity (nil without HTTPOptions.Resource).
func (h *HTTPHandler) caller(r *http.Request, id *Identity) *caller {
	addr := h.clientAddr(r)
	// Chain-peer trust comes from the connection itself, never from
	// X-Forwarded-For (see above).
	peer := httpguard.PeerAddr(r.RemoteAddr)
	c := &caller{sessions: "addr:" + addrKey(addr)}
	switch {
	case id != nil:
		c.principal = id.principal()
		c.sessions = c.principal
		c.forwarder = h.forwarders[c.principal]
		c.sole = len(h.forwarders) == 1
	case h.opts.BearerToken != "":
		c.principal, c.forwarder, c.sole = principal.Bearer, true, true
	default:
		c.principal = c.sessions
		c.forwarder = peer.IsValid() && peer.IsLoopback() && !httpguard.Trusted(peer, h.opts.TrustedProxies)
		c.sole = true
	}
	return c
}

// clientAddr is the address of r's client: the connection's peer, or the
// client X-Forwarded-For names when that peer is one of
// HTTPOptions.TrustedProxies (httpguard.ClientAddr).
func (h *HTTPHandler) clientAddr(r *http.Request) netip.Addr {
	return httpguard.ClientAddr(r, h.opts.TrustedProxies)
}

// addrKey is what a client address counts as: an IPv4 address, or the
// /64 of an IPv6 address (one host is usually given a whole /64).
func addrKey(a netip.Addr) string {
	return principal.AddressKey(a)
}
