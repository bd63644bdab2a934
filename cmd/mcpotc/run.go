package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpotc/mcpotc/bridge"
	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/bridge/tracing"
	"github.com/mcpotc/mcpotc/internal/httpguard"
	"github.com/mcpotc/mcpotc/internal/shutdown"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/otcsample"
)

// shutdownGrace bounds how long in-flight requests may take after a signal
// (after --drain-delay, when set); the calls still running then are ended
// and answered "shutting down" with Retry-After, within shutdown.Flush
// more (graceful; internal/shutdown).
const shutdownGrace = 10 * time.Second

// Main is the testable program: everything it touches comes in through its
// fields, and Run returns the exit code instead of exiting.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Ready, when set, is told the address a server command listens on
	// (tests use it with --listen 127.0.0.1:0).
	Ready func(addr string)
	// Terminal, when set, tells whether Stdin or Stderr is a terminal
	// (tests); nil: a character device is one.
	Terminal func(f any) bool
}

// errUsage marks an error that is the caller's wording: exit code 2.
var errUsage = errors.New("usage")

type command struct {
	name, summary string
	run           func(m *Main, ctx context.Context, args []string) error
}

// commands lists the subcommands in the order help shows them.
func commands() []command {
	return []command{
		{"serve-mcp", "MCP front: serve OTC tool servers to MCP clients (stdio, HTTP, SSE)", (*Main).serveMCP},
		{"serve-otc", "OTC front: serve MCP servers (stdio children or URLs) to OTC clients", (*Main).serveOTC},
		{"sample-otc", "serve the built-in sample OTC toolkit over HTTP", (*Main).sampleOTC},
		{"sample-mcp", "serve the built-in sample MCP server over stdio", (*Main).sampleMCP},
		{"version", "print the version", (*Main).version},
		{"help", "show help for mcpotc or one of its commands", (*Main).help},
	}
}

// Run runs one command line (without the program name) and returns the exit code.
func (m *Main) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		m.usage(m.Stderr)
		return 2
	}
	name := args[0]
	if name == "-h" || name == "--help" || name == "-help" {
		m.usage(m.Stdout)
		return 0
	}
	if name == "--version" || name == "-version" || name == "-v" {
		name, args = "version", append([]string{"version"}, args[1:]...)
	}
	for _, c := range commands() {
		if c.name == name {
			err := c.run(m, ctx, args[1:])
			switch {
			case err == nil, errors.Is(err, flag.ErrHelp):
				return 0
			case isUsage(err):
				fmt.Fprintf(m.Stderr, "mcpotc %s: %s\n", name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
				return 2
			default:
				fmt.Fprintf(m.Stderr, "mcpotc %s: %v\n", name, err)
				return 1
			}
		}
	}
	fmt.Fprintf(m.Stderr, "mcpotc: unknown command %q%s\n\n", name, commandHint(name))
	m.usage(m.Stderr)
	return 2
}

func (m *Main) usage(w io.Writer) {
	fmt.Fprintln(w, "mcpotc bridges MCP and OTC (Open Tool Calling / OXP) tool servers.")
	fmt.Fprintln(w, "\nUsage: mcpotc <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'mcpotc <command> -h' for a command's flags.")
}

// isUsage tells the errors that are the caller's wording — a flag, an
// argument, a config file or an unset variable it names — from failures of
// the program: exit code 2 rather than 1.
func isUsage(err error) bool {
	var pe *problemsError
	var ce *configError
	return errors.Is(err, errUsage) || errors.As(err, &pe) || errors.As(err, &ce)
}

// examples are shown at the end of a command's -h.
var examples = map[string][]string{
	"serve-mcp": {
		"mcpotc serve-mcp --transport http                      # the built-in sample toolkit at http://127.0.0.1:8090/mcp",
		"mcpotc serve-mcp --otc http://127.0.0.1:8081           # one OTC server, over stdio (for an MCP host's config)",
		"mcpotc serve-mcp --config serve-mcp.json --transport http --listen 0.0.0.0:8090",
	},
	"serve-otc": {
		"mcpotc serve-otc                                       # the built-in sample MCP server at http://127.0.0.1:8080",
		"mcpotc serve-otc -- npx -y @modelcontextprotocol/server-everything",
		"mcpotc serve-otc --mcp https://mcp.example.com/mcp --header 'Authorization: Bearer ${TOKEN}'",
	},
	"sample-otc": {
		"mcpotc sample-otc                                      # http://127.0.0.1:8081/tools",
		"mcpotc sample-otc --listen 127.0.0.1:9000 --log-level debug",
	},
	"sample-mcp": {
		"mcpotc sample-mcp                                      # MCP over stdin/stdout, for an MCP host or serve-otc",
		"mcpotc serve-otc -- mcpotc sample-mcp                  # the same tools over OTC",
	},
}

// positional says what to do with a command-line argument that is not a
// flag, per command.
var positional = map[string]func(arg string) string{
	"serve-otc": func(arg string) string {
		return fmt.Sprintf("unexpected argument %q: put the MCP server's command after --, e.g. mcpotc serve-otc -- %s (flags of mcpotc go before --)", arg, arg)
	},
	"serve-mcp": func(arg string) string {
		if strings.Contains(arg, "://") || strings.Contains(arg, ":") {
			return fmt.Sprintf("unexpected argument %q: name an OTC server with --otc, e.g. --otc %s", arg, arg)
		}
		return fmt.Sprintf("unexpected argument %q: serve-mcp takes only flags (an OTC server: --otc URL; see -h)", arg)
	},
}

// flags returns a flag set for a command. Parse errors never print by
// themselves: parse reports them once, and -h prints help to stdout.
func (m *Main) flags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name+" "+synopsis, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses flags: -h prints help (flag.ErrHelp), a bad flag is a usage error.
func (m *Main) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(m.Stdout, "Usage: mcpotc %s\n", strings.TrimSpace(fs.Name()))
			n := 0
			fs.VisitAll(func(*flag.Flag) { n++ })
			if n > 0 {
				fmt.Fprintln(m.Stdout, "\nFlags:")
			}
			printFlags(m.Stdout, fs)
			if ex := examples[commandOf(fs)]; len(ex) > 0 {
				fmt.Fprintln(m.Stdout, "\nExamples:")
				for _, e := range ex {
					fmt.Fprintln(m.Stdout, "  "+e)
				}
			}
			return err
		}
		return fmt.Errorf("%w: %v (see -h)", errUsage, unknownFlag(fs, err))
	}
	if fs.NArg() > 0 {
		if hint := positional[commandOf(fs)]; hint != nil {
			return fmt.Errorf("%w: %s", errUsage, hint(fs.Arg(0)))
		}
		return fmt.Errorf("%w: unexpected argument %q (see -h)", errUsage, fs.Arg(0))
	}
	return nil
}

// commandOf is the command a flag set of flags belongs to.
func commandOf(fs *flag.FlagSet) string {
	name, _, _ := strings.Cut(fs.Name(), " ")
	return name
}

// logFlags defines --log-level and --log-format on fs and returns the
// function that builds the command's logger from them, once fs is parsed.
func (m *Main) logFlags(fs *flag.FlagSet) func() (zerolog.Logger, error) {
	level := fs.String("log-level", "info", "log level: debug, info, warn, error (logs go to stderr)")
	format := fs.String("log-format", "auto", "log format: json (one JSON object a line), text (for people), auto (text when stderr is a terminal, else json)")
	return func() (zerolog.Logger, error) { return m.logger(*level, *format) }
}

// logger builds the logger for a command: zerolog to stderr, never stdout,
// as JSON lines or, for a person at a terminal, as text (docs/observability.md, Logs).
func (m *Main) logger(level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil || level == "" {
		return zerolog.Nop(), fmt.Errorf("%w: --log-level %q is not one of debug, info, warn, error", errUsage, level)
	}
	var w io.Writer = m.Stderr
	switch format {
	case "json":
	case "text", "auto":
		tty := m.terminal(m.Stderr)
		if format == "text" || tty {
			w = zerolog.ConsoleWriter{Out: m.Stderr, NoColor: !tty, TimeFormat: "15:04:05.000"}
		}
	default:
		return zerolog.Nop(), fmt.Errorf("%w: --log-format %q is not one of auto, json, text", errUsage, format)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// terminal tells whether w is a terminal (Main.Terminal, else a character
// device).
func (m *Main) terminal(w any) bool {
	if m.Terminal != nil {
		return m.Terminal(w)
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (m *Main) help(_ context.Context, args []string) error {
	if len(args) == 0 {
		m.usage(m.Stdout)
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] && c.name != "help" {
			return c.run(m, context.Background(), []string{"-h"})
		}
	}
	return fmt.Errorf("%w: unknown command %q%s", errUsage, args[0], commandHint(args[0]))
}

func (m *Main) sampleOTC(ctx context.Context, args []string) error {
	fs := m.flags("sample-otc", "[--listen 127.0.0.1:8081] [--allowed-host NAME]... [--idempotency-ttl 10m] [--log-level info]")
	listen := fs.String("listen", "127.0.0.1:8081", "address to listen on")
	logOpts := m.logFlags(fs)
	idemTTL := durationFlag(fs, "idempotency-ttl", 10*time.Minute, "how long a call_id's answer is kept and replayed (0: off)")
	var allowedHosts allowedHostList
	fs.Var(&allowedHosts, "allowed-host", allowedHostUsage)
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if err := checkListen("--listen", *listen); err != nil {
		return err
	}
	log, err := logOpts()
	if err != nil {
		return err
	}
	h, err := otcsample.New(nil).Handler(&otc.Options{Observe: bridge.LogOTCCalls(log), IdempotencyTTL: *idemTTL, AllowedHosts: allowedHosts})
	if err != nil {
		return err
	}
	return m.serveHTTP(ctx, log, *listen, h, "sample OTC toolkit")
}

// serveHTTP serves h on addr until ctx ends, then lets in-flight requests
// finish for at most shutdownGrace and answers those still running with
// "shutting down" (graceful).
func (m *Main) serveHTTP(ctx context.Context, log zerolog.Logger, addr string, h http.Handler, what string) error {
	return m.serveHTTPWith(ctx, log, addr, h, what, graceful)
}

// shutdownFunc shuts srv down within ctx's deadline (the grace); endCalls
// ends the calls of the requests still running with shutdown.ErrShutdown, so
// that each is answered "shutting down" (internal/shutdown).
type shutdownFunc func(ctx context.Context, srv *http.Server, endCalls func()) error

// graceful is the shutdown of a plain server: in-flight requests get the
// grace; then those still running have their calls ended and their answers
// get shutdown.Flush to be written before the connections close. nil: every
// request was answered.
func graceful(ctx context.Context, srv *http.Server, endCalls func()) error {
	err := srv.Shutdown(ctx)
	if err == nil || ctx.Err() == nil {
		return err
	}
	endCalls()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdown.Flush)
	defer cancel()
	if err := srv.Shutdown(fctx); err != nil {
		return fmt.Errorf("requests still running %v after the grace: %w", shutdown.Flush, err)
	}
	return nil
}

// draining is a shutdown for serveHTTPWith that first calls drain (a
// front's /ready turns 503), keeps serving for delay so that load
// balancers see it, then runs shutdown with a full shutdownGrace.
func draining(log zerolog.Logger, delay time.Duration, drain func(), next shutdownFunc) shutdownFunc {
	return func(ctx context.Context, srv *http.Server, endCalls func()) error {
		drain()
		if delay > 0 {
			log.Info().Dur("drain_delay", delay).Msg("draining: GET /ready answers 503")
			time.Sleep(delay)
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
			defer cancel()
		}
		return next(ctx, srv, endCalls)
	}
}

// serveHTTPWith is serveHTTP with a shutdown of the caller's (the MCP
// transports close their streams and sessions themselves). Every request's
// context descends from one that endCalls ends with shutdown.ErrShutdown
// (shutdown.Base), and so does every call detached from one.
func (m *Main) serveHTTPWith(ctx context.Context, log zerolog.Logger, addr string, h http.Handler, what string, stop shutdownFunc) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	calls, endCalls := shutdown.Base()
	srv := &http.Server{
		Handler:           httpguard.Handler(h), // closes after an ambiguously framed request (RFC 9112 §6.1)
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          nil,
		BaseContext:       func(net.Listener) context.Context { return calls },
	}
	log.Info().Str("addr", ln.Addr().String()).Msg("serving " + what)
	if m.Ready != nil {
		m.Ready(ln.Addr().String())
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	ended := false
	err = stop(sctx, srv, func() {
		ended = true
		log.Warn().Dur("grace", shutdownGrace).Msg("requests still running at the end of the shutdown grace: their calls are ended and answered 'shutting down'")
		endCalls()
	})
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	if ended {
		log.Info().Msg("every request was answered")
	}
	return nil
}

// metricsUsage is the help of --metrics-listen.
const metricsUsage = "address of a listener of its own that serves Prometheus metrics at GET /metrics (off by default; see docs/observability.md, Metrics)"

// serveMetrics serves mt at GET /metrics on addr, apart from the
// protocol's listener, until ctx ends. It fails at once when addr cannot
// be listened on.
func (m *Main) serveMetrics(ctx context.Context, log zerolog.Logger, addr string, mt *metrics.Metrics) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", mt.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
	log.Info().Str("addr", ln.Addr().String()).Msg("serving metrics at /metrics")
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return nil
}

// startTracing sets up the process's traces from the OTEL_* environment
// (docs/observability.md, Traces): a no-op tracer when it asks for none. The
// returned stop flushes the spans still buffered, within shutdownGrace.
func (m *Main) startTracing(ctx context.Context, log zerolog.Logger, service string) (trace.Tracer, func(), error) {
	tp, shutdown, err := tracing.Setup(ctx, m.Getenv, service, buildVersion())
	if err != nil {
		return nil, nil, fmt.Errorf("traces (OTEL_* environment): %w", err)
	}
	if tracing.Enabled(m.Getenv) {
		log.Info().Msg("exporting traces over OTLP/HTTP (OTEL_* environment)")
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn().Err(err).Msg("flushing traces")
		}
	}
	return tracing.Tracer(tp), stop, nil
}
