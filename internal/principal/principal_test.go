package principal

import (
	"net/netip"
	"testing"
)

func TestAddress(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.1":            "addr:192.0.2.1",
		"::ffff:192.0.2.1":     "addr:192.0.2.1",
		"2001:db8:1:2:3:4:5:6": "addr:2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1": "addr:2001:db8:1:2::/64",
		"2001:db8:1:3::1":      "addr:2001:db8:1:3::/64",
		"fe80::1%eth0":         "addr:fe80::/64",
	} {
		if got := Address(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Address(%s) = %q, want %q", addr, got, want)
		}
		if got := AddressOf(addr); got != want {
			t.Errorf("AddressOf(%s) = %q, want %q", addr, got, want)
		}
	}
	if got := Address(netip.Addr{}); got != "addr:unknown" {
		t.Errorf("Address(zero) = %q", got)
	}
	if got := AddressOf("not an address"); got != "addr:unknown" {
		t.Errorf("AddressOf(text) = %q", got)
	}
}

// No issuer and subject (or client) read as another pair, whatever they
// hold; the same pair is always the same name.
func TestTokenUnambiguous(t *testing.T) {
	if Token("a|sub:b", "c") == Token("a", "b|sub:c") {
		t.Error("Token: two issuer/subject pairs read alike")
	}
	if Token("https://as-a.example.com", "u1") == Token("https://as-b.example.com", "u1") {
		t.Error("Token: a subject of two issuers is one name")
	}
	if Token("i", "client:x") == TokenClient("i", "x") || Token("i|client:x", "") == TokenClient("i", "x") {
		t.Error("a subject reads as a client")
	}
	if Token("https://as.example.com", "u1") != "iss:22:https://as.example.com|sub:u1" {
		t.Errorf("Token = %q", Token("https://as.example.com", "u1"))
	}
	for _, n := range []string{Token("", ""), TokenClient("", ""), APIKey, Bearer, Stdio, Local} {
		if n == Address(netip.MustParseAddr("192.0.2.1")) || n == Address(netip.Addr{}) {
			t.Errorf("%q reads as an address", n)
		}
	}
}
