package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/mcp/mcpsample"
	"github.com/mcpotc/mcpotc/otc"
)

// The anchors of the OTC front's hop: what one OTC → MCP hop costs without
// mcpotc, measured against the same MCP echo server (mcpotc's sample MCP
// server, Sample.echo) in the same run, in interleaved rounds as the MCP
// front's anchors are (measurePaired):
//
//   - over streamable HTTP, serve-otc --mcp against an
//     httputil.ReverseProxy carrying the same calls as MCP to the same MCP
//     server (the floor of an HTTP hop: no JSON decoded);
//   - over stdio, serve-otc -- sample-mcp against a framework-free OTC →
//     MCP handler (otcMCPHop): it decodes the OTC request with
//     encoding/json, writes the MCP tools/call as one line to its own
//     sample-mcp child, routes the answer by id and encodes the OTC
//     result: the least an OTC → MCP bridge over stdio must do.
//
// The CPU time compared is each hop process's own (its MCP server is a
// process, or child, of its own in both).
const (
	modeMCPHTTPEcho = "__mcp-http-echo"     // the sample MCP server over streamable HTTP at /mcp
	modeOTCMCPHop   = "__otc-mcp-stdio-hop" // args: the stdio MCP server's command line
)

func serveMCPHTTPEcho() error {
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpsample.NewServer().StreamableHTTPHandler(nil))
	return serveAnchor(mux)
}

func serveOTCMCPHop(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: " + modeOTCMCPHop + " COMMAND [ARG…]")
	}
	h, err := startOTCMCPHop(args)
	if err != nil {
		return err
	}
	defer h.close()
	return serveAnchor(h)
}

// otcMCPHop is the framework-free OTC → MCP handler over stdio.
type otcMCPHop struct {
	cmd *exec.Cmd
	in  io.WriteCloser

	wmu     sync.Mutex // one line at a time on the child's stdin
	mu      sync.Mutex
	next    int64
	waiting map[int64]chan mcpAnswer
}

type mcpAnswer struct {
	Result *mcpgo.CallToolResult `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func startOTCMCPHop(argv []string) (*otcMCPHop, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h := &otcMCPHop{cmd: cmd, in: in, waiting: map[int64]chan mcpAnswer{}}
	go h.read(out)
	init := fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"otc-mcp-hop","version":"1"}}`, protocolVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.request(ctx, "initialize", json.RawMessage(init)); err != nil {
		h.close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if err := h.write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

func (h *otcMCPHop) close() {
	_ = h.in.Close()
	_ = h.cmd.Process.Kill()
	_ = h.cmd.Wait()
}

func (h *otcMCPHop) write(line []byte) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	_, err := h.in.Write(append(line, '\n'))
	return err
}

// read routes each answer line to its caller by id.
func (h *otcMCPHop) read(out io.Reader) {
	r := bufio.NewReaderSize(out, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var m struct {
				ID *int64 `json:"id"`
				mcpAnswer
			}
			if json.Unmarshal(line, &m) == nil && m.ID != nil {
				h.mu.Lock()
				ch := h.waiting[*m.ID]
				delete(h.waiting, *m.ID)
				h.mu.Unlock()
				if ch != nil {
					ch <- m.mcpAnswer
				}
			}
		}
		if err != nil {
			h.mu.Lock()
			for id, ch := range h.waiting {
				close(ch)
				delete(h.waiting, id)
			}
			h.mu.Unlock()
			return
		}
	}
}

func (h *otcMCPHop) request(ctx context.Context, method string, params any) (mcpAnswer, error) {
	ch := make(chan mcpAnswer, 1)
	h.mu.Lock()
	h.next++
	id := h.next
	h.waiting[id] = ch
	h.mu.Unlock()
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err == nil {
		err = h.write(line)
	}
	if err != nil {
		h.mu.Lock()
		delete(h.waiting, id)
		h.mu.Unlock()
		return mcpAnswer{}, err
	}
	select {
	case a, ok := <-ch:
		if !ok {
			return a, errors.New("the MCP server ended")
		}
		if a.Error != nil {
			return a, errors.New(a.Error.Message)
		}
		return a, nil
	case <-ctx.Done():
		h.mu.Lock()
		delete(h.waiting, id)
		h.mu.Unlock()
		return mcpAnswer{}, ctx.Err()
	}
}

func (h *otcMCPHop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/tools/call" {
		http.Error(w, "POST /tools/call only", http.StatusNotFound)
		return
	}
	var req struct {
		Request otc.CallToolRequest `json:"request"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	start := time.Now()
	// Toolkit.Tool@version: the MCP tool is Tool.
	name := req.Request.ToolID
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	name = name[strings.IndexByte(name, '.')+1:]
	resp := otc.CallToolResponse{CallID: req.Request.CallID, Success: true}
	a, err := h.request(r.Context(), string(mcpgo.MethodToolsCall), map[string]any{"name": name, "arguments": req.Request.Input})
	switch {
	case err != nil:
		resp.Success, resp.Error = false, &otc.ToolError{Message: err.Error()}
	case a.Result == nil || a.Result.IsError:
		resp.Success, resp.Error = false, &otc.ToolError{Message: "the tool failed"}
	case a.Result.StructuredContent != nil:
		resp.Value, err = json.Marshal(a.Result.StructuredContent)
	default:
		var text strings.Builder
		for _, c := range a.Result.Content {
			if t, ok := c.(mcpgo.TextContent); ok {
				text.WriteString(t.Text)
			}
		}
		resp.Value, err = json.Marshal(text.String())
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp.Duration = float64(time.Since(start).Microseconds()) / 1000
	writeJSON(w, map[string]any{"$schema": otc.SchemaOXP10, "result": &resp})
}

// otcPaired is the OTC front's anchor measurement at one concurrency over
// one transport: serve-otc and its anchor in interleaved rounds.
type otcPaired struct {
	Transport     string  `json:"transport"` // "streamable-http" or "stdio"
	Anchor        string  `json:"anchor"`
	Concurrency   int     `json:"concurrency"`
	Rounds        int     `json:"rounds"`
	CallsPerRound int     `json:"calls_per_round"`
	Errors        int     `json:"errors"`
	OTCFrontUS    float64 `json:"otc_front_cpu_us_per_call"`
	AnchorUS      float64 `json:"anchor_cpu_us_per_call"`
	// RoundRatios are serve-otc ÷ the anchor in each round, for the spread.
	RoundRatios []float64 `json:"round_ratios"`
}

// runOTCAnchors measures serve-otc against its two anchors (see the
// constants above), over streamable HTTP then stdio.
func (b *bench) runOTCAnchors() error {
	rounds := max(b.cfg.AnchorRounds, 1)
	per := max(b.cfg.Calls/rounds, 200)
	echoValue, _ := json.Marshal(hopMessage)
	otcEcho := func(c *otc.Client) callFunc { return otcCaller(c, "Sample.echo@1.0.0", echoArgs, wantValue(echoValue)) }

	b.progress("starting the OTC front's anchors over streamable HTTP: the MCP echo server, serve-otc --mcp, httputil.ReverseProxy")
	_, echoAddr, err := b.startServer("mcp-http-echo", nil, b.self, modeMCPHTTPEcho)
	if err != nil {
		return err
	}
	echoURL := "http://" + echoAddr + "/mcp"
	front, frontAddr, err := b.startMCPOTC("serve-otc http", "serve-otc", "--listen", "127.0.0.1:0", "--mcp", echoURL)
	if err != nil {
		return err
	}
	if err := waitHealthy(b.ctx, b.hc, "http://"+frontAddr, front, time.Minute); err != nil {
		return err
	}
	fc, err := b.otc("http://" + frontAddr)
	if err != nil {
		return err
	}
	// The toolkit is named after the server's serverInfo.name (--name
	// names only a command's): its echo tool's id is read from the catalog.
	tools, err := fc.ListTools(b.ctx)
	if err != nil {
		return err
	}
	echoID := ""
	for _, t := range tools {
		if t.Name == "echo" || strings.HasSuffix(t.Name, "_echo") {
			echoID = t.ID
		}
	}
	if echoID == "" {
		return errors.New("serve-otc --mcp serves no echo tool")
	}
	rp, rpAddr, err := b.startServer("reverse-proxy mcp", nil, b.self, modeReverseProxy, "http://"+echoAddr)
	if err != nil {
		return err
	}
	m, err := dialMCPHTTP(b.ctx, "http://"+rpAddr+"/mcp", b.hc)
	if err != nil {
		return err
	}
	defer m.close()
	b.otcPaired("streamable-http", "httputil.ReverseProxy", rounds, per, []pairedSide{
		{"serve-otc --mcp", front, otcCaller(fc, echoID, echoArgs, wantValue(echoValue))},
		{"the proxy", rp, mcpCaller(m, "echo", echoArgs, wantText(hopMessage))},
	})

	b.progress("starting the OTC front's anchors over stdio: serve-otc -- sample-mcp, a framework-free OTC → MCP handler")
	if err := b.otcFrontUp(); err != nil {
		return err
	}
	sc, err := b.otc(b.otcFrontBase)
	if err != nil {
		return err
	}
	hop, hopAddr, err := b.startServer("otc-mcp-stdio-hop", nil, b.self, modeOTCMCPHop, b.bin, "sample-mcp")
	if err != nil {
		return err
	}
	hc, err := b.otc("http://" + hopAddr)
	if err != nil {
		return err
	}
	b.otcPaired("stdio", "framework-free OTC → MCP handler", rounds, per, []pairedSide{
		{"serve-otc", b.otcFront, otcEcho(sc)},
		{"the handler", hop, otcEcho(hc)},
	})
	return nil
}

func (b *bench) otcPaired(transport, anchor string, rounds, per int, sides []pairedSide) {
	for _, c := range b.cfg.Concurrency {
		b.progress("%s and %s (%s) in %d interleaved rounds of %d calls at c=%d", sides[0].name, anchor, transport, rounds, per, c)
		us, ratios, errs, ok := b.interleave(sides, c, rounds, per)
		if !ok {
			b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("the OTC front's interleaved rounds against %s (%s) at c=%d could not be measured", anchor, transport, c))
			if errs > 0 {
				b.rep.Failed = true
			}
			continue
		}
		b.rep.OTCPaired = append(b.rep.OTCPaired, otcPaired{Transport: transport, Anchor: anchor, Concurrency: c, Rounds: rounds,
			CallsPerRound: per, Errors: errs, OTCFrontUS: us[0], AnchorUS: us[1], RoundRatios: ratios})
	}
}

// otcAnchorTargets: serve-otc's CPU per call ÷ its anchor's, over
// streamable HTTP (an httputil.ReverseProxy) and over stdio (the
// framework-free handler), at each measured concurrency; the verdict is
// the worst.
func (r *report) otcAnchorTargets(l *targetList) {
	for _, t := range []struct{ transport, name string }{
		{"streamable-http", "CPU per call, OTC front over streamable HTTP ÷ an httputil.ReverseProxy carrying the same MCP calls to the same MCP server ≤ 1.2"},
		{"stdio", "CPU per call, OTC front over stdio ÷ a framework-free OTC → MCP handler over stdio ≤ 1.2"},
	} {
		var parts []string
		worst, rounds, per := 0.0, 0, 0
		for _, p := range r.OTCPaired {
			if p.Transport != t.transport || p.AnchorUS == 0 {
				continue
			}
			x := p.OTCFrontUS / p.AnchorUS
			lo, hi := slices.Min(p.RoundRatios), slices.Max(p.RoundRatios)
			parts = append(parts, fmt.Sprintf("c=%d: %s ÷ %s = %.2f (rounds %.2f–%.2f)", p.Concurrency,
				fmtDur(fromUS(p.OTCFrontUS)), fmtDur(fromUS(p.AnchorUS)), x, lo, hi))
			worst, rounds, per = max(worst, x), p.Rounds, p.CallsPerRound
		}
		if len(parts) == 0 {
			l.unknown(t.name, "not measured (--only otc-anchors)")
			continue
		}
		l.add(t.name, worst <= 1.2, fmt.Sprintf("%s; %d interleaved rounds of %d calls each", strings.Join(parts, "; "), rounds, per))
	}
}
