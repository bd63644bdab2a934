package otc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/principal"
)

// memIdemStore is an IdempotencyStore in this process's memory, with the
// atomicity and expiry a shared database gives (the Redis one is tested
// against a real redis-server in the e2e suite). down makes every request
// fail, as an unreachable database does.
type memIdemStore struct {
	mu     sync.Mutex
	vals   map[string]memIdemVal
	down   atomic.Bool
	claims atomic.Int64
}

type memIdemVal struct {
	b     []byte
	exp   time.Time
	lease time.Time // a claim's lease ends then
}

var errMemStoreDown = errors.New("store down")

func newMemIdemStore() *memIdemStore { return &memIdemStore{vals: map[string]memIdemVal{}} }

func (s *memIdemStore) Claim(ctx context.Context, key string, claim []byte, lease, remember time.Duration) ([]byte, bool, error) {
	if s.down.Load() {
		return nil, false, errMemStoreDown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if v, ok := s.vals[key]; ok && now.Before(v.exp) {
		return bytes.Clone(v.b), now.Before(v.lease), nil
	}
	s.claims.Add(1)
	s.vals[key] = memIdemVal{bytes.Clone(claim), now.Add(lease + remember), now.Add(lease)}
	return nil, false, nil
}

func (s *memIdemStore) Settle(ctx context.Context, key string, claim, answer []byte, ttl time.Duration) (bool, error) {
	if s.down.Load() {
		return false, errMemStoreDown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vals[key]
	if !ok || !time.Now().Before(v.exp) || !bytes.Equal(v.b, claim) {
		return false, nil
	}
	if answer == nil {
		delete(s.vals, key)
	} else {
		s.vals[key] = memIdemVal{b: bytes.Clone(answer), exp: time.Now().Add(ttl)}
	}
	return true, nil
}

// replicas are n handlers of one tool sharing one store, each behind its
// own HTTP server: the tool counts its runs across all of them.
type replicas struct {
	store   *memIdemStore
	h       []*Handler
	srv     []*httptest.Server
	runs    atomic.Int64
	release chan struct{}
}

func newReplicas(t *testing.T, n int, opts Options) *replicas {
	t.Helper()
	rs := &replicas{store: newMemIdemStore(), release: make(chan struct{})}
	opts.IdempotencyTTL = 10 * time.Minute
	opts.IdempotencyStore = rs.store
	for i := 0; i < n; i++ {
		o := opts
		h := newTestHandler(t, &o, testTool("T.Slow@1.0.0", func(ctx context.Context, c *Call) (json.RawMessage, error) {
			run := rs.runs.Add(1)
			if strings.Contains(string(c.Request.Input), `"x":1`) {
				select {
				case <-rs.release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return json.RawMessage(fmt.Sprintf(`{"run":%d,"replica":%d}`, run, i)), nil
		}))
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		rs.h, rs.srv = append(rs.h, h), append(rs.srv, srv)
	}
	return rs
}

func (rs *replicas) post(ctx context.Context, i int, body string) (int, http.Header, []byte, error) {
	s := &idemServer{srv: rs.srv[i]}
	return s.post(ctx, nil, body)
}

// TestSharedIdempotencyAcrossReplicas: 64 call_ids, each sent to three
// replicas at once (192 requests) while the tool holds every run: the tool
// runs once per call_id and the three answers of a call_id are equal as
// data; a later repeat anywhere gets the same answer again.
func TestSharedIdempotencyAcrossReplicas(t *testing.T) {
	rs := newReplicas(t, 3, Options{})
	const ids = 64
	answers := make([][3][]byte, ids)
	errs := make(chan error, ids*3)
	var wg sync.WaitGroup
	for id := 0; id < ids; id++ {
		for r := 0; r < 3; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := fmt.Sprintf(`{"tool_id":"T.Slow","call_id":"id-%d","input":{"x":1}}`, id)
				status, _, data, err := rs.post(context.Background(), r, body)
				if err == nil && status != 200 {
					err = fmt.Errorf("replica %d, id-%d: status %d: %s", r, id, status, data)
				}
				answers[id][r] = data
				errs <- err
			}()
		}
	}
	waitFor(t, "64 runs", func() bool { return rs.runs.Load() >= ids })
	time.Sleep(50 * time.Millisecond) // a second run, if any, would start now
	close(rs.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := rs.runs.Load(); n != ids {
		t.Fatalf("the tool ran %d times for %d call_ids", n, ids)
	}
	for id := 0; id < ids; id++ {
		first := decodeAnswer(t, answers[id][0])
		for r := 1; r < 3; r++ {
			if v := decodeAnswer(t, answers[id][r]); !reflect.DeepEqual(v, first) {
				t.Fatalf("id-%d: replica %d answered %s, replica 0 %s", id, r, answers[id][r], answers[id][0])
			}
		}
		status, _, data, err := rs.post(context.Background(), id%3, fmt.Sprintf(`{"tool_id":"T.Slow","call_id":"id-%d","input":{"x":1}}`, id))
		if err != nil || status != 200 || !reflect.DeepEqual(decodeAnswer(t, data), first) {
			t.Fatalf("id-%d repeated later: %d %s %v, want %s", id, status, data, err, answers[id][0])
		}
	}
	if n := rs.runs.Load(); n != ids {
		t.Fatalf("the repeats ran the tool: %d runs", n)
	}
}

// TestSharedIdempotencyReusedElsewhere: a call_id that ran on one replica,
// sent to another with another input, is the 400 of a reused call_id.
func TestSharedIdempotencyReusedElsewhere(t *testing.T) {
	rs := newReplicas(t, 2, Options{})
	status, _, data, err := rs.post(context.Background(), 0, `{"tool_id":"T.Slow","call_id":"k","input":{"x":2}}`)
	if err != nil || status != 200 {
		t.Fatalf("first: %d %s %v", status, data, err)
	}
	status, _, data, err = rs.post(context.Background(), 1, `{"tool_id":"T.Slow","call_id":"k","input":{"x":3}}`)
	if err != nil || status != 400 || !strings.Contains(string(data), "already used for a different call") {
		t.Fatalf("reuse on the other replica: %d %s %v", status, data, err)
	}
	if n := rs.runs.Load(); n != 1 {
		t.Fatalf("%d runs", n)
	}
}

// TestSharedIdempotencyDeadReplica: a claim left by a replica that died
// mid-call is waited for until its lease ends; then its repeats get "the
// outcome is unknown" (no retry headers) and the tool does not run: a
// call_id runs at most once. A new call_id runs.
func TestSharedIdempotencyDeadReplica(t *testing.T) {
	rs := newReplicas(t, 1, Options{CallTimeout: 300 * time.Millisecond})
	rs.h[0].shared.leaseMargin = 0
	close(rs.release)
	// What the dead replica claimed: the same call, from the same caller
	// (this test's client, at 127.0.0.1).
	print := fingerprint("T.Slow@1.0.0", json.RawMessage(`{"x":1}`), nil)
	claim, _ := json.Marshal(sharedRecord{V: 1, Caller: callerHash(principal.AddressOf("127.0.0.1")), Print: fmt.Sprintf("%x", print), Claim: "dead"})
	if held, _, err := rs.store.Claim(context.Background(), sharedKey("orphan"), claim, 300*time.Millisecond, time.Minute); held != nil || err != nil {
		t.Fatal(held, err)
	}
	start := time.Now()
	for i := range 2 {
		status, hdr, data, err := rs.post(context.Background(), 0, `{"tool_id":"T.Slow","call_id":"orphan","input":{"x":1}}`)
		var body map[string]any
		if err != nil || json.Unmarshal(data, &body) != nil || status != 400 || body["message"] != "The outcome of this call is unknown" ||
			!strings.Contains(fmt.Sprint(body["developer_message"]), "new call_id") || hdr.Get("x-should-retry") != "" || hdr.Get("Retry-After") != "" {
			t.Fatalf("repeat %d after the dead replica's lease: %d %v %s %v", i, status, hdr, data, err)
		}
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("answered after %v: the lease of the dead replica was not waited for", waited)
	}
	if n := rs.runs.Load(); n != 0 {
		t.Fatalf("%d runs, want none", n)
	}
	status, _, data, err := rs.post(context.Background(), 0, `{"tool_id":"T.Slow","call_id":"orphan-2","input":{"x":1}}`)
	if err != nil || status != 200 || !strings.Contains(string(data), `"run":1`) {
		t.Fatalf("a new call_id: %d %s %v", status, data, err)
	}
}

// TestSharedIdempotencyStoreDown: with the store unreachable, a call with
// a call_id is a 400 "temporarily unavailable" with the retry headers (it
// does not run), and a call without one runs.
func TestSharedIdempotencyStoreDown(t *testing.T) {
	rs := newReplicas(t, 1, Options{})
	close(rs.release)
	rs.store.down.Store(true)
	status, hdr, data, err := rs.post(context.Background(), 0, `{"tool_id":"T.Slow","call_id":"c","input":{"x":2}}`)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if json.Unmarshal(data, &body) != nil || status != 400 || body["message"] != "Tool server temporarily unavailable" ||
		hdr.Get("Retry-After") != "1" || hdr.Get("x-should-retry") != "true" {
		t.Fatalf("store down: %d %v %s", status, hdr, data)
	}
	if n := rs.runs.Load(); n != 0 {
		t.Fatalf("the call ran without its store: %d runs", n)
	}
	status, _, data, err = rs.post(context.Background(), 0, `{"tool_id":"T.Slow","input":{"x":2}}`)
	if err != nil || status != 200 || !strings.Contains(string(data), `"success":true`) {
		t.Fatalf("without call_id: %d %s %v", status, data, err)
	}
}

// TestSharedIdempotencyNotKept: an answer that is not kept (the tool never
// ran: NotRun) frees the call_id, and a repeat runs it again.
func TestSharedIdempotencyNotKept(t *testing.T) {
	store := newMemIdemStore()
	var runs atomic.Int64
	h := newTestHandler(t, &Options{IdempotencyTTL: time.Minute, IdempotencyStore: store},
		testTool("T.Busy@1.0.0", func(ctx context.Context, c *Call) (json.RawMessage, error) {
			runs.Add(1)
			return nil, &ToolError{Message: "busy", NotRun: true, CanRetry: true}
		}))
	for i := 0; i < 2; i++ {
		status, _, body := do(t, h, "POST", "/tools/call", map[string]string{"OXP-Version": "1.0", "Content-Type": "application/json"}, `{"tool_id":"T.Busy","call_id":"b","input":{}}`)
		if status != 200 || body["success"] != false {
			t.Fatalf("call %d: %d %v", i, status, body)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d runs, want 2 (a NotRun answer is not replayed)", n)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.vals) != 0 {
		t.Fatalf("the store kept %d values", len(store.vals))
	}
}
