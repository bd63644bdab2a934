package bridge

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/mcp/mcpsample"
	"github.com/mcpotc/mcpotc/mcp/upstream"
)

// GET /tools is 503 with Retry-After, naming the MCP servers still
// connecting, while one that may still come up (not reachable yet, within
// its init timeout) was never listed — never a list without its tools.
// One that failed otherwise (a child that exits at once) does not hold
// the list. Once the late server listens, its tools are served within
// about a second.
func TestOTCFrontListWaitsForStartingUpstreams(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	f, err := NewOTCFront(context.Background(), []MCPServer{
		{Toolkit: "Sample", Config: upstream.Config{Name: "sample", InProcess: upstream.Piped(mcpsample.ServeStdio)}},
		{Toolkit: "Late", Config: upstream.Config{Name: "late", URL: "http://" + addr + "/mcp", Protocol: upstream.ProtocolLegacy}},
		{Toolkit: "Broken", Config: upstream.Config{Name: "broken", Command: "false"}},
	}, &OTCFrontOptions{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	get := func() (*httptest.ResponseRecorder, map[string]any) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/tools", nil)
		r.Header.Set("OXP-Version", "1.0")
		f.Handler().ServeHTTP(w, r)
		var body map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		return w, body
	}
	// The sample is listed and "broken" has failed: only "late" holds the list.
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, body := get()
		dev, _ := body["developer_message"].(string)
		if w.Code == 503 && strings.HasPrefix(dev, "still connecting: late (unreachable: ") && !strings.Contains(dev, ";") {
			if w.Header().Get("Retry-After") != "1" || body["message"] != "The tool list is not complete yet: 1 MCP server(s) still connecting" {
				t.Errorf("GET /tools = %d %v %s", w.Code, w.Header(), w.Body)
			}
			break
		}
		if w.Code == 200 {
			t.Fatalf("GET /tools = 200 while late was still starting: %s", w.Body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /tools = %d %s, want 503 naming late only", w.Code, w.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The late server comes up.
	s := mcpserver.NewMCPServer("late", "1.0.0", mcpserver.WithToolCapabilities(true))
	s.AddTool(mcpgo.NewTool("hello"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("hello"), nil
	})
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the port was taken meanwhile: %v", err)
	}
	ts := httptest.NewUnstartedServer(mcpserver.NewStreamableHTTPServer(s, mcpserver.WithStateful(true)))
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = f.Close(context.Background()) }) // first: its GET stream would hold ts.Close
	listening := time.Now()
	for {
		w, body := get()
		if w.Code == 200 {
			items, _ := body["items"].([]any)
			var ids []string
			for _, it := range items {
				m, _ := it.(map[string]any)
				ids = append(ids, m["id"].(string))
			}
			joined := strings.Join(ids, " ")
			if !strings.Contains(joined, "Late.hello@") || !strings.Contains(joined, "Sample.") {
				t.Errorf("GET /tools = %s, want the late server's and the sample's tools", joined)
			}
			break
		}
		if time.Since(listening) > 5*time.Second {
			t.Fatalf("GET /tools = %d %s five seconds after the late server listened", w.Code, w.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := time.Since(listening); d > 2*time.Second {
		t.Errorf("the list was complete %v after the late server listened, want within 2 s", d)
	}
}
