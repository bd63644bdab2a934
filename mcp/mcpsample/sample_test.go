package mcpsample

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

func newClient(t *testing.T) *mcpclient.Client {
	t.Helper()
	// The sample served over a pair of pipes, as mcpotc sample-mcp serves
	// it over stdio.
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- ServeStdio(context.Background(), inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		if err := <-served; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	c := mcpclient.NewClient(mcptransport.NewIO(outR, inW, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcpgo.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcpgo.Implementation{Name: "sample-test", Version: "1"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatal(err)
	}
	if res.ServerInfo.Name != Name || res.ServerInfo.Version != Version {
		t.Errorf("serverInfo = %+v", res.ServerInfo)
	}
	return c
}

func call(t *testing.T, c *mcpclient.Client, name string, args map[string]any) *mcpgo.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := mcpgo.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(t *testing.T, res *mcpgo.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("%d content blocks", len(res.Content))
	}
	tc, ok := mcpgo.AsTextContent(res.Content[0])
	if !ok {
		t.Fatalf("content %T", res.Content[0])
	}
	return tc.Text
}

func TestTools(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]mcpgo.Tool{}
	for _, tool := range list.Tools {
		got[tool.Name] = tool
		if !strings.Contains(tool.Description, "Sample tool") {
			t.Errorf("%s: description %q does not say it is a sample", tool.Name, tool.Description)
		}
	}
	for _, n := range []string{"echo", "add", "fail", "slow"} {
		if _, ok := got[n]; !ok {
			t.Errorf("tool %s missing", n)
		}
	}
	schema, _ := json.Marshal(got["add"].OutputSchema)
	if !strings.Contains(string(schema), `"sum"`) {
		t.Errorf("add outputSchema = %s", schema)
	}
}

func TestEchoAddFail(t *testing.T) {
	c := newClient(t)
	if got := text(t, call(t, c, "echo", map[string]any{"message": "héllo"})); got != "héllo" {
		t.Errorf("echo = %q", got)
	}
	if res := call(t, c, "echo", map[string]any{}); !res.IsError {
		t.Errorf("echo without message: %+v", res)
	}

	res := call(t, c, "add", map[string]any{"a": 2, "b": -0.5})
	if res.IsError || text(t, res) != `{"sum":1.5}` {
		t.Errorf("add: %+v", res)
	}
	structured, _ := json.Marshal(res.StructuredContent)
	if string(structured) != `{"sum":1.5}` {
		t.Errorf("structuredContent = %s", structured)
	}
	if res := call(t, c, "add", map[string]any{"a": "x", "b": 1}); !res.IsError {
		t.Errorf("add with a string: %+v", res)
	}

	res = call(t, c, "fail", nil)
	if !res.IsError || text(t, res) == "" {
		t.Errorf("fail: %+v", res)
	}
}

func TestSlowProgressAndBounds(t *testing.T) {
	c := newClient(t)
	var mu sync.Mutex
	var notes []mcpgo.JSONRPCNotification
	c.OnNotification(func(n mcpgo.JSONRPCNotification) {
		mu.Lock()
		defer mu.Unlock()
		notes = append(notes, n)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := mcpgo.CallToolRequest{}
	req.Params.Name = "slow"
	req.Params.Arguments = map[string]any{"seconds": 0.2, "steps": 3}
	req.Params.Meta = &mcpgo.Meta{ProgressToken: "tok"}
	start := time.Now()
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("slow returned after %s", d)
	}
	if res.IsError {
		t.Errorf("slow: %+v", res)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		mu.Lock()
		n := len(notes)
		mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	if len(notes) != 3 {
		t.Fatalf("%d notifications", len(notes))
	}
	last := notes[2]
	mu.Unlock()
	if last.Method != "notifications/progress" || last.Params.AdditionalFields["progressToken"] != "tok" ||
		fmt.Sprint(last.Params.AdditionalFields["progress"]) != "3" || fmt.Sprint(last.Params.AdditionalFields["total"]) != "3" {
		t.Errorf("last progress = %+v", last)
	}

	for _, args := range []map[string]any{{"seconds": 31}, {"seconds": -1}, {"steps": 0}, {"steps": 101}} {
		if res := call(t, c, "slow", args); !res.IsError {
			t.Errorf("slow %v accepted", args)
		}
	}
}

func TestSlowStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	req := mcpgo.CallToolRequest{}
	req.Params.Arguments = map[string]any{"seconds": 30}
	start := time.Now()
	_, err := slow(ctx, req)
	if !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Errorf("slow: %v after %s", err, time.Since(start))
	}
}

// TestServeStdio speaks raw JSON-RPC lines to ServeStdio.
func TestServeStdio(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- ServeStdio(context.Background(), inR, outW)
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	read := func() map[string]json.RawMessage {
		t.Helper()
		got := make(chan bool, 1)
		go func() { got <- lines.Scan() }()
		select {
		case ok := <-got:
			if !ok {
				t.Fatal("stdout ended")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no answer")
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", lines.Bytes(), err)
		}
		return m
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := read(); !strings.Contains(string(m["result"]), `"name":"mcpotc-sample"`) {
		t.Fatalf("initialize: %s", m["result"])
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}`)
	m := read()
	if string(m["id"]) != "2" || !strings.Contains(string(m["result"]), `"structuredContent":{"sum":3}`) {
		t.Fatalf("add: %s", m["result"])
	}
	// A slow call cancelled: not answered (the next answer is the ping's),
	// and it ends at once: the server returns at EOF without waiting out
	// its grace period (5 s) for it.
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","arguments":{"seconds":30}}}`)
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"test"}}`)
	send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	if m := read(); string(m["id"]) != "4" {
		t.Fatalf("after the cancel: %s, want the ping's answer", lines.Bytes())
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("ServeStdio did not return at the end of its input: the cancelled call still runs")
	}
}
