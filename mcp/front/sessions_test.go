package front

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/wiretest"
)

// heapInuse is the heap in use after collecting garbage (twice, so
// that finalizers and sync.Pool victims are gone too).
func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// waitSessions waits, up to d, for h to hold want sessions.
func waitSessions(t *testing.T, h *HTTPHandler, want int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for h.Sessions() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the front holds %d sessions after %v, want %d", h.Sessions(), d, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const tooManyBody = `{"jsonrpc":"2.0","id":null,"error":{"code":-32003,"message":"too many sessions: the server holds its maximum of %d sessions; retry later, or end an unused session with DELETE"}}`

// 10,000 sessions opened with initialize and dropped (never deleted) are
// all ended after the idle TTL, and the memory they held returns.
// Not parallel: it measures the heap.
func TestFrontSessionsExpireAndMemoryReturns(t *testing.T) {
	const n, ttl = 10000, 2 * time.Second
	f, _ := testFront(t, nil)
	h := f.StreamableHTTPHandler(&HTTPOptions{SessionIdleTTL: ttl, MaxSessions: n, MaxSessionsPerClient: -1})
	srv := httptest.NewServer(h)
	defer srv.Close()
	url := srv.URL + StreamablePath

	// One session through the network, to ask for it again once expired.
	first := &httpTestClient{url: url}
	initialize(t, first)

	before := heapInuse()
	init := request(1, "initialize", initParams)
	var mu sync.Mutex
	ids := map[string]bool{first.session: true}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n-1; i += 4 {
				// In process (no sockets) to stay fast; the answer is checked
				// as on the wire.
				req := httptest.NewRequest(http.MethodPost, StreamablePath, strings.NewReader(string(init)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				id := rec.Header().Get("Mcp-Session-Id")
				var res struct {
					ID     int `json:"id"`
					Result struct {
						ProtocolVersion string `json:"protocolVersion"`
					} `json:"result"`
				}
				if rec.Code != http.StatusOK || id == "" || json.Unmarshal(rec.Body.Bytes(), &res) != nil ||
					res.ID != 1 || res.Result.ProtocolVersion != "2025-11-25" {
					t.Errorf("initialize %d: %d session %q: %s", i, rec.Code, id, rec.Body)
					return
				}
				mu.Lock()
				ids[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(ids) != n {
		t.Fatalf("%d distinct session ids for %d initializes", len(ids), n)
	}
	peak := heapInuse()

	// The sweeper runs every max(TTL/2, 1 s) and ends sessions idle
	// longer than the TTL: all are gone within 2×TTL of the last one.
	waitSessions(t, h, 0, 3*ttl+wait)
	after := heapInuse()
	t.Logf("heap in use: before %d KiB, with the sessions %d KiB, after expiry %d KiB",
		before>>10, peak>>10, after>>10)
	// The sessions alive at the end of the run (those of the last TTL at
	// least) hold some MiB (about 0.7 KiB each); what stays after expiry
	// is the maps' own capacity (Go maps do not shrink), a small part of
	// it.
	held := int64(peak) - int64(before)
	if held < 2<<20 {
		t.Errorf("the sessions held only %d KiB: the measurement cannot tell a leak", held>>10)
	}
	if kept := int64(after) - int64(before); kept > held/3 {
		t.Errorf("%d KiB still in use after every session expired (of %d KiB held)", kept>>10, held>>10)
	}
	if n := watched(srv); n != 0 {
		t.Errorf("%d sessions with watched streams", n)
	}

	// At the wire: the expired session is unknown (404), and a new one works.
	first.version = "2025-11-25"
	r, err := first.post(t, context.Background(), request(2, "tools/list", `{}`), nil)
	if err != nil || r.status != http.StatusNotFound {
		t.Errorf("POST in an expired session: %v %d %s", err, r.status, r.body)
	}
	again := &httpTestClient{url: url, version: "2025-11-25"}
	initialize(t, again)
	sameJSON(t, callTool(t, again, 2, "tools/call", callParams("add", `{"a":1,"b":2}`)),
		`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"3"}],"structuredContent":{"sum":3}}}`)
	runtime.KeepAlive(h)
}

// boundHandler serves a front with at most three sessions.
func boundHandler(t *testing.T, ttl time.Duration) (*HTTPHandler, *httptest.Server) {
	return boundHandlerLog(t, ttl, nil)
}

func boundHandlerLog(t *testing.T, ttl time.Duration, logs *wiretest.Buffer) (*HTTPHandler, *httptest.Server) {
	var opts *Options
	if logs != nil {
		opts = &Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}
	}
	f, _ := testFront(t, opts)
	h := f.HTTPHandler(&HTTPOptions{MaxSessions: 3, SessionIdleTTL: ttl})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func initializeRaw(t *testing.T, url string) (int, http.Header, string) {
	return rawRequest(t, context.Background(), http.MethodPost, url, string(request(1, "initialize", initParams)), nil)
}

// expectRefused asserts the 503 answer to an initialize beyond a bound of 3.
func expectRefused(t *testing.T, url, what string) {
	t.Helper()
	status, header, body := initializeRaw(t, url)
	ct, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	if status != http.StatusServiceUnavailable || ct != "application/json" || header.Get("Retry-After") != "5" ||
		header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("%s: %d %s Retry-After=%q session=%q: %s", what, status, ct, header.Get("Retry-After"), header.Get("Mcp-Session-Id"), body)
	}
	sameJSON(t, []byte(body), fmt.Sprintf(tooManyBody, 3))
}

// initializeUsed opens a session at url and makes a call in it (a ping),
// so that it is not one to evict.
func initializeUsed(t *testing.T, url string) *httpTestClient {
	t.Helper()
	c := &httpTestClient{url: url}
	initialize(t, c)
	sameJSON(t, callTool(t, c, 2, "ping", `{}`), `{"jsonrpc":"2.0","id":2,"result":{}}`)
	return c
}

// Beyond MaxSessions, when every session made a call, initialize gets 503
// with a JSON-RPC error and Retry-After; a DELETE makes room.
func TestFrontSessionsBound(t *testing.T) {
	t.Parallel()
	var logs wiretest.Buffer
	h, srv := boundHandlerLog(t, -1, &logs)
	url := srv.URL + StreamablePath
	var live []*httpTestClient
	for range 3 {
		live = append(live, initializeUsed(t, url))
	}
	expectRefused(t, url, "the 4th initialize")
	if got := h.Sessions(); got != 3 {
		t.Errorf("Sessions() = %d, want 3", got)
	}
	// A legacy SSE stream counts against the same bound.
	status, header, body := rawRequest(t, context.Background(), http.MethodGet, srv.URL+SSEPath, "", nil)
	if status != http.StatusServiceUnavailable || header.Get("Retry-After") != "5" {
		t.Errorf("GET %s beyond the bound: %d %s", SSEPath, status, body)
	} else {
		sameJSON(t, []byte(body), fmt.Sprintf(tooManyBody, 3))
	}
	// The sessions held still work.
	live[2].version = "2025-11-25"
	sameJSON(t, callTool(t, live[2], 2, "ping", `{}`), `{"jsonrpc":"2.0","id":2,"result":{}}`)

	if status := deleteSession(t, url, live[0].session); status != http.StatusOK {
		t.Fatalf("DELETE: %d", status)
	}
	initializeUsed(t, url)
	expectRefused(t, url, "initialize when full again")
	// Refusals are logged, at most once a second: a flood of them does not
	// flood the log.
	if n := strings.Count(logs.String(), "refused new sessions: too many sessions"); n < 1 || n > 2 {
		t.Errorf("%d log lines for 3 refusals:\n%s", n, logs.String())
	}
}

// Idle expiry makes room too; the sessions in use stay.
func TestFrontSessionsBoundIdleExpiry(t *testing.T) {
	t.Parallel()
	h, srv := boundHandler(t, 2*time.Second)
	url := srv.URL + StreamablePath
	var live []*httpTestClient
	for range 3 {
		live = append(live, initializeUsed(t, url))
	}
	// live[0] and live[1] are in use (a ping every 200 ms), live[2] idle.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range live[:2] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 10; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				r, err := c.post(t, context.Background(), request(i, "ping", `{}`), nil)
				if err != nil || r.status != http.StatusOK {
					t.Errorf("ping in a session in use: %v %d %s", err, r.status, r.body)
					return
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	waitSessions(t, h, 2, 3*2*time.Second+wait)
	r, err := live[2].post(t, context.Background(), request(3, "ping", `{}`), nil)
	if err != nil || r.status != http.StatusNotFound {
		t.Errorf("POST in the expired session: %v %d %s", err, r.status, r.body)
	}
	initializeUsed(t, url)
	expectRefused(t, url, "initialize when full again")
}

// A concurrent burst of initializes never holds more than MaxSessions:
// while the sessions held never made a call, each new one takes the place
// of the oldest (the count stays exact); once those held have made calls,
// a burst is refused whole.
func TestFrontSessionsBoundUnderConcurrency(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	h := f.StreamableHTTPHandler(&HTTPOptions{MaxSessions: 5, MaxSessionsPerClient: -1, SessionIdleTTL: -1})
	srv := httptest.NewServer(h)
	defer srv.Close()
	url := srv.URL + StreamablePath
	burst := func() (ids []string, busy, other int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, header, _ := rawRequest(t, context.Background(), http.MethodPost, url,
					string(request(1, "initialize", initParams)), nil)
				mu.Lock()
				defer mu.Unlock()
				switch status {
				case http.StatusOK:
					ids = append(ids, header.Get("Mcp-Session-Id"))
				case http.StatusServiceUnavailable:
					busy++
				default:
					other++
				}
			}()
		}
		wg.Wait()
		return ids, busy, other
	}
	ids, busy, other := burst()
	if len(ids) < 5 || len(ids)+busy != 40 || other != 0 || h.Sessions() != 5 {
		t.Fatalf("%d admitted, %d refused, %d other, %d held; want 5 held", len(ids), busy, other, h.Sessions())
	}
	live := 0
	for _, id := range ids {
		c := &httpTestClient{url: url, session: id, version: "2025-11-25"}
		r, err := c.post(t, context.Background(), request(2, "ping", `{}`), nil)
		switch {
		case err != nil:
			t.Fatal(err)
		case r.status == http.StatusOK:
			live++
		case r.status != http.StatusNotFound:
			t.Errorf("ping in a session of the burst: %d %s", r.status, r.body)
		}
	}
	if live != 5 {
		t.Errorf("%d sessions of the burst answer, want 5 (the others were ended for newer ones: 404)", live)
	}
	ids, busy, other = burst()
	if len(ids) != 0 || busy != 40 || other != 0 || h.Sessions() != 5 {
		t.Errorf("every session in use: %d admitted, %d refused, %d other, %d held; want all 40 refused", len(ids), busy, other, h.Sessions())
	}
}

// A legacy SSE session without a message for the idle TTL has its stream
// closed; one that keeps sending stays.
func TestFrontSSESessionIdleExpiry(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	h := f.SSEHandler(&HTTPOptions{SessionIdleTTL: 500 * time.Millisecond})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close) // after the SSE streams' clients end
	idle := startFrontSSE(t, srv.URL, "")
	busy := startFrontSSE(t, srv.URL, "")
	initialize(t, busy)
	if got := h.Sessions(); got != 2 {
		t.Errorf("Sessions() = %d, want 2", got)
	}
	deadline := time.After(wait)
	for i := 10; ; i++ {
		sameJSON(t, callTool(t, busy, i, "ping", `{}`), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, i))
		select {
		case <-idle.ended:
		case <-deadline:
			t.Fatal("the idle SSE session's stream is still open")
		case <-time.After(100 * time.Millisecond):
			continue
		}
		break
	}
	select {
	case <-busy.ended:
		t.Fatal("the SSE session in use was closed")
	default:
	}
	waitSessions(t, h, 1, wait)
}

// --stateless: no session id is minted, a tools/call works without one,
// and nothing is held.
func TestFrontStatelessHoldsNoSession(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	h := f.StreamableHTTPHandler(&HTTPOptions{Stateless: true, MaxSessions: 1})
	srv := httptest.NewServer(h)
	defer srv.Close()
	url := srv.URL + StreamablePath
	for i := range 3 { // beyond MaxSessions: nothing is counted
		status, header, body := rawRequest(t, context.Background(), http.MethodPost, url, string(request(1, "initialize", initParams)), nil)
		if status != http.StatusOK || header.Get("Mcp-Session-Id") != "" {
			t.Fatalf("initialize %d: %d session %q: %s", i, status, header.Get("Mcp-Session-Id"), body)
		}
	}
	status, header, body := rawRequest(t, context.Background(), http.MethodPost, url,
		string(request(2, "tools/call", callParams("add", `{"a":1,"b":2}`))),
		http.Header{"Mcp-Protocol-Version": {"2025-11-25"}})
	if status != http.StatusOK || header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("tools/call: %d session %q", status, header.Get("Mcp-Session-Id"))
	}
	sameJSON(t, []byte(body), `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"3"}],"structuredContent":{"sum":3}}}`)
	if got := h.Sessions(); got != 0 {
		t.Errorf("Sessions() = %d, want 0", got)
	}
}

// An ended session id is forgotten, not remembered for good (as mcp-go
// v1.2.1's InsecureStatefulSessionIdManager does), and its GET streams
// are closed.
func TestFrontSessionIDsForgetEndedSessions(t *testing.T) {
	t.Parallel()
	ids := newFrontSessionIDs(0, 0)
	id := ids.mint(sessionClaims{}, nil)
	if !ids.valid(id) {
		t.Fatalf("a live session is invalid")
	}
	closed := false
	ids.watch(id, func() { closed = true })
	ids.terminate(id)
	if ids.valid(id) {
		t.Error("an ended session is still valid")
	}
	if !closed {
		t.Error("the ended session's GET stream is still open")
	}
	if len(ids.live) != 0 || len(ids.streams) != 0 || ids.count() != 0 {
		t.Errorf("the store holds %d ids and %d streams after the session ended", len(ids.live), len(ids.streams))
	}
}
