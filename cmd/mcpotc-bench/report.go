package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Row groups, in the order the table shows them.
const (
	groupHop      = "hop"
	groupBaseline = "baseline"
	groupPeer     = "peer"
	groupPayload  = "payload"
	groupBurst    = "burst"
	groupSessions = "sessions"
	groupCatalog  = "catalog"
)

// row is one line of the table; the JSON output is these rows.
type row struct {
	Group       string  `json:"group"`
	Key         string  `json:"key"`  // stable id, for targets and scripts
	Name        string  `json:"name"` // what the table says
	Concurrency int     `json:"concurrency,omitempty"`
	Calls       int     `json:"calls,omitempty"`
	Errors      int     `json:"errors"`
	CallsPerSec float64 `json:"calls_per_sec,omitempty"`
	P50us       float64 `json:"p50_us,omitempty"`
	P90us       float64 `json:"p90_us,omitempty"`
	P99us       float64 `json:"p99_us,omitempty"`
	MBPerSec    float64 `json:"mb_per_sec,omitempty"`
	PeakRSSKiB  int64   `json:"peak_rss_kib,omitempty"`
	// CPUusPerCall is the CPU time (user + system, /proc) the measured
	// process used per measured call, in µs (hop, baseline and peer rows).
	CPUusPerCall float64 `json:"cpu_us_per_call,omitempty"`
	RSSOf        string  `json:"rss_of,omitempty"` // the process whose peak RSS this is
	// Extra holds row-specific figures (bytes listed, RSS per session …).
	Extra      map[string]float64 `json:"extra,omitempty"`
	Note       string             `json:"note,omitempty"`
	Skipped    string             `json:"skipped,omitempty"`
	FirstError string             `json:"first_error,omitempty"`
}

func (r *row) fill(s sample) {
	r.Calls, r.Errors = s.calls, s.errors
	if s.first != nil {
		r.FirstError = s.first.Error()
	}
	if len(s.lat) == 0 {
		return
	}
	r.CallsPerSec = rate(len(s.lat), s.elapsed)
	r.P50us = us(percentile(s.lat, 50))
	r.P90us = us(percentile(s.lat, 90))
	r.P99us = us(percentile(s.lat, 99))
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func fromUS(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }

// target is one of the goals, computed from the rows.
type target struct {
	Name   string `json:"name"`
	Status string `json:"status"` // met, missed, unknown
	Detail string `json:"detail"`
}

// report is the whole output.
type report struct {
	Machine  machine  `json:"machine"`
	Config   any      `json:"config"`
	Started  string   `json:"started"`
	Duration float64  `json:"duration_s"`
	Rows     []row    `json:"rows"`
	Targets  []target `json:"targets"`
	// Paired is the anchor target's interleaved measurement (anchors.go).
	Paired []paired `json:"paired_cpu,omitempty"`
	// OTCPaired is the OTC front's anchors' interleaved measurement
	// (otcanchors.go).
	OTCPaired []otcPaired `json:"otc_paired_cpu,omitempty"`
	Notes     []string    `json:"notes,omitempty"`
	Failed    bool        `json:"failed"`
}

func (r *report) find(key string, conc int) *row {
	for i := range r.Rows {
		if r.Rows[i].Key == key && (conc == 0 || r.Rows[i].Concurrency == conc) && r.Rows[i].Skipped == "" {
			return &r.Rows[i]
		}
	}
	return nil
}

// targets computes the performance targets (docs/performance.md, Performance) from the
// rows of this run: every figure is a ratio against a baseline measured in
// the same run, or a bound.
func (r *report) targets() {
	var l targetList
	r.speedTargets(&l)
	r.scaleTargets(&l)
	r.Targets = l
}

// targetList collects the targets' verdicts.
type targetList []target

func (l *targetList) add(name string, ok bool, detail string) {
	*l = append(*l, target{Name: name, Status: verdict(ok), Detail: detail})
}

func (l *targetList) unknown(name, why string) {
	*l = append(*l, target{Name: name, Status: "unknown", Detail: why})
}

// ratio is figure m of row f over that of row d; ok is false where
// either row, or its figure, is missing.
func ratio(f, d *row, m func(*row) float64) (fv, dv, x float64, ok bool) {
	if f == nil || d == nil || m(f) == 0 || m(d) == 0 {
		return 0, 0, 0, false
	}
	return m(f), m(d), m(f) / m(d), true
}

// speedTargets are the targets of one call: the overhead at c=1, the
// throughput at c=64 and the 1 MiB echo.
func (r *report) speedTargets(l *targetList) {
	base := r.find("baseline", 1)
	overhead := func(name, bridged, direct string) {
		b, d := r.find(bridged, 1), r.find(direct, 1)
		if b == nil || d == nil || base == nil || b.P50us == 0 || d.P50us == 0 || base.P50us == 0 {
			l.unknown(name, "not measured")
			return
		}
		x := (b.P50us - d.P50us) / base.P50us
		detail := fmt.Sprintf("(p50 %s − direct %s) ÷ bare HTTP %s = %.2f×", fmtDur(fromUS(b.P50us)), fmtDur(fromUS(d.P50us)),
			fmtDur(fromUS(base.P50us)), x)
		if b.CPUusPerCall > 0 && base.CPUusPerCall > 0 {
			detail += fmt.Sprintf("; CPU per call: bridge %s, bare echo server %s", fmtDur(fromUS(b.CPUusPerCall)), fmtDur(fromUS(base.CPUusPerCall)))
		}
		l.add(name, x <= 1, detail)
	}
	overhead("overhead at c=1 ÷ bare loopback HTTP p50, OTC front ≤ 1.0×", "otc-front", "mcp-direct-stdio")
	overhead("overhead at c=1 ÷ bare loopback HTTP p50, MCP front over stdio ≤ 1.0×", "mcp-front-stdio", "otc-direct")
	overhead("overhead at c=1 ÷ bare loopback HTTP p50, MCP front over streamable HTTP ≤ 1.0×", "mcp-front-http", "otc-direct")

	throughput := func(name, front, direct string) {
		f, d, x, ok := ratio(r.find(front, 64), r.find(direct, 64), func(rw *row) float64 { return rw.CallsPerSec })
		if !ok {
			l.unknown(name, "not measured (needs concurrency 64)")
			return
		}
		l.add(name, x >= 0.6, fmt.Sprintf("%.0f ÷ %.0f calls/s = %.2f", f, d, x))
	}
	throughput("throughput at c=64 ÷ the direct call, OTC front ≥ 0.6", "otc-front", "mcp-direct-stdio")
	throughput("throughput at c=64 ÷ the direct call, MCP front over streamable HTTP ≥ 0.6", "mcp-front-http", "otc-direct")
	throughput("throughput at c=64 ÷ the direct call, MCP front over stdio ≥ 0.6", "mcp-front-stdio", "otc-direct")

	r.anchorTargets(l)
	r.otcAnchorTargets(l)

	const mib = "1 MiB"
	f, d, x, ok := ratio(r.findNamed("payload-mcp-front", mib), r.findNamed("payload-otc-direct", mib), func(rw *row) float64 { return rw.MBPerSec })
	if name := "1 MiB echo at c=1, MB/s ÷ the direct call, MCP front ≥ 0.5"; !ok {
		l.unknown(name, "not measured")
	} else {
		l.add(name, x >= 0.5, fmt.Sprintf("%.1f ÷ %.1f MB/s = %.2f", f, d, x))
	}
}

// anchorTargets: serve-mcp's CPU per call over streamable HTTP ÷ that of
// an httputil.ReverseProxy hop to the same OTC server, at each measured
// concurrency (the verdict is the worst), with the framework-free
// JSON-RPC hop's ratio beside it. The figures are those of the
// interleaved rounds (anchors.go, paired) when they ran, else the rows'.
func (r *report) anchorTargets(l *targetList) {
	const name = "CPU per call, MCP front over streamable HTTP ÷ an httputil.ReverseProxy hop to the same OTC server ≤ 1.2"
	var parts []string
	worst := 0.0
	if len(r.Paired) > 0 {
		for _, p := range r.Paired {
			if p.ProxyUS == 0 || p.JSONRPCUS == 0 {
				continue
			}
			x := p.MCPFrontUS / p.ProxyUS
			lo, hi := slices.Min(p.RoundRatios), slices.Max(p.RoundRatios)
			parts = append(parts, fmt.Sprintf("c=%d: %s ÷ %s = %.2f (rounds %.2f–%.2f; framework-free JSON-RPC hop %s: %.2f×)",
				p.Concurrency, fmtDur(fromUS(p.MCPFrontUS)), fmtDur(fromUS(p.ProxyUS)), x, lo, hi,
				fmtDur(fromUS(p.JSONRPCUS)), p.MCPFrontUS/p.JSONRPCUS))
			worst = max(worst, x)
		}
		if len(parts) > 0 {
			l.add(name, worst <= 1.2, fmt.Sprintf("%s; %d interleaved rounds of %d calls each", strings.Join(parts, "; "), r.Paired[0].Rounds, r.Paired[0].CallsPerRound))
			return
		}
	}
	cpu := func(rw *row) float64 { return rw.CPUusPerCall }
	for _, c := range r.concurrencies() {
		f, p, x, ok := ratio(r.find("mcp-front-http", c), r.find("anchor-reverse-proxy", c), cpu)
		if !ok {
			continue
		}
		part := fmt.Sprintf("c=%d: %s ÷ %s = %.2f", c, fmtDur(fromUS(f)), fmtDur(fromUS(p)), x)
		if _, j, y, ok := ratio(r.find("mcp-front-http", c), r.find("anchor-jsonrpc", c), cpu); ok {
			part += fmt.Sprintf(" (framework-free JSON-RPC hop %s: %.2f×)", fmtDur(fromUS(j)), y)
		}
		parts = append(parts, part)
		worst = max(worst, x)
	}
	if len(parts) == 0 {
		l.unknown(name, "not measured")
		return
	}
	l.add(name, worst <= 1.2, strings.Join(parts, "; "))
}

// concurrencies are the concurrencies of the hop rows, in order.
func (r *report) concurrencies() []int {
	var out []int
	for _, rw := range r.Rows {
		if rw.Key == "anchor-reverse-proxy" && rw.Skipped == "" {
			out = append(out, rw.Concurrency)
		}
	}
	return out
}

// scaleTargets are the targets of size: listing 10,000 tools, a burst of
// 1,000 calls, idle sessions.
func (r *report) scaleTargets(l *targetList) {
	list := func(name, key string) {
		rw := r.find(key, 0)
		if rw == nil || rw.P50us == 0 {
			l.unknown(name, "not measured")
			return
		}
		l.add(name, rw.P50us < 20_000, fmt.Sprintf("p50 %s, p99 %s", fmtDur(fromUS(rw.P50us)), fmtDur(fromUS(rw.P99us))))
	}
	list("tools/list of 10,000 tools p50 < 20 ms, MCP front", "catalog-mcp-list")
	list("tools/list of 10,000 tools p50 < 20 ms, OTC front", "catalog-otc-list")

	burst := func(name, front, direct string) {
		f, d, x, ok := ratio(r.find(front, 0), r.find(direct, 0), func(rw *row) float64 { return rw.P99us })
		if !ok {
			l.unknown(name, "not measured")
			return
		}
		l.add(name, x <= 2, fmt.Sprintf("p99 %s ÷ direct %s = %.2f×", fmtDur(fromUS(f)), fmtDur(fromUS(d)), x))
	}
	burst("burst of 1,000 calls at once, p99 ≤ 2× the direct call's, MCP front", "burst-mcp-front", "burst-otc-direct")
	burst("burst of 1,000 calls at once, p99 ≤ 2× the direct call's, OTC front", "burst-otc-front", "burst-mcp-direct")

	if s := r.find("sessions", 0); s != nil && s.Extra != nil {
		per := s.Extra["rss_per_session_kib"]
		l.add("memory per idle MCP session < 64 KiB", per < 64,
			fmt.Sprintf("%.1f KiB per session (RSS %+.0f KiB over %d sessions)", per, s.Extra["rss_delta_kib"], s.Calls))
	} else {
		l.unknown("memory per idle MCP session < 64 KiB", "not measured")
	}
}

// findNamed is the measured row of key whose name ends with suffix.
func (r *report) findNamed(key, suffix string) *row {
	for i := range r.Rows {
		if rw := &r.Rows[i]; rw.Key == key && strings.HasSuffix(rw.Name, suffix) && rw.Skipped == "" {
			return rw
		}
	}
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

var groupTitles = map[string]string{
	groupHop:      "Hops: one call through each front, against the same upstream called directly",
	groupBaseline: "Baseline: the physical floor of one hop",
	groupPeer:     "Peers (Node), same upstream, same client",
	groupPayload:  "Payloads (echo, concurrency 1; MB/s = message bytes per second, each way)",
	groupBurst:    "Bursts: 1,000 calls started at once",
	groupSessions: "Idle MCP sessions",
	groupCatalog:  "Catalogs of 10,000 tools (time to the last byte, read raw)",
}

var groupOrder = []string{groupHop, groupBaseline, groupPeer, groupPayload, groupBurst, groupSessions, groupCatalog}

// writeTable prints the report as aligned text.
func (r *report) writeTable(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "mcpotc-bench: %d CPUs (%s), %s, %s", m.CPUs, m.CPUModel, m.GoVersion, m.OS)
	if m.Node != "" {
		fmt.Fprintf(w, ", node %s", m.Node)
	}
	fmt.Fprintf(w, "; %s\n", r.Started)
	for _, g := range groupOrder {
		var rows []row
		for _, rw := range r.Rows {
			if rw.Group == g {
				rows = append(rows, rw)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", groupTitles[g])
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\tconc\tcalls\terrors\tcalls/s\tp50\tp90\tp99\tMB/s\tCPU/call\tpeak RSS\t")
		for _, rw := range rows {
			name := rw.Name
			if rw.Skipped != "" {
				fmt.Fprintf(tw, "%s\t\t\t\t\t\t\t\t\t\t\t  skipped: %s\n", name, rw.Skipped)
				continue
			}
			conc := "-"
			if rw.Concurrency > 0 {
				conc = fmt.Sprint(rw.Concurrency)
			}
			cps := "-"
			if rw.CallsPerSec > 0 {
				cps = fmt.Sprintf("%.0f", rw.CallsPerSec)
			}
			mbs := "-"
			if rw.MBPerSec > 0 {
				mbs = fmt.Sprintf("%.1f", rw.MBPerSec)
			}
			note := rw.Note
			if rw.RSSOf != "" {
				note = strings.TrimPrefix(note+"; RSS of "+rw.RSSOf, "; ")
			}
			if rw.FirstError != "" {
				note = strings.TrimPrefix(note+"; first error: "+rw.FirstError, "; ")
			}
			cpu := "-"
			if rw.CPUusPerCall > 0 {
				cpu = fmtDur(fromUS(rw.CPUusPerCall))
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t  %s\n", name, conc, rw.Calls, rw.Errors, cps,
				fmtDur(fromUS(rw.P50us)), fmtDur(fromUS(rw.P90us)), fmtDur(fromUS(rw.P99us)), mbs, cpu, fmtKiB(rw.PeakRSSKiB), note)
		}
		_ = tw.Flush()
	}
	if len(r.Targets) > 0 {
		fmt.Fprintln(w, "\nTargets")
		for _, t := range r.Targets {
			fmt.Fprintf(w, "  %-7s %s: %s\n", t.Status, t.Name, t.Detail)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintf(w, "\nran in %.0fs", r.Duration)
	if r.Failed {
		fmt.Fprint(w, "; SOME MEASURED CALLS FAILED")
	}
	fmt.Fprintln(w)
}

func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
