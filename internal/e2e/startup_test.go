//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestE2EDeadUpstreamLeftOut: serve-otc with two MCP servers, a stdio
// child that is up (the built-in sample) and a URL nothing listens at.
// Before, GET /tools answered 503 "still connecting" for as long as the
// dead one stayed dead, so for every OTC client (they list first) the
// bridge was down. Now the start-up wait ends (--startup-wait): GET /tools
// lists the live server's tools and its tool is called, /health is 503 and
// names the missing server, /ready is 200, the log says the wait ended; when
// a real MCP server (server-everything, streamable HTTP) starts listening at
// the dead URL, its tools join the catalog.
func TestE2EDeadUpstreamLeftOut(t *testing.T) {
	bin := buildMcpotc(t)
	port := freePort(t)
	cfg := filepath.Join(t.TempDir(), "serve-otc.json")
	body := fmt.Sprintf(`{"mcpServers": {
  "live": {"command": %q, "args": ["sample-mcp"], "toolkit": "Live"},
  "late": {"url": "http://127.0.0.1:%d/mcp", "toolkit": "Late"}
}}`, bin, port)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	br := otcfStart(t, []string{"--config", cfg, "--log-format", "json", "--startup-wait", "2s"}, nil)

	// /ready is 200 once the wait is over and the live server's tools are served.
	br.p.waitHTTP(t, br.base+"/ready", 2*time.Minute)
	status, tools := getJSON(t, br.base+"/tools")
	ids := toolIDs(tools)
	if status != 200 || !hasPrefix(ids, "Live.") || hasPrefix(ids, "Late.") {
		t.Fatalf("GET /tools after the start-up wait = %d %v, want 200 with the Live tools only", status, ids)
	}
	status, health := getJSON(t, br.base+"/health")
	ups, _ := health["upstreams"].(map[string]any)
	late, _ := ups["late"].(string)
	if status != 503 || ups["live"] != "ready" || late == "" || late == "ready" {
		t.Fatalf("GET /health = %d %v, want 503 naming late as not ready and live ready", status, health)
	}
	otcfWaitLog(t, br.p, 30*time.Second, "the start-up wait's end", func(m map[string]any) bool {
		msg, _ := m["message"].(string)
		return strings.HasPrefix(msg, "start-up wait over")
	})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	r, err := otcfDo(ctx, "POST", br.base+"/tools/call",
		map[string]string{"Content-Type": "application/json"}, []byte(`{"tool_id":"Live.add","input":{"a":2,"b":3}}`))
	if err != nil || r.Status != 200 || !strings.Contains(string(r.Raw), "5") {
		t.Fatalf("call of the live server's tool: %v %d %s", err, r.Status, r.Raw)
	}

	// The dead server comes up: its tools join.
	startPeer(t, context.Background(), "mcp-server-everything", []string{"streamableHttp"}, []string{"PORT=" + strconv.Itoa(port)})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, tools = getJSON(t, br.base+"/tools")
		if ids = toolIDs(tools); hasPrefix(ids, "Late.") && hasPrefix(ids, "Live.") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server that came up did not join the catalog: %v\n%s", ids, br.p.Stderr())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if status, _ := getJSON(t, br.base+"/health"); status != 200 {
		t.Errorf("GET /health once both serve = %d, want 200", status)
	}
}

// toolIDs are the ids of a GET /tools answer's items.
func toolIDs(list map[string]any) []string {
	items, _ := list["items"].([]any)
	var ids []string
	for _, it := range items {
		m, _ := it.(map[string]any)
		if id, ok := m["id"].(string); ok {
			ids = append(ids, id)
		} else if raw, err := json.Marshal(m); err == nil {
			ids = append(ids, string(raw))
		}
	}
	return ids
}

func hasPrefix(ids []string, prefix string) bool {
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) {
			return true
		}
	}
	return false
}
