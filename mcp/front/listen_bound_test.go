package front

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// 2026-07-28 subscriptions/listen streams count against bounds, as
// sessions do (issue 34, item 2): per client (MaxListenStreamsPerClient,
// a client named as for sessions: here its address behind a trusted
// proxy) and in all (MaxListenStreams). Beyond either, the listen gets 503
// with Retry-After and a JSON-RPC error (its own id) naming the bound and
// its number; another client's initialize is still answered; a stream
// that closes gives its room back.
func TestFrontListenStreamsBounded(t *testing.T) {
	f, _ := testFront(t, nil)
	srv, h := startFrontHTTP(t, f, &HTTPOptions{MaxListenStreams: 3, MaxListenStreamsPerClient: 2,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
	type answer struct {
		status     int
		retryAfter string
		frame      map[string]any
	}
	// listen opens a stream for client (its X-Forwarded-For): a stream
	// admitted is open once its first event (the acknowledgement) is read,
	// and closes with its cancel; a refusal's answer is read whole.
	listen := func(client string, id int) (answer, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{%q:%q,%q:{}}}}`,
			id, mcpgo.MetaKeyProtocolVersion, mcpgo.ProtocolVersion20260728, mcpgo.MetaKeyClientCapabilities)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+StreamablePath, strings.NewReader(body))
		req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Protocol-Version": {mcpgo.ProtocolVersion20260728}, "Mcp-Method": {"subscriptions/listen"}, "X-Forwarded-For": {client}}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			if err := json.Unmarshal(b, &a.frame); err != nil {
				t.Fatalf("listen %d of %s: %d %s", id, client, resp.StatusCode, b)
			}
			return a, cancel
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "event: message") {
			t.Fatalf("listen %d of %s: %q %v", id, client, line, err)
		}
		t.Cleanup(cancel)
		return a, func() { cancel(); resp.Body.Close() }
	}
	refusal := func(id int, bound string, max int, msg string) answer {
		return answer{status: http.StatusServiceUnavailable, retryAfter: "5", frame: map[string]any{"jsonrpc": "2.0", "id": float64(id),
			"error": map[string]any{"code": float64(CodeTooManySessions), "message": msg, "data": map[string]any{"bound": bound, "max": float64(max)}}}}
	}
	expect := func(what string, got, want answer) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v\nwant %+v", what, got, want)
		}
	}
	open := answer{status: http.StatusOK}

	a1, closeA1 := listen("192.0.2.1", 1)
	a2, _ := listen("192.0.2.1", 2)
	expect("client A's first two streams", answer{a1.status, "", nil}, open)
	expect("client A's second stream", answer{a2.status, "", nil}, open)
	a3, _ := listen("192.0.2.1", 3)
	expect("client A's third stream", a3, refusal(3, "MaxListenStreamsPerClient", 2,
		"too many subscriptions/listen streams for this client: it holds its maximum of 2 streams; close one (one stream carries every notification), or retry later"))
	b1, _ := listen("192.0.2.2", 4)
	expect("client B's stream", answer{b1.status, "", nil}, open)
	c1, _ := listen("192.0.2.3", 5)
	expect("client C's stream, the server full", c1, refusal(5, "MaxListenStreams", 3,
		"too many subscriptions/listen streams: the server holds its maximum of 3 streams; retry later"))

	// Client C still opens a session: the streams do not take the room
	// sessions have.
	initReq, _ := http.NewRequest(http.MethodPost, srv.URL+StreamablePath, strings.NewReader(string(request(1, "initialize", initParams))))
	initReq.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "X-Forwarded-For": {"192.0.2.3"}}
	resp, err := srv.Client().Do(initReq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderSessionID) == "" {
		t.Errorf("client C's initialize with the streams full: %d", resp.StatusCode)
	}

	// A stream closed gives its room back (the server sees the close
	// when it sees the connection end: wait for the admission).
	closeA1()
	for deadline := time.Now().Add(10 * time.Second); ; {
		a, _ := listen("192.0.2.1", 6)
		if a.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client A after closing a stream: %+v (%d held)", a, h.listens.count())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
