package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/mcp/mcpsample"
	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/otcsample"
)

// waitOTCReady waits, up to 10 s, for f's GET /ready to answer 200.
func waitOTCReady(t *testing.T, f *OTCFront) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		w := httptest.NewRecorder()
		f.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ready", nil))
		if w.Code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /ready: %d %s", w.Code, w.Body)
		}
	}
}

// callSeries reads mcpotc_calls_total from mt: "front upstream tool
// outcome" → count.
func callSeries(t *testing.T, mt *metrics.Metrics) map[string]float64 {
	t.Helper()
	families, err := mt.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "mcpotc_calls_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[strings.Join([]string{l["front"], l["upstream"], l["tool"], l["outcome"]}, " ")] = m.GetCounter().GetValue()
		}
	}
	return out
}

// scrape reads GET /metrics of mt as text.
func scrape(t *testing.T, mt *metrics.Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	mt.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", w.Code)
	}
	return w.Body.String()
}

func sameSeries(t *testing.T, got map[string]float64, want map[string]float64) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("mcpotc_calls_total\n got: %s\nwant: %s", g, w)
	}
}

// The OTC front counts each call by upstream, tool and outcome (ok,
// tool_error, invalid_input, unknown_tool, timeout), times it in
// mcp_client_operation_duration_seconds, reports its upstream; 10,000
// calls to random unknown tools add no series.
func TestOTCFrontMetrics(t *testing.T) {
	mt := metrics.New()
	f, err := NewOTCFront(context.Background(), []MCPServer{{Toolkit: "Sample", Config: upstream.Config{Name: "sample", InProcess: upstream.Piped(mcpsample.ServeStdio), CallTimeout: 300 * time.Millisecond}}},
		&OTCFrontOptions{Logger: zerolog.Nop(), Metrics: mt, Server: otc.Options{CallTimeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	call := func(body string) int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/tools/call", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		f.Handler().ServeHTTP(w, r)
		return w.Code
	}
	waitOTCReady(t, f)
	call(`{"tool_id":"Sample.echo","input":{"message":"hi"}}`)
	call(`{"tool_id":"Sample.fail","input":{"message":"no"}}`)
	call(`{"tool_id":"Sample.add","input":{"a":"one","b":2}}`)
	call(`{"tool_id":"Sample.nope","input":{}}`)
	call(`{"tool_id":"Sample.slow","input":{"seconds":5,"steps":1}}`)
	want := map[string]float64{
		"otc sample Sample.echo ok":           1,
		"otc sample Sample.fail tool_error":   1,
		"otc sample Sample.add invalid_input": 1,
		"otc other other unknown_tool":        1,
		"otc sample Sample.slow timeout":      1,
	}
	sameSeries(t, callSeries(t, mt), want)

	for i := range 10000 {
		call(fmt.Sprintf(`{"tool_id":"Random%d.tool%d","input":{}}`, i, i))
	}
	want["otc other other unknown_tool"] = 10001
	sameSeries(t, callSeries(t, mt), want)

	text := scrape(t, mt)
	for _, line := range []string{
		`mcpotc_upstream_up{front="otc",upstream="sample"} 1`,
		`mcpotc_upstream_tools{front="otc",upstream="sample"} 4`,
		`mcp_client_operation_duration_seconds_count{gen_ai_tool_name="Sample.echo",mcp_method_name="tools/call",outcome="ok",upstream="sample"} 1`,
		`mcpotc_catalog_refreshes_total{front="otc",result="ok",upstream="sample"} 1`,
		"mcpotc_idempotency_entries 0",
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// The MCP front counts each tools/call by upstream, tool and outcome and
// times it in mcp_server_operation_duration_seconds; calls of tools it
// does not serve (answered by mcp-go) are unknown_tool under "other", and
// 10,000 of them with random names add no series.
func TestMCPFrontMetrics(t *testing.T) {
	h, err := otcsample.New(nil).Handler(&otc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mt := metrics.New()
	f, err := NewMCPFront(context.Background(), []OTCServer{otcUpstreamOn(t, "calc", "", h)}, &MCPFrontOptions{Logger: zerolog.Nop(), Metrics: mt})
	if err != nil {
		t.Fatal(err)
	}
	s := f.Server()
	ctx := context.Background()
	msg := func(id int, method, params string) {
		s.HandleMessage(ctx, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)))
	}
	msg(0, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}`)
	msg(1, "tools/call", `{"name":"Calculator_Add","arguments":{"a":2,"b":3}}`)
	msg(2, "tools/call", `{"name":"Calculator_Add","arguments":{"a":"two","b":3}}`)
	msg(3, "tools/call", `{"name":"nope","arguments":{}}`)
	want := map[string]float64{
		"mcp calc Calculator_Add ok":            1,
		"mcp calc Calculator_Add invalid_input": 1,
		"mcp other other unknown_tool":          1,
	}
	sameSeries(t, callSeries(t, mt), want)
	for i := range 10000 {
		msg(10+i, "tools/call", fmt.Sprintf(`{"name":"random_%d","arguments":{}}`, i))
	}
	want["mcp other other unknown_tool"] = 10001
	sameSeries(t, callSeries(t, mt), want)
	text := scrape(t, mt)
	for _, line := range []string{
		`mcpotc_upstream_up{front="mcp",upstream="calc"} 1`,
		`mcp_server_operation_duration_seconds_count{gen_ai_tool_name="Calculator_Add",mcp_method_name="tools/call",outcome="ok",upstream="calc"} 1`,
		`mcpotc_catalog_refreshes_total{front="mcp",result="ok",upstream="calc"} 1`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// A tools/list that fails counts as an "error" listing on the OTC front
// too, and the listing that then succeeds as "ok".
func TestOTCFrontMetricsCountFailedListings(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	mcpHTTP := mcpsample.NewServer().StreamableHTTPHandler(nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if failing.Load() && bytes.Contains(body, []byte(`"method":"tools/list"`)) {
			http.Error(w, "listing is down", http.StatusServiceUnavailable)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		mcpHTTP.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	mt := metrics.New()
	f, err := NewOTCFront(context.Background(), []MCPServer{{Toolkit: "Sample", Config: upstream.Config{Name: "sample", URL: srv.URL + "/mcp",
		RestartBackoffMin: 10 * time.Millisecond, RestartBackoffMax: 50 * time.Millisecond}}},
		&OTCFrontOptions{Logger: zerolog.Nop(), Metrics: mt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	refreshes := func(result string) float64 {
		prefix := `mcpotc_catalog_refreshes_total{front="otc",result="` + result + `",upstream="sample"} `
		for line := range strings.Lines(scrape(t, mt)) {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				return n
			}
		}
		return 0
	}
	for deadline := time.Now().Add(10 * time.Second); refreshes("error") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no failed listings counted:\n%s", scrape(t, mt))
		}
	}
	if ok := refreshes("ok"); ok != 0 {
		t.Fatalf("ok listings while every tools/list fails: %v", ok)
	}
	failing.Store(false)
	waitOTCReady(t, f)
	if ok := refreshes("ok"); ok != 1 {
		t.Errorf("ok listings after the upstream recovered: %v, want 1", ok)
	}
}
