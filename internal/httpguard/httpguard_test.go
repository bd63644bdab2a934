package httpguard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/conntest"
)

// quiet is how long an open connection stays silent before the exchange
// counts it as kept open.
const quiet = 500 * time.Millisecond

// echoServer serves Handler over an echo of each request's path and body,
// and records the paths it served.
func echoServer(t *testing.T) (addr string, served func() []string) {
	t.Helper()
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		_, _ = io.WriteString(w, r.URL.Path+" "+string(body))
	})))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), paths...)
	}
}

// A request with both Content-Length and Transfer-Encoding is answered
// (its body read as chunked, as net/http frames it), with "Connection:
// close", and the connection is then closed: the request a proxy framing
// by Content-Length would have seen behind it is never served. The
// honest flows: a body framed by Content-Length keeps the connection, and
// a second request on it is served.
func TestHandlerClosesAfterAmbiguousFraming(t *testing.T) {
	t.Parallel()
	const smuggled = "GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	for _, tc := range []struct {
		name, request string
		answer        string // a substring of the whole answer
		closed        bool
		paths         []string
	}{
		{
			name: "Content-Length and Transfer-Encoding, a request hidden behind",
			request: "POST /call HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 47\r\nTransfer-Encoding: chunked\r\n\r\n" +
				"0\r\n\r\n" + smuggled,
			answer: "/call ", closed: true, paths: []string{"/call"},
		},
		{
			name:    "Content-Length and Transfer-Encoding, a body",
			request: "POST /call HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
			answer:  "/call hello", closed: true, paths: []string{"/call"},
		},
		{
			name:    "Transfer-Encoding alone",
			request: "POST /call HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n" + smuggled,
			answer:  "/call hi", closed: true, paths: []string{"/call"},
		},
		{
			name:    "HTTP/1.0 keep-alive with a body",
			request: "POST /call HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi" + smuggled,
			answer:  "/call hi", closed: true, paths: []string{"/call"},
		},
		{
			name:    "honest: Content-Length, then a second request on the same connection",
			request: "POST /call HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\nhi" + "GET /next HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
			answer:  "/next ", closed: false, paths: []string{"/call", "/next"},
		},
		{
			name:    "honest: HTTP/1.0 keep-alive without a body",
			request: "GET /get HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n",
			answer:  "/get ", closed: false, paths: []string{"/get"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr, served := echoServer(t)
			answer, closed, err := conntest.RawExchange(addr, tc.request, quiet)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(answer, "HTTP/1.") || !strings.Contains(answer, " 200 OK\r\n") || !strings.Contains(answer, tc.answer) {
				t.Errorf("answer %q, want 200 with %q", answer, tc.answer)
			}
			if closed != tc.closed || strings.Contains(answer, "Connection: close\r\n") != tc.closed {
				t.Errorf("closed=%t, want %t; answer %q", closed, tc.closed, answer)
			}
			if got := strings.Join(served(), ","); got != strings.Join(tc.paths, ",") {
				t.Errorf("served %q, want %q", got, tc.paths)
			}
		})
	}
}

// AmbiguousFraming as a pure function, HTTP/2 included (no such framing).
func TestAmbiguousFraming(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		major, minor int
		te           []string
		length       int64
		want         bool
	}{
		{1, 1, []string{"chunked"}, -1, true},
		{1, 1, nil, 10, false},
		{1, 1, nil, 0, false},
		{1, 0, nil, 10, true},
		{1, 0, nil, 0, false},
		{2, 0, []string{"chunked"}, -1, false},
		{2, 0, nil, -1, false},
	} {
		r := &http.Request{ProtoMajor: tc.major, ProtoMinor: tc.minor, TransferEncoding: tc.te, ContentLength: tc.length}
		if got := AmbiguousFraming(r); got != tc.want {
			t.Errorf("HTTP/%d.%d TE %q length %d: %t, want %t", tc.major, tc.minor, tc.te, tc.length, got, tc.want)
		}
	}
}
