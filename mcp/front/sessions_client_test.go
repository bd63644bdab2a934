package front

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// fromAddr is an HTTP client whose connections come from the loopback
// address local (127.0.0.2 is another client than 127.0.0.1).
func fromAddr(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: wait}
	return &http.Client{Timeout: wait, Transport: &http.Transport{DialContext: d.DialContext}}
}

// post sends one JSON-RPC message with hc and returns the answer's
// status, session id and body.
func post(t *testing.T, hc *http.Client, url, token, session, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), strings.TrimSpace(string(b))
}

const tooManyForClient = `{"jsonrpc":"2.0","id":null,"error":{"code":-32003,"message":"too many sessions for this client: it holds its maximum of %d sessions; end an unused session with DELETE, or retry later"}}`

// MaxSessionsPerClient (issue 25, item 14): one client address that opens
// sessions beyond its bound gets 503 with -32003, used sessions or not,
// while a second client (another loopback address) still gets sessions;
// a DELETE gives the first one room again. Behind OAuth the client is the
// token's issuer and subject: two users at one address each have their
// own bound.
func TestFrontSessionsPerClient(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	srv, h := startFrontHTTP(t, f, &HTTPOptions{MaxSessionsPerClient: 2, SessionIdleTTL: -1})
	url := srv.URL + StreamablePath
	init := string(request(1, "initialize", initParams))
	one, two := fromAddr("127.0.0.1"), fromAddr("127.0.0.2")
	var mine []string
	for i := range 2 {
		status, id, body := post(t, one, url, "", "", init)
		if status != http.StatusOK || id == "" {
			t.Fatalf("initialize %d from 127.0.0.1: %d %s", i, status, body)
		}
		mine = append(mine, id)
	}
	status, id, body := post(t, one, url, "", "", init)
	if status != http.StatusServiceUnavailable || id != "" {
		t.Fatalf("the 3rd initialize from 127.0.0.1: %d session %q %s, want 503", status, id, body)
	}
	sameJSON(t, []byte(body), fmt.Sprintf(tooManyForClient, 2))
	// The other client is not refused for the first one's sessions, and
	// the sessions held still work.
	if status, id, body := post(t, two, url, "", "", init); status != http.StatusOK || id == "" {
		t.Errorf("initialize from 127.0.0.2: %d %s", status, body)
	}
	if status, _, body := post(t, one, url, "", mine[0], string(request(2, "ping", `{}`))); status != http.StatusOK {
		t.Errorf("ping in a session held: %d %s", status, body)
	}
	if got := deleteSession(t, url, mine[1]); got != http.StatusOK {
		t.Fatalf("DELETE: %d", got)
	}
	if status, _, body := post(t, one, url, "", "", init); status != http.StatusOK {
		t.Errorf("initialize from 127.0.0.1 after a DELETE: %d %s", status, body)
	}
	if h.Sessions() != 3 {
		t.Errorf("Sessions() = %d, want 3", h.Sessions())
	}

	// Behind OAuth: per issuer and subject, not per address.
	srv, _ = startFrontHTTP(t, f, &HTTPOptions{MaxSessionsPerClient: 1, SessionIdleTTL: -1, Resource: twoIssuerAuth(issuerA, issuerB)})
	url = srv.URL + StreamablePath
	for _, token := range []string{"A:u1", "B:u1", "A:u2"} {
		if status, _, body := post(t, one, url, token, "", init); status != http.StatusOK {
			t.Errorf("first initialize of %s: %d %s", token, status, body)
		}
	}
	if status, _, body := post(t, one, url, "A:u1", "", init); status != http.StatusServiceUnavailable {
		t.Errorf("second initialize of A:u1: %d %s, want 503", status, body)
	}
}

// MaxSessions full of sessions that never made a call (issue 25, item
// 14): a new client is admitted and the oldest unused session is ended
// (its id gets 404, its client initializes again); a session that made a
// call is never ended before unused ones, and only when every session
// held made a call is a new client refused. The same for signed ids, and
// a legacy SSE stream that never carried a call is closed for a new one.
func TestFrontSessionsEvictUnused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		keys [][]byte
	}{{"sessions in memory", nil}, {"signed session ids", [][]byte{[]byte(keyA)}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, _ := testFront(t, nil)
			srv, h := startFrontHTTP(t, f, &HTTPOptions{MaxSessions: 3, SessionIdleTTL: -1, SessionKeys: tc.keys})
			url := srv.URL + StreamablePath
			hc := fromAddr("127.0.0.1")
			init := string(request(1, "initialize", initParams))
			open := func(what string) string {
				t.Helper()
				status, id, body := post(t, hc, url, "", "", init)
				if status != http.StatusOK || id == "" {
					t.Fatalf("%s: %d %s", what, status, body)
				}
				// notifications/initialized does not make a session used.
				if status, _, body := post(t, hc, url, "", id, string(notification("notifications/initialized", `{}`))); status != http.StatusAccepted {
					t.Fatalf("%s: notifications/initialized: %d %s", what, status, body)
				}
				return id
			}
			ping := func(id string) int {
				t.Helper()
				status, _, _ := post(t, hc, url, "", id, string(request(2, "ping", `{}`)))
				return status
			}
			used := open("s1")
			if ping(used) != http.StatusOK {
				t.Fatal("ping in s1")
			}
			s2, s3 := open("s2"), open("s3")
			n1 := open("n1: the server full, s2 and s3 never used") // ends s2, the oldest unused
			if got := ping(s2); got != http.StatusNotFound {
				t.Errorf("s2, ended for n1: %d, want 404", got)
			}
			n2 := open("n2") // ends s3 (n1 is newer)
			if got := ping(s3); got != http.StatusNotFound {
				t.Errorf("s3, ended for n2: %d, want 404", got)
			}
			for _, id := range []string{used, n1, n2} { // now all used
				if got := ping(id); got != http.StatusOK {
					t.Errorf("a session in use: %d, want 200", got)
				}
			}
			status, id, body := post(t, hc, url, "", "", init)
			if status != http.StatusServiceUnavailable || id != "" {
				t.Fatalf("initialize with every session in use: %d %s, want 503", status, body)
			}
			sameJSON(t, []byte(body), fmt.Sprintf(tooManyBody, 3))
			if h.Sessions() != 3 {
				t.Errorf("Sessions() = %d, want 3", h.Sessions())
			}
		})
	}
	t.Run("legacy SSE and open streams", func(t *testing.T) {
		t.Parallel()
		f, _ := testFront(t, nil)
		srv, h := startFrontHTTP(t, f, &HTTPOptions{MaxSessions: 2, SessionIdleTTL: -1})
		idle := startFrontSSE(t, srv.URL, "")
		initialize(t, idle) // initialize and notifications/initialized only
		streaming := &httpTestClient{url: srv.URL + StreamablePath}
		initialize(t, streaming)
		stream := openStream(t, streaming.url, streaming.session) // an open stream is use
		fresh := &httpTestClient{url: srv.URL + StreamablePath}
		initialize(t, fresh)
		expectEnded(t, idle.ended, "the SSE stream that never carried a call")
		select {
		case <-stream:
			t.Error("the GET stream of a session in use was closed")
		case <-time.After(100 * time.Millisecond):
		}
		waitSessions(t, h, 2, wait)
	})
}

// clientAddr: X-Forwarded-For is ignored unless the peer is a trusted
// proxy; then the rightmost address that is not one is the client, and a
// malformed entry stops the walk. An IPv6 client counts as its /64.
func TestFrontClientAddr(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, tc := range []struct {
		proxies []netip.Prefix
		remote  string
		xff     []string
		want    string
	}{
		{nil, "192.0.2.1:1234", []string{"203.0.113.9"}, "192.0.2.1"},
		{trusted, "192.0.2.1:1234", []string{"203.0.113.9"}, "192.0.2.1"},
		{trusted, "10.1.2.3:1234", []string{"203.0.113.9"}, "203.0.113.9"},
		{trusted, "10.1.2.3:1234", []string{"198.51.100.7, 203.0.113.9", "10.9.9.9"}, "203.0.113.9"},
		{trusted, "10.1.2.3:1234", []string{"203.0.113.9, not-an-ip"}, "10.1.2.3"},
		{trusted, "10.1.2.3:1234", []string{"10.4.4.4"}, "10.4.4.4"},
		{trusted, "10.1.2.3:1234", nil, "10.1.2.3"},
		{trusted, "[::1]:80", []string{"2001:db8:1:2:3:4:5:6"}, "2001:db8:1:2::/64"},
		{nil, "[2001:db8:1:2:3:4:5:6]:80", nil, "2001:db8:1:2::/64"},
		{nil, "[::ffff:192.0.2.1]:80", nil, "192.0.2.1"},
		{nil, "pipe", nil, "unknown"},
	} {
		h := &HTTPHandler{opts: HTTPOptions{TrustedProxies: tc.proxies}}
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := addrKey(h.clientAddr(r)); got != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q, proxies %v: client %s, want %s", tc.remote, tc.xff, tc.proxies, got, tc.want)
		}
	}
}

// The session bound follows the client address X-Forwarded-For names only
// behind a trusted proxy: a client that writes its own X-Forwarded-For
// does not escape its bound.
func TestFrontSessionsPerClientForwardedFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		proxies []netip.Prefix
		want    int // status of the second initialize with another X-Forwarded-For
	}{
		{nil, http.StatusServiceUnavailable},
		{[]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, http.StatusOK},
	} {
		f, _ := testFront(t, nil)
		srv, _ := startFrontHTTP(t, f, &HTTPOptions{MaxSessionsPerClient: 1, SessionIdleTTL: -1, TrustedProxies: tc.proxies})
		var got []int
		for _, xff := range []string{"203.0.113.1", "203.0.113.2"} {
			status, _, _ := rawRequest(t, context.Background(), http.MethodPost, srv.URL+StreamablePath,
				string(request(1, "initialize", initParams)), http.Header{"X-Forwarded-For": {xff}})
			got = append(got, status)
		}
		if got[0] != http.StatusOK || got[1] != tc.want {
			t.Errorf("trusted proxies %v: statuses %v, want [200 %d]", tc.proxies, got, tc.want)
		}
	}
}
