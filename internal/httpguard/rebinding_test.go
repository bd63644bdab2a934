package httpguard

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// guardServer serves, on a loopback listener, 403 "Header Value" for a
// request g refuses and 200 "ok" for one it lets through.
func guardServer(t *testing.T, g *Rebinding) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refused := g.Check(r); refused != nil {
			w.WriteHeader(http.StatusForbidden)
			_, _ = fmt.Fprintf(w, "%s %s", refused.Header, refused.Value)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A page that rebound its name to 127.0.0.1 names that name in Host, and
// its own origin in Origin: both are refused on a loopback listener, with
// what they named. The honest flows: loopback names and IPs with any
// port, an allowed host (with any port, or only the one it names), an
// allowed origin, and no Origin at all pass.
func TestRebindingOnALoopbackListener(t *testing.T) {
	t.Parallel()
	base := guardServer(t, NewRebinding([]string{"bridge.example", "proxy.example:8443", "[fd00::1]"}, []string{"https://app.example.com"}))
	for _, tc := range []struct {
		name, host, origin string
		status             int
		body               string
	}{
		{"rebound name in Host", "evil.example", "", 403, "Host evil.example"},
		{"rebound name with a port", "evil.example:80", "", 403, "Host evil.example:80"},
		{"allowed name on another port", "proxy.example:80", "", 403, "Host proxy.example:80"},
		{"allowed name's suffix", "xbridge.example", "", 403, "Host xbridge.example"},
		{"empty Host", "", "", 403, "Host "},
		{"foreign Origin", "127.0.0.1", "http://evil.example", 403, "Origin http://evil.example"},
		{"opaque Origin", "127.0.0.1", "null", 403, "Origin null"},
		{"non-http Origin", "127.0.0.1", "file://localhost", 403, "Origin file://localhost"},
		{"Origin on an allowed name's other port", "localhost", "https://proxy.example:9443", 403, "Origin https://proxy.example:9443"},
		{"honest: 127.0.0.1", "127.0.0.1:8080", "", 200, "ok"},
		{"honest: 127.0.0.2, no port", "127.0.0.2", "", 200, "ok"},
		{"honest: localhost, any case", "LocalHost:1", "", 200, "ok"},
		{"honest: ::1", "[::1]:8080", "", 200, "ok"},
		{"honest: IPv4-mapped loopback", "[::ffff:127.0.0.1]:80", "", 200, "ok"},
		{"honest: allowed name, any port, any case", "Bridge.Example:9000", "", 200, "ok"},
		{"honest: allowed name:port", "proxy.example:8443", "", 200, "ok"},
		{"honest: allowed IPv6 address", "[fd00::1]:80", "", 200, "ok"},
		{"honest: local Origin", "localhost:8080", "http://localhost:5173", 200, "ok"},
		{"honest: allowed name's Origin", "bridge.example", "https://bridge.example", 200, "ok"},
		{"honest: allowed origin, trailing slash, any case", "127.0.0.1", "HTTPS://app.example.com/", 200, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequest(http.MethodGet, base+"/tools", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tc.host
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.host == "" {
				// net/http's client sends the URL's host for an empty
				// Host: write the request by hand.
				addr := strings.TrimPrefix(base, "http://")
				answer := rawGet(t, addr, "GET /tools HTTP/1.1\r\nHost: \r\n\r\n")
				if !strings.Contains(answer, " 403 ") || !strings.HasSuffix(answer, tc.body) {
					t.Fatalf("answer %q, want 403 %q", answer, tc.body)
				}
				return
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || string(body) != tc.body {
				t.Errorf("Host %q Origin %q: %d %q, want %d %q", tc.host, tc.origin, resp.StatusCode, body, tc.status, tc.body)
			}
		})
	}
}

// rawGet writes request on a new connection to addr and reads the answer
// until the server closes the connection.
func rawGet(t *testing.T, addr, request string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, request+"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(conn)
	first, _, _ := strings.Cut(string(b), "HTTP/1.1 200")
	return first
}

// A request that arrived on another address than loopback (a public
// listener, which its operator exposed on purpose) is not checked; one
// without a local address (not from a net/http server) neither. As pure
// decisions: no packet leaves loopback.
func TestRebindingOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	g := NewRebinding(nil, nil)
	at := func(local net.Addr) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "http://evil.example/tools", nil)
		r.Header.Set("Origin", "http://evil.example")
		if local != nil {
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, local))
		}
		return r
	}
	for _, local := range []net.Addr{
		&net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 8080},
		&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 8080},
		&net.TCPAddr{IP: net.IPv4zero, Port: 8080},
		nil,
	} {
		if refused := g.Check(at(local)); refused != nil {
			t.Errorf("arrived on %v: refused %+v, want not checked", local, refused)
		}
	}
	for _, local := range []net.Addr{
		&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080},
		&net.TCPAddr{IP: net.ParseIP("::1"), Port: 8080},
	} {
		if refused := g.Check(at(local)); refused == nil || *refused != (Refusal{"Host", "evil.example"}) {
			t.Errorf("arrived on %v: %+v, want Host evil.example refused", local, refused)
		}
	}
	// The zero value admits loopback hosts only.
	var zero Rebinding
	if !zero.LocalHost("127.0.0.1:80") || zero.LocalHost("bridge.example") {
		t.Error("zero Rebinding: want loopback only")
	}
}

func TestOriginListed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		origins []string
		origin  string
		want    bool
	}{
		{[]string{"https://app.example.com"}, "https://app.example.com", true},
		{[]string{"https://app.example.com/"}, "HTTPS://APP.example.com", true},
		{[]string{"https://app.example.com"}, "https://app.example.com:8443", false},
		{[]string{"https://app.example.com"}, "http://app.example.com", false},
		{[]string{"https://app.example.com"}, "https://app.example.com.evil.example", false},
		{[]string{"*"}, "https://anything.example", true},
		{nil, "https://app.example.com", false},
	} {
		if got := OriginListed(tc.origins, tc.origin); got != tc.want {
			t.Errorf("OriginListed(%q, %q) = %t, want %t", tc.origins, tc.origin, got, tc.want)
		}
	}
}
