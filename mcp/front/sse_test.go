package front

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

// sseTestClient is a raw legacy SSE client: a GET stream and POSTs to the
// endpoint it announces.
type sseTestClient struct {
	framedClient // frames are POSTed to the endpoint
	base         *url.URL
	endpoint     string
	token        string
	ended        chan struct{} // the stream ended
	close        func()        // hangs up
}

func startFrontSSE(t *testing.T, base, token string) *sseTestClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+SSEPath, nil)
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", SSEPath, resp.StatusCode)
	}
	u, _ := url.Parse(base)
	c := &sseTestClient{base: u, token: token, ended: make(chan struct{}), close: cancel}
	c.framedClient = framedClient{d: newFrontDispatcher(), put: c.postMessage}
	endpoint := make(chan string, 1)
	go func() {
		defer close(c.ended)
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		var event string
		var data [][]byte
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			line = bytes.TrimRight(line, "\r\n")
			switch {
			case len(line) == 0:
				frame := bytes.Join(data, []byte("\n"))
				switch event {
				case "endpoint":
					endpoint <- string(frame)
				case "message":
					if err := c.d.deliver(frame); err != nil {
						t.Error(err)
					}
				}
				event, data = "", nil
			case bytes.HasPrefix(line, []byte("event:")):
				event = string(bytes.TrimSpace(line[len("event:"):]))
			case bytes.HasPrefix(line, []byte("data:")):
				data = append(data, bytes.TrimPrefix(line[len("data:"):], []byte(" ")))
			}
		}
	}()
	select {
	case c.endpoint = <-endpoint:
	case <-time.After(wait):
		t.Fatal("no endpoint event")
	}
	return c
}

func (c *sseTestClient) postMessage(t *testing.T, frame []byte) {
	status, err := c.postAs(frame, c.token)
	if err != nil {
		t.Error(err)
		return
	}
	if status != http.StatusAccepted {
		t.Errorf("POST %s: %d", c.endpoint, status)
	}
}

// postAs POSTs frame to the session's message endpoint with token (none
// when empty) and returns the answer's status.
func (c *sseTestClient) postAs(frame []byte, token string) (int, error) {
	ref, err := url.Parse(c.endpoint)
	if err != nil {
		return 0, err
	}
	req, _ := http.NewRequest(http.MethodPost, c.base.ResolveReference(ref).String(), bytes.NewReader(frame))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// startSSESession starts f's HTTP handler with opts and a legacy SSE
// client of it with token, initialized.
func startSSESession(t *testing.T, f *Server, opts *HTTPOptions, token string) (*httptest.Server, *HTTPHandler, *sseTestClient) {
	t.Helper()
	srv, h := startFrontHTTP(t, f, opts)
	c := startFrontSSE(t, srv.URL, token)
	initialize(t, c)
	return srv, h, c
}

func TestFrontSSE(t *testing.T) {
	t.Parallel()
	f, p := testFront(t, nil)
	srv, _, c := startSSESession(t, f, nil, "")
	runScenarios(t, c, p)
	t.Run("replacing tools notifies the client", func(t *testing.T) { listChanged(t, f, c.d) })

	t.Run("hanging up cancels the session's calls", func(t *testing.T) {
		other := startFrontSSE(t, srv.URL, "")
		initialize(t, other)
		other.send(t, 9, "tools/call", callParams("block", `{"tag":"h9"}`))
		expectTag(t, p.started, "h9")
		other.close()
		expectTag(t, p.cancelled, "h9")
	})

	t.Run("two sessions with the same ids", func(t *testing.T) {
		other := startFrontSSE(t, srv.URL, "")
		initialize(t, other)
		a := c.send(t, 77, "tools/call", callParams("coded", `{"code":-32010,"delay_ms":20,"tag":"a"}`))
		b := other.send(t, 77, "tools/call", callParams("coded", `{"code":-32011,"tag":"b"}`))
		sameJSON(t, await(t, a), `{"jsonrpc":"2.0","id":77,"error":{"code":-32010,"message":"code -32010 for a","data":{"tag":"a"}}}`)
		sameJSON(t, await(t, b), `{"jsonrpc":"2.0","id":77,"error":{"code":-32011,"message":"code -32011 for b","data":{"tag":"b"}}}`)
	})
}

func TestFrontSSEBearerToken(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	_, _, c := startSSESession(t, f, &HTTPOptions{BearerToken: "s3cret"}, "s3cret")
	sameJSON(t, callTool(t, c, 2, "tools/call", callParams("whoami", `{}`)),
		`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"token s3cret"}]}}`)
}

// Shutdown waits for a call in flight on an SSE session, writes its answer
// on the stream, then closes the stream.
func TestFrontSSEShutdownDeliversInFlightAnswers(t *testing.T) {
	t.Parallel()
	f, p := testFront(t, nil)
	srv, h, c := startSSESession(t, f, nil, "")
	ch := c.send(t, 5, "tools/call", callParams("wait", `{"tag":"s5"}`))
	expectTag(t, p.started, "s5")

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.Shutdown(ctx, srv.Config) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a call in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, SSEPath, nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("new SSE stream while shutting down: %d", rec.Code)
	}

	close(p.release)
	sameJSON(t, await(t, ch), `{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"released s5"}]}}`)
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	expectEnded(t, c.ended, "the SSE stream")
}

// When ctx ends first, the calls still running are cancelled and answered
// "shutting down" on their stream before it closes; every request is then
// done, and Shutdown returns nil.
func TestFrontSSEShutdownTimeoutCancelsCalls(t *testing.T) {
	t.Parallel()
	f, p := testFront(t, nil)
	srv, h, c := startSSESession(t, f, nil, "")
	ch := c.send(t, 6, "tools/call", callParams("block", `{"tag":"s6"}`))
	expectTag(t, p.started, "s6")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := h.Shutdown(ctx, srv.Config); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	expectTag(t, p.cancelled, "s6")
	sameJSON(t, await(t, ch), shuttingDownFrame(6))
	expectEnded(t, c.ended, "the SSE stream")
}

// A legacy SSE session is its opener's: with HTTPOptions.Resource, a
// message POSTed to alice's session with bob's token finds no session
// (404) and reaches no tool; alice's own messages are served.
func TestFrontSSESessionOwner(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	auth := subjectAuth()
	_, _, alice := startSSESession(t, f, &HTTPOptions{Resource: auth}, "tok-alice")
	status, err := alice.postAs(request(2, "tools/call", callParams("whois", `{}`)), "tok-bob")
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusNotFound {
		t.Errorf("bob's message in alice's SSE session: %d, want 404", status)
	}
	sameJSON(t, callTool(t, alice, 3, "tools/call", callParams("whois", `{}`)),
		`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"subject alice"}]}}`)
}
