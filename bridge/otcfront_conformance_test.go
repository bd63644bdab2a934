package bridge_test

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
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
	"golang.org/x/tools/txtar"

	"github.com/mcpotc/mcpotc/bridge"
	"github.com/mcpotc/mcpotc/internal/mcpgotest"
	"github.com/mcpotc/mcpotc/internal/wiretest"
	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
)

// The -update flag is shared with the MCP-front suite of this package
// (one flag per test binary): it is looked up by name, and registered here
// only when no other file of the package does. Use -run OTCFrontConformance
// with it to rewrite only these vectors.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the expected response sections of the conformance vectors from the answers")
	}
}

func otcfUpdating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

const otcfVectorDir = "../testdata/conformance/otc_front"

// Bounds of every wait.
const (
	// otcfWait bounds each wait: the catalog, an OTC answer, an upstream
	// call, an elicitation answer, a cancellation.
	otcfWait = 5 * time.Second
	// otcfHangLimit bounds how long the fake upstream holds a "hang" call.
	otcfHangLimit = 2 * otcfWait
)

// TestOTCFrontConformance runs the wire-level vectors of the OTC front
// (docs/otc-front.md,
// What OTC clients see; docs/mapping.md, How MCP names become OTC ids; docs/mapping.md, Round trips) in
// testdata/conformance/otc_front. Each file is one scenario in txtar form:
// bridge.NewOTCFront over one MCP upstream, its Handler behind an
// httptest.Server, driven with raw HTTP requests.
//
//	A comment: what the scenario shows and which contract row it covers
//	(required, never empty).
//
//	-- options.json --        optional, first: see otcfOptions
//	{"toolkit": "Calc", "forward_authorization": true, "call_timeout": "300ms"}
//
//	-- tools.json --          the upstream's tools: a JSON array of raw MCP
//	[{"name": "add", …}]      tool objects, answered to tools/list as written
//	                          (required unless the upstream is unreachable)
//
//	-- 1.request --           an OTC request: method and path,
//	POST /tools/call          headers sent as written,
//	Content-Type: application/json
//	                          blank line, then the body, sent as written
//	{"$schema": "urn:oxp:1.0", "request": {…}}
//
//	-- 1.upstream --          optional: the tools/call the upstream must
//	{"name": "add",           receive during this step (see otcfUpstreamStep)
//	 "arguments": {"a": 1},   and what it answers; absent: the upstream must
//	 "result": {…}}           receive NO tools/call during the step
//
//	-- 1.response --          the expected answer: status code,
//	200                       headers asserted (only those listed; "Name:"
//	Content-Type: application/json   alone asserts absence; Content-Type
//	                          must be listed), blank line, the body compared
//	{"$schema": …}            as data; or "none": the client gives up first
//
// Steps are numbered 1, 2, … without a gap, written request, upstream,
// response, and run in order against one front and one upstream per file
// (idempotency state and a shut-down upstream carry over). The front is
// driven once its first catalog is built (or, for an unreachable upstream,
// once its health says so); the fake holds its answer to initialize until
// NewOTCFront has returned (see otcfRun.gate).
//
// Upstream kinds (options.json "upstream"):
//
//	http         (default) a fake streamable-HTTP MCP server on net/http
//	             speaking raw JSON-RPC: tools/list answers tools.json byte
//	             for byte, results and errors are sent as written (any
//	             code, any data), server→client requests go on the POST's
//	             SSE stream, and the request headers can be asserted
//	inprocess    an mcp-go server (mcpserver.NewMCPServer) in this process,
//	             tools given to mcp-go with RawInputSchema/RawOutputSchema;
//	             what mcp-go really sends (its typed Tool and CallToolResult
//	             re-encode the rest) is logged when it differs from the file.
//	             It can answer only what mcp-go can produce: a result,
//	             -32603 (a handler error, no data) and -32042
//	             (URLElicitationRequiredError, mcp-go's message); the loader
//	             refuses anything else
//	unreachable  a URL whose listener is closed: the upstream never comes up
//
// Compared as data: both sides decoded; objects by exact key set, arrays by
// length and order, numbers by exact value (123456789012345678901234567890
// must arrive digit for digit; 15 and 15.0 are equal). Placeholders, as JSON
// strings in expected sections only: "<uuid>", "<number>", "<string>",
// "<any>" (the member must be present). A placeholder may name a capture,
// "<number:dur>": {{dur}} in a later request or expected response is
// replaced by the value it matched.
//
// Invariants checked in every scenario: the upstream gets exactly the calls
// the steps list, each arguments object byte for byte the OTC input as sent
// (compacted; absent input: {}); no context token or secret and no API key
// appears in the front's log.
//
// Files are named scenario.txtar or scenario.DIALECT.txtar (DIALECT one of
// otc-1.0, oxp-1.0, oxp-flat); a dialect file has its two siblings and its
// requests to /tools and /tools/call are written in that dialect.
//
// options.json may carry "known_deviation": {"what": …, "match": [...]}:
// the scenario asserts the contract, the front is known to deviate, and the
// problems containing one of the match texts are logged instead of failing
// the test (any other problem still fails it); once none occurs the test
// fails, so that the marker is removed with the fix.
//
// go test ./bridge -run OTCFrontConformance -update rewrites the N.response
// sections that differ from the front's answers, keeping the listed headers
// and the placeholders that still match ({{captures}} are written out as
// values); vectors with a known deviation are never rewritten.
func TestOTCFrontConformance(t *testing.T) {
	wiretest.RunVectors(t, otcfVectorDir, func(t *testing.T, path string) {
		sc := wiretest.MustLoadVector(t, path, otcfParseScenario)
		sc.path = path
		problems := otcfRunScenario(t, sc)
		wiretest.Report(t, problems, sc.opts.KnownDeviation)
	})
}

// otcfOptions is options.json.
type otcfOptions struct {
	// Upstream is the upstream kind: http (default), inprocess, unreachable.
	Upstream string `json:"upstream"`
	// Server is the upstream's serverInfo. Default: {"name": "calc",
	// "version": "2.0.0"}.
	Server *otcfServerInfo `json:"server"`
	// Toolkit, Version, Allow, Deny and ForwardAuthorization are those of
	// the bridge.MCPServer.
	Toolkit              string   `json:"toolkit"`
	Version              string   `json:"version"`
	Allow                []string `json:"allow"`
	Deny                 []string `json:"deny"`
	ForwardAuthorization bool     `json:"forward_authorization"`
	// APIKey is the OTC server's transport key (otc.Options.APIKey).
	APIKey string `json:"api_key"`
	// IdempotencyTTL is otc.Options.IdempotencyTTL, CallTimeout the
	// upstream's upstream.Config.CallTimeout, as Go durations.
	IdempotencyTTL string `json:"idempotency_ttl"`
	CallTimeout    string `json:"call_timeout"`
	// KnownDeviation says how the front deviates from the contract here.
	KnownDeviation *wiretest.KnownDeviation `json:"known_deviation"`
}

type otcfServerInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// otcfUpstreamStep is N.upstream: the tools/call the upstream must receive
// during step N and what it does.
//
//	down              the upstream (http) is shut down before N.request is
//	                  sent and stays down; nothing else may be set
//	name              the MCP tool name the call must carry (exact)
//	arguments         its arguments, compared as data (required)
//	_meta             its params._meta, compared as data; absent: the call
//	                  must carry no _meta
//	headers           http: header name → exact value, or null: absent
//	elicit            params of an elicitation/create sent (on the call's
//	                  SSE stream) before answering; elicit_answer is the
//	                  result the bridge must answer, compared as data
//	held              with elicit: the bridge must not answer it during
//	                  this step (whose response is its challenge) but
//	                  during the next one, a retry that has no N.upstream
//	                  of its own (no new tools/call may arrive): then the
//	                  call answers, and that is the retry's outcome
//	result            answer: this CallToolResult, as written
//	error             answer: this JSON-RPC error object, as written
//	http_status       answer (http): this HTTP status with an empty body
//	hang              answer: none; the call is held until the bridge drops
//	                  it (bounded by otcfHangLimit)
//	drop              answer (http): the connection is closed unanswered
//	cancelled         with hang (http): notifications/cancelled for the
//	                  call must arrive
//	client_abort_after  with hang: the OTC client gives up after this Go
//	                  duration (N.response is then "none")
type otcfUpstreamStep struct {
	Down             bool               `json:"down"`
	Name             string             `json:"name"`
	Arguments        json.RawMessage    `json:"arguments"`
	Meta             json.RawMessage    `json:"_meta"`
	Headers          map[string]*string `json:"headers"`
	Elicit           json.RawMessage    `json:"elicit"`
	ElicitAnswer     json.RawMessage    `json:"elicit_answer"`
	Held             bool               `json:"held"`
	Result           json.RawMessage    `json:"result"`
	Error            json.RawMessage    `json:"error"`
	HTTPStatus       int                `json:"http_status"`
	Hang             bool               `json:"hang"`
	Drop             bool               `json:"drop"`
	Cancelled        bool               `json:"cancelled"`
	ClientAbortAfter string             `json:"client_abort_after"`

	clientAbort time.Duration
}

// otcfScenario is one loaded vector file.
type otcfScenario struct {
	path        string
	name        string // file name without dialect and .txtar
	dialect     string
	archive     *txtar.Archive
	opts        otcfOptions
	server      otcfServerInfo
	tools       []byte            // tools.json as written
	toolList    []json.RawMessage // its elements
	callTimeout time.Duration
	idemTTL     time.Duration
	steps       []*otcfStep
}

type otcfStep struct {
	n        int
	req      *wiretest.Request
	resp     *wiretest.Response
	respFile int // index of N.response in archive.Files
	up       *otcfUpstreamStep
}

// otcfMatcher compares what the server sent with a vector.
var otcfMatcher = wiretest.Matcher{Root: "(body)"}

var (
	otcfSectionName = regexp.MustCompile(`^([1-9][0-9]*)\.(request|response|upstream)$`)
)

// otcfParseScenario loads one vector strictly.
func otcfParseScenario(file string, data []byte) (*otcfScenario, error) {
	v, err := wiretest.ParseVector(file, data, "contract row")
	if err != nil {
		return nil, err
	}
	sc := &otcfScenario{archive: v.Archive, name: v.Name, dialect: v.Dialect}
	sections := map[string]map[int]int{"request": {}, "response": {}, "upstream": {}}
	hasTools := false
	for i, f := range sc.archive.Files {
		switch f.Name {
		case "options.json":
			if err := wiretest.DecodeOptions(i, f.Data, &sc.opts); err != nil {
				return nil, err
			}
			continue
		case "tools.json":
			if hasTools {
				return nil, errors.New("tools.json appears twice")
			}
			hasTools = true
			sc.tools = bytes.TrimRight(f.Data, "\n")
			if err := wiretest.DecodeStrict(sc.tools, &sc.toolList); err != nil {
				return nil, fmt.Errorf("tools.json is not a JSON array: %w", err)
			}
			for j, tool := range sc.toolList {
				if t := bytes.TrimSpace(tool); len(t) == 0 || t[0] != '{' {
					return nil, fmt.Errorf("tools.json: element %d is not an object", j)
				}
			}
			continue
		}
		m := otcfSectionName.FindStringSubmatch(f.Name)
		if m == nil {
			return nil, fmt.Errorf("unknown section %q (want options.json, tools.json, N.request, N.upstream or N.response)", f.Name)
		}
		n, _ := strconv.Atoi(m[1])
		if _, dup := sections[m[2]][n]; dup {
			return nil, fmt.Errorf("section %q appears twice", f.Name)
		}
		sections[m[2]][n] = i
	}
	if err := sc.checkOptions(hasTools); err != nil {
		return nil, err
	}
	requests, responses, upstreams := sections["request"], sections["response"], sections["upstream"]
	if len(requests)+len(responses)+len(upstreams) == 0 {
		return nil, errors.New("no steps")
	}
	captured := map[string]int{}
	used := map[string]bool{}
	for n := 1; n <= len(requests) || n <= len(responses) || n <= len(upstreams); n++ {
		qi, okq := requests[n]
		pi, okp := responses[n]
		ui, oku := upstreams[n]
		switch {
		case !okq && !okp && !oku:
			return nil, fmt.Errorf("steps are not numbered 1..N without a gap: %d is missing", n)
		case !okq:
			return nil, fmt.Errorf("step %d has no %d.request", n, n)
		case !okp:
			return nil, fmt.Errorf("%d.request has no %d.response", n, n)
		case pi < qi || (oku && (ui < qi || pi < ui)):
			return nil, fmt.Errorf("step %d: write %d.request, then %d.upstream, then %d.response", n, n, n, n)
		}
		st := &otcfStep{n: n, respFile: pi}
		var err error
		if st.req, err = wiretest.ParseRequest(string(sc.archive.Files[qi].Data)); err != nil {
			return nil, fmt.Errorf("%d.request: %w", n, err)
		}
		if sc.dialect != "" {
			if err := wiretest.CheckDialect(sc.dialect, st.req); err != nil {
				return nil, fmt.Errorf("%d.request is not written in %s: %w", n, sc.dialect, err)
			}
		}
		for _, name := range st.req.References() {
			if _, ok := captured[name]; !ok {
				return nil, fmt.Errorf("%d.request: {{%s}} is not captured by an earlier response", n, name)
			}
			used[name] = true
		}
		if oku {
			if st.up, err = sc.parseUpstream(sc.archive.Files[ui].Data); err != nil {
				return nil, fmt.Errorf("%d.upstream: %w", n, err)
			}
		}
		if st.resp, err = wiretest.ParseResponse(string(sc.archive.Files[pi].Data), true); err != nil {
			return nil, fmt.Errorf("%d.response: %w", n, err)
		}
		abort := st.up != nil && st.up.clientAbort > 0
		switch {
		case st.resp.None && !abort:
			return nil, fmt.Errorf("%d.response is none but %d.upstream has no client_abort_after", n, n)
		case !st.resp.None && abort:
			return nil, fmt.Errorf("%d.upstream has client_abort_after: %d.response must be none", n, n)
		}
		for _, name := range (&wiretest.Request{Body: st.resp.Body}).References() {
			if _, ok := captured[name]; !ok {
				return nil, fmt.Errorf("%d.response: {{%s}} is not captured by an earlier response", n, name)
			}
			used[name] = true
		}
		if st.resp.JSON && strings.TrimSpace(st.resp.Body) != "" {
			want, _ := st.resp.Want(nil) // JSON: ParseResponse checked it
			if err := wiretest.RecordCaptures(fmt.Sprintf("%d.response", n), want, captured, n); err != nil {
				return nil, err
			}
		}
		if prev := len(sc.steps) - 1; prev >= 0 && sc.steps[prev].up != nil && sc.steps[prev].up.Held && st.up != nil {
			return nil, fmt.Errorf("%d.upstream: step %d held its call: the retry's outcome is that call's, with no tools/call of its own", n, n-1)
		}
		sc.steps = append(sc.steps, st)
	}
	if last := len(sc.steps) - 1; last >= 0 && sc.steps[last].up != nil && sc.steps[last].up.Held {
		return nil, fmt.Errorf("step %d holds its call: a retry step must follow", last+1)
	}
	for name, at := range captured {
		if !used[name] {
			return nil, fmt.Errorf("%d.response captures %q but nothing later uses {{%s}}", at, name, name)
		}
	}
	return sc, nil
}

func (sc *otcfScenario) checkOptions(hasTools bool) error {
	o := &sc.opts
	switch o.Upstream {
	case "":
		o.Upstream = "http"
	case "http", "inprocess", "unreachable":
	default:
		return fmt.Errorf("options.json: upstream %q: want http, inprocess or unreachable", o.Upstream)
	}
	switch {
	case o.Upstream == "unreachable" && hasTools:
		return errors.New("an unreachable upstream lists no tools: drop tools.json")
	case o.Upstream != "unreachable" && !hasTools:
		return errors.New("no tools.json")
	}
	sc.server = otcfServerInfo{Name: "calc", Version: "2.0.0"}
	if o.Server != nil {
		sc.server = *o.Server
	}
	var err error
	if o.CallTimeout != "" {
		if sc.callTimeout, err = time.ParseDuration(o.CallTimeout); err != nil || sc.callTimeout <= 0 {
			return fmt.Errorf("options.json: call_timeout %q: want a positive Go duration", o.CallTimeout)
		}
	}
	if o.IdempotencyTTL != "" {
		if sc.idemTTL, err = time.ParseDuration(o.IdempotencyTTL); err != nil || sc.idemTTL <= 0 {
			return fmt.Errorf("options.json: idempotency_ttl %q: want a positive Go duration", o.IdempotencyTTL)
		}
	}
	if err := o.KnownDeviation.Check(); err != nil {
		return fmt.Errorf("options.json: %w", err)
	}
	return nil
}

// parseUpstream reads and checks N.upstream.
func (sc *otcfScenario) parseUpstream(data []byte) (*otcfUpstreamStep, error) {
	var u otcfUpstreamStep
	if err := wiretest.DecodeStrict(data, &u); err != nil {
		return nil, err
	}
	kind := sc.opts.Upstream
	if kind == "unreachable" {
		return nil, errors.New("an unreachable upstream receives no call")
	}
	if u.Down {
		if kind != "http" {
			return nil, errors.New("down needs the http upstream")
		}
		if u.Name != "" || u.Arguments != nil || u.Meta != nil || u.Headers != nil || u.Elicit != nil || u.ElicitAnswer != nil ||
			u.Result != nil || u.Error != nil || u.HTTPStatus != 0 || u.Hang || u.Drop || u.Cancelled || u.ClientAbortAfter != "" {
			return nil, errors.New("down stands alone: the upstream receives no call")
		}
		return &u, nil
	}
	if u.Name == "" {
		return nil, errors.New("name is required")
	}
	var args map[string]any
	if u.Arguments == nil || wiretest.DecodeStrict(u.Arguments, &args) != nil || args == nil {
		return nil, errors.New("arguments is required: a JSON object")
	}
	answers := 0
	for _, set := range []bool{u.Result != nil, u.Error != nil, u.HTTPStatus != 0, u.Hang, u.Drop} {
		if set {
			answers++
		}
	}
	if answers != 1 {
		return nil, errors.New("set exactly one of result, error, http_status, hang and drop")
	}
	if (u.Elicit == nil) != (u.ElicitAnswer == nil) {
		return nil, errors.New("elicit and elicit_answer come together")
	}
	if u.Elicit != nil && u.Result == nil && u.Error == nil {
		return nil, errors.New("elicit needs a result or an error to answer afterwards")
	}
	if u.Held && u.Elicit == nil {
		return nil, errors.New("held needs elicit")
	}
	if u.Error != nil {
		var e struct {
			Code    *int            `json:"code"`
			Message *string         `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if err := wiretest.DecodeStrict(u.Error, &e); err != nil || e.Code == nil || e.Message == nil {
			return nil, errors.New(`error must be a JSON-RPC error object {"code", "message"[, "data"]}`)
		}
	}
	if u.HTTPStatus != 0 && (u.HTTPStatus < 200 || u.HTTPStatus > 599 || u.HTTPStatus == http.StatusOK) {
		return nil, fmt.Errorf("http_status %d: want an error status", u.HTTPStatus)
	}
	if u.Cancelled && !u.Hang {
		return nil, errors.New("cancelled needs hang")
	}
	if u.ClientAbortAfter != "" {
		d, err := time.ParseDuration(u.ClientAbortAfter)
		if err != nil || d <= 0 || !u.Hang {
			return nil, errors.New("client_abort_after needs hang and a positive Go duration")
		}
		u.clientAbort = d
	}
	if kind == "inprocess" {
		switch {
		case u.Headers != nil, u.HTTPStatus != 0, u.Drop, u.Cancelled:
			return nil, errors.New("headers, http_status, drop and cancelled need the http upstream")
		case u.Error != nil:
			if err := otcfInProcessError(u.Error); err != nil {
				return nil, err
			}
		}
	}
	return &u, nil
}

// otcfInProcessError makes sure an in-process mcp-go server can answer
// exactly this JSON-RPC error.
func otcfInProcessError(raw json.RawMessage) error {
	var e struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(raw, &e)
	switch e.Code {
	case mcpgo.INTERNAL_ERROR:
		if e.Data != nil {
			return errors.New("in-process, a tool handler's error is -32603 without data: use the http upstream")
		}
		return nil
	case mcpgo.URL_ELICITATION_REQUIRED:
		got, err := json.Marshal(otcfURLElicitationError(e.Data).JSONRPCError().Error)
		if err != nil {
			return err
		}
		var want, have any
		_ = wiretest.DecodeStrict(raw, &want)
		_ = wiretest.DecodeStrict(got, &have)
		if p := otcfMatcher.Match("error", want, have, nil); p != nil {
			return fmt.Errorf("in-process mcp-go would answer %s, not this error (%s): use the http upstream", got, strings.Join(p, "; "))
		}
		return nil
	}
	return fmt.Errorf("in-process mcp-go cannot answer JSON-RPC code %d from a tool: use the http upstream", e.Code)
}

func otcfURLElicitationError(data json.RawMessage) mcpgo.URLElicitationRequiredError {
	var d struct {
		Elicitations []mcpgo.ElicitationParams `json:"elicitations"`
	}
	_ = json.Unmarshal(data, &d)
	return mcpgo.URLElicitationRequiredError{Elicitations: d.Elicitations}
}

// otcfRun is one scenario being run: the state the fake upstream shares
// with the driver.
type otcfRun struct {
	t  *testing.T
	sc *otcfScenario

	srv     *httptest.Server // http upstream
	srvOnce sync.Once

	mu        sync.Mutex
	step      *otcfStep
	consumed  bool   // the step's call arrived
	callID    string // its JSON-RPC id, raw
	problems  []string
	cancelled map[string]chan struct{} // JSON-RPC id → closed on notifications/cancelled
	elicits   map[string]chan []byte
	inprocRaw json.RawMessage // params of the latest in-process tools/call
	secrets   []string

	active  int           // tools/call handlers running
	done    chan struct{} // closed at the end: releases held calls
	started chan struct{} // closed once NewOTCFront has returned (see otcfGate)
}

func (r *otcfRun) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// otcfNoGate, set to 1 in the environment, turns the gate off.
const otcfNoGate = "MCPOTC_OTCF_NO_GATE"

// gate holds the upstream's answer to initialize until NewOTCFront has
// returned, so that every vector starts from the same order of events.
// NewOTCFront once raced with the upstream's first catalog (it recorded
// the upstream after starting it); with MCPOTC_OTCF_NO_GATE=1,
// go test -race -count=10 checks that it no longer does.
func (r *otcfRun) gate() {
	if os.Getenv(otcfNoGate) == "1" {
		return
	}
	t := time.NewTimer(otcfWait)
	defer t.Stop()
	select {
	case <-r.started:
	case <-t.C:
	}
}

func (r *otcfRun) enter() {
	r.mu.Lock()
	r.active++
	r.mu.Unlock()
}

func (r *otcfRun) leave() {
	r.mu.Lock()
	r.active--
	r.mu.Unlock()
}

func (r *otcfRun) cancelChan(id string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := r.cancelled[id]
	if ch == nil {
		ch = make(chan struct{})
		r.cancelled[id] = ch
	}
	return ch
}

// otcfLogSink collects the front's log and says when a catalog was built.
type otcfLogSink struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	once    sync.Once
	catalog chan struct{}
}

func (s *otcfLogSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if bytes.Contains(p, []byte(`"catalog ready"`)) || bytes.Contains(p, []byte(`"catalog not updated"`)) {
		s.once.Do(func() { close(s.catalog) })
	}
	return s.buf.Write(p)
}

func (s *otcfLogSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// otcfRunScenario runs one scenario and returns what differs from it.
func otcfRunScenario(t *testing.T, sc *otcfScenario) []string {
	r := &otcfRun{t: t, sc: sc, done: make(chan struct{}), started: make(chan struct{}), cancelled: map[string]chan struct{}{}, elicits: map[string]chan []byte{}}
	if sc.opts.APIKey != "" {
		r.secrets = append(r.secrets, sc.opts.APIKey)
	}
	for _, st := range sc.steps {
		r.secrets = append(r.secrets, otcfContextSecrets(st.req.Body)...)
	}
	logs := &otcfLogSink{catalog: make(chan struct{})}
	cfg := upstream.Config{
		Name:              "up",
		CallTimeout:       sc.callTimeout,
		InitTimeout:       otcfWait,
		RestartBackoffMin: 20 * time.Millisecond,
		RestartBackoffMax: 200 * time.Millisecond,
		PingInterval:      -1,
		DrainTimeout:      time.Second,
	}
	switch sc.opts.Upstream {
	case "http":
		r.srv = httptest.NewServer(http.HandlerFunc(r.serveMCP))
		cfg.URL = r.srv.URL + "/mcp"
	case "inprocess":
		cfg.InProcess = mcpgotest.InProcess(r.newInProcess())
	case "unreachable":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg.URL = "http://" + ln.Addr().String() + "/mcp"
		ln.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	front, err := bridge.NewOTCFront(ctx, []bridge.MCPServer{{
		Config:               cfg,
		Toolkit:              sc.opts.Toolkit,
		Version:              sc.opts.Version,
		Allow:                sc.opts.Allow,
		Deny:                 sc.opts.Deny,
		ForwardAuthorization: sc.opts.ForwardAuthorization,
	}}, &bridge.OTCFrontOptions{
		Server: otc.Options{APIKey: sc.opts.APIKey, IdempotencyTTL: sc.idemTTL},
		Logger: zerolog.New(logs),
	})
	close(r.started)
	if err != nil {
		cancel()
		t.Fatalf("NewOTCFront: %v", err)
	}
	fs := httptest.NewServer(front.Handler())
	defer func() {
		close(r.done)
		cctx, ccancel := context.WithTimeout(context.Background(), 2*otcfWait)
		if err := front.Close(cctx); err != nil {
			t.Errorf("closing the front: %v", err)
		}
		ccancel()
		cancel()
		fs.Close()
		r.closeUpstream()
	}()
	client := fs.Client()
	client.Timeout = 2 * otcfWait
	base, _ := url.Parse(fs.URL)

	if sc.opts.Upstream == "unreachable" {
		r.awaitUnreachable(client, base)
	} else {
		select {
		case <-logs.catalog:
		case <-time.After(otcfWait):
			t.Fatalf("no catalog within %s; log:\n%s", otcfWait, logs.String())
		}
	}

	// -update never rewrites a vector with a known deviation: its expected
	// sections are the contract, not what the front answers.
	updating := otcfUpdating() && sc.opts.KnownDeviation == nil
	if otcfUpdating() && !updating {
		t.Logf("%s has a known deviation: not rewritten", sc.path)
	}
	captures := map[string]string{}
	changed := false
	for _, st := range sc.steps {
		r.mu.Lock()
		r.step, r.consumed, r.callID = st, false, ""
		r.mu.Unlock()
		if st.up != nil && st.up.Down {
			r.closeUpstream()
		}
		var abort time.Duration
		if st.up != nil {
			abort = st.up.clientAbort
		}
		status, header, body, err := wiretest.Send(client, base, st.req, captures, abort)
		where := fmt.Sprintf("step %d (%s %s)", st.n, st.req.Method, st.req.Target)
		switch {
		case st.resp.None:
			if err == nil {
				r.fail("%s: the front answered %d before the client gave up: %s", where, status, body)
			}
		case err != nil:
			r.fail("%s: %v", where, err)
		case updating:
			if len(otcfMatcher.Compare(st.resp, status, header, body, captures)) == 0 {
				break
			}
			updated, ferr := wiretest.FormatResponse(st.resp, status, header, body)
			if ferr != nil {
				r.fail("%s: %v", where, ferr)
				break
			}
			f := &sc.archive.Files[st.respFile]
			if !bytes.Equal(f.Data, updated) {
				f.Data, changed = updated, true
			}
		default:
			problems := otcfMatcher.Compare(st.resp, status, header, body, captures)
			for _, p := range problems {
				r.fail("%s: %s", where, p)
			}
			if len(problems) > 0 {
				t.Logf("%s: the front answered %d\n%s", where, status, body)
			}
		}
		r.endStep(st)
	}
	if changed {
		if err := os.WriteFile(sc.path, txtar.Format(sc.archive), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", sc.path)
	}
	log := logs.String()
	for _, s := range r.secrets {
		if strings.Contains(log, s) {
			r.fail("the front's log carries the credential %q", s)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.problems) > 0 {
		t.Logf("front log:\n%s", log)
	}
	return r.problems
}

func (r *otcfRun) closeUpstream() {
	if r.srv == nil {
		return
	}
	r.srvOnce.Do(func() {
		r.srv.CloseClientConnections()
		r.srv.Close()
	})
}

// awaitUnreachable waits until the front's health says why the upstream is
// down: it has tried and failed to reach it.
func (r *otcfRun) awaitUnreachable(client *http.Client, base *url.URL) {
	deadline := time.Now().Add(otcfWait)
	for time.Now().Before(deadline) {
		resp, err := client.Get(base.String() + "/health")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable && bytes.Contains(b, []byte("unreachable")) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.t.Fatalf("the front's health never said the upstream was unreachable within %s", otcfWait)
}

// endStep waits for the step's upstream handlers and checks that the call
// it lists arrived (and was cancelled when it must be).
func (r *otcfRun) endStep(st *otcfStep) {
	deadline := time.Now().Add(otcfHangLimit + time.Second)
	for st.up == nil || !st.up.Held { // a held call runs on into the next step
		r.mu.Lock()
		active := r.active
		r.mu.Unlock()
		if active == 0 {
			break
		}
		if time.Now().After(deadline) {
			r.fail("step %d: the upstream's handler still runs %s after the answer", st.n, otcfHangLimit)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.mu.Lock()
	consumed, id := r.consumed, r.callID
	r.mu.Unlock()
	if st.up == nil || st.up.Down {
		return
	}
	if !consumed {
		r.fail("step %d: the upstream received no tools/call, want one to %q", st.n, st.up.Name)
		return
	}
	if st.up.Cancelled {
		select {
		case <-r.cancelChan(id):
		case <-time.After(otcfWait):
			r.fail("step %d: the upstream received no notifications/cancelled for call %s within %s", st.n, id, otcfWait)
		}
	}
}

// otcfContextSecrets lists the tokens and secret values of a request's
// context: none may be logged.
func otcfContextSecrets(body string) []string {
	var top map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &top) != nil {
		return nil
	}
	if inner, ok := top["request"]; ok {
		top = nil
		_ = json.Unmarshal(inner, &top)
	}
	var c struct {
		Authorization []struct {
			Token string `json:"token"`
		} `json:"authorization"`
		Secrets []struct {
			Value string `json:"value"`
		} `json:"secrets"`
	}
	_ = json.Unmarshal(top["context"], &c)
	var out []string
	for _, a := range c.Authorization {
		if len(a.Token) >= 6 {
			out = append(out, a.Token)
		}
	}
	for _, s := range c.Secrets {
		if len(s.Value) >= 6 {
			out = append(out, s.Value)
		}
	}
	return out
}

// otcfRawInput is the input of an OTC call request as sent (envelope or
// flat, "input" or its alias "inputs"); {} when absent or null.
func otcfRawInput(body string) []byte {
	var top map[string]json.RawMessage
	_ = json.Unmarshal([]byte(body), &top)
	if inner, ok := top["request"]; ok {
		top = nil
		_ = json.Unmarshal(inner, &top)
	}
	in, ok := top["input"]
	if !ok {
		in = top["inputs"]
	}
	if len(bytes.TrimSpace(in)) == 0 || string(bytes.TrimSpace(in)) == "null" {
		return []byte("{}")
	}
	return in
}

// otcfWireForm is JSON compacted with <, > and & escaped: two encodings of
// the same bytes compare equal whatever their spacing.
func otcfWireForm(b []byte) string {
	var c, e bytes.Buffer
	if json.Compact(&c, b) != nil {
		return string(b)
	}
	json.HTMLEscape(&e, c.Bytes())
	return e.String()
}

// takeCall records the tools/call the upstream received and checks it
// against the current step; it returns what to answer, or nil when the
// call was not expected.
func (r *otcfRun) takeCall(id json.RawMessage, params json.RawMessage, header http.Header) *otcfUpstreamStep {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      json.RawMessage `json:"_meta"`
	}
	perr := json.Unmarshal(params, &p)
	r.mu.Lock()
	st, consumed := r.step, r.consumed
	if st != nil && st.up != nil && !st.up.Down && !consumed {
		r.consumed, r.callID = true, string(id)
	}
	r.mu.Unlock()
	if st == nil || st.up == nil || st.up.Down || consumed {
		n := 0
		if st != nil {
			n = st.n
		}
		r.fail("step %d: the upstream received an unexpected tools/call: %s", n, params)
		return nil
	}
	up := st.up
	where := fmt.Sprintf("step %d: upstream tools/call", st.n)
	if perr != nil {
		r.fail("%s: params are not an object: %s", where, params)
		return up
	}
	if p.Name != up.Name {
		r.fail("%s: name %q, want %q", where, p.Name, up.Name)
	}
	var want, got any
	_ = wiretest.DecodeStrict(up.Arguments, &want)
	if err := wiretest.DecodeStrict(p.Arguments, &got); err != nil {
		r.fail("%s: arguments are not JSON (%v): %s", where, err, p.Arguments)
	} else {
		for _, prob := range otcfMatcher.Match("arguments", want, got, nil) {
			r.fail("%s: %s", where, prob)
		}
	}
	if sent := otcfRawInput(st.req.Body); otcfWireForm(p.Arguments) != otcfWireForm(sent) {
		r.fail("%s: arguments %s are not byte for byte the OTC input %s", where, p.Arguments, sent)
	}
	switch {
	case up.Meta == nil && p.Meta != nil:
		r.fail("%s: _meta %s, want none", where, p.Meta)
	case up.Meta != nil:
		var wm, gm any
		_ = wiretest.DecodeStrict(up.Meta, &wm)
		if p.Meta == nil {
			r.fail("%s: no _meta, want %s", where, up.Meta)
		} else if err := wiretest.DecodeStrict(p.Meta, &gm); err == nil {
			for _, prob := range otcfMatcher.Match("_meta", wm, gm, nil) {
				r.fail("%s: %s", where, prob)
			}
		}
	}
	for name, v := range up.Headers {
		got := strings.Join(header.Values(name), ", ")
		switch {
		case v == nil && got != "":
			r.fail("%s: header %s: %q, want it absent", where, name, got)
		case v != nil && got != *v:
			r.fail("%s: header %s: %q, want %q", where, name, got, *v)
		}
	}
	return up
}

// serveMCP is the fake streamable-HTTP MCP server: raw JSON-RPC, one
// response per POST (JSON, or an SSE stream when the call elicits).
func (r *otcfRun) serveMCP(w http.ResponseWriter, req *http.Request) {
	switch req.Method {
	case http.MethodPost:
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK)
		return
	default: // no GET stream: the server sends nothing unasked
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	// No keep-alive: after "down", a call must find the server gone, not
	// ride a pooled connection the server closed an instant before (a
	// request written on it cannot be told from one the server died on).
	w.Header().Set("Connection", "close")
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &m) != nil {
		http.Error(w, "not JSON", http.StatusBadRequest)
		return
	}
	switch {
	case m.Method == "" && m.ID != nil: // an answer to the fake's own request
		r.mu.Lock()
		ch := r.elicits[string(m.ID)]
		r.mu.Unlock()
		if ch != nil {
			select {
			case ch <- body:
			default:
			}
		} else {
			r.fail("the upstream received an answer to a request it never sent: %s", body)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	case m.ID == nil: // a notification
		if m.Method == string(mcpgo.MethodNotificationCancelled) {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			_ = json.Unmarshal(m.Params, &p)
			ch := r.cancelChan(string(p.RequestID))
			r.mu.Lock()
			select {
			case <-ch:
			default:
				close(ch)
			}
			r.mu.Unlock()
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	reply := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}
	switch m.Method {
	case string(mcpgo.MethodInitialize):
		r.gate()
		info, _ := json.Marshal(r.sc.server)
		w.Header().Set("Mcp-Session-Id", "otcf-session")
		reply(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":` + string(info) + `}`)
	case string(mcpgo.MethodPing):
		reply(`{}`)
	case string(mcpgo.MethodToolsList):
		reply(`{"tools":` + string(r.sc.tools) + `}`)
	case string(mcpgo.MethodToolsCall):
		r.enter()
		defer r.leave()
		up := r.takeCall(m.ID, m.Params, req.Header)
		if up == nil {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"unexpected call (conformance fake)"}}`, m.ID)
			return
		}
		r.answerHTTP(w, req, m.ID, up)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, m.ID)
	}
}

// answerHTTP answers a tools/call as the step says.
func (r *otcfRun) answerHTTP(w http.ResponseWriter, req *http.Request, id json.RawMessage, up *otcfUpstreamStep) {
	final := func() string {
		if up.Error != nil {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":%s}`, id, up.Error)
		}
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, up.Result)
	}
	switch {
	case up.Drop:
		hj, ok := w.(http.Hijacker)
		if !ok {
			r.fail("the fake upstream cannot drop a connection")
			return
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			conn.Close()
		}
	case up.HTTPStatus != 0:
		w.WriteHeader(up.HTTPStatus)
	case up.Hang:
		t := time.NewTimer(otcfHangLimit)
		defer t.Stop()
		select {
		case <-req.Context().Done():
		case <-r.done:
		case <-t.C:
			r.fail("the bridge held a hung call for more than %s", otcfHangLimit)
		}
	case up.Elicit != nil:
		r.elicitHTTP(w, req, id, up, otcfCompactLine(final()))
	default:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, final())
	}
}

// elicitHTTP sends elicitation/create on the call's SSE stream, checks the
// bridge's answer, then sends the call's answer.
func (r *otcfRun) elicitHTTP(w http.ResponseWriter, req *http.Request, id json.RawMessage, up *otcfUpstreamStep, final string) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		r.fail("the fake upstream cannot stream")
		return
	}
	eid := `"otcf-elicit-` + strings.Trim(string(id), `"`) + `"`
	ch := make(chan []byte, 1)
	r.mu.Lock()
	r.elicits[eid] = ch
	asked := r.step
	r.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "event: message\ndata: %s\n\n", otcfCompactLine(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"elicitation/create","params":%s}`, eid, up.Elicit)))
	flusher.Flush()
	t := time.NewTimer(otcfWait)
	defer t.Stop()
	select {
	case answer := <-ch:
		r.checkElicitAnswer(answer, up)
		r.checkHeld(asked, up)
	case <-t.C:
		r.fail("the bridge did not answer elicitation/create within %s", otcfWait)
	case <-req.Context().Done():
		r.fail("the bridge dropped the call before answering elicitation/create")
		return
	}
	fmt.Fprintf(w, "event: message\ndata: %s\n\n", final)
	flusher.Flush()
}

// checkHeld checks when the bridge answered an elicitation asked during
// step asked: during the next step when it is held, else during it.
func (r *otcfRun) checkHeld(asked *otcfStep, up *otcfUpstreamStep) {
	r.mu.Lock()
	now := r.step
	r.mu.Unlock()
	switch {
	case up.Held && now == asked:
		r.fail("step %d: the bridge answered the held elicitation before the retry", asked.n)
	case !up.Held && now != asked:
		r.fail("step %d: the bridge answered the elicitation only in step %d", asked.n, now.n)
	}
}

func (r *otcfRun) checkElicitAnswer(answer []byte, up *otcfUpstreamStep) {
	var a struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(answer, &a)
	if a.Result == nil {
		r.fail("elicitation/create was answered with an error: %s, want the result %s", answer, up.ElicitAnswer)
		return
	}
	var want, got any
	_ = wiretest.DecodeStrict(up.ElicitAnswer, &want)
	if err := wiretest.DecodeStrict(a.Result, &got); err != nil {
		r.fail("elicitation answer is not JSON: %s", a.Result)
		return
	}
	for _, p := range otcfMatcher.Match("elicitation answer", want, got, nil) {
		r.fail("%s", p)
	}
}

func otcfCompactLine(s string) string {
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(s)) != nil {
		return s
	}
	return buf.String()
}

// newInProcess builds the in-process mcp-go upstream: the tools of
// tools.json with raw schemas, one handler answering as the steps say. A
// hook keeps the raw params of each tools/call (mcp-go's typed request
// would round big numbers).
func (r *otcfRun) newInProcess() *mcpserver.MCPServer {
	hooks := &mcpserver.Hooks{}
	hooks.AddOnRequestInitialization(func(_ context.Context, _ any, message any) error {
		raw, ok := message.(json.RawMessage)
		if !ok {
			return nil
		}
		var m struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		_ = json.Unmarshal(raw, &m)
		if m.Method == string(mcpgo.MethodInitialize) {
			r.gate()
		}
		if m.Method == string(mcpgo.MethodToolsCall) {
			r.mu.Lock()
			r.inprocRaw = m.Params
			r.mu.Unlock()
		}
		return nil
	})
	s := mcpserver.NewMCPServer(r.sc.server.Name, r.sc.server.Version,
		mcpserver.WithToolCapabilities(true), mcpserver.WithElicitation(), mcpserver.WithHooks(hooks))
	for _, raw := range r.sc.toolList {
		var w struct {
			Name         string          `json:"name"`
			Title        string          `json:"title"`
			Description  string          `json:"description"`
			InputSchema  json.RawMessage `json:"inputSchema"`
			OutputSchema json.RawMessage `json:"outputSchema"`
			Annotations  json.RawMessage `json:"annotations"`
			Icons        json.RawMessage `json:"icons"`
			Meta         json.RawMessage `json:"_meta"`
		}
		if err := json.Unmarshal(raw, &w); err != nil {
			r.t.Fatalf("tools.json: %v", err)
		}
		tool := mcpgo.Tool{Name: w.Name, Title: w.Title, Description: w.Description, RawInputSchema: w.InputSchema, RawOutputSchema: w.OutputSchema}
		for _, f := range []struct {
			raw json.RawMessage
			dst any
		}{{w.Annotations, &tool.Annotations}, {w.Icons, &tool.Icons}, {w.Meta, &tool.Meta}} {
			if f.raw != nil {
				if err := json.Unmarshal(f.raw, f.dst); err != nil {
					r.t.Fatalf("tools.json: tool %s: mcp-go cannot take %s: %v", w.Name, f.raw, err)
				}
			}
		}
		if served, err := json.Marshal(tool); err == nil {
			var want, got any
			_ = wiretest.DecodeStrict(raw, &want)
			_ = wiretest.DecodeStrict(served, &got)
			if p := otcfMatcher.Match("tool", want, got, nil); p != nil {
				r.t.Logf("in-process mcp-go serves tool %s as %s, not as written (%s): the mapping is tested on what it serves", w.Name, served, strings.Join(p, "; "))
			}
		}
		s.AddTool(tool, r.inProcessCall)
	}
	return s
}

// inProcessCall is the in-process tool handler.
func (r *otcfRun) inProcessCall(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	r.enter()
	defer r.leave()
	r.mu.Lock()
	raw := r.inprocRaw
	r.inprocRaw = nil
	r.mu.Unlock()
	up := r.takeCall(json.RawMessage(`"in-process"`), raw, http.Header{})
	if up == nil {
		return nil, errors.New("unexpected call (conformance fake)")
	}
	if up.Elicit != nil {
		var p mcpgo.ElicitationParams
		if err := json.Unmarshal(up.Elicit, &p); err != nil {
			r.fail("elicit: mcp-go cannot take %s: %v", up.Elicit, err)
		}
		r.mu.Lock()
		asked := r.step
		r.mu.Unlock()
		res, err := mcpserver.ServerFromContext(ctx).RequestElicitation(ctx, mcpgo.ElicitationRequest{Params: p})
		if err != nil {
			r.fail("in-process elicitation/create failed: %v", err)
		} else {
			b, _ := json.Marshal(res)
			r.checkElicitAnswer([]byte(`{"result":`+string(b)+`}`), up)
			r.checkHeld(asked, up)
		}
	}
	switch {
	case up.Hang:
		t := time.NewTimer(otcfHangLimit)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-r.done:
		case <-t.C:
			r.fail("the bridge held a hung call for more than %s", otcfHangLimit)
		}
		return nil, errors.New("abandoned")
	case up.Error != nil:
		var e struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		_ = json.Unmarshal(up.Error, &e)
		if e.Code == mcpgo.URL_ELICITATION_REQUIRED {
			return nil, otcfURLElicitationError(e.Data)
		}
		return nil, errors.New(e.Message)
	}
	res, err := mcpgo.ParseCallToolResult(&up.Result)
	if err != nil {
		r.fail("result: mcp-go cannot take %s: %v", up.Result, err)
		return nil, err
	}
	if served, err := json.Marshal(res); err == nil {
		var want, got any
		_ = wiretest.DecodeStrict(up.Result, &want)
		_ = wiretest.DecodeStrict(served, &got)
		if p := otcfMatcher.Match("result", want, got, nil); p != nil {
			r.t.Logf("in-process mcp-go sends the result as %s, not as written (%s)", served, strings.Join(p, "; "))
		}
	}
	return res, nil
}

// TestOTCFrontConformanceLoader shows that the loader refuses malformed
// vectors, and that the comparison reports what it must.
func TestOTCFrontConformanceLoader(t *testing.T) {
	const tools = "-- tools.json --\n[{\"name\": \"add\", \"inputSchema\": {\"type\": \"object\"}}]\n"
	const req = "-- 1.request --\nPOST /tools/call\nOXP-Version: 1.0\n\n{\"tool_id\": \"calc.add\"}\n"
	const resp = "-- 1.response --\n200\nContent-Type: application/json\n\n{}\n"
	const call = "-- 1.upstream --\n{\"name\": \"add\", \"arguments\": {}, \"result\": {\"content\": []}}\n"
	ok := "comment\n" + tools + req + call + resp
	if _, err := otcfParseScenario("x.txtar", []byte(ok)); err != nil {
		t.Fatalf("a good vector is refused: %v", err)
	}
	upstream := func(body string) string { return "-- 1.upstream --\n" + body + "\n" }
	bad := []struct{ file, vector, why string }{
		{"x.txtar", tools + req + resp, "no comment header"},
		{"x.txtar", "c\n" + req + resp, "no tools.json"},
		{"x.txtar", "c\n-- options.json --\n{\"upstream\": \"unreachable\"}\n" + tools + req + resp, "drop tools.json"},
		{"x.txtar", "c\n" + tools + "-- options.json --\n{}\n" + req + resp, "must be the first section"},
		{"x.txtar", "c\n-- options.json --\n{\"toolkits\": \"x\"}\n" + tools + req + resp, "unknown field"},
		{"x.txtar", "c\n-- options.json --\n{\"upstream\": \"stdio\"}\n" + tools + req + resp, "want http, inprocess or unreachable"},
		{"x.txtar", "c\n-- options.json --\n{\"call_timeout\": \"5\"}\n" + tools + req + resp, "call_timeout"},
		{"x.txtar", "c\n" + tools + req, "has no 1.response"},
		{"x.txtar", "c\n" + tools + resp, "has no 1.request"},
		{"x.txtar", "c\n" + tools + resp + req, "then"},
		{"x.txtar", "c\n" + tools + req + resp + call, "then"},
		{"x.txtar", "c\n" + tools + strings.ReplaceAll(req+resp, "1.", "2."), "1 is missing"},
		{"x.txtar", "c\n" + tools + req + "-- 1.reply --\n200\n", "unknown section"},
		{"x.txtar", "c\n" + tools + req + upstream(`{"name": "add", "arguments": {}}`) + resp, "exactly one of"},
		{"x.txtar", "c\n" + tools + req + upstream(`{"name": "add", "result": {}}`) + resp, "arguments is required"},
		{"x.txtar", "c\n" + tools + req + upstream(`{"name": "add", "arguments": {}, "result": {}, "hang": true}`) + resp, "exactly one of"},
		{"x.txtar", "c\n" + tools + req + upstream(`{"name": "add", "arguments": {}, "error": {"code": 1}}`) + resp, "JSON-RPC error object"},
		{"x.txtar", "c\n" + tools + req + upstream(`{"down": true, "name": "add"}`) + resp, "down stands alone"},
		{"x.txtar", "c\n" + tools + req + upstream(`{"name": "add", "arguments": {}, "reslt": {}}`) + resp, "unknown field"},
		{"x.txtar", "c\n" + tools + req + upstream(`{"name": "add", "arguments": {}, "hang": true, "client_abort_after": "1s"}`) + resp, "must be none"},
		{"x.txtar", "c\n" + tools + req + "-- 1.response --\nnone\n", "no client_abort_after"},
		{"x.txtar", "c\n-- options.json --\n{\"upstream\": \"inprocess\"}\n" + tools + req + upstream(`{"name": "add", "arguments": {}, "error": {"code": -32602, "message": "m"}}`) + resp, "cannot answer JSON-RPC code -32602"},
		{"x.txtar", "c\n-- options.json --\n{\"upstream\": \"inprocess\"}\n" + tools + req + upstream(`{"name": "add", "arguments": {}, "error": {"code": -32042, "message": "m", "data": {"elicitations": []}}}`) + resp, "would answer"},
		{"x.txtar", "c\n-- options.json --\n{\"upstream\": \"inprocess\"}\n" + tools + req + upstream(`{"name": "add", "arguments": {}, "drop": true}`) + resp, "need the http upstream"},
		{"x.txtar", "c\n" + tools + req + "-- 1.response --\n200\n\n{}\n", "Content-Type is not listed"},
		{"x.txtar", "c\n" + tools + req + "-- 1.response --\n200\nContent-Type: application/json\n\n{\"a\": \"<uid>\"}\n", "unknown placeholder"},
		{"x.txtar", "c\n" + tools + req + "-- 1.response --\n200\nContent-Type: application/json\n\n{\"a\": \"<number:d>\"}\n", "nothing later uses"},
		{"x.txtar", "c\n" + tools + strings.Replace(req, "calc.add", "{{d}}", 1) + resp, "not captured"},
		{"x.oxp-flat.txtar", "c\n" + tools + "-- 1.request --\nGET /tools\n" + resp, "no OXP-Version header"},
		{"x.otc-1.0.txtar", "c\n" + tools + "-- 1.request --\nPOST /tools/call\n\n{\"$schema\": \"urn:oxp:1.0\", \"request\": {}}\n" + resp, `want "otc://1.0"`},
		{"X.txtar", ok, "want scenario.txtar"},
	}
	for _, b := range bad {
		_, err := otcfParseScenario(b.file, []byte(b.vector))
		if err == nil || !strings.Contains(err.Error(), b.why) {
			t.Errorf("%s %q: error %v, want one saying %q", b.file, b.vector, err, b.why)
		}
	}
	big := json.Number("123456789012345678901234567890")
	if p := otcfMatcher.Match("", big, json.Number("123456789012345680000000000000"), nil); p == nil {
		t.Error("a rounded big integer matches the exact one")
	}
	if p := otcfMatcher.Match("", map[string]any{"n": json.Number("15")}, map[string]any{"n": json.Number("15.0")}, nil); p != nil {
		t.Errorf("15 and 15.0 differ: %v", p)
	}
	if p := otcfMatcher.Match("", map[string]any{"a": "<any>"}, map[string]any{}, nil); p == nil {
		t.Error("<any> matches a missing member")
	}
	if otcfWireForm([]byte(`{"a": "<b>"}`)) != otcfWireForm([]byte(`{"a":"\u003cb\u003e"}`)) {
		t.Error("the wire form of two encodings of the same bytes differs")
	}
}
