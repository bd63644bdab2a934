package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/otc"
)

// The anchors of the MCP front's hop: what one MCP→OTC hop over HTTP costs
// without mcpotc, measured against the same OTC server in the same run.
//
//   - an httputil.ReverseProxy: the floor of an HTTP hop (it parses the
//     request's head and copies the body; it decodes no JSON);
//   - a JSON-RPC handler with no framework: it decodes the MCP request
//     with encoding/json, makes the same OTC call with an http.Client, and
//     encodes the result: the least an MCP→OTC bridge must do.
//
// Each runs as a process of its own (the bench re-executed in a hidden
// mode), so that its CPU time per call is read as serve-mcp's is.
const (
	modeReverseProxy = "__reverse-proxy" // args: the upstream's base URL
	modeJSONRPCHop   = "__jsonrpc-hop"   // args: the OTC server's base URL
)

// anchorTransport is the upstream transport of both anchors: pooled as
// mcpotc's OTC client is (otc/client.go), so that no anchor pays for
// connections the bridge keeps.
func anchorTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
	}
}

// serveAnchor serves h on a loopback port it prints, until SIGTERM.
func serveAnchor(h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "{\"addr\":%q}\n", ln.Addr().String())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func serveReverseProxy(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: " + modeReverseProxy + " UPSTREAM_URL")
	}
	target, err := url.Parse(args[0])
	if err != nil {
		return err
	}
	p := httputil.NewSingleHostReverseProxy(target)
	p.Transport = anchorTransport()
	return serveAnchor(p)
}

func serveJSONRPCHop(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: " + modeJSONRPCHop + " OTC_URL")
	}
	h := &jsonrpcHop{call: args[0] + "/tools/call", hc: &http.Client{Transport: anchorTransport()}}
	return serveAnchor(h)
}

// jsonrpcHop is the framework-free JSON-RPC handler: stateless streamable
// HTTP, one tool (Calculator_Add), each call one OTC call.
type jsonrpcHop struct {
	call string
	hc   *http.Client
}

func (h *jsonrpcHop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if m.ID == nil { // a notification
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result any
	switch m.Method {
	case string(mcpgo.MethodInitialize):
		result = mcpgo.InitializeResult{ProtocolVersion: protocolVersion, ServerInfo: mcpgo.Implementation{Name: "jsonrpc-hop", Version: "1"},
			Capabilities: mcpgo.ServerCapabilities{Tools: &struct {
				ListChanged bool `json:"listChanged,omitempty"`
			}{}}}
	case string(mcpgo.MethodPing):
		result = struct{}{}
	case string(mcpgo.MethodToolsCall):
		res, err := h.toolsCall(r.Context(), m.Params)
		if err != nil {
			writeJSON(w, map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32603, "message": err.Error()}})
			return
		}
		result = res
	default:
		writeJSON(w, map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
		return
	}
	writeJSON(w, map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
}

// toolsCall makes the OTC call of a tools/call of Calculator_Add.
func (h *jsonrpcHop) toolsCall(ctx context.Context, params json.RawMessage) (*mcpgo.CallToolResult, error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, err
	}
	if p.Name != "Calculator_Add" {
		return nil, fmt.Errorf("no tool %q", p.Name)
	}
	body, err := json.Marshal(map[string]any{"$schema": "urn:oxp:1.0", "request": map[string]any{
		"tool_id": "Calculator.Add@1.1.0", "call_id": otc.NewCallID(), "input": p.Arguments}})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.call, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var answer struct {
		Result struct {
			Success bool            `json:"success"`
			Value   json.RawMessage `json:"value"`
		} `json:"result"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&answer); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !answer.Result.Success {
		return nil, fmt.Errorf("the OTC server answered %d (success %v)", resp.StatusCode, answer.Result.Success)
	}
	var structured any
	_ = json.Unmarshal(answer.Result.Value, &structured)
	return &mcpgo.CallToolResult{Content: []mcpgo.Content{mcpgo.NewTextContent(string(answer.Result.Value))}, StructuredContent: structured}, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// runAnchors measures the two anchors against sample-otc, the upstream of
// the MCP front's hop rows.
func (b *bench) runAnchors() error {
	b.progress("starting the anchors: httputil.ReverseProxy and a framework-free JSON-RPC hop")
	rp, rpAddr, err := b.startServer("reverse-proxy", nil, b.self, modeReverseProxy, b.sampleOTCBase)
	if err != nil {
		return err
	}
	c, err := b.otc("http://" + rpAddr)
	if err != nil {
		return err
	}
	b.measureRows(groupHop, "anchor-reverse-proxy", "anchor:    OTC → httputil.ReverseProxy → sample-otc", "the proxy", rp,
		otcCaller(c, "Calculator.Add@1.1.0", addArgs, wantValue(json.RawMessage(`{"sum":5}`))))
	jp, jpAddr, err := b.startServer("jsonrpc-hop", nil, b.self, modeJSONRPCHop, b.sampleOTCBase)
	if err != nil {
		return err
	}
	m, err := dialMCPHTTP(b.ctx, "http://"+jpAddr+"/mcp", b.hc)
	if err != nil {
		return err
	}
	b.mcpAnchor = m
	jsonrpc := mcpCaller(m, "Calculator_Add", addArgs, wantText(`{"sum":5}`))
	b.measureRows(groupHop, "anchor-jsonrpc", "anchor:    MCP HTTP → JSON-RPC handler, no framework → sample-otc", "the handler", jp, jsonrpc)
	b.measurePaired([]pairedSide{
		{"serve-mcp", b.mcpFrontHTTP, mcpCaller(b.mcpHTTP, "Calculator_Add", addArgs, wantText(`{"sum":5}`))},
		{"the proxy", rp, otcCaller(c, "Calculator.Add@1.1.0", addArgs, wantValue(json.RawMessage(`{"sum":5}`)))},
		{"the handler", jp, jsonrpc},
	})
	return nil
}

// paired is the anchor target's measurement at one concurrency: serve-mcp
// over streamable HTTP and both anchors, in interleaved rounds whose order
// turns each round, so that a drift of the machine's speed (another
// process, the CPU's clock) falls on the three alike. Measured one after
// the other, the rows alone moved the ratio by ±0.15 between runs on a
// 2-vCPU machine. Each CPU figure is its rounds' pooled CPU time ÷ their
// calls.
type paired struct {
	Concurrency   int     `json:"concurrency"`
	Rounds        int     `json:"rounds"`
	CallsPerRound int     `json:"calls_per_round"`
	Errors        int     `json:"errors"`
	MCPFrontUS    float64 `json:"mcp_front_cpu_us_per_call"`
	ProxyUS       float64 `json:"reverse_proxy_cpu_us_per_call"`
	JSONRPCUS     float64 `json:"jsonrpc_cpu_us_per_call"`
	// RoundRatios are serve-mcp ÷ the proxy in each round, for the spread.
	RoundRatios []float64 `json:"round_ratios"`
}

// pairedSide is one of the processes measurePaired compares.
type pairedSide struct {
	name string
	p    *proc
	call callFunc
}

// measurePaired runs --anchor-rounds rounds of calls on each side at each
// concurrency (sides[0] is serve-mcp, sides[1] the proxy, sides[2] the
// framework-free handler) and records the pooled CPU per call.
func (b *bench) measurePaired(sides []pairedSide) {
	rounds := b.cfg.AnchorRounds
	if rounds < 1 {
		return
	}
	per := max(b.cfg.Calls/rounds, 200)
	for _, c := range b.cfg.Concurrency {
		b.progress("serve-mcp and the anchors in %d interleaved rounds of %d calls at c=%d", rounds, per, c)
		us, ratios, errs, ok := b.interleave(sides, c, rounds, per)
		if !ok {
			b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("the interleaved anchor rounds at c=%d could not be measured", c))
			continue
		}
		b.rep.Paired = append(b.rep.Paired, paired{Concurrency: c, Rounds: rounds, CallsPerRound: per, Errors: errs,
			MCPFrontUS: us[0], ProxyUS: us[1], JSONRPCUS: us[2], RoundRatios: ratios})
	}
}

// interleave runs rounds rounds of per calls on each side at concurrency
// c, the sides' order turning each round, and returns each side's pooled
// CPU time per call (µs), sides[0] ÷ sides[1] in each round, the failed
// calls, and false when a round could not be measured.
func (b *bench) interleave(sides []pairedSide, c, rounds, per int) (us, ratios []float64, errs int, ok bool) {
	cpu := make([]time.Duration, len(sides))
	calls := make([]int, len(sides))
	for i := 0; i < rounds; i++ {
		round := make([]float64, len(sides))
		for k := range sides {
			j := (i + k) % len(sides)
			d, n, e, measured := b.cpuOf(sides[j], c, per)
			errs += e
			if !measured {
				return nil, nil, errs, false
			}
			cpu[j] += d
			calls[j] += n
			round[j] = float64(d) / float64(n)
		}
		if round[1] > 0 {
			ratios = append(ratios, round[0]/round[1])
		}
	}
	us = make([]float64, len(sides))
	for j := range sides {
		us[j] = float64(cpu[j].Microseconds()) / float64(calls[j])
	}
	return us, ratios, errs, true
}

// cpuOf drives n calls at concurrency c on one side and reads its CPU time
// around them (after a short warm-up: the round before may have been
// another side's); measured is false when a call failed or /proc could
// not be read.
func (b *bench) cpuOf(s pairedSide, c, n int) (d time.Duration, calls, errs int, measured bool) {
	var cpu0 time.Duration
	var ok0 bool
	smp := run(b.ctx, n, min(b.cfg.Warmup, 4*c), c, func() { cpu0, ok0 = cpuTime(s.p.pid()) }, s.call)
	cpu1, ok1 := cpuTime(s.p.pid())
	if smp.errors > 0 || !ok0 || !ok1 || len(smp.lat) == 0 || cpu1 <= cpu0 {
		return 0, 0, max(smp.errors, 1), false
	}
	return cpu1 - cpu0, len(smp.lat), 0, true
}
