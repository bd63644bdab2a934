package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/sample"
)

// version is set at build time with -ldflags "-X main.version=…"; else the
// module version from the build info is used.
var version = ""

// shutdownGrace bounds how long in-flight requests may take after a signal.
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
	for _, c := range commands() {
		if c.name == name {
			err := c.run(m, ctx, args[1:])
			switch {
			case err == nil, errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				fmt.Fprintf(m.Stderr, "mcpotc %s: %v\n", name, err)
				return 2
			default:
				fmt.Fprintf(m.Stderr, "mcpotc %s: %v\n", name, err)
				return 1
			}
		}
	}
	fmt.Fprintf(m.Stderr, "mcpotc: unknown command %q\n\n", name)
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
			fs.SetOutput(m.Stdout)
			fs.PrintDefaults()
			fs.SetOutput(io.Discard)
			return err
		}
		return fmt.Errorf("%w: %v (see -h)", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (see -h)", errUsage, fs.Arg(0))
	}
	return nil
}

// logger builds the logger for a command: zerolog to stderr, never stdout.
func (m *Main) logger(level string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil || level == "" {
		return zerolog.Nop(), fmt.Errorf("%w: --log-level %q is not one of debug, info, warn, error", errUsage, level)
	}
	return zerolog.New(m.Stderr).Level(lvl).With().Timestamp().Logger(), nil
}

func (m *Main) version(_ context.Context, args []string) error {
	fs := m.flags("version", "")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, "mcpotc", buildVersion())
	return nil
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
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
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

func (m *Main) sampleOTC(ctx context.Context, args []string) error {
	fs := m.flags("sample-otc", "[--listen 127.0.0.1:8081] [--allowed-host NAME]... [--idempotency-ttl 10m] [--log-level info]")
	listen := fs.String("listen", "127.0.0.1:8081", "address to listen on")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error (logs go to stderr)")
	idemTTL := fs.Duration("idempotency-ttl", 10*time.Minute, "how long a call_id's answer is kept and replayed (0: off)")
	var allowedHosts stringList
	fs.Var(&allowedHosts, "allowed-host", "host name admitted in Host and Origin on a loopback listener besides localhost and loopback IPs, e.g. a reverse proxy's (repeatable)")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	log, err := m.logger(*level)
	if err != nil {
		return err
	}
	h, err := sample.New(nil).Handler(&otc.Options{Observe: bridge.LogOTCCalls(log), IdempotencyTTL: *idemTTL, AllowedHosts: allowedHosts})
	if err != nil {
		return err
	}
	return m.serveHTTP(ctx, log, *listen, h, "sample OTC toolkit")
}

// serveHTTP serves h on addr until ctx ends, then lets in-flight requests
// finish for at most shutdownGrace.
func (m *Main) serveHTTP(ctx context.Context, log zerolog.Logger, addr string, h http.Handler, what string) error {
	return m.serveHTTPWith(ctx, log, addr, h, what, func(ctx context.Context, srv *http.Server) error { return srv.Shutdown(ctx) })
}

// serveHTTPWith is serveHTTP with a shutdown of the caller's (the MCP
// transports close their streams and sessions themselves).
func (m *Main) serveHTTPWith(ctx context.Context, log zerolog.Logger, addr string, h http.Handler, what string, shutdown func(context.Context, *http.Server) error) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          nil,
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
	if err := shutdown(sctx, srv); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
