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
	b.measureRows(groupHop, "anchor-jsonrpc", "anchor:    MCP HTTP → JSON-RPC handler, no framework → sample-otc", "the handler", jp,
		mcpCaller(m, "Calculator_Add", addArgs, wantText(`{"sum":5}`)))
	return nil
}
