package state

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/mcp/front"
)

// startRedis runs a redis-server of its own on a free loopback port for
// the test (skipped when redis-server is not installed) and returns its
// URL once it answers PING.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (Debian package redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := "redis://127.0.0.1:" + strconv.Itoa(port)
	r, err := Open(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for deadline := time.Now().Add(10 * time.Second); r.Ping(context.Background()) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("redis-server does not answer PING")
		}
	}
	return url
}

// Two replicas of the MCP front that share their state keys continue each
// other's calls, so they share the used-once marks of requestStates in
// Redis (issue 34, item 12): a state answered on one replica is refused on
// the other; the honest retry on either goes on once.
func TestUsedStatesSharedAcrossReplicas(t *testing.T) {
	url := startRedis(t)
	key := [][]byte{[]byte("a key the replicas share, 32 bytes+")}
	replica := func() *front.Server {
		r, err := Open(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		f := front.New("replica", "1.0.0", &front.Options{StateKeys: key, UsedStates: r})
		f.SetTools(front.Tool{Tool: mcpgo.NewTool("connect"), Handler: func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			if _, ok := front.Resumed(ctx); ok {
				return mcpgo.NewToolResultText("connected"), nil
			}
			return nil, &front.InputRequired{Elicitations: []mcpgo.ElicitationParams{{Mode: mcpgo.ElicitationModeURL, ElicitationID: "k", URL: "https://auth.example/"}}}
		}})
		return f
	}
	a, b := replica(), replica()
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	call := func(f *front.Server, extra string) map[string]any {
		msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"connect","arguments":{},` + meta + extra + `}}`
		var frame map[string]any
		if err := json.Unmarshal(f.HandleMessage(context.Background(), []byte(msg)), &frame); err != nil {
			t.Fatal(err)
		}
		return frame
	}
	retry := func(state string) string {
		return fmt.Sprintf(`,"inputResponses":{"k":{"action":"accept"}},"requestState":%q`, state)
	}
	stateOf := func(frame map[string]any) string {
		res, _ := frame["result"].(map[string]any)
		s, _ := res["requestState"].(string)
		if s == "" {
			t.Fatalf("no requestState: %v", frame)
		}
		return s
	}
	textOf := func(frame map[string]any) string {
		b, _ := json.Marshal(frame)
		return string(b)
	}

	state := stateOf(call(a, ""))
	if got := textOf(call(b, retry(state))); !strings.Contains(got, `"text":"connected"`) {
		t.Fatalf("the honest retry on the other replica: %s", got)
	}
	for _, f := range []*front.Server{a, b} {
		got := call(f, retry(state))
		e, _ := got["error"].(map[string]any)
		if e == nil || e["code"] != float64(-32602) || !strings.Contains(e["message"].(string), "it was used already") {
			t.Errorf("the state replayed: %s, want -32602 used already", textOf(got))
		}
	}
	state = stateOf(call(b, ""))
	if got := textOf(call(a, retry(state))); !strings.Contains(got, `"text":"connected"`) {
		t.Errorf("another call's honest retry: %s", got)
	}
}
