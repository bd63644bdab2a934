package front

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Who is the chain peer (Forwarder), and how a passed-on call_id is sent
// (ScopedCallID), per transport: stdio and the bearer token's holder are
// the peer; behind OAuth only the listed forwarders are; without
// authentication only loopback clients are. A call_id goes as it is only
// from a peer no other principal could also be; otherwise it is scoped by
// the caller's principal, the same for the same caller, different for
// another, and at most 256 bytes.
func TestFrontCallerForwarding(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	auth := twoIssuerAuth(issuerA, issuerB)
	oneForwarder := f.newHTTPHandler(&HTTPOptions{Resource: auth, Forwarders: []Identity{{Issuer: issuerB, Subject: "otc-front"}}}, true, false)
	twoForwarders := f.newHTTPHandler(&HTTPOptions{Resource: auth, Forwarders: []Identity{{Issuer: issuerB, Subject: "otc-front"}, {Issuer: issuerA, Subject: "otc-2"}}}, true, false)
	bearerH := f.newHTTPHandler(&HTTPOptions{BearerToken: "s3cret"}, true, false)
	open := f.newHTTPHandler(nil, true, false)
	req := func(remote string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.RemoteAddr = remote
		return r
	}
	ctxOf := func(c *caller) context.Context { return context.WithValue(context.Background(), callerKey{}, c) }
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		forwarder bool
		asIs      bool
	}{
		{"stdio", ctxOf(stdioCaller), true, true},
		{"the bearer token's holder", ctxOf(bearerH.caller(req("192.0.2.1:1"), nil)), true, true},
		{"the one OAuth forwarder", ctxOf(oneForwarder.caller(req("192.0.2.1:1"), &Identity{Issuer: issuerB, Subject: "otc-front"})), true, true},
		{"its subject at the other issuer", ctxOf(oneForwarder.caller(req("192.0.2.1:1"), &Identity{Issuer: issuerA, Subject: "otc-front"})), false, false},
		{"an OAuth user", ctxOf(oneForwarder.caller(req("127.0.0.1:1"), &Identity{Issuer: issuerA, Subject: "u1"})), false, false},
		{"one of two OAuth forwarders", ctxOf(twoForwarders.caller(req("192.0.2.1:1"), &Identity{Issuer: issuerA, Subject: "otc-2"})), true, false},
		{"no authentication, loopback", ctxOf(open.caller(req("127.0.0.1:1"), nil)), true, true},
		{"no authentication, ::1", ctxOf(open.caller(req("[::1]:1"), nil)), true, true},
		{"no authentication, another address", ctxOf(open.caller(req("192.0.2.1:1"), nil)), false, false},
		{"not through a front", context.Background(), false, false},
	} {
		if got := Forwarder(tc.ctx); got != tc.forwarder {
			t.Errorf("%s: Forwarder = %t, want %t", tc.name, got, tc.forwarder)
		}
		id := ScopedCallID(tc.ctx, "call-1")
		if (id == "call-1") != tc.asIs {
			t.Errorf("%s: ScopedCallID = %q, as it is: %t, want %t", tc.name, id, id == "call-1", tc.asIs)
		}
		if !tc.asIs && (!strings.HasSuffix(id, "-call-1") || id != ScopedCallID(tc.ctx, "call-1")) {
			t.Errorf("%s: ScopedCallID = %q, want a stable prefix before the call_id", tc.name, id)
		}
		if long := ScopedCallID(tc.ctx, strings.Repeat("x", 256)); len(long) > 256 {
			t.Errorf("%s: a 256-byte call_id scoped to %d bytes", tc.name, len(long))
		}
	}
	alice := ctxOf(oneForwarder.caller(req("127.0.0.1:1"), &Identity{Issuer: issuerA, Subject: "alice"}))
	bob := ctxOf(oneForwarder.caller(req("127.0.0.1:1"), &Identity{Issuer: issuerA, Subject: "bob"}))
	aliceB := ctxOf(oneForwarder.caller(req("127.0.0.1:1"), &Identity{Issuer: issuerB, Subject: "alice"}))
	if a, b, c := ScopedCallID(alice, "k"), ScopedCallID(bob, "k"), ScopedCallID(aliceB, "k"); a == b || a == c || b == c {
		t.Errorf("two callers' call_ids meet: %q %q %q", a, b, c)
	}
	if a, b := ScopedCallID(alice, strings.Repeat("x", 300)), ScopedCallID(alice, strings.Repeat("x", 299)); a == b || len(a) > 256 {
		t.Errorf("long call_ids: %q %q", a, b)
	}
}
