package httpguard

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// ClientAddr: X-Forwarded-For is ignored unless the peer is a trusted
// proxy; then the rightmost address that is not one is the client (over
// several header fields, the last field's last entry first), and a
// malformed entry stops the walk.
func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, tc := range []struct {
		proxies []netip.Prefix
		remote  string
		xff     []string
		want    string
	}{
		{nil, "192.0.2.1:1234", []string{"203.0.113.9"}, "192.0.2.1"},
		{trusted, "192.0.2.1:1234", []string{"203.0.113.9"}, "192.0.2.1"}, // not from a proxy: a forgery
		{trusted, "10.1.2.3:1234", []string{"203.0.113.9"}, "203.0.113.9"},
		{trusted, "10.1.2.3:1234", []string{"198.51.100.7, 203.0.113.9", "10.9.9.9"}, "203.0.113.9"},
		{trusted, "10.1.2.3:1234", []string{"198.51.100.7", "203.0.113.9, 10.9.9.9"}, "203.0.113.9"},
		{trusted, "10.1.2.3:1234", []string{"203.0.113.9, not-an-ip"}, "10.1.2.3"},
		{trusted, "10.1.2.3:1234", []string{"10.4.4.4"}, "10.4.4.4"},
		{trusted, "10.1.2.3:1234", nil, "10.1.2.3"},
		{trusted, "[::1]:80", []string{"2001:db8:1:2:3:4:5:6"}, "2001:db8:1:2:3:4:5:6"},
		{trusted, "[::1]:80", []string{"[2001:db8::7]:4711"}, "2001:db8::7"},
		{nil, "[::ffff:192.0.2.1]:80", nil, "192.0.2.1"},
		{nil, "[fe80::1%eth0]:80", nil, "fe80::1"},
		{nil, "pipe", nil, "invalid IP"},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := ClientAddr(r, tc.proxies).String(); got != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q, proxies %v: client %s, want %s", tc.remote, tc.xff, tc.proxies, got, tc.want)
		}
	}
}
