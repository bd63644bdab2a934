package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/otc"
)

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {90, 90 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}} {
		if got := percentile(d, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

func TestRunCountsCallsAndFailures(t *testing.T) {
	var n int
	calls := make(chan struct{}, 1000)
	s := run(context.Background(), 100, 10, 8, nil, func(context.Context) error {
		calls <- struct{}{}
		return nil
	})
	close(calls)
	for range calls {
		n++
	}
	if n != 110 || s.calls != 100 || s.errors != 0 || len(s.lat) != 100 {
		t.Errorf("made %d calls, sample %d calls %d errors %d latencies", n, s.calls, s.errors, len(s.lat))
	}
	boom := errors.New("boom")
	i := 0
	s = run(context.Background(), 10, 0, 1, nil, func(context.Context) error {
		i++
		if i%2 == 0 {
			return boom
		}
		return nil
	})
	if s.errors != 5 || !errors.Is(s.first, boom) || len(s.lat) != 5 {
		t.Errorf("failures: %d errors, first %v, %d latencies", s.errors, s.first, len(s.lat))
	}
	// A warm-up that fails measures nothing.
	s = run(context.Background(), 10, 3, 1, nil, func(context.Context) error { return boom })
	if s.errors == 0 || s.calls != 0 {
		t.Errorf("failed warm-up: %+v", s)
	}
}

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"--calls", "10", "--concurrency", "1, 4", "--only", "hops,catalog"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Calls != 10 || len(c.Concurrency) != 2 || c.Concurrency[1] != 4 || !c.runs("hops") || c.runs("peers") {
		t.Errorf("parsed %+v", c)
	}
	for _, bad := range [][]string{{"--concurrency", "0"}, {"--only", "nope"}, {"--calls", "0"}, {"extra"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestTargets(t *testing.T) {
	r := &report{Rows: []row{
		{Key: "baseline", Concurrency: 1, P50us: 40, CPUusPerCall: 20},
		{Key: "otc-front", Concurrency: 1, P50us: 100, CPUusPerCall: 90},
		{Key: "mcp-direct-stdio", Concurrency: 1, P50us: 70},
		{Key: "otc-front", Concurrency: 64, CallsPerSec: 9000},
		{Key: "mcp-direct-stdio", Concurrency: 64, CallsPerSec: 20000},
		{Key: "mcp-front-http", Concurrency: 1, P50us: 300, CPUusPerCall: 120},
		{Key: "mcp-front-http", Concurrency: 16, CPUusPerCall: 130},
		{Key: "anchor-reverse-proxy", Concurrency: 1, CPUusPerCall: 100},
		{Key: "anchor-reverse-proxy", Concurrency: 16, CPUusPerCall: 100},
		{Key: "anchor-jsonrpc", Concurrency: 1, CPUusPerCall: 90},
		{Key: "otc-direct", Concurrency: 1, P50us: 100},
		{Key: "payload-mcp-front", Name: "MCP front, 1 MiB", MBPerSec: 30},
		{Key: "payload-otc-direct", Name: "direct, 1 MiB", MBPerSec: 50},
		{Key: "payload-otc-direct", Name: "direct, 1 KiB", MBPerSec: 1},
		{Key: "catalog-otc-list", P50us: 12000, P99us: 20000},
		{Key: "burst-mcp-front", P99us: 90000},
		{Key: "burst-otc-direct", P99us: 30000},
		{Group: groupPeer, Key: "openapi-mcp-server", Name: "openapi-mcp-server", Skipped: "node not found"},
		{Key: "sessions", Calls: 200, Extra: map[string]float64{"rss_per_session_kib": 80, "rss_delta_kib": 16000}},
	}}
	r.targets()
	got := map[string]string{}
	for _, tg := range r.Targets {
		got[tg.Name] = tg.Status + ": " + tg.Detail
	}
	for name, want := range map[string]string{
		"overhead at c=1 ÷ bare loopback HTTP p50, OTC front ≤ 1.0×":                      "met: (p50 100µs − direct 70µs) ÷ bare HTTP 40µs = 0.75×; CPU per call: bridge 90µs, bare echo server 20µs",
		"overhead at c=1 ÷ bare loopback HTTP p50, MCP front over streamable HTTP ≤ 1.0×": "missed: (p50 300µs − direct 100µs) ÷ bare HTTP 40µs = 5.00×; CPU per call: bridge 120µs, bare echo server 20µs",
		"overhead at c=1 ÷ bare loopback HTTP p50, MCP front over stdio ≤ 1.0×":           "unknown: not measured",
		"throughput at c=64 ÷ the direct call, OTC front ≥ 0.6":                           "missed: 9000 ÷ 20000 calls/s = 0.45",
		"throughput at c=64 ÷ the direct call, MCP front over stdio ≥ 0.6":                "unknown: not measured (needs concurrency 64)",
		"1 MiB echo at c=1, MB/s ÷ the direct call, MCP front ≥ 0.5":                      "met: 30.0 ÷ 50.0 MB/s = 0.60",
		"tools/list of 10,000 tools p50 < 20 ms, OTC front":                               "met: p50 12.0ms, p99 20.0ms",
		"tools/list of 10,000 tools p50 < 20 ms, MCP front":                               "unknown: not measured",
		"burst of 1,000 calls at once, p99 ≤ 2× the direct call's, MCP front":             "missed: p99 90.0ms ÷ direct 30.0ms = 3.00×",
		"burst of 1,000 calls at once, p99 ≤ 2× the direct call's, OTC front":             "unknown: not measured",
		"memory per idle MCP session < 64 KiB":                                            "missed: 80.0 KiB per session (RSS +16000 KiB over 200 sessions)",
		// The worst concurrency decides; a row without its anchor is left out.
		"CPU per call, MCP front over streamable HTTP ÷ an httputil.ReverseProxy hop to the same OTC server ≤ 1.2": "missed: c=1: 120µs ÷ 100µs = 1.20 (framework-free JSON-RPC hop 90µs: 1.33×); c=16: 130µs ÷ 100µs = 1.30",
	} {
		if got[name] != want {
			t.Errorf("%s:\n got %q\nwant %q", name, got[name], want)
		}
	}
	if len(got) != 15 {
		t.Errorf("%d targets, want 15: %v", len(got), got)
	}
	// With interleaved rounds, their pooled figures decide, not the rows'.
	r.Paired = []paired{
		{Concurrency: 1, Rounds: 3, CallsPerRound: 400, MCPFrontUS: 115, ProxyUS: 100, JSONRPCUS: 92, RoundRatios: []float64{1.2, 1.1, 1.15}},
		{Concurrency: 4, Rounds: 3, CallsPerRound: 400, MCPFrontUS: 60, ProxyUS: 50, JSONRPCUS: 48, RoundRatios: []float64{1.25, 1.18, 1.17}},
	}
	r.targets()
	for _, tg := range r.Targets {
		if tg.Name == "CPU per call, MCP front over streamable HTTP ÷ an httputil.ReverseProxy hop to the same OTC server ≤ 1.2" {
			if want := "c=1: 115µs ÷ 100µs = 1.15 (rounds 1.10–1.20; framework-free JSON-RPC hop 92µs: 1.25×); c=4: 60µs ÷ 50µs = 1.20 (rounds 1.17–1.25; framework-free JSON-RPC hop 48µs: 1.25×); 3 interleaved rounds of 400 calls each"; tg.Status != "met" || tg.Detail != want {
				t.Errorf("with paired rounds: %s: %s\nwant met: %s", tg.Status, tg.Detail, want)
			}
		}
	}
	// The OTC front's anchors: one target per transport, the worst
	// concurrency deciding.
	r.OTCPaired = []otcPaired{
		{Transport: "streamable-http", Concurrency: 1, Rounds: 3, CallsPerRound: 400, OTCFrontUS: 110, AnchorUS: 100, RoundRatios: []float64{1.05, 1.1, 1.15}},
		{Transport: "stdio", Concurrency: 1, Rounds: 3, CallsPerRound: 400, OTCFrontUS: 110, AnchorUS: 100, RoundRatios: []float64{1.1}},
		{Transport: "stdio", Concurrency: 64, Rounds: 3, CallsPerRound: 400, OTCFrontUS: 130, AnchorUS: 100, RoundRatios: []float64{1.3}},
	}
	r.targets()
	for name, want := range map[string]string{
		"CPU per call, OTC front over streamable HTTP ÷ an httputil.ReverseProxy carrying the same MCP calls to the same MCP server ≤ 1.2": "met: c=1: 110µs ÷ 100µs = 1.10 (rounds 1.05–1.15); 3 interleaved rounds of 400 calls each",
		"CPU per call, OTC front over stdio ÷ a framework-free OTC → MCP handler over stdio ≤ 1.2":                                         "missed: c=1: 110µs ÷ 100µs = 1.10 (rounds 1.10–1.10); c=64: 130µs ÷ 100µs = 1.30 (rounds 1.30–1.30); 3 interleaved rounds of 400 calls each",
	} {
		found := false
		for _, tg := range r.Targets {
			if tg.Name == name {
				found = true
				if tg.Status+": "+tg.Detail != want {
					t.Errorf("%s:\n got %s: %s\nwant %s", name, tg.Status, tg.Detail, want)
				}
			}
		}
		if !found {
			t.Errorf("no target %q", name)
		}
	}
	r.Paired[1].MCPFrontUS = 61
	r.targets()
	for _, tg := range r.Targets {
		if strings.HasPrefix(tg.Name, "CPU per call, MCP front") && tg.Status != "missed" {
			t.Errorf("c=4 at 1.22: %s: %s", tg.Status, tg.Detail)
		}
	}
	var out bytes.Buffer
	r.writeTable(&out)
	if !strings.Contains(out.String(), "skipped: node not found") || !strings.Contains(out.String(), "Targets") {
		t.Errorf("table:\n%s", out.String())
	}
}

func TestBenchOTC(t *testing.T) {
	b, err := startBenchOTC(50)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	c, err := newOTCClient(b.base, newHTTPClient())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	defs, err := c.ListTools(ctx)
	if err != nil || len(defs) != 50 {
		t.Fatalf("ListTools: %d tools, %v", len(defs), err)
	}
	big := strings.Repeat("é<x>", 1000)
	msg, _ := json.Marshal(big)
	resp, err := c.Call(ctx, &otc.CallToolRequest{ToolID: "Bench.Echo@1.0.0", CallID: "c1", Input: json.RawMessage(`{"message":` + string(msg) + `}`)})
	if err != nil || !resp.Success || resp.CallID != "c1" {
		t.Fatalf("echo: %+v %v", resp, err)
	}
	var got string
	if err := json.Unmarshal(resp.Value, &got); err != nil || got != big {
		t.Fatalf("echo value %.60s…, %v", resp.Value, err)
	}
	gen, name := b.change()
	defs, err = c.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.servedAt(gen); !ok {
		t.Error("the listing of the new generation was not recorded")
	}
	found := false
	for _, d := range defs {
		found = found || d.Name == name
	}
	if !found || len(defs) != 50 {
		t.Errorf("after a change: %d tools, %s listed: %v", len(defs), name, found)
	}
}

// TestCPUTime: both readings of this process's CPU time work and grow
// with work done; the scheduler's (schedstat) is the one cpuTime gives.
func TestCPUTime(t *testing.T) {
	pid := os.Getpid()
	s0, ok1 := schedTime(pid)
	t0, ok2 := statTime(pid)
	if !ok1 || !ok2 {
		t.Fatalf("schedstat readable %v, stat readable %v", ok1, ok2)
	}
	x := 0
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); {
		for i := range 1000 {
			x += i
		}
	}
	s1, _ := schedTime(pid)
	t1, _ := statTime(pid)
	if s1 <= s0 || t1 <= t0 {
		t.Errorf("200 ms of work (%d): schedstat %v → %v, stat %v → %v", x, s0, s1, t0, t1)
	}
	if c, ok := cpuTime(pid); !ok || c < s1 {
		t.Errorf("cpuTime %v %v, after schedstat's %v", c, ok, s1)
	}
	if _, ok := cpuTime(1 << 30); ok {
		t.Error("the CPU time of a process that does not exist")
	}
}
