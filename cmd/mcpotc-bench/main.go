package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// config is the command line.
type config struct {
	Calls       int   `json:"calls"`
	Warmup      int   `json:"warmup"`
	Concurrency []int `json:"concurrency"`
	Burst       int   `json:"burst"`
	BurstRounds int   `json:"burst_rounds"`
	// AnchorRounds is the number of interleaved rounds of the anchor
	// target (anchors.go, measurePaired); 0 measures none.
	AnchorRounds int    `json:"anchor_rounds"`
	Sessions     int    `json:"sessions"`
	Tools        int    `json:"tools"`
	Only         string `json:"only,omitempty"`
	MCPOTC       string `json:"mcpotc,omitempty"`
	Node         string `json:"node,omitempty"`
	Peers        string `json:"peers,omitempty"`
	NoInstall    bool   `json:"no_install,omitempty"`
	JSON         string `json:"-"`
	Pprof        string `json:"pprof,omitempty"`
	Keep         bool   `json:"-"`
	Verbose      bool   `json:"-"`

	only map[string]bool
}

func (c *config) runs(group string) bool {
	if len(c.only) == 0 {
		return !optIn[group]
	}
	return c.only[group]
}

// optIn are the groups a run without --only leaves out: otc-anchors
// measures one target in interleaved rounds, at length (minutes on 2
// cores), which the everything run of the docs and CI need not pay for.
var optIn = map[string]bool{"otc-anchors": true}

const usage = `Usage: mcpotc-bench [flags]

Measures mcpotc's OTC front and MCP front on loopback against direct calls,
a bare HTTP round trip and Node peers, and prints a table. Run it from the
mcpotc checkout (it builds ./cmd/mcpotc), or pass --mcpotc.

Flags:
`

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("mcpotc-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.IntVar(&c.Calls, "calls", 5000, "measured calls per hop/peer row and concurrency (payload rows make fewer: see docs/performance.md)")
	fs.IntVar(&c.Warmup, "warmup", 200, "warm-up calls before each row (not measured)")
	fs.IntVar(&c.AnchorRounds, "anchor-rounds", 5, "interleaved rounds of each front and its anchors for the CPU-per-call targets, --calls ÷ rounds calls each (0: the rows alone)")
	conc := fs.String("concurrency", "1,4,64", "comma-separated concurrencies of the hop and peer rows")
	fs.IntVar(&c.Burst, "burst", 1000, "calls started at once in the burst rows")
	fs.IntVar(&c.BurstRounds, "burst-rounds", 3, "bursts per burst row")
	fs.IntVar(&c.Sessions, "sessions", 200, "idle MCP sessions opened in the sessions row")
	fs.IntVar(&c.Tools, "tools", 10000, "tools in the catalog rows (the OTC front reads at most 10,000 from an MCP server)")
	fs.StringVar(&c.Only, "only", "", "run only these groups: hops, otc-anchors, baseline, peers, payload, burst, sessions, catalog (comma-separated; without it, all but otc-anchors)")
	fs.StringVar(&c.MCPOTC, "mcpotc", "", "the mcpotc binary to measure (default: go build ./cmd/mcpotc into a temp dir)")
	fs.StringVar(&c.Node, "node", "", "the node binary for the peers (default: the one .ci/install-peers.sh installs, else node on PATH)")
	fs.StringVar(&c.Peers, "peers", "", "node_modules with supergateway and @ivotoby/openapi-mcp-server (default: $MCPOTC_PEERS, else .ci/peers/node_modules)")
	fs.BoolVar(&c.NoInstall, "no-install", false, "do not run .ci/install-peers.sh when the peers are missing")
	fs.StringVar(&c.JSON, "json", "", "also write the figures as JSON to this file (- for stdout; the table then goes to stderr)")
	fs.StringVar(&c.Pprof, "pprof", "", "build mcpotc with net/http/pprof and write CPU and heap profiles of the fronts under load to this directory")
	fs.BoolVar(&c.Keep, "keep", false, "keep the work directory (binaries, logs, specs) and print its path")
	fs.BoolVar(&c.Verbose, "v", false, "print progress to stderr")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, f := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--concurrency: %q is not a positive integer", f)
		}
		c.Concurrency = append(c.Concurrency, n)
	}
	if c.Calls < 1 || c.Warmup < 0 || c.Burst < 1 || c.BurstRounds < 1 || c.Sessions < 1 || c.Tools < 2 {
		return nil, errors.New("--calls, --burst, --burst-rounds, --sessions must be positive, --warmup not negative, --tools at least 2")
	}
	if c.Only != "" {
		c.only = map[string]bool{}
		for _, g := range strings.Split(c.Only, ",") {
			g = strings.TrimSpace(g)
			switch g {
			case "hops", "otc-anchors", "baseline", "peers", "payload", "burst", "sessions", "catalog":
				c.only[g] = true
			default:
				return nil, fmt.Errorf("--only: unknown group %q", g)
			}
		}
	}
	return c, nil
}

func main() {
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "__") {
		os.Exit(runHidden(os.Args[1], os.Args[2:]))
	}
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpotc-bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runBench(ctx, cfg)
	stop()
	os.Exit(code)
}
