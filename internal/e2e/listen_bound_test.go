//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestE2EListenStreamsBounded: serve-mcp --max-listen-streams-per-client 2
// --max-listen-streams 3 (issue 34, item 2). One client (127.0.0.1) opens
// two 2026-07-28 subscriptions/listen streams; its third is refused (503,
// Retry-After, -32003 naming MaxListenStreamsPerClient and 2); a second
// client (127.0.0.2) opens one, a third client's (127.0.0.3) is refused
// naming MaxListenStreams and 3, and that client's initialize is still
// answered.
func TestE2EListenStreamsBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	br := startBridge(t, ctx, "http", []string{"--max-listen-streams-per-client", "2", "--max-listen-streams", "3"}, nil)
	client := func(src string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	// listen opens a stream from src: 200 once its first event is read
	// (the stream then stays open until the test ends), or the refusal.
	listen := func(src string, id int) (int, http.Header, map[string]any) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, br.url, strings.NewReader(body))
		req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Protocol-Version": {proto20260728}, "Mcp-Method": {"subscriptions/listen"}}
		resp, err := client(src).Do(req)
		if err != nil {
			t.Fatalf("listen %d from %s: %v", id, src, err)
		}
		if resp.StatusCode == http.StatusOK {
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "event: message") {
				t.Fatalf("listen %d from %s: %q %v", id, src, line, err)
			}
			t.Cleanup(func() { resp.Body.Close() })
			return resp.StatusCode, resp.Header, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var frame map[string]any
		if err := json.Unmarshal(b, &frame); err != nil {
			t.Fatalf("listen %d from %s: %d %s", id, src, resp.StatusCode, b)
		}
		return resp.StatusCode, resp.Header, frame
	}
	refused := func(what string, status int, h http.Header, frame map[string]any, id int, bound string, max float64) {
		t.Helper()
		e, _ := frame["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || frame["id"] != float64(id) || e["code"] != float64(-32003) ||
			data["bound"] != bound || data["max"] != max || !strings.Contains(fmt.Sprint(e["message"]), "maximum of "+strconv.Itoa(int(max))) {
			t.Errorf("%s: %d Retry-After %q %v, want 503 and -32003 naming %s and %v", what, status, h.Get("Retry-After"), frame, bound, max)
		}
	}
	for i, src := range []string{"127.0.0.1", "127.0.0.1"} {
		if status, _, frame := listen(src, i+1); status != http.StatusOK {
			t.Fatalf("stream %d of 127.0.0.1: %d %v", i+1, status, frame)
		}
	}
	status, h, frame := listen("127.0.0.1", 3)
	refused("the third stream of 127.0.0.1", status, h, frame, 3, "MaxListenStreamsPerClient", 2)
	if status, _, frame := listen("127.0.0.2", 4); status != http.StatusOK {
		t.Fatalf("the stream of 127.0.0.2: %d %v", status, frame)
	}
	status, h, frame = listen("127.0.0.3", 5)
	refused("the stream of 127.0.0.3, the server full", status, h, frame, 5, "MaxListenStreams", 3)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, br.url, strings.NewReader(initializeBody))
	req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	resp, err := client("127.0.0.3").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Errorf("the initialize of 127.0.0.3 with the streams full: %d", resp.StatusCode)
	}
	t.Log("--max-listen-streams-per-client 2, --max-listen-streams 3: a client's third stream and a third client's stream refused (503, -32003 naming the bound); that client's initialize answered")
}
