package otc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpotc/mcpotc/internal/conntest"
)

// The byte and entry accounting of the call_id store, its per-caller
// shares and that running entries are never evicted are tested in
// package internal/answers (TestAccountingProperty, TestRunningNeverEvicted),
// the store this one and serve-mcp's idempotency_key use.

// idemServer serves tools at a real listener with idempotency on; runs
// counts executions of the tool T.Slow, which waits for release (or its
// context) when its input says so.
type idemServer struct {
	srv      *httptest.Server
	h        *Handler
	runs     atomic.Int64
	entered  atomic.Int64 // requests that reached the handler
	release  chan struct{}
	started  chan struct{}
	mu       sync.Mutex
	records  []*CallRecord
	toolDone chan error
}

func newIdemServer(t *testing.T, opts Options) *idemServer {
	t.Helper()
	s := &idemServer{release: make(chan struct{}), started: make(chan struct{}, 1000), toolDone: make(chan error, 1000)}
	opts.Observe = func(r *CallRecord) {
		s.mu.Lock()
		s.records = append(s.records, r)
		s.mu.Unlock()
	}
	if opts.IdempotencyTTL == 0 {
		opts.IdempotencyTTL = 10 * time.Minute
	}
	s.h = newTestHandler(t, &opts, testTool("T.Slow@1.0.0", func(ctx context.Context, c *Call) (json.RawMessage, error) {
		n := s.runs.Add(1)
		s.started <- struct{}{}
		if strings.Contains(string(c.Request.Input), `"x":1`) {
			select {
			case <-s.release:
			case <-ctx.Done():
				s.toolDone <- ctx.Err()
				return nil, ctx.Err()
			}
		}
		s.toolDone <- nil
		return json.RawMessage(fmt.Sprintf(`{"run":%d,"input":%s}`, n, c.Request.Input)), nil
	}))
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.entered.Add(1)
		s.h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// post sends one call and returns status, headers and body.
func (s *idemServer) post(ctx context.Context, header map[string]string, body string) (int, http.Header, []byte, error) {
	h := map[string]string{"Content-Type": "application/json", "OXP-Version": "1.0"}
	maps.Copy(h, header)
	return conntest.Post(ctx, s.srv.URL+"/tools/call", h, []byte(body))
}

func decodeAnswer(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("answer %q is not JSON: %v", data, err)
	}
	return v
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestIdempotency50Plus50 is the acceptance test: 50 concurrent and 50
// later requests with one call_id run the tool once, and all 100 answers
// are equal as data (the first one's, duration included).
func TestIdempotency50Plus50(t *testing.T) {
	s := newIdemServer(t, Options{})
	body := `{"tool_id":"T.Slow","call_id":"one-id","input":{"x":1}}`
	answers := make(chan []byte, 100)
	errs := make(chan error, 100)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _, data, err := s.post(context.Background(), nil, body)
			if err == nil && status != 200 {
				err = fmt.Errorf("status %d: %s", status, data)
			}
			errs <- err
			answers <- data
		}()
	}
	// The tool holds the first run until all 50 requests are in.
	waitFor(t, "50 requests", func() bool { return s.entered.Load() == 50 })
	close(s.release)
	wg.Wait()
	for i := 0; i < 50; i++ {
		status, _, data, err := s.post(context.Background(), nil, body)
		if err == nil && status != 200 {
			err = fmt.Errorf("status %d: %s", status, data)
		}
		errs <- err
		answers <- data
	}
	close(errs)
	close(answers)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := s.runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
	var first any
	n := 0
	for a := range answers {
		v := decodeAnswer(t, a)
		if first == nil {
			first = v
			if m := v.(map[string]any); m["success"] != true || m["call_id"] != "one-id" {
				t.Fatalf("answer %s", a)
			}
		} else if !reflect.DeepEqual(v, first) {
			t.Fatalf("answer %d differs:\n%s\nfirst: %v", n, a, first)
		}
		n++
	}
	if n != 100 {
		t.Fatalf("%d answers", n)
	}
	s.mu.Lock()
	replayed := 0
	for _, r := range s.records {
		if r.Replayed {
			replayed++
		}
	}
	s.mu.Unlock()
	if replayed != 99 {
		t.Errorf("%d answers replayed, want 99", replayed)
	}
}

// TestIdempotencyDisconnectThenRetry: a client gives up on a slow call at
// 0.3 s and retries with the same call_id: the tool ran once, was not
// cancelled, and the retry gets its answer.
func TestIdempotencyDisconnectThenRetry(t *testing.T) {
	s := newIdemServer(t, Options{})
	body := `{"tool_id":"T.Slow","call_id":"retry-me","input":{"x":1}}`
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, _, _, err := s.post(ctx, nil, body); err == nil {
		t.Fatal("the first request was answered; it must time out on the client")
	}
	<-s.started
	type result struct {
		status int
		data   []byte
		err    error
	}
	done := make(chan result, 1)
	go func() {
		status, _, data, err := s.post(context.Background(), nil, body)
		done <- result{status, data, err}
	}()
	close(s.release)
	r := <-done
	if r.err != nil || r.status != 200 {
		t.Fatalf("retry: %d %s %v", r.status, r.data, r.err)
	}
	if err := <-s.toolDone; err != nil {
		t.Fatalf("the tool's context ended when its first client left: %v", err)
	}
	if n := s.runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
	var got struct {
		Value struct {
			Run int `json:"run"`
		} `json:"value"`
	}
	_ = json.Unmarshal(r.data, &got)
	if got.Value.Run != 1 {
		t.Errorf("retry answer %s, want the first run's", r.data)
	}
}

// TestIdempotencyCallTimeoutBoundsDetachedRun: a call run detached from
// its request still ends at CallTimeout.
func TestIdempotencyCallTimeoutBoundsDetachedRun(t *testing.T) {
	s := newIdemServer(t, Options{CallTimeout: 200 * time.Millisecond})
	status, _, data, err := s.post(context.Background(), nil, `{"tool_id":"T.Slow","call_id":"bounded","input":{"x":1}}`)
	if err != nil || status != 200 {
		t.Fatalf("%d %s %v", status, data, err)
	}
	if err := <-s.toolDone; err != context.DeadlineExceeded {
		t.Fatalf("tool context: %v, want DeadlineExceeded", err)
	}
}

// TestIdempotencyCallerIsPartOfTheKey: the same call_id from another
// caller (API key vs a JWT's sub, two JWT subs) is a 400, never the first
// caller's answer and never a second run.
func TestIdempotencyCallerIsPartOfTheKey(t *testing.T) {
	secret := []byte("jwt-secret")
	s := newIdemServer(t, Options{APIKey: "the-key", JWTSecret: secret})
	token := func(sub string) string {
		claims := jwt.MapClaims{"exp": time.Now().Add(time.Hour).Unix()}
		if sub != "" {
			claims["sub"] = sub
		}
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	body := `{"tool_id":"T.Slow","call_id":"shared","input":{"x":2}}`
	byKey := map[string]string{"OXP-API-Key": "the-key"}
	if status, _, data, err := s.post(context.Background(), byKey, body); err != nil || status != 200 {
		t.Fatalf("API key caller: %d %s %v", status, data, err)
	}
	if status, _, data, _ := s.post(context.Background(), map[string]string{"Authorization": "Bearer the-key"}, body); status != 200 {
		t.Fatalf("the same API key as a bearer token is the same caller: %d %s", status, data)
	}
	for _, sub := range []string{"alice", ""} {
		status, _, data, err := s.post(context.Background(), map[string]string{"Authorization": "Bearer " + token(sub)}, body)
		if err != nil || status != 400 || !strings.Contains(string(data), "already used") {
			t.Errorf("JWT sub %q reusing the API key caller's call_id: %d %s %v; want 400", sub, status, data, err)
		}
	}
	body2 := `{"tool_id":"T.Slow","call_id":"alice-call","input":{"x":2}}`
	if status, _, data, _ := s.post(context.Background(), map[string]string{"Authorization": "Bearer " + token("alice")}, body2); status != 200 {
		t.Fatalf("alice: %d %s", status, data)
	}
	// A new token of alice (tokens rotate) is the same caller: replayed.
	if status, _, data, _ := s.post(context.Background(), map[string]string{"Authorization": "Bearer " + token("alice") + ""}, body2); status != 200 {
		t.Fatalf("alice again: %d %s", status, data)
	}
	if status, _, data, _ := s.post(context.Background(), map[string]string{"Authorization": "Bearer " + token("bob")}, body2); status != 400 {
		t.Errorf("bob reusing alice's call_id: %d %s; want 400", status, data)
	}
	if n := s.runs.Load(); n != 2 {
		t.Errorf("the tool ran %d times, want 2 (one per accepted call_id)", n)
	}
}

// TestIdempotencyContextIsPartOfTheFingerprint: the same call_id with
// another context (token, secret, user id) is a 400.
func TestIdempotencyContextIsPartOfTheFingerprint(t *testing.T) {
	s := newIdemServer(t, Options{})
	call := func(ctx string) (int, []byte) {
		status, _, data, err := s.post(context.Background(), nil, `{"tool_id":"T.Slow","call_id":"ctx-call","input":{"x":2},"context":`+ctx+`}`)
		if err != nil {
			t.Fatal(err)
		}
		return status, data
	}
	first := `{"authorization":[{"id":"g","token":"tok-A"},{"id":"h","token":"t2"}],"secrets":[{"id":"s","value":"v"}],"user_id":"u"}`
	if status, data := call(first); status != 200 {
		t.Fatalf("first: %d %s", status, data)
	}
	// The same context in another order is the same call.
	if status, data := call(`{"user_id":"u","secrets":[{"id":"s","value":"v"}],"authorization":[{"id":"h","token":"t2"},{"id":"g","token":"tok-A"}]}`); status != 200 {
		t.Errorf("same context reordered: %d %s", status, data)
	}
	for _, other := range []string{
		`{"authorization":[{"id":"g","token":"tok-B"},{"id":"h","token":"t2"}],"secrets":[{"id":"s","value":"v"}],"user_id":"u"}`,
		`{"authorization":[{"id":"g","token":"tok-A"},{"id":"h","token":"t2"}],"secrets":[{"id":"s","value":"w"}],"user_id":"u"}`,
		`{"authorization":[{"id":"g","token":"tok-A"},{"id":"h","token":"t2"}],"secrets":[{"id":"s","value":"v"}],"user_id":"other"}`,
		`null`,
	} {
		if status, data := call(other); status != 400 || !strings.Contains(string(data), "already used") {
			t.Errorf("context %s: %d %s; want 400", other, status, data)
		}
	}
	if n := s.runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

// TestIdempotencyRunningBound: beyond IdempotencyMaxRunning running calls,
// a new call_id is a 400 "temporarily unavailable" with the retry headers.
func TestIdempotencyRunningBound(t *testing.T) {
	s := newIdemServer(t, Options{IdempotencyMaxRunning: 2})
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _, _ = s.post(context.Background(), nil, fmt.Sprintf(`{"tool_id":"T.Slow","call_id":"hold-%d","input":{"x":1}}`, i))
		}()
	}
	<-s.started
	<-s.started
	status, hdr, data, err := s.post(context.Background(), nil, `{"tool_id":"T.Slow","call_id":"third","input":{"x":1}}`)
	close(s.release)
	wg.Wait()
	if err != nil || status != 400 {
		t.Fatalf("third running call: %d %s %v; want 400", status, data, err)
	}
	if hdr.Get("Retry-After") != "1" || hdr.Get("X-Should-Retry") != "true" {
		t.Errorf("headers Retry-After %q x-should-retry %q", hdr.Get("Retry-After"), hdr.Get("X-Should-Retry"))
	}
	if m := decodeAnswer(t, data).(map[string]any); m["message"] != "Tool server temporarily unavailable" {
		t.Errorf("body %s", data)
	}
	// Without a call_id nothing is bounded here.
	if status, _, data, _ := s.post(context.Background(), nil, `{"tool_id":"T.Slow","input":{"x":2}}`); status != 200 {
		t.Errorf("call without call_id: %d %s", status, data)
	}
}

// TestIdempotencyWhatIsKept: 400s and NotRun tool errors are not kept;
// an unknown outcome (can_retry) is kept for its retry_after_ms within the
// TTL, then runs again; a definite tool failure is kept.
func TestIdempotencyWhatIsKept(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	runs := map[string]int{}
	retry := int64(2000)
	h := newTestHandler(t, &Options{IdempotencyTTL: time.Minute, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }},
		testTool("T.Kind@1.0.0", func(_ context.Context, c *Call) (json.RawMessage, error) {
			var in struct {
				X int `json:"x"`
			}
			_ = json.Unmarshal(c.Request.Input, &in)
			mu.Lock()
			runs[c.Request.CallID]++
			mu.Unlock()
			switch in.X {
			case 1:
				return nil, &ServerErrorResponse{Message: "refused"}
			case 2:
				return nil, &ToolError{Message: "needs authorization", NotRun: true}
			case 3:
				return nil, &ToolError{Message: "lost", CanRetry: true, RetryAfterMS: &retry}
			case 4:
				return nil, &ToolError{Message: "failed"}
			case 5:
				return nil, &ToolError{Message: "retry now", CanRetry: true}
			}
			return json.RawMessage(`1`), nil
		}))
	call := func(id string, x int) {
		do(t, h, "POST", "/tools/call", flatHeader, fmt.Sprintf(`{"tool_id":"T.Kind","call_id":"%s","input":{"x":%d}}`, id, x))
	}
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	for _, tt := range []struct {
		id      string
		x       int
		advance time.Duration
		want    int
	}{
		{"refused", 1, 0, 2},
		{"notrun", 2, 0, 2},
		{"lost-soon", 3, time.Second, 1},
		{"lost-later", 3, 2*time.Second + time.Millisecond, 2},
		{"failed", 4, 59 * time.Second, 1},
		{"retry-now", 5, 0, 2},
		{"ok", 0, 59 * time.Second, 1},
		{"ok-expired", 0, time.Minute + time.Millisecond, 2},
	} {
		call(tt.id, tt.x)
		advance(tt.advance)
		call(tt.id, tt.x)
		mu.Lock()
		got := runs[tt.id]
		mu.Unlock()
		if got != tt.want {
			t.Errorf("%s: ran %d times, want %d", tt.id, got, tt.want)
		}
	}
}

// TestLongIDsRefused: call_id and trace_id over 256 bytes are a 400 and
// nothing is stored; 256 bytes are fine.
func TestLongIDsRefused(t *testing.T) {
	s := newIdemServer(t, Options{})
	long := strings.Repeat("a", 2<<20)
	for _, tt := range []struct {
		name, body string
		want       int
	}{
		{"call_id 2 MiB", `{"tool_id":"T.Slow","call_id":"` + long + `","input":{"x":2}}`, 400},
		{"call_id 257", `{"tool_id":"T.Slow","call_id":"` + long[:257] + `","input":{"x":2}}`, 400},
		{"trace_id 257", `{"tool_id":"T.Slow","trace_id":"` + long[:257] + `","input":{"x":2}}`, 400},
		{"call_id 256", `{"tool_id":"T.Slow","call_id":"` + long[:256] + `","input":{"x":2}}`, 200},
	} {
		status, _, data, err := s.post(context.Background(), nil, tt.body)
		if err != nil || status != tt.want {
			t.Errorf("%s: %d %.200s %v; want %d", tt.name, status, data, err, tt.want)
		}
		if tt.want == 400 && bytes.Contains(data, []byte(long[:257])) {
			t.Errorf("%s: the answer echoes the id", tt.name)
		}
	}
	if n := s.h.idem.store.Len(); n != 1 {
		t.Errorf("%d entries stored, want 1 (the 256-byte call_id)", n)
	}
	if s.runs.Load() != 1 {
		t.Errorf("the tool ran %d times, want 1", s.runs.Load())
	}
}
