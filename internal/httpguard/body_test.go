package httpguard

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/conntest"
)

// bodyServer answers each request with what ReadBody (limit, timeout)
// gave: 408 with "Connection: close" for a body not in on time, 413 for
// one over the limit, else 200 and the body, after waiting hold (to show
// that the request lives on past the deadline once the body is in).
func bodyServer(t *testing.T, limit int64, timeout, hold time.Duration) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := ReadBody(w, r, limit, timeout)
		var tooBig *http.MaxBytesError
		switch {
		case TimedOut(err):
			w.Header().Set("Connection", "close")
			http.Error(w, "timeout", http.StatusRequestTimeout)
			return
		case errors.As(err, &tooBig):
			http.Error(w, fmt.Sprintf("over %d", tooBig.Limit), http.StatusRequestEntityTooLarge)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(hold):
		case <-r.Context().Done():
			return // the request was cancelled: no answer
		}
		_, _ = fmt.Fprintf(w, "got %q", data)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// A body that trickles in slower than the timeout gets 408 and the
// connection is closed; the honest flow: a body sent at once, announced
// or chunked, is read, and the request lives on past the deadline while
// the handler works (it is not cancelled), on a connection kept open.
func TestReadBodyDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	addr := bodyServer(t, 1<<10, timeout, 2*timeout)

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 20\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	stop := conntest.Trickle(conn, strings.Repeat("x", 20), 100*time.Millisecond)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	answer, _ := io.ReadAll(conn) // until the server closes it
	stop()
	if !strings.HasPrefix(string(answer), "HTTP/1.1 408 ") || !strings.Contains(string(answer), "Connection: close\r\n") {
		t.Errorf("trickled body: %q, want 408 and Connection: close", answer)
	}

	for _, request := range []string{
		"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello",
		// Read to its end: net/http starts its background read at once.
		"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	} {
		answer, closed, err := conntest.RawExchange(addr, request, 4*timeout)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(answer, "HTTP/1.1 200 ") || !strings.HasSuffix(answer, `got "hello"`) || closed {
			t.Errorf("honest body %q: %q (closed %t), want 200 got \"hello\" on an open connection", request, answer, closed)
		}
	}
}

// A body over the limit is cut there, as *http.MaxBytesError (and the
// connection closes after the answer), whether its length is announced
// or chunked; the honest flow: a body at the limit is read whole.
func TestReadBodyLimit(t *testing.T) {
	t.Parallel()
	addr := bodyServer(t, 8, time.Second, 0)
	for _, tc := range []struct {
		name, request, status, body string
	}{
		{"announced over", "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 9\r\n\r\n123456789", "413", "over 8"},
		{"chunked over", "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n123456789\r\n0\r\n\r\n", "413", "over 8"},
		{"honest: at the limit", "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 8\r\n\r\n12345678", "200", `got "12345678"`},
		{"honest: no body", "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n", "200", `got ""`},
	} {
		answer, _, err := conntest.RawExchange(addr, tc.request, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(answer, "HTTP/1.1 "+tc.status+" ") || !strings.Contains(answer, tc.body) {
			t.Errorf("%s: %q, want %s with %q", tc.name, answer, tc.status, tc.body)
		}
	}
}

// Without a connection (a test recorder) the body is read unbounded in
// time; without a body, nothing is read.
func TestReadBodyWithoutConnection(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	data, err := ReadBody(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("abc")), 0, time.Nanosecond)
	if err != nil || string(data) != "abc" {
		t.Errorf("recorder: %q, %v", data, err)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Body = nil
	if data, err := ReadBody(w, r, 10, time.Second); data != nil || err != nil {
		t.Errorf("nil body: %q, %v", data, err)
	}
	if TimedOut(io.ErrUnexpectedEOF) || TimedOut(nil) {
		t.Error("TimedOut of a non-timeout error")
	}
}
