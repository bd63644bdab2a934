package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/policy"
	"github.com/mcpotc/mcpotc/bridge/state"
	"github.com/mcpotc/mcpotc/internal/mcpgotest"
	"github.com/mcpotc/mcpotc/internal/redistest"
	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
)

// startRedisServer opens the --state client on a redis-server of its own.
func startRedisServer(t *testing.T) *state.Redis {
	t.Helper()
	r, err := state.Open(redistest.Start(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// runCounter is an MCP server whose tool "work" counts its runs by the
// argument "who".
type runCounter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *runCounter) get(who string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[who]
}

func (c *runCounter) server() *mcpserver.MCPServer {
	s := mcpserver.NewMCPServer("counter", "1.0.0", mcpserver.WithToolCapabilities(true))
	s.AddTool(mcpgo.NewTool("work", mcpgo.WithString("who", mcpgo.Required())), func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		who := req.GetString("who", "")
		c.mu.Lock()
		c.runs[who]++
		n := c.runs[who]
		c.mu.Unlock()
		return mcpgo.NewToolResultText(who + " run " + strconv.Itoa(n)), nil
	})
	return s
}

// A caller that sends a call with a call_id and hangs up at once gets no
// run the shared rate limit does not count (issue 34, item 1): serve-otc
// with its rate-limit buckets and call_ids in a real redis-server (as
// --state), a limit of 3 calls an hour of Counter.work per caller.
// mallory makes her 3 calls, then sends 6 more, each with its own call_id,
// closing each connection as soon as it is sent; the front sees each only
// once the hang-up is known (the test's handler waits for the request's
// context to end, then serves it), so each reaches admission with its
// caller gone. None of them runs; no error-level line says the store
// cannot be reached; her next 3 calls are 429. alice, an honest caller,
// gets her own 3. (Before: each hang-up's Redis script failed with
// "context canceled", the limiter took it for the store down, counted the
// call in this replica's buckets and admitted it, and the detached call
// ran: mallory's tool ran 6 times.)
func TestOTCFrontLimitHoldsWhenCallerHangsUp(t *testing.T) {
	secret := []byte("hangup-test-secret")
	rdb := startRedisServer(t)
	limits, _ := policy.NewLimits(nil, []policy.ToolRate{{Tools: []string{"Counter.work"}, Rate: policy.Rate{Requests: 3, Per: time.Hour}}})
	counter := &runCounter{runs: map[string]int{}}
	logs := &syncBuffer{}
	f, err := NewOTCFront(context.Background(), []MCPServer{{Toolkit: "Counter",
		Config: upstream.Config{Name: "counter", InProcess: mcpgotest.InProcess(counter.server())}}},
		&OTCFrontOptions{Logger: zerolog.New(logs), Controls: &Controls{Limits: limits}, LimitStore: rdb,
			Server: otc.Options{JWTSecret: secret, IdempotencyTTL: time.Hour, IdempotencyStore: rdb}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	waitOTCReady(t, f)

	// Requests marked X-Test-Hangup reach the front once their client's
	// hang-up is known; served tells when the front answered them.
	served := make(chan struct{}, 16)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test-Hangup") == "" {
			f.Handler().ServeHTTP(w, r)
			return
		}
		// The server learns of the hang-up once the body is read.
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
			t.Error("the hang-up was not noticed within 20 s")
		}
		f.Handler().ServeHTTP(w, r)
		served <- struct{}{}
	}))
	t.Cleanup(hs.Close)

	token := func(sub string) string {
		s, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
		return "Bearer " + s
	}
	mallory, alice := token("mallory"), token("alice")
	body := func(who, callID string) string {
		return `{"tool_id":"Counter.work","call_id":"` + callID + `","input":{"who":"` + who + `"}}`
	}
	call := func(auth, who, callID string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/tools/call", strings.NewReader(body(who, callID)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("OXP-Version", "1.0")
		req.Header.Set("Authorization", auth)
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	tally := func(auth, who string, from, n int) map[int]int {
		got := map[int]int{}
		for i := from; i < from+n; i++ {
			status, m := call(auth, who, who+"-"+strconv.Itoa(i))
			got[status]++
			if status == http.StatusOK && m["success"] != true {
				t.Errorf("%s's call %d: 200 %v", who, i+1, m)
			}
		}
		return got
	}
	if got := tally(mallory, "mallory", 0, 3); got[200] != 3 {
		t.Errorf("mallory's first 3 calls: %v, want 3 × 200", got)
	}
	for i := range 6 {
		b := body("mallory", "hangup-"+strconv.Itoa(i))
		conn, err := net.Dial("tcp", hs.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.WriteString(conn, "POST /tools/call HTTP/1.1\r\nHost: "+hs.Listener.Addr().String()+"\r\nContent-Type: application/json\r\nOXP-Version: 1.0\r\n"+
			"Authorization: "+mallory+"\r\nX-Test-Hangup: 1\r\nContent-Length: "+strconv.Itoa(len(b))+"\r\n\r\n"+b)
		_ = conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-served:
		case <-time.After(30 * time.Second):
			t.Fatalf("hang-up %d: the front did not finish with it within 30 s", i+1)
		}
	}
	if got := tally(mallory, "mallory", 3, 3); got[429] != 3 {
		t.Errorf("mallory's 3 calls after her 6 hang-ups: %v, want 3 × 429", got)
	}
	if got := tally(alice, "alice", 0, 6); got[200] != 3 || got[429] != 3 {
		t.Errorf("alice's 6 calls: %v, want 3 × 200 and 3 × 429", got)
	}
	if n := counter.get("mallory"); n != 3 {
		t.Errorf("mallory's tool ran %d times, want 3 (the limit; her hang-ups none)", n)
	}
	if n := counter.get("alice"); n != 3 {
		t.Errorf("alice's tool ran %d times, want 3", n)
	}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, `"level":"error"`) || strings.Contains(line, "cannot be reached") {
			t.Errorf("log: %s", line)
		}
	}
}
