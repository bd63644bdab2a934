package httpguard

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// ReadDeadline bounds the reading of a request's body: it sets a read
// deadline timeout from now on the connection w answers (timeout <= 0:
// none), and returns the function that lifts it, to call once the body is
// in, so that the deadline bounds nothing else the connection reads. (Go
// 1.26's net/http lifts it too when a body is read to its end and it
// starts watching for the client leaving; a body read in part leaves it.)
// A read past the deadline fails with an error TimedOut reports; a
// ResponseWriter without read deadlines (a test recorder) reads unbounded.
func ReadDeadline(w http.ResponseWriter, timeout time.Duration) (lift func()) {
	if timeout <= 0 {
		return func() {}
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(timeout)) != nil {
		return func() {} // not a net/http server connection
	}
	return func() { _ = rc.SetReadDeadline(time.Time{}) }
}

// ReadBody reads r's body (none: nil) within timeout (see ReadDeadline; <= 0: no
// bound) and at most maxBytes of it (http.MaxBytesReader, whose
// *http.MaxBytesError also makes net/http close the connection after the
// answer; <= 0: no bound). A body whose Content-Length is announced is
// read into one buffer of that size. The deadline is lifted after the
// read, except when it passed (TimedOut(err)): that connection is done
// for, and its answer should say "Connection: close".
func ReadBody(w http.ResponseWriter, r *http.Request, maxBytes int64, timeout time.Duration) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	lift := ReadDeadline(w, timeout)
	var body io.Reader = r.Body
	if maxBytes > 0 {
		body = http.MaxBytesReader(w, r.Body, maxBytes)
	}
	var data []byte
	var err error
	if n := r.ContentLength; n > 0 && (maxBytes <= 0 || n <= maxBytes) {
		// One buffer of the announced size (net/http ends the body there).
		data = make([]byte, n)
		var got int
		got, err = io.ReadFull(body, data)
		data = data[:got]
	} else {
		data, err = io.ReadAll(body)
	}
	if !TimedOut(err) {
		lift()
	}
	return data, err
}

// TimedOut reports whether err is a read deadline that passed.
func TimedOut(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
