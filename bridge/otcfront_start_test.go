package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/mcp/mcpsample"
	"github.com/mcpotc/mcpotc/mcp/upstream"
)

// The first tool list of every upstream is served, however early it
// arrives: in-process servers answer initialize and tools/list at once,
// while NewOTCFront is still starting the others. NewOTCFront records
// every upstream (upstream.New) before any connects (Connect), so a
// callback never meets an upstream the front has not recorded; before,
// a tool list met before the record was dropped from the catalog and a
// second build after the start covered it. That no callback runs before
// Connect, whatever the timing, is TestNewRunsNothingUntilConnect in
// mcp/upstream. Run with -race -count=20.
func TestOTCFrontServesToolListsThatArriveDuringStart(t *testing.T) {
	const n = 8
	var ups []MCPServer
	var want []string
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		ups = append(ups, MCPServer{Toolkit: fmt.Sprintf("Kit%d", i), Config: upstream.Config{Name: name, InProcess: upstream.Piped(mcpsample.ServeStdio)}})
		want = append(want, fmt.Sprintf("Kit%d", i))
	}
	mt := metrics.New() // its callbacks name the upstream too
	f, err := NewOTCFront(context.Background(), ups, &OTCFrontOptions{Logger: zerolog.Nop(), Metrics: mt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })

	// Every toolkit is listed and every upstream reads "ready" (its
	// tools are in the served catalog), within a bound.
	var toolkits []string
	var health string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		toolkits, health = servedToolkits(t, f), get(t, f, "/health")
		if slices.Equal(toolkits, want) && strings.Count(health, `"ready"`) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("served toolkits %q, want %q; /health %s", toolkits, want, health)
		}
	}

	// The honest flow: a call to the last upstream's tool.
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/tools/call", strings.NewReader(`{"tool_id":"Kit7.echo","input":{"message":"hi"}}`))
	r.Header.Set("Content-Type", "application/json")
	f.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"success":true`) || !strings.Contains(w.Body.String(), "hi") {
		t.Fatalf("call: %d %s", w.Code, w.Body)
	}
}

// get answers GET path from f's handler, as a string.
func get(t *testing.T, f *OTCFront, path string) string {
	t.Helper()
	w := httptest.NewRecorder()
	f.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w.Body.String()
}

// servedToolkits are the sorted toolkits of GET /tools.
func servedToolkits(t *testing.T, f *OTCFront) []string {
	t.Helper()
	var list struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(get(t, f, "/tools")), &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range list.Items {
		kit, _, _ := strings.Cut(it.ID, ".")
		if !slices.Contains(out, kit) {
			out = append(out, kit)
		}
	}
	slices.Sort(out)
	return out
}
