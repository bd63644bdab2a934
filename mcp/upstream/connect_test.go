package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/mcp/mcpsample"
)

// New runs nothing: no callback before Connect, however fast the server
// (an in-process one answers at once), so that a caller can record the
// Upstream before its first callback. Its calls fail as unavailable
// (never sent) until then. After Connect, the tool list arrives and calls
// work; a second Connect does nothing.
func TestNewRunsNothingUntilConnect(t *testing.T) {
	lists := make(chan int, 4)
	u, err := New(&Config{Name: "sample", InProcess: Piped(mcpsample.ServeStdio)}, &Options{
		OnToolsChanged: func(tools []json.RawMessage) { lists <- len(tools) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = u.Close(ctx)
	})
	select {
	case n := <-lists:
		t.Fatalf("OnToolsChanged(%d tools) before Connect", n)
	case <-time.After(300 * time.Millisecond):
	}
	if s := u.Status(); s.Ready || s.Reason != "starting" {
		t.Errorf("before Connect: %+v, want not ready, starting", s)
	}
	if _, err := callTool(t, u, "echo", `{"message":"hi"}`); !errors.Is(err, ErrUnavailable) {
		t.Errorf("call before Connect: %v, want ErrUnavailable", err)
	}

	u.Connect(context.Background())
	u.Connect(context.Background())
	select {
	case n := <-lists:
		if n != 4 {
			t.Errorf("first tool list: %d tools, want 4", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no tool list 10s after Connect")
	}
	res, err := callTool(t, u, "echo", `{"message":"hi"}`)
	if err != nil || resultText(t, res) != "hi" {
		t.Fatalf("call after Connect: %s, %v", res, err)
	}
}

// An Upstream that never connected closes at once, and Connect after
// Close does nothing: no callback ever runs.
func TestCloseBeforeConnect(t *testing.T) {
	lists := make(chan int, 1)
	u, err := New(&Config{Name: "sample", InProcess: Piped(mcpsample.ServeStdio)}, &Options{
		OnToolsChanged: func(tools []json.RawMessage) { lists <- len(tools) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	if err := u.Close(ctx); err != nil || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("Close before Connect: %v after %s", err, time.Since(start))
	}
	u.Connect(context.Background())
	select {
	case n := <-lists:
		t.Fatalf("OnToolsChanged(%d tools) after Close", n)
	case <-time.After(300 * time.Millisecond):
	}
	if s := u.Status(); s.Ready || s.Reason != "closed" {
		t.Errorf("after Close: %+v, want closed", s)
	}
}
