package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
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
	RSSOf       string  `json:"rss_of,omitempty"` // the process whose peak RSS this is
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
	Notes    []string `json:"notes,omitempty"`
	Failed   bool     `json:"failed"`
}

func (r *report) find(key string, conc int) *row {
	for i := range r.Rows {
		if r.Rows[i].Key == key && (conc == 0 || r.Rows[i].Concurrency == conc) && r.Rows[i].Skipped == "" {
			return &r.Rows[i]
		}
	}
	return nil
}

// targets computes the targets from the measured rows.
func (r *report) targets() {
	var ts []target
	base := r.find("baseline", 1)
	overhead := func(name, bridged, direct string) {
		t := target{Name: name, Status: "unknown"}
		b, d := r.find(bridged, 1), r.find(direct, 1)
		if b == nil || d == nil || base == nil || b.P50us == 0 || d.P50us == 0 {
			t.Detail = "not measured"
		} else {
			over := b.P50us - d.P50us
			t.Status = verdict(over <= base.P50us)
			t.Detail = fmt.Sprintf("p50 %s − direct %s = %s overhead vs bare HTTP round trip %s", fmtDur(fromUS(b.P50us)),
				fmtDur(fromUS(d.P50us)), fmtSigned(over), fmtDur(fromUS(base.P50us)))
		}
		ts = append(ts, t)
	}
	overhead("overhead c=1, OTC front (≤ bare HTTP p50)", "otc-front", "mcp-direct-stdio")
	overhead("overhead c=1, MCP front over streamable HTTP (≤ bare HTTP p50)", "mcp-front-http", "otc-direct")
	overhead("overhead c=1, MCP front over stdio (≤ bare HTTP p50)", "mcp-front-stdio", "otc-direct")
	ratio := func(name, ours, peer string, want float64) {
		t := target{Name: name, Status: "unknown"}
		o, p := r.find(ours, 64), r.find(peer, 64)
		switch {
		case p == nil:
			t.Detail = "peer not measured"
			if pr := r.findAny(peer); pr != nil && pr.Skipped != "" {
				t.Detail = pr.Skipped
			}
		case o == nil || o.CallsPerSec == 0 || p.CallsPerSec == 0:
			t.Detail = "not measured"
		default:
			x := o.CallsPerSec / p.CallsPerSec
			t.Status = verdict(x >= want)
			t.Detail = fmt.Sprintf("%.0f vs %.0f calls/s at c=64: %.2f×", o.CallsPerSec, p.CallsPerSec, x)
		}
		ts = append(ts, t)
	}
	ratio("OTC front ≥ 3× supergateway (c=64)", "otc-front", "supergateway", 3)
	ratio("MCP front (stdio) ≥ 3× openapi-mcp-server (stdio, c=64)", "mcp-front-stdio", "openapi-mcp-server", 3)
	ratio("MCP front (streamable HTTP) ≥ 3× openapi-mcp-server (stdio, c=64)", "mcp-front-http", "openapi-mcp-server", 3)
	list := func(name, key string) {
		t := target{Name: name, Status: "unknown", Detail: "not measured"}
		if l := r.find(key, 0); l != nil && l.P50us > 0 {
			t.Status = verdict(l.P50us < 50_000)
			t.Detail = fmt.Sprintf("p50 %s, p99 %s", fmtDur(fromUS(l.P50us)), fmtDur(fromUS(l.P99us)))
		}
		ts = append(ts, t)
	}
	list("tools/list of 10,000 tools through the OTC front < 50 ms", "catalog-otc-list")
	list("tools/list of 10,000 tools through the MCP front < 50 ms", "catalog-mcp-list")
	t := target{Name: "memory per idle MCP session < 64 KiB", Status: "unknown", Detail: "not measured"}
	if s := r.find("sessions", 0); s != nil && s.Extra != nil {
		per := s.Extra["rss_per_session_kib"]
		t.Status = verdict(per < 64)
		t.Detail = fmt.Sprintf("%.1f KiB per session (RSS %+.0f KiB over %d sessions)", per, s.Extra["rss_delta_kib"], s.Calls)
	}
	ts = append(ts, t)
	r.Targets = ts
}

func (r *report) findAny(key string) *row {
	for i := range r.Rows {
		if r.Rows[i].Key == key {
			return &r.Rows[i]
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

func fmtSigned(v float64) string {
	if v < 0 {
		return "−" + fmtDur(fromUS(-v))
	}
	return fmtDur(fromUS(v))
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
		fmt.Fprintln(tw, "\tconc\tcalls\terrors\tcalls/s\tp50\tp90\tp99\tMB/s\tpeak RSS\t")
		for _, rw := range rows {
			name := rw.Name
			if rw.Skipped != "" {
				fmt.Fprintf(tw, "%s\t\t\t\t\t\t\t\t\t\t  skipped: %s\n", name, rw.Skipped)
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
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t  %s\n", name, conc, rw.Calls, rw.Errors, cps,
				fmtDur(fromUS(rw.P50us)), fmtDur(fromUS(rw.P90us)), fmtDur(fromUS(rw.P99us)), mbs, fmtKiB(rw.PeakRSSKiB), note)
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
