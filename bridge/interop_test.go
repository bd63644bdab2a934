package bridge_test

// The interop matrix: each front against every peer shape it must serve or
// read, with no Node and no network beyond loopback.
//
//   - The OTC front (bridge.NewOTCFront over the built-in sample MCP server,
//     in-process) answering OTC clients in each dialect: otc-1.0 and oxp-1.0
//     envelopes, oxp-flat (OXP-Version header), the `inputs` alias of
//     `input`, and POST /call, the docs' alias of POST /tools/call.
//   - The MCP front (bridge.NewMCPFront served over streamable HTTP by
//     Front().StreamableHTTPHandler, driven with raw JSON-RPC) against a fake
//     OTC upstream per dialect (httptest): otc-1.0 (tools, wrapped input
//     schemas), oxp-1.0 (items), oxp-flat (items, OXP-Version both ways) and
//     loose (langchain-tool-server: a bare array list, a bare
//     CallToolResponse, 404 for an unknown tool, 400 with FastAPI's detail
//     for bad input). Each fake accepts only requests in its own dialect.
//
// Every cell is ok or FAIL; the matrices are printed with t.Log at the end
// and any FAIL fails the test (with the cell's differences, as data, above
// the matrix). Extension members ("x-…") that an OTC front adds to its
// bodies are tolerated wherever OTC allows them (OTC clients ignore them)
// and logged; _meta members beyond those checked are tolerated (a model
// does not read _meta), but carriers never reach content or messages.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/big"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/bridge"
	"github.com/mcpotc/mcpotc/internal/wiretest"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/mcp/mcpsample"
	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
)

// interopWait bounds every wait of the matrix: one HTTP exchange, a catalog.
const interopWait = 5 * time.Second

// TestInteropMatrix runs both matrices and prints them.
func TestInteropMatrix(t *testing.T) {
	otcFront := newInteropMatrix("OTC front (MCP upstream: the sample server, in-process) × OTC client",
		[]string{"list", "call", "tool error", "422 invalid input", "400 unknown tool"})
	mcpFront := newInteropMatrix("MCP front (streamable HTTP client) × OTC upstream dialect",
		[]string{"list", "call", "tool error", "input error", "unknown tool"})
	t.Run("otc-front", func(t *testing.T) {
		base := interopStartOTCFront(t)
		for _, c := range interopOTCClients {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				interopOTCFrontColumn(t, otcFront, base, c)
			})
		}
	})
	t.Run("mcp-front", func(t *testing.T) {
		for _, d := range interopUpstreamDialects {
			t.Run(d, func(t *testing.T) {
				t.Parallel()
				interopMCPFrontColumn(t, mcpFront, d)
			})
		}
	})
	t.Log("\n" + otcFront.String() + "\n" + mcpFront.String())
	if otcFront.failed() || mcpFront.failed() {
		t.Errorf("the interop matrix has FAIL cells (their differences are above)")
	}
}

// --- the matrix -------------------------------------------------------------------

type interopMatrix struct {
	title string
	rows  []string
	mu    sync.Mutex
	cols  []string
	cells map[[2]string]bool // {row, col} → ok
}

func newInteropMatrix(title string, rows []string) *interopMatrix {
	return &interopMatrix{title: title, rows: rows, cells: map[[2]string]bool{}}
}

func (m *interopMatrix) set(row, col string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Contains(m.rows, row) {
		panic("interop matrix: unknown row " + row)
	}
	if !slices.Contains(m.cols, col) {
		m.cols = append(m.cols, col)
	}
	key := [2]string{row, col}
	if prev, seen := m.cells[key]; seen {
		ok = ok && prev
	}
	m.cells[key] = ok
}

func (m *interopMatrix) failed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.rows {
		for _, c := range m.cols {
			if ok, seen := m.cells[[2]string{r, c}]; !seen || !ok {
				return true
			}
		}
	}
	return len(m.cols) == 0
}

// String is the matrix as a text table: rows × columns, ok / FAIL, "—"
// for a cell that was never checked (a failure too).
func (m *interopMatrix) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	cols := slices.Clone(m.cols)
	sort.SliceStable(cols, func(i, j int) bool { return interopColOrder(cols[i]) < interopColOrder(cols[j]) })
	w0 := 0
	for _, r := range m.rows {
		w0 = max(w0, len(r))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", m.title)
	fmt.Fprintf(&b, "  %-*s", w0, "")
	for _, c := range cols {
		fmt.Fprintf(&b, " | %-*s", max(len(c), 4), c)
	}
	b.WriteString("\n")
	for _, r := range m.rows {
		fmt.Fprintf(&b, "  %-*s", w0, r)
		for _, c := range cols {
			cell := "—"
			if ok, seen := m.cells[[2]string{r, c}]; seen {
				cell = map[bool]string{true: "ok", false: "FAIL"}[ok]
			}
			fmt.Fprintf(&b, " | %-*s", max(len(c), 4), cell)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// interopColOrder keeps the columns in the order they are declared.
func interopColOrder(col string) int {
	for i, c := range interopOTCClients {
		if c.name == col {
			return i
		}
	}
	if i := slices.Index(interopUpstreamDialects, col); i >= 0 {
		return i
	}
	return 1 << 20
}

// interopCell runs one cell's check: its problems fail the test, and the
// cell is FAIL when there is any.
func interopCell(t *testing.T, m *interopMatrix, row, col string, check func() []string) {
	t.Helper()
	problems := check()
	m.set(row, col, len(problems) == 0)
	for _, p := range problems {
		t.Errorf("[%s × %s] %s", row, col, p)
	}
}

// --- matching JSON as data ----------------------------------------------------------

// interopMatch lists how got (decoded with UseNumber) differs from want
// (wiretest.Like); members named "x-…" in got are extensions: tolerated,
// and recorded in ext.
func interopMatch(path string, want, got any, ext *[]string) []string {
	return wiretest.Like{Tolerate: func(_, k string) bool { return strings.HasPrefix(k, "x-") }, Ext: ext}.Diff(path, want, got)
}

func interopShow(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	if len(b) > 1500 {
		return string(b[:1500]) + "…"
	}
	return string(b)
}

// interopData is a JSON text as data (for expectations written as JSON).
func interopData(s string) any {
	v, err := wiretest.Decode([]byte(s))
	if err != nil {
		panic(fmt.Sprintf("bad expected JSON %s: %v", s, err))
	}
	return v
}

// --- HTTP ---------------------------------------------------------------------------------

type interopResp struct {
	status int
	header http.Header
	raw    []byte
	body   any
}

var interopHTTP = &http.Client{Timeout: interopWait}

// interopDo makes one bounded HTTP exchange; the answer must be JSON.
func interopDo(method, url string, hdr map[string]string, body []byte) (*interopResp, error) {
	ctx, cancel := context.WithTimeout(context.Background(), interopWait)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := interopHTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	r := &interopResp{status: resp.StatusCode, header: resp.Header, raw: raw}
	if err != nil {
		return r, fmt.Errorf("%s %s: reading the body: %w", method, url, err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return r, fmt.Errorf("%s %s: HTTP %d with Content-Type %q: %s", method, url, r.status, ct, interopTrunc(raw))
	}
	if r.body, err = wiretest.Decode(raw); err != nil {
		return r, fmt.Errorf("%s %s: HTTP %d body is not JSON (%v): %s", method, url, r.status, err, interopTrunc(raw))
	}
	return r, nil
}

func interopTrunc(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}

// --- 1. the OTC front × OTC clients ---------------------------------------------------------

// interopOTCClient is one kind of OTC client of the OTC front.
type interopOTCClient struct {
	name     string
	schema   string // the envelope's $schema; "" for oxp-flat (OXP-Version header)
	callPath string // POST path of calls
	inputKey string // "input", or the "inputs" alias
}

var interopOTCClients = []interopOTCClient{
	{name: "otc-1.0", schema: otc.SchemaOTC10, callPath: "/tools/call", inputKey: "input"},
	{name: "oxp-1.0", schema: otc.SchemaOXP10, callPath: "/tools/call", inputKey: "input"},
	{name: "oxp-flat", schema: "", callPath: "/tools/call", inputKey: "input"},
	{name: "inputs alias", schema: otc.SchemaOXP10, callPath: "/tools/call", inputKey: "inputs"},
	{name: "POST /call", schema: otc.SchemaOTC10, callPath: "/call", inputKey: "input"},
}

// The sample MCP server's tools as the OTC front lists them (toolkit
// "Sample", version: the server's 1.0.0).
var interopSampleIDs = []string{"Sample.add@1.0.0", "Sample.echo@1.0.0", "Sample.fail@1.0.0", "Sample.slow@1.0.0"}

// interopStartOTCFront starts an OTC front over the in-process sample MCP
// server and waits for its catalog.
func interopStartOTCFront(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	f, err := bridge.NewOTCFront(ctx, []bridge.MCPServer{{
		Toolkit: "Sample",
		Config:  upstream.Config{Name: "sample", InProcess: upstream.Piped(mcpsample.ServeStdio)},
	}}, nil)
	if err != nil {
		t.Fatalf("NewOTCFront: %v", err)
	}
	srv := httptest.NewServer(f.Handler())
	t.Cleanup(func() {
		srv.Close()
		cctx, cancel := context.WithTimeout(context.Background(), interopWait)
		defer cancel()
		if err := f.Close(cctx); err != nil {
			t.Errorf("OTCFront.Close: %v", err)
		}
	})
	deadline := time.Now().Add(interopWait)
	for {
		r, err := interopDo(http.MethodGet, srv.URL+"/tools", map[string]string{otc.VersionHeader: "1.0"}, nil)
		if err == nil && r.status == http.StatusOK {
			items, _ := r.body.(map[string]any)["items"].([]any)
			if len(items) == len(interopSampleIDs) {
				return srv.URL
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the OTC front did not list the sample's %d tools within %v (last: %v %v)", len(interopSampleIDs), interopWait, err, r)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// call is the body and headers of a call carrying req in c's dialect.
func (c interopOTCClient) call(req map[string]any) ([]byte, map[string]string) {
	req = maps.Clone(req)
	if in, ok := req["input"]; ok && c.inputKey != "input" {
		delete(req, "input")
		req[c.inputKey] = in
	}
	body, hdr, _ := wiretest.OTCCall(c.schema, req)
	return body, hdr
}

// list is how c asks for the catalog: otc-1.0 callers send {"$schema"} in
// the GET body, oxp-flat callers the OXP-Version header, oxp-1.0 nothing.
func (c interopOTCClient) list() (map[string]string, []byte) {
	switch c.schema {
	case otc.SchemaOTC10:
		return map[string]string{"Content-Type": "application/json"}, []byte(`{"$schema":"otc://1.0"}`)
	case "":
		return map[string]string{otc.VersionHeader: "1.0"}, nil
	}
	return nil, nil
}

// checkAnswer checks an answer's status, OXP-Version header and body
// (inner is the dialect-free body: the CallToolResponse for 200, the error
// body otherwise).
func (c interopOTCClient) checkAnswer(logf func(string, ...any), label string, r *interopResp, status int, inner map[string]any) []string {
	return c.checkBody(logf, label, r, status, wiretest.OTCAnswer(c.schema, status, inner))
}

// checkBody checks an answer's status, OXP-Version header and whole body.
func (c interopOTCClient) checkBody(logf func(string, ...any), label string, r *interopResp, status int, want map[string]any) []string {
	var problems []string
	if r.status != status {
		return []string{fmt.Sprintf("%s: HTTP %d, want %d: %s", label, r.status, status, interopTrunc(r.raw))}
	}
	h := r.header.Get(otc.VersionHeader)
	switch {
	case c.schema == "" && h != "1.0":
		problems = append(problems, fmt.Sprintf("%s: OXP-Version header %q, want 1.0 (the caller sent it)", label, h))
	case c.schema != "" && h != "":
		problems = append(problems, fmt.Sprintf("%s: OXP-Version header %q on an answer to an envelope caller", label, h))
	}
	var ext []string
	for _, d := range interopMatch("body", want, r.body, &ext) {
		problems = append(problems, fmt.Sprintf("%s: %s\n    got: %s", label, d, interopTrunc(r.raw)))
	}
	if len(ext) > 0 && logf != nil {
		// Tolerated: an OTC client ignores extension members.
		logf("%s: extension members (tolerated): %s", label, strings.Join(ext, "; "))
	}
	return problems
}

// interopOTCFrontColumn checks one kind of OTC client against the front.
func interopOTCFrontColumn(t *testing.T, m *interopMatrix, base string, c interopOTCClient) {
	post := func(req map[string]any) (*interopResp, error) {
		body, hdr := c.call(req)
		return interopDo(http.MethodPost, base+c.callPath, hdr, body)
	}
	expect := func(label string, req map[string]any, status int, inner map[string]any) []string {
		r, err := post(req)
		if err != nil {
			return []string{fmt.Sprintf("%s: %v", label, err)}
		}
		return c.checkAnswer(t.Logf, label, r, status, inner)
	}

	interopCell(t, m, "list", c.name, func() []string {
		// The reference: the flat list, checked on its own.
		ref, err := interopDo(http.MethodGet, base+"/tools", map[string]string{otc.VersionHeader: "1.0"}, nil)
		if err != nil {
			return []string{err.Error()}
		}
		items, _ := ref.body.(map[string]any)["items"].([]any)
		problems := interopCheckSampleCatalog(items)
		hdr, body := c.list()
		r, err := interopDo(http.MethodGet, base+"/tools", hdr, body)
		if err != nil {
			return append(problems, err.Error())
		}
		var want map[string]any
		switch c.schema {
		case "":
			want = map[string]any{"items": items}
		case otc.SchemaOTC10:
			// otc-1.0 callers get every input_schema in {"parameters": …}.
			wrapped := make([]any, len(items))
			for i, it := range items {
				tool := maps.Clone(it.(map[string]any))
				tool["input_schema"] = map[string]any{"parameters": tool["input_schema"]}
				wrapped[i] = tool
			}
			want = map[string]any{"$schema": c.schema, "tools": wrapped, "items": wrapped}
		default:
			want = map[string]any{"$schema": c.schema, "tools": items, "items": items}
		}
		return append(problems, c.checkBody(t.Logf, "GET /tools", r, http.StatusOK, want)...)
	})

	interopCell(t, m, "call", c.name, func() []string {
		callID := "interop-" + strings.NewReplacer(" ", "-", "/", "").Replace(c.name)
		problems := expect("Sample.add@1.0.0 {a:1,b:2}",
			map[string]any{"tool_id": "Sample.add@1.0.0", "call_id": callID, "input": map[string]any{"a": 1, "b": 2}},
			http.StatusOK, map[string]any{"call_id": callID, "duration": "<number>", "success": true, "value": map[string]any{"sum": 3}})
		msg := "hi ✓ \u2028 \"q\" <b>"
		problems = append(problems, expect("Sample.echo (latest)",
			map[string]any{"tool_id": "Sample.echo", "input": map[string]any{"message": msg}},
			http.StatusOK, map[string]any{"call_id": "<uuid>", "duration": "<number>", "success": true, "value": msg})...)
		return problems
	})

	interopCell(t, m, "tool error", c.name, func() []string {
		return expect("Sample.fail@1",
			map[string]any{"tool_id": "Sample.fail@1", "input": map[string]any{}},
			http.StatusOK, map[string]any{"call_id": "<uuid>", "duration": "<number>", "success": false,
				"error": map[string]any{"message": "this sample tool always fails", "?can_retry": false}})
	})

	interopCell(t, m, "422 invalid input", c.name, func() []string {
		return expect("Sample.add {a:\"x\"}",
			map[string]any{"tool_id": "Sample.add", "input": map[string]any{"a": "x"}},
			http.StatusUnprocessableEntity, map[string]any{
				"message":          "Some input parameters are invalid: a: Must be a number; b: Is required",
				"parameter_errors": map[string]any{"a": "Must be a number", "b": "Is required"},
			})
	})

	interopCell(t, m, "400 unknown tool", c.name, func() []string {
		problems := expect("Sample.nope",
			map[string]any{"tool_id": "Sample.nope", "input": map[string]any{}},
			http.StatusBadRequest, map[string]any{"message": "Tool 'Sample.nope' was not found", "developer_message": "<string>"})
		return append(problems, expect("Sample.add@9.9.9",
			map[string]any{"tool_id": "Sample.add@9.9.9", "input": map[string]any{"a": 1, "b": 2}},
			http.StatusBadRequest, map[string]any{"message": "Tool 'Sample.add@9.9.9' was not found", "developer_message": "<string>"})...)
	})
}

// interopCheckSampleCatalog checks the OTC front's plain (OXP) list of the
// sample server's tools.
func interopCheckSampleCatalog(items []any) []string {
	var problems []string
	var ids []string
	for _, it := range items {
		tool, _ := it.(map[string]any)
		id, _ := tool["id"].(string)
		ids = append(ids, id)
		mcpName := strings.TrimSuffix(strings.TrimPrefix(id, "Sample."), "@1.0.0")
		want := map[string]any{
			"id":          id,
			"name":        "Sample_" + mcpName,
			"description": "~^Sample tool \\(built into mcpotc\\): ",
			"version":     "1.0.0",
			"input_schema": func(v any) string {
				s, ok := v.(map[string]any)
				switch {
				case !ok:
					return "not an object: " + interopShow(v)
				case s["type"] != "object":
					return "type is not object: " + interopShow(v)
				case s["parameters"] != nil:
					return "wrapped in parameters for an OXP caller: " + interopShow(v)
				}
				// A plain OTC client: the carrier of an MCP front
				// (docs/mapping.md, Round trips) is not listed to it.
				if _, ok := s["x-mcp-tool"]; ok {
					return fmt.Sprintf("the x-mcp-tool carrier is listed to a plain OTC client: %s", interopShow(v))
				}
				props, _ := s["properties"].(map[string]any)
				for k, p := range props {
					if d, _ := p.(map[string]any)["description"].(string); d == "" {
						return fmt.Sprintf("property %s has no description", k)
					}
				}
				return ""
			},
			"output_schema": map[string]any{},
		}
		if mcpName == "add" {
			want["output_schema"] = interopData(`{"type":"object","properties":{"sum":{"type":"number","description":"a + b"}},"required":["sum"]}`)
		}
		for _, d := range interopMatch(id, want, tool, nil) {
			problems = append(problems, "GET /tools: "+d)
		}
	}
	sort.Strings(ids)
	if !slices.Equal(ids, interopSampleIDs) {
		problems = append(problems, fmt.Sprintf("GET /tools ids %q, want %q", ids, interopSampleIDs))
	}
	return problems
}

// --- 2. the MCP front × OTC upstream dialects ------------------------------------------------

var interopUpstreamDialects = []string{"otc-1.0", "oxp-1.0", "oxp-flat", "loose"}

// The fake upstreams' tools, with plain input schemas (an otc-1.0 fake
// lists them wrapped in {"parameters": …}).
var interopUpstreamTools = []map[string]any{
	{
		"id": "Math.Add@1.0.0", "name": "Math_Add", "description": "Adds two integers.", "version": "1.0.0",
		"input_schema":  interopData(`{"type":"object","properties":{"a":{"type":"integer","description":"The first."},"b":{"type":"integer","description":"The second."}},"required":["a","b"]}`),
		"output_schema": interopData(`{"type":"integer"}`),
	},
	{
		"id": "Doorbell.Ring@0.1.0", "name": "Doorbell_Ring", "description": "Rings a doorbell.", "version": "0.1.0",
		"input_schema":  interopData(`{"type":"object","properties":{"doorbell_id":{"type":"string","description":"Which doorbell."}},"required":["doorbell_id"]}`),
		"output_schema": nil,
	},
	{
		"id": "Math.Gone@1.0.0", "name": "Math_Gone", "description": "Listed, then no longer served.", "version": "1.0.0",
		"input_schema":  interopData(`{"type":"object","properties":{}}`),
		"output_schema": interopData(`{}`),
	},
}

// interopDevSecret is in the upstream's developer_message: it must never
// reach what a model reads.
const interopDevSecret = "interop-developer-detail-7f3a"

// interopFakeOTC is an OTC server in one dialect; it accepts only requests
// in that dialect and records the calls it gets.
type interopFakeOTC struct {
	dialect string

	mu       sync.Mutex
	problems []string
	calls    []map[string]any // the CallToolRequests, decoded
}

func (f *interopFakeOTC) problem(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
}

// take returns the problems and calls recorded since the last take.
func (f *interopFakeOTC) take() (problems []string, calls []map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	problems, calls = f.problems, f.calls
	f.problems, f.calls = nil, nil
	return problems, calls
}

func (f *interopFakeOTC) schema() string {
	switch f.dialect {
	case "otc-1.0":
		return otc.SchemaOTC10
	case "oxp-flat":
		return ""
	}
	return otc.SchemaOXP10 // oxp-1.0, and loose (langchain-tool-server reads the OXP envelope)
}

func (f *interopFakeOTC) write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	if f.dialect == "oxp-flat" {
		w.Header().Set(otc.VersionHeader, "1.0")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// errorBody is a 400/422 body: with the envelope's $schema in the
// envelope dialects.
func (f *interopFakeOTC) errorBody(body map[string]any) map[string]any {
	if s := f.schema(); s != "" && f.dialect != "loose" {
		body = maps.Clone(body)
		body["$schema"] = s
	}
	return body
}

func (f *interopFakeOTC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/health":
		f.write(w, http.StatusOK, map[string]any{"status": "ok"})
	case r.Method == http.MethodGet && r.URL.Path == "/tools":
		f.serveTools(w)
	case r.Method == http.MethodPost && r.URL.Path == "/tools/call":
		f.serveCall(w, r)
	default:
		f.problem("unexpected %s %s", r.Method, r.URL.Path)
		f.write(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
	}
}

func (f *interopFakeOTC) serveTools(w http.ResponseWriter) {
	tools := make([]any, len(interopUpstreamTools))
	for i, tool := range interopUpstreamTools {
		tool = maps.Clone(tool)
		if f.dialect == "otc-1.0" {
			tool["input_schema"] = map[string]any{"parameters": tool["input_schema"]}
		}
		tools[i] = tool
	}
	switch f.dialect {
	case "otc-1.0":
		f.write(w, http.StatusOK, map[string]any{"$schema": otc.SchemaOTC10, "tools": tools})
	case "oxp-1.0":
		f.write(w, http.StatusOK, map[string]any{"$schema": otc.SchemaOXP10, "items": tools})
	case "oxp-flat":
		f.write(w, http.StatusOK, map[string]any{"items": tools})
	default: // loose: a bare array
		f.write(w, http.StatusOK, tools)
	}
}

func (f *interopFakeOTC) serveCall(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	top, err := wiretest.Decode(raw)
	body, _ := top.(map[string]any)
	if err != nil || body == nil {
		f.problem("POST /tools/call: body is not a JSON object: %s", interopTrunc(raw))
		f.write(w, http.StatusBadRequest, f.errorBody(map[string]any{"message": "bad body"}))
		return
	}
	req := body
	if s := f.schema(); s == "" {
		if r.Header.Get(otc.VersionHeader) == "" {
			f.problem("POST /tools/call without OXP-Version to an oxp-flat server: %s", interopTrunc(raw))
		}
		if _, ok := body["request"]; ok {
			f.problem("POST /tools/call: an envelope sent to an oxp-flat server: %s", interopTrunc(raw))
		}
	} else {
		if h := r.Header.Get(otc.VersionHeader); h != "" {
			f.problem("POST /tools/call: OXP-Version %q sent to a %s server", h, f.dialect)
		}
		if body["$schema"] != s {
			f.problem("POST /tools/call: $schema %s, want %q for a %s server: %s", interopShow(body["$schema"]), s, f.dialect, interopTrunc(raw))
		}
		req, _ = body["request"].(map[string]any)
		if req == nil {
			f.problem("POST /tools/call: no request envelope for a %s server: %s", f.dialect, interopTrunc(raw))
			f.write(w, http.StatusBadRequest, f.errorBody(map[string]any{"message": "no request"}))
			return
		}
	}
	if _, ok := req["inputs"]; ok {
		f.problem("POST /tools/call: the client sent the `inputs` alias: %s", interopTrunc(raw))
	}
	f.mu.Lock()
	f.calls = append(f.calls, req)
	f.mu.Unlock()

	callID, _ := req["call_id"].(string)
	input, _ := req["input"].(map[string]any)
	ok := func(value any) {
		resp := map[string]any{"call_id": callID, "duration": json.Number("1.5"), "success": true, "value": value}
		f.answer(w, resp)
	}
	switch req["tool_id"] {
	case "Math.Add@1.0.0":
		a, okA := interopInt(input["a"])
		b, okB := interopInt(input["b"])
		if okA && okB {
			ok(json.Number(new(big.Int).Add(a, b).String()))
			return
		}
		errs := map[string]any{}
		var detail []any
		for _, k := range []string{"a", "b"} {
			if _, isInt := interopInt(input[k]); !isInt {
				errs[k] = "Must be an integer"
				detail = append(detail, map[string]any{"loc": []any{"body", "request", "input", k}, "msg": "Input should be a valid integer", "type": "int_parsing"})
			}
		}
		if f.dialect == "loose" {
			f.write(w, http.StatusBadRequest, map[string]any{"detail": detail})
			return
		}
		f.write(w, http.StatusUnprocessableEntity, f.errorBody(map[string]any{"message": "Some input parameters are invalid", "parameter_errors": errs}))
	case "Doorbell.Ring@0.1.0":
		f.answer(w, map[string]any{"call_id": callID, "duration": json.Number("0.25"), "success": false, "error": map[string]any{
			"message":                   "Doorbell ID not found",
			"developer_message":         interopDevSecret + ": no doorbell " + fmt.Sprint(input["doorbell_id"]),
			"can_retry":                 true,
			"retry_after_ms":            500,
			"additional_prompt_content": "ids: doorbell42",
		}})
	default:
		if f.dialect == "loose" {
			f.write(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
			return
		}
		f.write(w, http.StatusBadRequest, f.errorBody(map[string]any{
			"message":           fmt.Sprintf("Tool '%v' was not found", req["tool_id"]),
			"developer_message": interopDevSecret + ": registry reloaded",
		}))
	}
}

// answer writes a 200 CallToolResponse in the fake's dialect.
func (f *interopFakeOTC) answer(w http.ResponseWriter, resp map[string]any) {
	if s := f.schema(); s != "" && f.dialect != "loose" {
		f.write(w, http.StatusOK, map[string]any{"$schema": s, "result": resp})
		return
	}
	f.write(w, http.StatusOK, resp) // oxp-flat, and loose: the bare CallToolResponse
}

func interopInt(v any) (*big.Int, bool) {
	n, ok := v.(json.Number)
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return nil, false
	}
	return new(big.Int).SetString(string(n), 10)
}

// interopMCPClient speaks raw JSON-RPC to a streamable HTTP MCP endpoint.
type interopMCPClient struct {
	url     string
	session string
	nextID  int
}

// rpc sends one request and returns the response frame, decoded.
func (c *interopMCPClient) rpc(method string, params any) (map[string]any, error) {
	c.nextID++
	id := c.nextID
	msg := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	frames, hdr, err := c.post(msg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if method == "initialize" {
		c.session = hdr.Get("Mcp-Session-Id")
	}
	for _, f := range frames {
		m, _ := f.(map[string]any)
		if m == nil || m["method"] != nil {
			continue // a notification or a server request
		}
		if n, ok := m["id"].(json.Number); ok && n.String() == fmt.Sprint(id) {
			return m, nil
		}
	}
	return nil, fmt.Errorf("%s: no response with id %d among %s", method, id, interopShow(frames))
}

func (c *interopMCPClient) notify(method string) error {
	_, _, err := c.post(map[string]any{"jsonrpc": "2.0", "method": method})
	return err
}

// post sends one JSON-RPC message and returns the frames of the answer
// (its JSON body, or the data of each SSE event).
func (c *interopMCPClient) post(msg any) ([]any, http.Header, error) {
	body, _ := json.Marshal(msg)
	ctx, cancel := context.WithTimeout(context.Background(), interopWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := interopHTTP.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, resp.Header, err
	}
	if resp.StatusCode == http.StatusAccepted {
		return nil, resp.Header, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.Header, fmt.Errorf("HTTP %d: %s", resp.StatusCode, interopTrunc(raw))
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var texts [][]byte
	switch ct {
	case "application/json":
		texts = [][]byte{raw}
	case "text/event-stream":
		var data [][]byte
		for _, line := range bytes.Split(bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")), []byte("\n")) {
			if len(line) == 0 {
				if len(data) > 0 {
					texts = append(texts, bytes.Join(data, []byte("\n")))
				}
				data = nil
			} else if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(v, []byte(" ")))
			}
		}
		if len(data) > 0 {
			texts = append(texts, bytes.Join(data, []byte("\n")))
		}
	default:
		return nil, resp.Header, fmt.Errorf("Content-Type %q: %s", ct, interopTrunc(raw))
	}
	var frames []any
	for _, t := range texts {
		v, err := wiretest.Decode(t)
		if err != nil {
			return nil, resp.Header, fmt.Errorf("frame is not JSON (%v): %s", err, interopTrunc(t))
		}
		frames = append(frames, v)
	}
	return frames, resp.Header, nil
}

// interopMCPFrontColumn checks the MCP front against a fake OTC upstream
// in dialect d, the client learning the dialect (auto, as serve-mcp does).
func interopMCPFrontColumn(t *testing.T, m *interopMatrix, d string) {
	fake := &interopFakeOTC{dialect: d}
	up := httptest.NewServer(fake)
	t.Cleanup(up.Close)
	client, err := otc.NewClient(up.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mf, err := bridge.NewMCPFront(ctx, []bridge.OTCServer{{Name: "fake-" + d, Client: client}},
		&bridge.MCPFrontOptions{Refresh: time.Hour, CallTimeout: interopWait})
	if err != nil {
		t.Fatalf("NewMCPFront over a %s upstream: %v", d, err)
	}
	h := mf.Server().StreamableHTTPHandler(nil)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), interopWait)
		defer cancel()
		if err := h.Shutdown(cctx, srv.Config); err != nil {
			t.Errorf("HTTPHandler.Shutdown: %v", err)
		}
		srv.Close()
	})
	c := &interopMCPClient{url: srv.URL + front.StreamablePath}
	initRes, err := c.rpc("initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "mcpotc-interop", "version": "0.0.0"},
	})
	if err != nil || initRes["error"] != nil {
		t.Fatalf("initialize: %v %s", err, interopShow(initRes))
	}
	if err := c.notify("notifications/initialized"); err != nil {
		t.Fatalf("notifications/initialized: %v", err)
	}
	if ps, _ := fake.take(); len(ps) > 0 {
		t.Errorf("listing: the %s upstream got requests outside its dialect:\n  %s", d, strings.Join(ps, "\n  "))
	}

	// call checks one tools/call: the frame against want, the upstream's
	// request (exactly one, in its dialect, with the tool id and the
	// arguments as input), and that nothing the upstream kept for
	// developers reached the frame. It returns the call_id the upstream saw.
	call := func(label, name string, args map[string]any, toolID string, want func(callID string) map[string]any) []string {
		frame, err := c.rpc("tools/call", map[string]any{"name": name, "arguments": args})
		problems, calls := fake.take()
		for i := range problems {
			problems[i] = label + ": upstream: " + problems[i]
		}
		if err != nil {
			return append(problems, fmt.Sprintf("%s: %v", label, err))
		}
		var callID string
		if len(calls) != 1 {
			problems = append(problems, fmt.Sprintf("%s: the upstream got %d calls, want 1: %s", label, len(calls), interopShow(calls)))
		} else {
			callID, _ = calls[0]["call_id"].(string)
			wantReq := map[string]any{"tool_id": toolID, "call_id": "<uuid>", "input": interopData(interopShow(args))}
			for _, diff := range interopMatch("upstream request", wantReq, calls[0], nil) {
				problems = append(problems, label+": "+diff)
			}
		}
		var ext []string
		for _, diff := range interopMatch("frame", want(callID), frame, &ext) {
			problems = append(problems, fmt.Sprintf("%s: %s\n    got: %s", label, diff, interopShow(frame)))
		}
		for _, e := range ext {
			problems = append(problems, fmt.Sprintf("%s: an x- member in an MCP frame: %s", label, e))
		}
		if s := interopShow(frame); strings.Contains(s, interopDevSecret) && !interopOnlyInMeta(frame) {
			problems = append(problems, fmt.Sprintf("%s: the upstream's developer_message reached what a model reads: %s", label, s))
		}
		return problems
	}

	interopCell(t, m, "list", d, func() []string {
		frame, err := c.rpc("tools/list", map[string]any{})
		if err != nil {
			return []string{err.Error()}
		}
		problems, _ := fake.take()
		res, _ := frame["result"].(map[string]any)
		tools, _ := res["tools"].([]any)
		sort.Slice(tools, func(i, j int) bool {
			return fmt.Sprint(tools[i].(map[string]any)["name"]) < fmt.Sprint(tools[j].(map[string]any)["name"])
		})
		want := []any{}
		for _, name := range []string{"Doorbell_Ring", "Math_Add", "Math_Gone"} {
			var def map[string]any
			for _, tool := range interopUpstreamTools {
				if tool["name"] == name {
					def = tool
				}
			}
			w := map[string]any{
				"name":         name,
				"title":        strings.ReplaceAll(name, "_", " "),
				"description":  def["description"],
				"inputSchema":  def["input_schema"], // unwrapped, whatever the dialect
				"?annotations": "<any>",
				"_meta": map[string]any{"<open>": true, "mcpotc/otc-tool": map[string]any{
					"<open>": true, "id": def["id"], "version": def["version"],
				}},
			}
			if name == "Math_Add" {
				// A non-object output schema is wrapped in {"value": …}.
				w["outputSchema"] = interopData(`{"type":"object","properties":{"value":{"type":"integer"}},"required":["value"]}`)
			}
			want = append(want, w)
		}
		problems = append(problems, interopMatch("tools/list", map[string]any{"tools": want, "?nextCursor": "<any>"}, res, nil)...)
		if len(problems) > 0 {
			problems = append(problems, "got: "+interopShow(frame))
		}
		return problems
	})

	interopCell(t, m, "call", d, func() []string {
		return call("Math_Add {a:2,b:3}", "Math_Add", map[string]any{"a": 2, "b": 3}, "Math.Add@1.0.0", func(callID string) map[string]any {
			return map[string]any{"jsonrpc": "2.0", "id": "<any>", "result": map[string]any{
				"content":           []any{map[string]any{"type": "text", "text": "5"}},
				"structuredContent": map[string]any{"value": 5},
				"?isError":          false,
				"_meta":             interopCallMeta(callID),
			}}
		})
	})

	interopCell(t, m, "tool error", d, func() []string {
		return call("Doorbell_Ring {doorbell_id:x}", "Doorbell_Ring", map[string]any{"doorbell_id": "x"}, "Doorbell.Ring@0.1.0", func(callID string) map[string]any {
			meta := interopCallMeta(callID)
			meta["mcpotc/otc-error"] = map[string]any{
				"<open>":                    true,
				"message":                   "Doorbell ID not found",
				"developer_message":         interopDevSecret + ": no doorbell x",
				"can_retry":                 true,
				"retry_after_ms":            500,
				"additional_prompt_content": "ids: doorbell42",
			}
			return map[string]any{"jsonrpc": "2.0", "id": "<any>", "result": map[string]any{
				"isError": true,
				"content": []any{map[string]any{"type": "text", "text": "Doorbell ID not found\n\nids: doorbell42"}},
				"_meta":   meta,
			}}
		})
	})

	interopCell(t, m, "input error", d, func() []string {
		msg, perr := "invalid arguments: a: Must be an integer", "Must be an integer"
		if d == "loose" { // FastAPI's detail: a 400 whose items name the parameter
			msg, perr = "invalid arguments: a: Input should be a valid integer", "Input should be a valid integer"
		}
		return call("Math_Add {a:\"two\",b:3}", "Math_Add", map[string]any{"a": "two", "b": 3}, "Math.Add@1.0.0", func(string) map[string]any {
			return map[string]any{"jsonrpc": "2.0", "id": "<any>", "error": map[string]any{
				"code":    -32602,
				"message": msg,
				"data":    map[string]any{"<open>": true, "parameter_errors": map[string]any{"a": perr}},
			}}
		})
	})

	interopCell(t, m, "unknown tool", d, func() []string {
		msg := `unknown tool "Math_Gone": Tool 'Math.Gone@1.0.0' was not found`
		if d == "loose" { // 404 {"detail": "Not Found"}
			msg = `unknown tool "Math_Gone": Not Found`
		}
		return call("Math_Gone", "Math_Gone", map[string]any{}, "Math.Gone@1.0.0", func(string) map[string]any {
			return map[string]any{"jsonrpc": "2.0", "id": "<any>", "error": map[string]any{
				"code": -32602, "message": msg, "?data": "<any>",
			}}
		})
	})
}

// interopCallMeta is the expected _meta of a result: the OTC call id the
// upstream saw, in mcpotc/otc-call; other members tolerated.
func interopCallMeta(callID string) map[string]any {
	return map[string]any{"<open>": true, "mcpotc/otc-call": map[string]any{"<open>": true, "call_id": callID}}
}

// interopOnlyInMeta reports whether interopDevSecret appears in frame only
// under a result's _meta or an error's data (never in content or a message).
func interopOnlyInMeta(frame map[string]any) bool {
	strip := maps.Clone(frame)
	if res, ok := strip["result"].(map[string]any); ok {
		res = maps.Clone(res)
		delete(res, "_meta")
		strip["result"] = res
	}
	if e, ok := strip["error"].(map[string]any); ok {
		e = maps.Clone(e)
		delete(e, "data")
		strip["error"] = e
	}
	return !strings.Contains(interopShow(strip), interopDevSecret)
}
