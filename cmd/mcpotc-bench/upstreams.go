package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/mcp/front"
)

// The bench re-executes itself for the upstreams that must be processes of
// their own. These modes are not part of its documented command line.
const (
	modeHTTPEcho    = "__http-echo"    // the bare loopback HTTP server
	modeMCPUpstream = "__mcp-upstream" // a stdio MCP server with many tools
)

func runHidden(mode string, args []string) int {
	var err error
	switch mode {
	case modeHTTPEcho:
		err = serveHTTPEcho()
	case modeMCPUpstream:
		err = serveMCPUpstream(args)
	case modeReverseProxy:
		err = serveReverseProxy(args)
	case modeJSONRPCHop:
		err = serveJSONRPCHop(args)
	case modeMCPHTTPEcho:
		err = serveMCPHTTPEcho()
	case modeOTCMCPHop:
		err = serveOTCMCPHop(args)
	default:
		err = fmt.Errorf("unknown mode %s", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpotc-bench", mode+":", err)
		return 1
	}
	return 0
}

// serveHTTPEcho answers every POST with its body: one bare HTTP hop. It
// prints the address it listens on, then serves until SIGTERM.
func serveHTTPEcho() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "{\"addr\":%q}\n", ln.Addr().String())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// mcpUpstreamServer is a stdio MCP server with "echo" and synthetic tools
// up to a count; SIGUSR1 replaces its last tool by a new one (a catalog
// change: notifications/tools/list_changed) and names it in --changes.
type mcpUpstreamServer struct {
	s       *front.Server
	n       int
	changes string
	gen     int
}

// mcpUpstreamName is the serverInfo.name of the synthetic MCP server.
const mcpUpstreamName = "mcpotc-bench-upstream"

func serveMCPUpstream(args []string) error {
	fs := flag.NewFlagSet(modeMCPUpstream, flag.ContinueOnError)
	n := fs.Int("tools", 10000, "number of tools, echo included")
	changes := fs.String("changes", "", "file where each change writes the new tool's name")
	pidfile := fs.String("pidfile", "", "file to write the pid to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pidfile != "" {
		if err := os.WriteFile(*pidfile, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return err
		}
	}
	u := &mcpUpstreamServer{
		s:       front.New(mcpUpstreamName, "1.0.0", nil),
		n:       *n,
		changes: *changes,
	}
	u.s.SetTools(u.tools()...)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		for range sig {
			u.gen++
			u.s.SetTools(u.tools()...)
			if u.changes != "" {
				_ = os.WriteFile(u.changes, []byte(syntheticToolName(u.n-1, u.gen)), 0o644)
			}
		}
	}()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := u.s.ServeStdio(ctx, os.Stdin, os.Stdout)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// syntheticToolName names synthetic tool i (1-based) of catalog generation
// gen: the last tool's name changes with each generation.
func syntheticToolName(i, gen int) string {
	if gen > 0 {
		return fmt.Sprintf("tool_g%d_%05d", gen, i)
	}
	return fmt.Sprintf("tool_%05d", i)
}

func (u *mcpUpstreamServer) tools() []front.Tool {
	out := make([]front.Tool, 0, u.n)
	out = append(out, front.Tool{
		Tool: mcpgo.NewTool("echo",
			mcpgo.WithDescription("Returns the message it is given."),
			mcpgo.WithString("message", mcpgo.Required(), mcpgo.Description("The text to send back."))),
		Handler: func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			var args struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal(req.Params.RawArguments, &args)
			return mcpgo.NewToolResultText(args.Message), nil
		},
	})
	ok := func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("ok"), nil
	}
	for i := 1; i < u.n; i++ {
		gen := 0
		if i == u.n-1 {
			gen = u.gen
		}
		name := syntheticToolName(i, gen)
		out = append(out, front.Tool{
			Tool: mcpgo.NewTool(name,
				mcpgo.WithDescription(fmt.Sprintf("Synthetic tool %d of the mcpotc benchmark: answers ok.", i)),
				mcpgo.WithString("query", mcpgo.Description("A search query.")),
				mcpgo.WithNumber("limit", mcpgo.Description("At most this many results."), mcpgo.Min(1), mcpgo.Max(100))),
			Handler: ok,
		})
	}
	return out
}

// benchOTC is the in-bench OTC server: Bench.Echo@1.0.0 (the value is the
// input's message) and synthetic tools up to a count, listed in oxp-1.0.
// Its catalog changes on demand (the last tool gets a new name), and it
// records when it first served each catalog generation.
type benchOTC struct {
	n       int
	srv     *http.Server
	base    string
	gen     atomic.Int64
	catalog atomic.Pointer[[]byte]

	mu     sync.Mutex
	served map[int64]time.Time // generation → first GET /tools that served it
}

func startBenchOTC(n int) (*benchOTC, error) {
	b := &benchOTC{n: n, served: map[int64]time.Time{}}
	b.setCatalog(0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b.base = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /tools", b.serveTools)
	mux.HandleFunc("POST /tools/call", b.serveCall)
	b.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

func (b *benchOTC) close() { _ = b.srv.Close() }

// benchOTCToolkit is the toolkit of the in-bench OTC server's tools.
const benchOTCToolkit = "Bench"

// otcToolName is the OTC tool part of synthetic tool i of generation gen.
func otcToolName(i int, gen int64) string {
	if gen > 0 {
		return fmt.Sprintf("Tool_g%d_%05d", gen, i)
	}
	return fmt.Sprintf("Tool_%05d", i)
}

func (b *benchOTC) setCatalog(gen int64) {
	var buf bytes.Buffer
	buf.WriteString(`{"$schema":"urn:oxp:1.0","tools":`)
	var list bytes.Buffer
	list.WriteString(`[{"id":"Bench.Echo@1.0.0","name":"Bench_Echo","description":"Returns the message it is given.","version":"1.0.0",` +
		`"input_schema":{"type":"object","properties":{"message":{"type":"string","description":"The text to send back."}},"required":["message"]},` +
		`"output_schema":{}}`)
	for i := 1; i < b.n; i++ {
		g := int64(0)
		if i == b.n-1 {
			g = gen
		}
		tool := otcToolName(i, g)
		fmt.Fprintf(&list, `,{"id":"Bench.%s@1.0.0","name":"Bench_%s","description":"Synthetic tool %d of the mcpotc benchmark: answers ok.","version":"1.0.0",`+
			`"input_schema":{"type":"object","properties":{"query":{"type":"string","description":"A search query."},`+
			`"limit":{"type":"number","description":"At most this many results.","minimum":1,"maximum":100}}},"output_schema":{}}`, tool, tool, i)
	}
	list.WriteString(`]`)
	buf.Write(list.Bytes())
	buf.WriteString(`,"items":`)
	buf.Write(list.Bytes())
	buf.WriteString(`}`)
	data := buf.Bytes()
	b.catalog.Store(&data)
	b.gen.Store(gen)
}

// change moves the catalog to the next generation and returns the MCP
// name its new tool gets from the MCP front.
func (b *benchOTC) change() (gen int64, mcpName string) {
	gen = b.gen.Load() + 1
	b.setCatalog(gen)
	return gen, benchOTCToolkit + "_" + otcToolName(b.n-1, gen)
}

// servedAt is when a GET /tools first served generation gen.
func (b *benchOTC) servedAt(gen int64) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.served[gen]
	return t, ok
}

func (b *benchOTC) serveTools(w http.ResponseWriter, _ *http.Request) {
	start := time.Now()
	gen := b.gen.Load()
	data := *b.catalog.Load()
	b.mu.Lock()
	if _, ok := b.served[gen]; !ok {
		b.served[gen] = start
	}
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

func (b *benchOTC) serveCall(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var env struct {
		Request struct {
			ToolID string `json:"tool_id"`
			CallID string `json:"call_id"`
			Input  struct {
				Message json.RawMessage `json:"message"`
			} `json:"input"`
		} `json:"request"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"$schema":"urn:oxp:1.0","message":"Request body is malformed","developer_message":%q}`, err.Error())
		return
	}
	value := json.RawMessage(`"ok"`)
	if env.Request.ToolID == "Bench.Echo@1.0.0" || env.Request.ToolID == "Bench.Echo" {
		if env.Request.Input.Message == nil {
			w.WriteHeader(http.StatusUnprocessableEntity)
			io.WriteString(w, `{"$schema":"urn:oxp:1.0","message":"message is required","parameter_errors":{"message":"Is required"}}`)
			return
		}
		value = env.Request.Input.Message
	}
	callID, _ := json.Marshal(env.Request.CallID)
	w.Header().Set("Content-Type", "application/json")
	var out bytes.Buffer
	out.Grow(len(value) + 128)
	out.WriteString(`{"$schema":"urn:oxp:1.0","result":{"call_id":`)
	out.Write(callID)
	out.WriteString(`,"duration":0,"success":true,"value":`)
	out.Write(value)
	out.WriteString("}}")
	_, _ = w.Write(out.Bytes())
}
