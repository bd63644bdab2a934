package otc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpotc/mcpotc/internal/conntest"
)

// rawResponse reads one HTTP response from conn: status line, headers, body.
func rawResponse(t *testing.T, conn net.Conn) (*http.Response, []byte) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp, body
}

// TestBodyTrickleGets408: a body sent one byte every 300 ms is cut at the
// body read timeout with a 408 and a JSON body, and the connection closes.
func TestBodyTrickleGets408(t *testing.T) {
	h := newTestHandler(t, &Options{BodyReadTimeout: 500 * time.Millisecond},
		testTool("T.X@1.0.0", func(context.Context, *Call) (json.RawMessage, error) {
			t.Error("the tool ran")
			return nil, nil
		}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, target := range []string{"POST /tools/call", "GET /tools"} {
		t.Run(target, func(t *testing.T) { trickle(t, srv, target) })
	}
}

func trickle(t *testing.T, srv *httptest.Server, target string) {
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := flatCall("T.X", `{}`)
	head := target + " HTTP/1.1\r\nHost: " + srv.Listener.Addr().String() + "\r\nContent-Type: application/json\r\nOXP-Version: 1.0\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	stop := conntest.Trickle(conn, body, 300*time.Millisecond) // until the server answers
	resp, data := rawResponse(t, conn)
	stop()
	if resp.StatusCode != http.StatusRequestTimeout || resp.Proto != "HTTP/1.1" {
		t.Fatalf("status line %s %s; want HTTP/1.1 408", resp.Proto, resp.Status)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil || got["message"] != "Request body was not received in time" {
		t.Fatalf("body %q (%v)", data, err)
	}
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	// The server closes the connection after the 408.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("connection still open after the 408: read %d, %v", n, err)
	}
}

// TestBodyTimeoutWithoutDeadlineSupport: a ResponseWriter without read
// deadlines (httptest.ResponseRecorder) still serves calls.
func TestBodyTimeoutWithoutDeadlineSupport(t *testing.T) {
	h := newTestHandler(t, &Options{BodyReadTimeout: time.Millisecond},
		testTool("T.X@1.0.0", func(context.Context, *Call) (json.RawMessage, error) { return json.RawMessage(`7`), nil }))
	if status, _, body := do(t, h, "POST", "/tools/call", flatHeader, flatCall("T.X", `{}`)); status != 200 || body["value"] != 7.0 {
		t.Fatalf("%d %v", status, body)
	}
}

// TestDurationExcludesUpload: duration is the tool's run time, not the
// upload of the request. The test clock moves an hour between the headers
// (the handler has started) and the body; the tool takes 5 ms of it.
func TestDurationExcludesUpload(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	h := newTestHandler(t, &Options{Now: clock},
		testTool("T.X@1.0.0", func(context.Context, *Call) (json.RawMessage, error) {
			advance(5 * time.Millisecond)
			return json.RawMessage(`1`), nil
		}))
	entered := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := flatCall("T.X", `{}`)
	head := "POST /tools/call HTTP/1.1\r\nHost: " + srv.Listener.Addr().String() + "\r\nContent-Type: application/json\r\nOXP-Version: 1.0\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not start")
	}
	advance(time.Hour) // the upload takes an hour
	if _, err := io.WriteString(conn, body); err != nil {
		t.Fatal(err)
	}
	resp, data := rawResponse(t, conn)
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %q", resp.StatusCode, data)
	}
	if got["duration"] != 5.0 {
		t.Errorf("duration %v ms, want 5 (the tool's time only)", got["duration"])
	}
}

// TestLocalhostProtection: on a loopback listener, Host and Origin must be
// local (or allowed); others get 403 on every route.
func TestLocalhostProtection(t *testing.T) {
	h := newTestHandler(t, &Options{AllowedHosts: []string{"proxy.example", "other.example:8443"}},
		testTool("T.X@1.0.0", func(context.Context, *Call) (json.RawMessage, error) { return json.RawMessage(`1`), nil }))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tt := range []struct {
		host, origin string
		want         int
	}{
		{"", "", 200}, // 127.0.0.1:port
		{"localhost:9", "", 200},
		{"127.1.2.3", "", 200},
		{"[::1]:80", "", 200},
		{"LOCALHOST", "http://localhost:3000", 200},
		{"proxy.example", "https://proxy.example", 200},
		{"proxy.example:443", "", 200},
		{"other.example:8443", "", 200},
		{"other.example", "", 403},
		{"evil.example", "", 403},
		{"localhost.evil.example", "", 403},
		{"", "http://evil.example", 403},
		{"", "null", 403},
		{"", "file://localhost", 403},
	} {
		for _, path := range []string{"/tools/call", "/tools"} {
			method := "POST"
			if path == "/tools" {
				method = "GET"
			}
			req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(flatCall("T.X", `{}`)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("OXP-Version", "1.0")
			if tt.host != "" {
				req.Host = tt.host
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s Host %q Origin %q: %d %s; want %d", path, tt.host, tt.origin, resp.StatusCode, data, tt.want)
			}
			if tt.want == 403 {
				var got map[string]any
				if json.Unmarshal(data, &got) != nil || !strings.HasPrefix(fmt.Sprint(got["message"]), "forbidden: ") {
					t.Errorf("403 body %q", data)
				}
			}
		}
	}
	// Not a loopback listener (no local address known): not checked.
	if status, _, _ := do(t, h, "POST", "/tools/call", flatHeader, flatCall("T.X", `{}`)); status != 200 {
		t.Errorf("request without a loopback local address: %d", status)
	}
	// Protection off.
	off := newTestHandler(t, &Options{DisableLocalhostProtection: true},
		testTool("T.X@1.0.0", func(context.Context, *Call) (json.RawMessage, error) { return json.RawMessage(`1`), nil }))
	srv2 := httptest.NewServer(off)
	defer srv2.Close()
	req, _ := http.NewRequest("GET", srv2.URL+"/tools", nil)
	req.Host = "evil.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("protection off: %d", resp.StatusCode)
	}
}

// TestCallNeedsJSONContentType: POST /tools/call (and /call) without a JSON
// Content-Type is 415 and the tool does not run.
func TestCallNeedsJSONContentType(t *testing.T) {
	ran := 0
	h := newTestHandler(t, nil, testTool("T.X@1.0.0", func(context.Context, *Call) (json.RawMessage, error) { ran++; return json.RawMessage(`1`), nil }))
	for _, tt := range []struct {
		ct   string
		want int
	}{
		{"", 415},
		{"text/plain", 415},
		{"application/x-www-form-urlencoded", 415},
		{"multipart/form-data; boundary=x", 415},
		{"application/jsonx", 415},
		{";;", 415},
		{"application/json", 200},
		{"application/json; charset=utf-8", 200},
		{"Application/JSON", 200},
		{"application/vnd.oxp+json", 200},
	} {
		for _, path := range []string{"/tools/call", "/call"} {
			hdr := map[string]string{"OXP-Version": "1.0"}
			if tt.ct != "" {
				hdr["Content-Type"] = tt.ct
			}
			status, _, body := do(t, h, "POST", path, hdr, flatCall("T.X", `{}`))
			if status != tt.want {
				t.Errorf("%s Content-Type %q: %d %v; want %d", path, tt.ct, status, body, tt.want)
			}
			if status == 415 && body["message"] != "Request body must be JSON" {
				t.Errorf("415 body %v", body)
			}
		}
	}
	if ran != 8 {
		t.Errorf("the tool ran %d times, want 8", ran)
	}
}

// TestJWTClaimShapes: aud must be a string or a non-empty array of
// strings, sub a string; other shapes are 401.
func TestJWTClaimShapes(t *testing.T) {
	secret := []byte("s")
	h := newTestHandler(t, &Options{JWTSecret: secret, JWTAudiences: []string{"tools"}})
	for _, tt := range []struct {
		name   string
		claims jwt.MapClaims
		want   int
	}{
		{"aud string", jwt.MapClaims{"aud": "tools"}, 200},
		{"aud list", jwt.MapClaims{"aud": []any{"x", "tools"}}, 200},
		{"no aud", jwt.MapClaims{}, 200},
		{"sub string", jwt.MapClaims{"sub": "alice"}, 200},
		{"aud number", jwt.MapClaims{"aud": 42}, 401},
		{"aud empty list", jwt.MapClaims{"aud": []any{}}, 401},
		{"aud list of numbers", jwt.MapClaims{"aud": []any{1}}, 401},
		{"aud mixed list", jwt.MapClaims{"aud": []any{"tools", 1}}, 401},
		{"aud object", jwt.MapClaims{"aud": map[string]any{}}, 401},
		{"aud null", jwt.MapClaims{"aud": nil}, 401},
		{"aud true", jwt.MapClaims{"aud": true}, 401},
		{"aud not allowed", jwt.MapClaims{"aud": "other"}, 401},
		{"sub number", jwt.MapClaims{"sub": 5}, 401},
	} {
		tt.claims["exp"] = time.Now().Add(time.Hour).Unix()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, tt.claims).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		status, _, body := do(t, h, "GET", "/tools", map[string]string{"Authorization": "Bearer " + tok}, "")
		if status != tt.want {
			t.Errorf("%s: %d %v; want %d", tt.name, status, body, tt.want)
		}
	}
}

// TestRetryHeadersOnTemporaryRefusal: a 400 whose body has RetryAfter
// carries Retry-After (whole seconds, at least 1) and x-should-retry, and
// stays a 400 with the body unchanged; other 400s carry neither.
func TestRetryHeadersOnTemporaryRefusal(t *testing.T) {
	for _, tt := range []struct {
		after time.Duration
		want  string
	}{{time.Millisecond, "1"}, {time.Second, "1"}, {1500 * time.Millisecond, "2"}, {0, ""}} {
		h := newTestHandler(t, nil, testTool("T.X@1.0.0", func(context.Context, *Call) (json.RawMessage, error) {
			return nil, &ServerErrorResponse{Message: "Tool server temporarily unavailable", RetryAfter: tt.after}
		}))
		status, hdr, body := do(t, h, "POST", "/tools/call", flatHeader, flatCall("T.X", `{}`))
		if status != 400 || hdr.Get("Retry-After") != tt.want || body["message"] != "Tool server temporarily unavailable" || len(body) != 1 {
			t.Errorf("RetryAfter %s: %d Retry-After %q body %v", tt.after, status, hdr.Get("Retry-After"), body)
		}
		wantRetry := ""
		if tt.want != "" {
			wantRetry = "true"
		}
		if hdr.Get("X-Should-Retry") != wantRetry {
			t.Errorf("RetryAfter %s: x-should-retry %q", tt.after, hdr.Get("X-Should-Retry"))
		}
	}
}
