package upstream

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// resumingServer is a 2025-11-25 streamable HTTP server as the conformance
// runner's sse-retry scenario is one: it answers any method it does not
// know (server/discover included) with an empty result; a tools/call
// gets an event stream with a priming event (an id, retry: 20, no data)
// that it ends before the response; the response comes on the GET that
// resumes it with Last-Event-ID (a GET without one, the stream of
// notifications, ends at once). With never set, no stream ever carries it.
type resumingServer struct {
	never   bool
	mu      sync.Mutex
	pending json.RawMessage // the id of the call waiting for its answer
	gets    []string        // the Last-Event-ID of each GET
	n       int
}

func (s *resumingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Mcp-Session-Id", "session-1")
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "text/event-stream")
		last := r.Header.Get("Last-Event-ID")
		if last == "" { // the standalone stream of notifications: nothing on it
			return
		}
		s.gets = append(s.gets, last)
		s.n++
		fmt.Fprintf(w, "id: event-%d\nretry: 20\ndata: \n\n", s.n)
		if s.pending != nil && !s.never {
			s.n++
			fmt.Fprintf(w, "event: message\nid: event-%d\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"resumed\"}]}}\n\n", s.n, s.pending)
			s.pending = nil
		}
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(body, &req)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case req.ID == nil:
		w.WriteHeader(http.StatusAccepted)
	case req.Method == "initialize":
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","serverInfo":{"name":"resuming","version":"1"},"capabilities":{"tools":{}}}}`, req.ID)
	case req.Method == "tools/list":
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"test_reconnection","inputSchema":{"type":"object"}}]}}`, req.ID)
	case req.Method == "tools/call":
		s.pending = req.ID
		w.Header().Set("Content-Type", "text/event-stream")
		s.n++
		fmt.Fprintf(w, "id: event-%d\nretry: 20\ndata: \n\n", s.n) // and the stream ends
	default:
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
	}
}

// Defect (conformance sse-retry, SEP-1699): a 2025-11-25 server that
// answers server/discover with an empty result was taken for a 2026-07-28
// server, and at that wire mcp-go never resumes a stream: the call failed
// "lost: unexpected nil response" without a GET. Now: the empty result is
// not a DiscoverResult, the bridge initializes, and the call's answer
// comes from the stream resumed with GET and Last-Event-ID.
func TestUpstreamResumesAnEndedCallStream(t *testing.T) {
	s := &resumingServer{}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp"}, Options{})
	waitReady(t, u)
	if st := u.Status(); st.ProtocolVersion != "2025-11-25" {
		t.Fatalf("protocol %q (%s), want 2025-11-25 after initialize", st.ProtocolVersion, st.Reason)
	}
	res, err := callTool(t, u, "test_reconnection", `{}`)
	if err != nil || resultText(t, res) != "resumed" {
		t.Fatalf("call: %s, %v", res, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.gets) != 1 || s.gets[0] != "event-1" {
		t.Errorf("GETs with Last-Event-ID %q, want one, resuming from event-1", s.gets)
	}
}

// A server that ends every resumed stream without the answer is resumed
// at most 100 times, then the call fails saying so.
func TestUpstreamResumesBounded(t *testing.T) {
	s := &resumingServer{never: true}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp", CallTimeout: time.Minute}, Options{})
	waitReady(t, u)
	_, err := callTool(t, u, "test_reconnection", `{}`)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("ended the response stream %d times", maxStreamResumes)) {
		t.Errorf("call: %v, want a failure after %d resumptions", err, maxStreamResumes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.gets) != maxStreamResumes {
		t.Errorf("%d GETs, want %d", len(s.gets), maxStreamResumes)
	}
}
