package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/mcp/mcpsample"
)

func TestUpstreamInProcessSample(t *testing.T) {
	var mu sync.Mutex
	var progress []string
	logs := &testLogs{}
	u, err := Start(context.Background(), &Config{Name: "sample", InProcess: Piped(mcpsample.ServeStdio)}, &Options{
		Logger: logs.logger(),
		OnNotification: func(method string, params json.RawMessage) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, method+" "+string(params))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := u.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	waitReady(t, u)
	tools := waitTools(t, u, 4)
	names := map[string]bool{}
	for _, raw := range tools {
		var tool struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		}
		_ = json.Unmarshal(raw, &tool)
		names[tool.Name] = strings.Contains(tool.Description, "Sample tool")
	}
	for _, n := range []string{"echo", "add", "fail", "slow"} {
		if !names[n] {
			t.Errorf("tool %s missing or not described as a sample: %v", n, names)
		}
	}
	if got := u.ServerInfo(); got.Name != mcpsample.Name || got.Version != mcpsample.Version {
		t.Errorf("ServerInfo = %+v", got)
	}

	res, err := callTool(t, u, "echo", `{"message":"hello"}`)
	if err != nil || resultText(t, res) != "hello" {
		t.Errorf("echo: %s, %v", res, err)
	}

	res, err = callTool(t, u, "add", `{"a":2,"b":3.5}`)
	var r mcpgo.CallToolResult
	if err != nil {
		t.Fatal(err)
	}
	var add struct {
		StructuredContent map[string]float64 `json:"structuredContent"`
		IsError           bool               `json:"isError"`
	}
	_ = json.Unmarshal(res, &add)
	if add.StructuredContent["sum"] != 5.5 || add.IsError || resultText(t, res) != `{"sum":5.5}` {
		t.Errorf("add: %s", res)
	}

	res, err = callTool(t, u, "fail", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(res, &r); err != nil || !r.IsError || resultText(t, res) == "" {
		t.Errorf("fail: %s", res)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err = u.CallTool(ctx, "slow", json.RawMessage(`{"seconds":0.2,"steps":4}`), map[string]any{"progressToken": "p-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.IsError = false
	if err := json.Unmarshal(res, &r); err != nil || r.IsError {
		t.Errorf("slow: %s", res)
	}
	eventually(t, 2*time.Second, "4 progress notifications", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) == 4
	})
	mu.Lock()
	if !strings.HasPrefix(progress[3], "notifications/progress ") || !strings.Contains(progress[3], `"progressToken":"p-1"`) ||
		!strings.Contains(progress[3], `"progress":4`) {
		t.Errorf("progress = %q", progress)
	}
	mu.Unlock()

	// Cancelled: returns promptly, the tool stops.
	cctx, ccancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, ccancel)
	start := time.Now()
	_, err = u.CallTool(cctx, "slow", json.RawMessage(`{"seconds":20}`), nil, nil)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Errorf("cancelled slow: %v after %s", err, time.Since(start))
	}
}
