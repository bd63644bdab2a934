//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// holdChildEnv makes this test binary a tiny MCP stdio server with one tool,
// "hold", that answers after its argument seconds and says on stderr that it
// holds a call ("hold child: holding <id>"): the test's sign that a call is
// in flight, without sleeping.
const holdChildEnv = "MCPOTC_E2E_HOLD_CHILD"

// TestE2EHoldChild is not a test: with holdChildEnv set, it serves MCP over
// stdio and exits at the end of its stdin.
func TestE2EHoldChild(t *testing.T) {
	if os.Getenv(holdChildEnv) != "1" {
		return
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	reply := func(id json.RawMessage, result string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", id, result)
		out.Flush()
	}
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			os.Exit(0)
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					Seconds float64 `json:"seconds"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &m) != nil || m.ID == nil || m.Method == "" {
			continue
		}
		switch m.Method {
		case "initialize":
			reply(m.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"hold-child","version":"1.0.0"}}`)
		case "ping":
			reply(m.ID, `{}`)
		case "tools/list":
			reply(m.ID, `{"tools":[{"name":"hold","inputSchema":{"type":"object","properties":{"seconds":{"type":"number"}}}}]}`)
		case "tools/call":
			fmt.Fprintf(os.Stderr, "hold child: holding %s\n", m.ID)
			id, d := m.ID, time.Duration(m.Params.Arguments.Seconds*float64(time.Second))
			time.AfterFunc(d, func() {
				reply(id, fmt.Sprintf(`{"content":[{"type":"text","text":"held %gs"}]}`, d.Seconds()))
			})
		default:
			mu.Lock()
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`+"\n", m.ID)
			out.Flush()
			mu.Unlock()
		}
	}
}

// TestE2EOTCFrontShutdownAnswersLongCalls: SIGTERM while 16 calls run that
// the shutdown grace (10 s) cannot wait for, and one that fits it. The one
// that fits is answered normally; each long one is answered 503 with
// Retry-After and a message naming the shutdown (not a closed connection);
// serve-otc exits 0.
func TestE2EOTCFrontShutdownAnswersLongCalls(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b := otcfStart(t, []string{"--name", "hold", "--", self, "-test.run=^TestE2EHoldChild$"},
		[]string{holdChildEnv + "=1", "GORACE=atexit_sleep_ms=0"})
	b.waitTools(t, []string{"hold.hold@1.0.0"})
	d := otcfDialects[1]

	const long = 16
	var answers []<-chan *otcfResp
	for i := range long {
		req := map[string]any{"tool_id": "hold.hold", "input": map[string]any{"seconds": 25}}
		if i%4 == 0 {
			// With a call_id the call runs detached from its client
			// (idempotency); the shutdown ends it all the same.
			req["call_id"] = fmt.Sprintf("long-%d", i)
		}
		answers = append(answers, b.callAsync(t, d, req, fmt.Sprintf("long call %d", i)))
	}
	short := map[string]any{"tool_id": "hold.hold", "input": map[string]any{"seconds": 3}}
	shortAnswer := b.callAsync(t, d, short, "the call that fits the grace")
	// Every call is in flight: the child holds all of them.
	deadline := time.Now().Add(otcfStartTimeout)
	for {
		n := len(b.logs(func(m map[string]any) bool {
			return m["message"] == "child stderr" && strings.HasPrefix(fmt.Sprint(m["line"]), "hold child: holding ")
		}))
		if n == long+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child holds %d calls, want %d", n, long+1)
		}
		time.Sleep(20 * time.Millisecond)
	}

	start := time.Now()
	if err := syscall.Kill(b.p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := <-shortAnswer; r != nil {
		otcfCheckAnswer(t, d, short, r, 200, otcfOK("held 3s"))
	}
	for i, ch := range answers {
		r := <-ch
		if r == nil {
			continue // no HTTP answer: reported by callAsync
		}
		if r.Status != 503 || r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Raw), "shutting down") {
			t.Errorf("long call %d: %d Retry-After %q %s; want 503, Retry-After and a message naming the shutdown",
				i, r.Status, r.Header.Get("Retry-After"), truncate(string(r.Raw), 300))
		}
	}
	err = b.p.Wait(otcfStopBound)
	t.Logf("serve-otc exited %v after SIGTERM: %v", time.Since(start).Round(time.Millisecond), err)
	if err != nil {
		t.Errorf("serve-otc after SIGTERM: %v, want exit status 0", err)
	}
	for _, want := range []string{"requests still running at the end of the shutdown grace: their calls are ended and answered 'shutting down'", "every request was answered"} {
		if len(b.logs(func(m map[string]any) bool { return m["message"] == want })) != 1 {
			t.Errorf("log: want one line %q", want)
		}
	}
}

// shutdownMessage is the message of a call's answer when a shutdown ended it.
const shutdownMessage = "The bridge is shutting down: the call was ended before it finished; retry it (another replica, or this one once it is back, will take it)"

// TestE2EMCPFrontShutdownAnswersLongCalls: SIGTERM while calls run that the
// shutdown grace cannot wait for, on every transport and protocol: each
// call is answered with the JSON-RPC error CodeShuttingDown (-32006), its
// message naming the shutdown and data.retryAfter, not a lost connection;
// serve-mcp exits 0. (Calls that fit the grace: TestE2EMCPFrontShutdown.)
func TestE2EMCPFrontShutdownAnswersLongCalls(t *testing.T) {
	buildMcpotc(t)
	forEachTransportProtocol(t, 90*time.Second, func(t *testing.T, ctx context.Context, transport, protocol string) {
		up := slowOTC(t, 40*time.Second)
		b := startBridge(t, ctx, transport, []string{"--otc", up.URL}, nil)
		cs := b.connect(t, ctx, clientOpts{protocol: protocol})
		if names := toolNames(listTools(t, ctx, cs)); !slices.Equal(names, []string{"Slow_Wait"}) {
			t.Fatalf("tools/list = %q, want [Slow_Wait]", names)
		}
		const calls = 3
		errs := make(chan error, calls)
		for i := range calls {
			go func() {
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "Slow_Wait", Arguments: map[string]any{"tag": fmt.Sprint("long-", i)}})
				if err == nil {
					err = fmt.Errorf("a result: %s", jsonString(res))
				}
				errs <- err
			}()
		}
		for range calls {
			waitTag(t, up.started, "a call reaching the upstream", 15*time.Second)
		}
		start := time.Now()
		if err := syscall.Kill(b.p.Pid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		for range calls {
			// The SDK keeps the error's type only while the connection is
			// up (it wraps it with %v once closed): the code and data are
			// compared where it does, and on stdout for stdio.
			err := <-errs
			var we *jsonrpc.Error
			switch {
			case errors.As(err, &we):
				if we.Code != -32006 || we.Message != shutdownMessage || !reflect.DeepEqual(asData(t, we.Data), mustData(`{"retryAfter":2}`)) {
					t.Errorf("a call longer than the grace: %d %q %v, want -32006 naming the shutdown, data {\"retryAfter\":2}", we.Code, we.Message, we.Data)
				}
			case err == nil || !strings.HasSuffix(err.Error(), shutdownMessage):
				t.Errorf("a call longer than the grace: %v (%T), want the JSON-RPC error naming the shutdown", err, err)
			}
		}
		err := b.p.Wait(exitBound)
		if transport == "stdio" {
			var frames []any
			for _, l := range strings.Split(strings.TrimSpace(b.p.Stdout()), "\n") {
				if f := mustData(l); !strings.Contains(l, `"result"`) {
					frames = append(frames, withoutKeys(f, "id"))
				}
			}
			want := mustData(`{"jsonrpc":"2.0","error":{"code":-32006,"message":` + jsonString(shutdownMessage) + `,"data":{"retryAfter":2}}}`)
			if len(frames) != calls || slices.ContainsFunc(frames, func(f any) bool { return !reflect.DeepEqual(f, want) }) {
				t.Errorf("stdout error frames: %s, want %d × %s", jsonString(frames), calls, jsonString(want))
			}
		}
		t.Logf("serve-mcp --transport %s exited %v after SIGTERM: %v", transport, time.Since(start).Round(time.Millisecond), err)
		if err != nil {
			t.Errorf("serve-mcp --transport %s after SIGTERM: %v, want exit status 0", transport, err)
		}
	})
}
