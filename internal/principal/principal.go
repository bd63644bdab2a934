// Package principal names who calls, once for both fronts (docs/operations.md,
// Operator controls, "Principals"): every per-caller bound and record —
// rate limits, call_id and idempotency_key scopes, held calls, kept
// resume states, pending authorizations, the audit log's principal and
// its share — takes its key from these functions, so that a caller is
// one principal everywhere and two callers are never one.
//
//   - a token's caller (an OAuth access token, a JWT): its issuer and
//     subject (Token), or its issuer and client when it names no subject
//     (TokenClient), length-prefixed so that no pair reads as another;
//   - the API key's holder (APIKey), the bearer token's holder (Bearer),
//     the process that started a stdio front (Stdio): one principal each;
//   - a caller that did not authenticate: its client address, an IPv6
//     address by its /64 (Address).
package principal

import (
	"net/netip"
	"strconv"
)

// The principals that are one party each.
const (
	// APIKey is the holder of serve-otc's API key (there is one key).
	APIKey = "api-key"
	// Bearer is the holder of serve-mcp's bearer token.
	Bearer = "bearer"
	// Stdio is the process that started a front over stdio.
	Stdio = "stdio"
	// Local is a request served in process, through no transport.
	Local = "local"
)

// Token names a token's caller by its issuer and subject, the issuer
// length-prefixed so that no issuer and subject read as another pair,
// whatever they contain: "iss:" the issuer's length ":" the issuer
// "|sub:" the subject. A subject of two issuers is two principals.
func Token(issuer, subject string) string {
	return issuerPart(issuer) + "|sub:" + subject
}

// TokenClient names the caller of a token that has no subject by its
// issuer and client: "iss:" the issuer's length ":" the issuer "|client:"
// the client id.
func TokenClient(issuer, clientID string) string {
	return issuerPart(issuer) + "|client:" + clientID
}

func issuerPart(issuer string) string {
	return "iss:" + strconv.Itoa(len(issuer)) + ":" + issuer
}

// Address names a caller that did not authenticate by its client
// address: "addr:" and an IPv4 address, or the /64 of an IPv6 address
// (one host is usually given a whole /64, and could otherwise take a
// fresh principal per address); "addr:unknown" when there is none.
func Address(a netip.Addr) string {
	return "addr:" + AddressKey(a)
}

// AddressKey is Address without its "addr:" prefix: what a client address
// counts as.
func AddressKey(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return "unknown"
	case a.Is4():
		return a.String()
	}
	p, _ := a.WithZone("").Prefix(64)
	return p.String()
}

// AddressOf is Address of an address written as text (an IP address, with
// or without an IPv6 zone); "addr:unknown" when it is not one.
func AddressOf(s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return Address(netip.Addr{})
	}
	return Address(a)
}
