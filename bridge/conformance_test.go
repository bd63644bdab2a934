package bridge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/tools/txtar"

	"github.com/mcpotc/mcpotc/bridge"
	"github.com/mcpotc/mcpotc/internal/wiretest"
	"github.com/mcpotc/mcpotc/otc"
)

var update = flag.Bool("update", false, "rewrite the N.mcp.response sections of the MCP-front conformance vectors from the front's answers")

const vectorDir = "../testdata/conformance/mcp_front"

// wait bounds each wait for a frame, an upstream request or an abort (a
// variable for the harness's own tests, which shorten it).
var wait = 5 * time.Second

const (
	// quiet is how long a response that must never come is waited for.
	quiet = 300 * time.Millisecond
	// settle is how long late frames are read before the final checks.
	settle = 100 * time.Millisecond
	// defaultProtocol is the protocol version the client initializes with.
	defaultProtocol = "2025-11-25"
)

// TestMCPFrontConformance runs the wire-level vectors of the MCP front
// (docs/mcp-front.md, What MCP hosts see; docs/mapping.md, Round trips) in
// testdata/conformance/mcp_front. Each file is one scenario in txtar form:
// bridge.NewMCPFront over a fake OTC upstream (an httptest.Server), served
// with Front().ServeStdio over pipes, driven with raw JSON-RPC lines.
//
//	A comment: what the scenario shows and which contract row it covers
//	(required, never empty).
//
//	-- options.json --              optional, first: see vectorOptions
//	{"dialect": "oxp-flat", "secrets": {"TWILIO_KEY": "sk-1"}}
//
//	-- tools.upstream.request --    optional: asserted on every GET /tools
//	GET /tools                      method and path
//	OXP-Version: 1.0                headers asserted ("Name:" alone: absent)
//
//	-- tools.upstream.response --   required: the fake upstream's GET /tools
//	200                             status
//	Content-Type: application/json  headers sent
//	                                blank line, then the body, sent as written
//	{"$schema": "urn:oxp:1.0", "items": […]}
//
//	-- startup.error --             instead of steps: NewMCPFront must fail
//	tool name "x" is exposed twice  with an error containing this text
//
//	-- log.contains --              optional: text the front's log (zerolog
//	"trace_id":"00-4bf9…"           JSON lines) must contain, one per line
//
//	-- 1.mcp --                     a JSON-RPC request or notification, sent
//	{"jsonrpc": "2.0", "id": 1, …}  compacted onto one line
//	-- 1.upstream.request --        what POST /tools/call must receive
//	POST /tools/call                (method, path, headers as above, and the
//	Content-Type: application/json  body compared as data); its input must
//	                                also be byte for byte the arguments of
//	{"$schema": …, "request": {…}}  N.mcp as sent (absent: {})
//	-- 1.upstream.response --       what the upstream answers: an HTTP
//	200                             message as in tools.upstream.response
//	Content-Type: application/json  (body sent as written), or
//	                                  hang     never answers: the bridge must
//	{"$schema": …, "result": {…}}              abort the request (its context
//	                                           ends) within `wait`
//	                                  refused  the upstream is closed before
//	                                           N.mcp is sent (no request section)
//	-- 1.mcp.response --            the JSON-RPC frame expected for N.mcp,
//	{"jsonrpc": "2.0", "id": 1, …}  compared as data; or "none": no response
//	                                may ever come for it
//
// A frame that MCP does not allow as a request, a batch (a JSON array) or
// a message whose id is not a number or a string (null, an object, an
// array, a boolean), is sent as written (compacted): its response is the
// frame with a null id.
//
// Steps are numbered 1, 2, … without a gap and run in order against one
// front and one fake upstream per file. N.mcp.response is required for a
// request (a frame with an id) and forbidden for a notification;
// N.upstream.request and N.upstream.response come together (refused: the
// response alone). A step without upstream sections asserts that the
// upstream receives no call. When the upstream hangs, the step's MCP
// response is awaited after all later steps have been sent (so that step 3
// can cancel the call of step 2), once the upstream saw the abort.
//
// Compared as data: both sides decoded; objects by exact key set, arrays by
// length and order, numbers by their literal text (so that
// 123456789012345678901234567890 is asserted exact, digit for digit).
// Placeholders, as JSON strings in expected sections only: "<uuid>",
// "<number>", "<string>", "<any>" (the member must be present). A
// placeholder may name a capture, "<uuid:call>"; {{call}} in a later section
// (an upstream response, a frame to send, an expected section) is replaced
// by the value it matched.
//
// Invariants checked in every scenario: the client's initialize (unless
// no_initialize) succeeds with the requested protocol version; the front
// sends no request or notification of its own; no configured credential
// (API key, bearer token, authorization tokens, secrets) appears in any
// frame or log line; no developer_message sent by the upstream appears in a
// result's content or an error's message or data, and each is logged.
//
// options.json may carry "known_deviation": {"what": …, "match": …}: the
// scenario asserts the contract, the front is known to deviate, and the
// problems whose text contains match are logged instead of failing the test
// (any other problem still fails it); once none occurs the test fails, so
// that the marker is removed with the fix.
//
// go test ./bridge -run MCPFrontConformance -update rewrites the
// N.mcp.response sections from the frames the front sent, keeping the
// placeholders that still match and writing captured values as their
// {{reference}} (an empty section is filled in); files with a
// known_deviation are left alone.
func TestMCPFrontConformance(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(vectorDir, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no vectors in %s", vectorDir)
	}
	for _, f := range files {
		// Not in parallel: mcp-go has one stdio session per process.
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) {
			sc := wiretest.MustLoadVector(t, f, func(_ string, data []byte) (*scenario, error) {
				return parseScenario(data, *update)
			})
			sc.path = f
			problems := runScenario(t, sc)
			wiretest.Report(t, problems, sc.opts.KnownDeviation)
		})
	}
}

// vectorOptions is options.json.
type vectorOptions struct {
	// Dialect is otc.ClientOptions.Dialect: auto (default), otc-1.0,
	// oxp-1.0, oxp-flat, loose.
	Dialect string `json:"dialect"`
	// APIKey and BearerToken are the client's transport credentials.
	APIKey      string `json:"api_key"`
	BearerToken string `json:"bearer_token"`
	// Prefix, Secrets, Tokens, UserID are those of the OTCServer.
	Prefix  string            `json:"prefix"`
	Secrets map[string]string `json:"secrets"`
	Tokens  map[string]string `json:"tokens"`
	UserID  string            `json:"user_id"`
	// CallTimeout is MCPFrontOptions.CallTimeout, UpstreamCallTimeout
	// OTCServer.CallTimeout, as Go durations ("200ms").
	CallTimeout         string `json:"call_timeout"`
	UpstreamCallTimeout string `json:"upstream_call_timeout"`
	// InputErrorsAsResult is MCPFrontOptions.InputErrorsAsResult.
	InputErrorsAsResult bool `json:"input_errors_as_result"`
	// ProtocolVersion and Capabilities are the client's initialize params
	// (defaults: 2025-11-25 and {}).
	ProtocolVersion string          `json:"protocol_version"`
	Capabilities    json.RawMessage `json:"capabilities"`
	// NoInitialize skips the handshake, as a 2026-07-28 client does (its
	// requests carry version and capabilities in _meta).
	NoInitialize bool `json:"no_initialize"`
	// Mirrors are more upstreams, served by the same fake server under
	// /NAME with the same GET /tools answer (for prefixes and name clashes).
	Mirrors []mirrorOptions `json:"mirrors"`
	// KnownDeviation says how the front deviates from the contract here.
	KnownDeviation *wiretest.KnownDeviation `json:"known_deviation"`
}

type mirrorOptions struct {
	Name   string `json:"name"`
	Prefix string `json:"prefix"`
}

// scenario is one loaded vector file.
type scenario struct {
	path         string
	archive      *txtar.Archive
	opts         vectorOptions
	callTimeout  time.Duration
	upTimeout    time.Duration
	toolsReq     *httpExpect
	toolsResp    *httpAnswer
	startupError string
	logContains  []string
	steps        []*step
	// secrets are the configured credentials, which no frame may carry.
	secrets []string
}

type step struct {
	n        int
	frame    string // N.mcp, compacted
	id       string // the frame's id as JSON; "" for a notification
	upReq    *httpExpect
	upResp   *httpAnswer
	want     *frameExpect
	wantFile int      // index of N.mcp.response in archive.Files
	hang     *pending // the call held by a hanging upstream
}

// httpExpect is an expected request: body compared as data.
type httpExpect struct {
	method, path string
	header       []wiretest.Header
	body         string
}

// httpAnswer is what the fake upstream does.
type httpAnswer struct {
	kind   string // "http", "hang", "refused"
	status int
	header []wiretest.Header
	body   string
}

// frameExpect is an expected JSON-RPC frame.
type frameExpect struct {
	none bool
	text string // JSON, may hold placeholders and {{captures}}
}

// matcher compares what the server sent with a vector.
var matcher = wiretest.Matcher{Root: "(frame)", ExactNumbers: true}

var (
	sectionName = regexp.MustCompile(`^([1-9][0-9]*)\.(mcp|mcp\.response|upstream\.request|upstream\.response)$`)
)

// parseScenario loads one vector strictly. updating allows empty
// N.mcp.response sections, for -update to fill in.
func parseScenario(data []byte, updating bool) (*scenario, error) {
	sc := &scenario{archive: txtar.Parse(data)}
	if len(bytes.TrimSpace(sc.archive.Comment)) == 0 {
		return nil, errors.New("no comment header: say what the scenario shows and which contract row it covers")
	}
	type stepFiles struct{ mcp, resp, upReq, upResp int }
	files := map[int]*stepFiles{}
	seen := map[string]bool{}
	var toolsReq, toolsResp, startup = -1, -1, -1
	for i, f := range sc.archive.Files {
		if seen[f.Name] {
			return nil, fmt.Errorf("section %q appears twice", f.Name)
		}
		seen[f.Name] = true
		switch f.Name {
		case "options.json":
			if err := wiretest.DecodeOptions(i, f.Data, &sc.opts); err != nil {
				return nil, err
			}
			continue
		case "tools.upstream.request":
			toolsReq = i
			continue
		case "tools.upstream.response":
			toolsResp = i
			continue
		case "startup.error":
			startup = i
			continue
		case "log.contains":
			for _, l := range strings.Split(string(f.Data), "\n") {
				if l = strings.TrimSpace(l); l != "" {
					sc.logContains = append(sc.logContains, l)
				}
			}
			if len(sc.logContains) == 0 {
				return nil, errors.New("log.contains is empty")
			}
			continue
		}
		m := sectionName.FindStringSubmatch(f.Name)
		if m == nil {
			return nil, fmt.Errorf("unknown section %q (want options.json, tools.upstream.request, tools.upstream.response, startup.error, log.contains, N.mcp, N.mcp.response, N.upstream.request or N.upstream.response)", f.Name)
		}
		n, _ := strconv.Atoi(m[1])
		sf := files[n]
		if sf == nil {
			sf = &stepFiles{-1, -1, -1, -1}
			files[n] = sf
		}
		switch m[2] {
		case "mcp":
			sf.mcp = i
		case "mcp.response":
			sf.resp = i
		case "upstream.request":
			sf.upReq = i
		case "upstream.response":
			sf.upResp = i
		}
	}
	if err := sc.parseOptions(); err != nil {
		return nil, fmt.Errorf("options.json: %w", err)
	}
	if toolsResp < 0 {
		return nil, errors.New("no tools.upstream.response: the front lists the upstream's tools at start")
	}
	var err error
	if sc.toolsResp, err = parseAnswer(string(sc.archive.Files[toolsResp].Data)); err != nil {
		return nil, fmt.Errorf("tools.upstream.response: %w", err)
	}
	if sc.toolsResp.kind != "http" {
		return nil, fmt.Errorf("tools.upstream.response: %s is for calls only", sc.toolsResp.kind)
	}
	if toolsReq >= 0 {
		if sc.toolsReq, err = parseExpect(string(sc.archive.Files[toolsReq].Data)); err != nil {
			return nil, fmt.Errorf("tools.upstream.request: %w", err)
		}
		if sc.toolsReq.method != http.MethodGet || sc.toolsReq.path != "/tools" || sc.toolsReq.body != "" {
			return nil, errors.New("tools.upstream.request: want GET /tools, headers, no body")
		}
	}
	if startup >= 0 {
		sc.startupError = strings.TrimSpace(string(sc.archive.Files[startup].Data))
		if sc.startupError == "" {
			return nil, errors.New("startup.error is empty: give the text the error must contain")
		}
		if len(files) > 0 {
			return nil, errors.New("startup.error and steps: a front that fails to start serves nothing")
		}
		return sc, nil
	}
	if len(files) == 0 {
		return nil, errors.New("no steps")
	}

	captured := map[string]string{} // capture → section that records it
	used := map[string]bool{}
	refs := func(section, text string) error {
		for _, m := range wiretest.Reference.FindAllStringSubmatch(text, -1) {
			if _, ok := captured[m[1]]; !ok {
				return fmt.Errorf("%s: {{%s}} is not captured by an earlier section", section, m[1])
			}
			used[m[1]] = true
		}
		return nil
	}
	captures := func(section string, want any) error {
		return wiretest.RecordCaptures(section, want, captured, section)
	}
	ids := map[string]int{}
	for n := 1; n <= len(files); n++ {
		sf, ok := files[n]
		if !ok {
			return nil, fmt.Errorf("steps are not numbered 1..%d without a gap: %d is missing", len(files), n)
		}
		st := &step{n: n, wantFile: sf.resp}
		name := func(s string) string { return fmt.Sprintf("%d.%s", n, s) }
		if sf.mcp < 0 {
			return nil, fmt.Errorf("step %d has no %s", n, name("mcp"))
		}
		text := string(sc.archive.Files[sf.mcp].Data)
		if err := refs(name("mcp"), text); err != nil {
			return nil, err
		}
		if st.frame, st.id, err = parseFrame(text); err != nil {
			return nil, fmt.Errorf("%s: %w", name("mcp"), err)
		}
		if st.id != "" && st.id != "null" { // null: invalid requests, each answered before the next step
			if prev, dup := ids[st.id]; dup {
				return nil, fmt.Errorf("%s: id %s is already used by %d.mcp", name("mcp"), st.id, prev)
			}
			ids[st.id] = n
		}
		if sf.upResp >= 0 {
			if st.upResp, err = parseAnswer(string(sc.archive.Files[sf.upResp].Data)); err != nil {
				return nil, fmt.Errorf("%s: %w", name("upstream.response"), err)
			}
		}
		switch {
		case sf.upReq >= 0 && sf.upResp < 0:
			return nil, fmt.Errorf("%s has no %s", name("upstream.request"), name("upstream.response"))
		case sf.upResp >= 0 && sf.upReq < 0 && st.upResp.kind != "refused":
			return nil, fmt.Errorf("%s has no %s", name("upstream.response"), name("upstream.request"))
		case sf.upReq >= 0 && st.upResp.kind == "refused":
			return nil, fmt.Errorf("%s: a refused upstream receives no request", name("upstream.request"))
		}
		if sf.upReq >= 0 {
			text := string(sc.archive.Files[sf.upReq].Data)
			if err := refs(name("upstream.request"), text); err != nil {
				return nil, err
			}
			if st.upReq, err = parseExpect(text); err != nil {
				return nil, fmt.Errorf("%s: %w", name("upstream.request"), err)
			}
			var want any
			if err := wiretest.DecodeStrict([]byte(st.upReq.body), &want); err != nil {
				return nil, fmt.Errorf("%s: body is not JSON: %w", name("upstream.request"), err)
			}
			if err := captures(name("upstream.request"), want); err != nil {
				return nil, err
			}
		}
		if st.upResp != nil && st.upResp.kind == "http" {
			text := string(sc.archive.Files[sf.upResp].Data)
			if err := refs(name("upstream.response"), text); err != nil {
				return nil, err
			}
		}
		switch {
		case st.id == "" && sf.resp >= 0:
			return nil, fmt.Errorf("%s: %s is a notification, which gets no response", name("mcp.response"), name("mcp"))
		case st.id != "" && sf.resp < 0:
			return nil, fmt.Errorf("%s is a request and has no %s", name("mcp"), name("mcp.response"))
		case sf.resp >= 0:
			text := strings.TrimSpace(string(sc.archive.Files[sf.resp].Data))
			switch {
			case text == "none":
				st.want = &frameExpect{none: true}
			case text == "" && !updating:
				return nil, fmt.Errorf("%s is empty (run with -update to fill it in)", name("mcp.response"))
			default:
				if err := refs(name("mcp.response"), text); err != nil {
					return nil, err
				}
				st.want = &frameExpect{text: text}
				if text != "" {
					var want any
					if err := wiretest.DecodeStrict([]byte(text), &want); err != nil {
						return nil, fmt.Errorf("%s: not JSON: %w", name("mcp.response"), err)
					}
					if err := captures(name("mcp.response"), want); err != nil {
						return nil, err
					}
				}
			}
		}
		sc.steps = append(sc.steps, st)
	}
	if err := refs("log.contains", strings.Join(sc.logContains, "\n")); err != nil {
		return nil, err
	}
	for name, at := range captured {
		if !used[name] {
			return nil, fmt.Errorf("%s captures %q but no later section uses {{%s}}", at, name, name)
		}
	}
	return sc, nil
}

func (sc *scenario) parseOptions() error {
	o := &sc.opts
	if err := o.KnownDeviation.Check(); err != nil {
		return err
	}
	if _, err := otc.ParseDialect(o.Dialect); err != nil {
		return err
	}
	for _, d := range []struct {
		s   string
		dst *time.Duration
	}{{o.CallTimeout, &sc.callTimeout}, {o.UpstreamCallTimeout, &sc.upTimeout}} {
		if d.s == "" {
			continue
		}
		v, err := time.ParseDuration(d.s)
		if err != nil || v <= 0 {
			return fmt.Errorf("timeout %q: want a positive Go duration", d.s)
		}
		*d.dst = v
	}
	if o.NoInitialize && (o.ProtocolVersion != "" || len(o.Capabilities) > 0) {
		return errors.New("no_initialize: protocol_version and capabilities are initialize's")
	}
	if len(o.Capabilities) > 0 {
		var caps map[string]any
		if err := json.Unmarshal(o.Capabilities, &caps); err != nil {
			return fmt.Errorf("capabilities: want a JSON object: %w", err)
		}
	}
	for _, m := range o.Mirrors {
		if !regexp.MustCompile(`^[a-z0-9_]+$`).MatchString(m.Name) || m.Name == "tools" || m.Name == "otc" {
			return fmt.Errorf("mirror name %q: want [a-z0-9_]+, not tools or otc", m.Name)
		}
	}
	for _, s := range []string{o.APIKey, o.BearerToken} {
		if s != "" {
			sc.secrets = append(sc.secrets, s)
		}
	}
	for _, m := range []map[string]string{o.Secrets, o.Tokens} {
		for _, v := range m {
			if v != "" {
				sc.secrets = append(sc.secrets, v)
			}
		}
	}
	for _, s := range sc.secrets {
		if len(s) < 6 {
			return fmt.Errorf("credential %q is too short to be searched for in frames: use at least 6 characters", s)
		}
	}
	return nil
}

// parseFrame checks a JSON-RPC message to send and compacts it.
func parseFrame(text string) (frame, id string, err error) {
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "[") {
		// A batch, which the front refuses: answered with a null id.
		var batch []any
		if err := wiretest.DecodeStrict([]byte(t), &batch); err != nil {
			return "", "", fmt.Errorf("not a JSON array: %w", err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(t)); err != nil {
			return "", "", err
		}
		return buf.String(), "null", nil
	}
	var msg map[string]json.RawMessage
	if err := wiretest.DecodeStrict([]byte(text), &msg); err != nil {
		return "", "", fmt.Errorf("not a JSON object: %w", err)
	}
	if string(msg["jsonrpc"]) != `"2.0"` {
		return "", "", errors.New(`want "jsonrpc": "2.0"`)
	}
	var method string
	if json.Unmarshal(msg["method"], &method) != nil || method == "" {
		return "", "", errors.New("want a method")
	}
	if raw, ok := msg["id"]; ok {
		id = string(raw)
		var v any
		if err := wiretest.DecodeStrict(raw, &v); err != nil {
			return "", "", err
		}
		switch v.(type) {
		case string, json.Number:
		default:
			// Not an id MCP allows (null, object, array, bool): an
			// Invalid Request, answered with a null id.
			id = "null"
		}
		if id == `"initialize"` {
			return "", "", errors.New(`id "initialize" is the harness's own`)
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(text)); err != nil {
		return "", "", err
	}
	return buf.String(), id, nil
}

func parseExpect(s string) (*httpExpect, error) {
	first, header, body, err := wiretest.SplitMessage(s)
	if err != nil {
		return nil, err
	}
	method, path, ok := strings.Cut(first, " ")
	if !ok || !regexp.MustCompile(`^[A-Z]+$`).MatchString(method) || !strings.HasPrefix(path, "/") || strings.Contains(path, " ") {
		return nil, fmt.Errorf("first line %q: want METHOD /path", first)
	}
	return &httpExpect{method: method, path: path, header: header, body: body}, nil
}

func parseAnswer(s string) (*httpAnswer, error) {
	first, header, body, err := wiretest.SplitMessage(s)
	if err != nil {
		return nil, err
	}
	switch first {
	case "hang", "refused":
		if len(header) > 0 || body != "" {
			return nil, fmt.Errorf("%s takes no headers and no body", first)
		}
		return &httpAnswer{kind: first}, nil
	}
	status, err := strconv.Atoi(first)
	if err != nil || status < 100 || status > 599 {
		return nil, fmt.Errorf("first line %q: want a status code, hang or refused", first)
	}
	return &httpAnswer{kind: "http", status: status, header: header, body: body}, nil
}

// ---------------------------------------------------------------------------
// The run.

// run is one scenario in progress.
type run struct {
	t        *testing.T
	sc       *scenario
	mu       sync.Mutex // guards problems, captures, devMessages, cur
	problems []string
	captures map[string]string
	// devMessages are the developer_message values the upstream sent.
	devMessages []string
	cur         *pending // the call the current step expects, or nil
	done        chan struct{}
	// hangLimit bounds how long the fake upstream holds a "hang" request.
	hangLimit time.Duration
}

// pending is one expected upstream call.
type pending struct {
	st       *step
	taken    bool
	received chan struct{}
	aborted  chan struct{}
}

func (r *run) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

func (r *run) expand(s string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return wiretest.Reference.ReplaceAllStringFunc(s, func(m string) string { return r.captures[m[2:len(m)-2]] })
}

// runScenario runs one scenario and returns what differs from it.
func runScenario(t *testing.T, sc *scenario) []string {
	r := &run{t: t, sc: sc, captures: map[string]string{}, done: make(chan struct{}), hangLimit: wait + 2*time.Second}
	srv := httptest.NewServer(http.HandlerFunc(r.serveUpstream))
	closeSrv := sync.OnceFunc(srv.Close)
	defer closeSrv()
	var closeDone = sync.OnceFunc(func() { close(r.done) })
	defer closeDone()

	upstream := func(name, base, prefix string) bridge.OTCServer {
		client, err := otc.NewClient(base, &otc.ClientOptions{
			Dialect:     otc.Dialect(sc.opts.Dialect),
			APIKey:      sc.opts.APIKey,
			BearerToken: sc.opts.BearerToken,
		})
		if err != nil {
			t.Fatal(err)
		}
		return bridge.OTCServer{
			Name: name, Client: client, Prefix: prefix,
			Secrets: sc.opts.Secrets, Tokens: sc.opts.Tokens, UserID: sc.opts.UserID,
			CallTimeout: sc.upTimeout,
			Credentials: []string{sc.opts.APIKey, sc.opts.BearerToken},
		}
	}
	ups := []bridge.OTCServer{upstream("otc", srv.URL, sc.opts.Prefix)}
	for _, m := range sc.opts.Mirrors {
		ups = append(ups, upstream(m.Name, srv.URL+"/"+m.Name, m.Prefix))
	}
	logs := &wiretest.Buffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	front, err := bridge.NewMCPFront(ctx, ups, &bridge.MCPFrontOptions{
		CallTimeout:         sc.callTimeout,
		InputErrorsAsResult: sc.opts.InputErrorsAsResult,
		Logger:              zerolog.New(logs),
		Version:             "conformance",
	})
	if sc.startupError != "" {
		switch {
		case err == nil:
			r.fail("NewMCPFront succeeded, want an error containing %q", sc.startupError)
		case !strings.Contains(err.Error(), sc.startupError):
			r.fail("NewMCPFront: %v; want an error containing %q", err, sc.startupError)
		}
		closeDone()
		closeSrv()
		return r.finish(nil, logs.String())
	}
	if err != nil {
		t.Fatalf("NewMCPFront: %v", err)
	}

	c := startClient(t, front)
	defer c.stop(t, closeDone)
	if !sc.opts.NoInitialize && !r.initialize(c) {
		return r.finish(c, logs.String())
	}

	changed := false
	var deferred []*step
	for _, st := range sc.steps {
		if st.upResp != nil && st.upResp.kind == "refused" {
			closeSrv()
		}
		var p *pending
		if st.upReq != nil {
			p = &pending{st: st, received: make(chan struct{}), aborted: make(chan struct{})}
			r.mu.Lock()
			r.cur = p
			r.mu.Unlock()
		}
		c.write(t, r.expand(st.frame))
		if p != nil {
			select {
			case <-p.received:
			case <-time.After(wait):
				r.fail("%d.upstream.request: the upstream received no call within %v", st.n, wait)
				if raw, ok := c.await(st.id, quiet); ok {
					r.fail("%d.mcp: the front answered %s", st.n, raw)
				}
				return r.finish(c, logs.String())
			}
		}
		if p != nil && st.upResp.kind == "hang" {
			deferred = append(deferred, st)
			st.hang = p
			continue
		}
		if st.id != "" {
			changed = r.checkResponse(c, st) || changed
		}
		r.mu.Lock()
		r.cur = nil
		r.mu.Unlock()
	}
	for _, st := range deferred {
		select {
		case <-st.hang.aborted:
		case <-time.After(wait):
			r.fail("%d.upstream.response: hang: the bridge did not abort the upstream request within %v", st.n, wait)
		}
		if st.id != "" {
			changed = r.checkResponse(c, st) || changed
		}
	}
	if changed && sc.path != "" {
		if err := os.WriteFile(sc.path, txtar.Format(sc.archive), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", sc.path)
	}
	// Let late frames arrive before the final checks.
	c.collect(settle)
	return r.finish(c, logs.String())
}

// initialize performs the handshake.
func (r *run) initialize(c *client) bool {
	pv := r.sc.opts.ProtocolVersion
	if pv == "" {
		pv = defaultProtocol
	}
	caps := r.sc.opts.Capabilities
	if len(caps) == 0 {
		caps = json.RawMessage(`{}`)
	}
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": pv,
		"capabilities":    caps,
		"clientInfo":      map[string]any{"name": "mcpotc-conformance", "version": "1.0.0"},
	})
	c.write(r.t, fmt.Sprintf(`{"jsonrpc":"2.0","id":"initialize","method":"initialize","params":%s}`, params))
	raw, ok := c.await(`"initialize"`, wait)
	if !ok {
		r.fail("initialize: no response within %v", wait)
		return false
	}
	var resp struct {
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
			ServerInfo      struct {
				Name string `json:"name"`
			} `json:"serverInfo"`
			Capabilities struct {
				Tools *struct {
					ListChanged bool `json:"listChanged"`
				} `json:"tools"`
			} `json:"capabilities"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil || resp.Result == nil {
		r.fail("initialize failed: %s", raw)
		return false
	}
	if res := resp.Result; res.ProtocolVersion != pv || res.ServerInfo.Name != "mcpotc" || res.Capabilities.Tools == nil || !res.Capabilities.Tools.ListChanged {
		r.fail("initialize: %s; want protocolVersion %s, serverInfo.name mcpotc, capabilities.tools.listChanged", raw, pv)
	}
	c.write(r.t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return true
}

// checkResponse awaits and compares the frame of one step; it reports
// whether -update changed the section.
func (r *run) checkResponse(c *client, st *step) bool {
	if st.want.none {
		if raw, ok := c.await(st.id, quiet); ok {
			r.fail("%d.mcp.response: none expected, the front sent %s", st.n, raw)
		}
		return false
	}
	raw, ok := c.await(st.id, wait)
	if !ok {
		r.fail("%d.mcp.response: no frame with id %s within %v", st.n, st.id, wait)
		return false
	}
	var got any
	if err := wiretest.DecodeStrict(raw, &got); err != nil {
		r.fail("%d.mcp.response: the frame is not JSON: %v", st.n, err)
		return false
	}
	var want any
	text := r.expand(st.want.text)
	if text != "" {
		if err := wiretest.DecodeStrict([]byte(text), &want); err != nil {
			r.fail("%d.mcp.response: %v", st.n, err)
			return false
		}
	}
	if *update && r.sc.opts.KnownDeviation == nil {
		// A known deviation's expectations are the contract's, never the
		// front's answers.
		r.mu.Lock()
		refs := maps.Clone(r.captures)
		r.mu.Unlock()
		updated, err := formatJSON(raw, want, refs)
		if err != nil {
			r.fail("%d.mcp.response: %v", st.n, err)
			return false
		}
		f := &r.sc.archive.Files[st.wantFile]
		if bytes.Equal(f.Data, updated) {
			return false
		}
		f.Data = updated
		return true
	}
	r.mu.Lock()
	problems := matcher.Match("", want, got, r.captures)
	r.mu.Unlock()
	if len(problems) > 0 {
		r.fail("%d.mcp.response:\n\t%s\n\tthe front sent %s", st.n, strings.Join(problems, "\n\t"), raw)
	}
	return false
}

// finish runs the invariants over every frame and log line.
func (r *run) finish(c *client, logs string) []string {
	var frames [][]byte
	if c != nil {
		frames = c.all
		for _, m := range c.unsolicited {
			r.fail("the front sent a message of its own: %s", m)
		}
		for _, s := range c.stray {
			r.fail("stdout carried a line that is not a JSON-RPC frame: %q", s)
		}
	}
	for _, s := range r.sc.secrets {
		for _, f := range frames {
			if bytes.Contains(f, []byte(s)) {
				r.fail("a configured credential appears in a frame: %s", f)
			}
		}
		if strings.Contains(logs, s) {
			r.fail("a configured credential appears in the log:\n%s", logs)
		}
	}
	for _, want := range r.sc.logContains {
		if want = r.expand(want); !strings.Contains(logs, want) {
			r.fail("log.contains: %q is not in the log:\n%s", want, logs)
		}
	}
	r.mu.Lock()
	devs := slices.Clone(r.devMessages)
	r.mu.Unlock()
	for _, d := range devs {
		for _, f := range frames {
			var msg struct {
				Result struct {
					Content json.RawMessage `json:"content"`
				} `json:"result"`
				Error struct {
					Message string          `json:"message"`
					Data    json.RawMessage `json:"data"`
				} `json:"error"`
			}
			_ = json.Unmarshal(f, &msg)
			if strings.Contains(string(msg.Result.Content), d) || strings.Contains(msg.Error.Message, d) || strings.Contains(string(msg.Error.Data), d) {
				r.fail("the developer_message %q reaches a model-facing part of a frame: %s", d, f)
			}
		}
		// It is logged, with configured credentials redacted.
		logged := d
		for _, c := range r.sc.secrets {
			if len(c) >= 4 {
				logged = strings.ReplaceAll(logged, c, "[redacted]")
			}
		}
		if !strings.Contains(logs, logged) {
			r.fail("the developer_message %q is not logged", logged)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.problems)
}

// serveUpstream is the fake OTC upstream.
func (r *run) serveUpstream(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	path := req.URL.Path
	for _, m := range r.sc.opts.Mirrors {
		if rest, ok := strings.CutPrefix(path, "/"+m.Name+"/"); ok {
			path = "/" + rest
		}
	}
	switch {
	case req.Method == http.MethodGet && path == "/tools":
		if e := r.sc.toolsReq; e != nil {
			for _, p := range wiretest.CompareHeaders(e.header, req.Header) {
				r.fail("tools.upstream.request: GET %s: %s", req.URL.Path, p)
			}
		}
		r.answer(w, r.sc.toolsResp)
		return
	case req.Method == http.MethodPost && path == "/tools/call":
	default:
		r.fail("the upstream received an unexpected %s %s", req.Method, req.URL.Path)
		http.Error(w, `{"message":"unexpected request"}`, http.StatusNotFound)
		return
	}
	r.mu.Lock()
	p := r.cur
	if p == nil || p.taken {
		r.mu.Unlock()
		r.fail("the upstream received a call no step expects: %s", body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"message":"unexpected call"}`)
		return
	}
	p.taken = true
	r.mu.Unlock()
	st := p.st
	r.checkCall(st, req, body)
	close(p.received)
	if st.upResp.kind == "hang" {
		select {
		case <-req.Context().Done():
			close(p.aborted)
		case <-r.done:
			w.WriteHeader(http.StatusGatewayTimeout)
		case <-time.After(r.hangLimit):
			w.WriteHeader(http.StatusGatewayTimeout)
		}
		return
	}
	r.answer(w, st.upResp)
}

// checkCall compares a POST /tools/call with the step's expectation.
func (r *run) checkCall(st *step, req *http.Request, body []byte) {
	e := st.upReq
	where := fmt.Sprintf("%d.upstream.request", st.n)
	gotPath := req.URL.Path
	if req.Method != e.method || gotPath != e.path {
		r.fail("%s: %s %s, want %s %s", where, req.Method, gotPath, e.method, e.path)
	}
	for _, p := range wiretest.CompareHeaders(e.header, req.Header) {
		r.fail("%s: %s", where, p)
	}
	var got, want any
	if err := wiretest.DecodeStrict(body, &got); err != nil {
		r.fail("%s: the body is not JSON (%v): %q", where, err, body)
		return
	}
	if err := wiretest.DecodeStrict([]byte(r.expand(e.body)), &want); err != nil {
		r.fail("%s: %v", where, err)
		return
	}
	r.mu.Lock()
	problems := matcher.Match("", want, got, r.captures)
	r.mu.Unlock()
	if len(problems) > 0 {
		r.fail("%s:\n\t%s\n\tthe upstream received %s", where, strings.Join(problems, "\n\t"), body)
	}
	// The input, byte for byte: the arguments as the MCP client sent them.
	var frame struct {
		Params struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	_ = json.Unmarshal([]byte(r.expand(st.frame)), &frame)
	args := frame.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	if in := rawInput(body); !bytes.Equal(in, args) {
		r.fail("%s: input is %s, want the arguments byte for byte: %s", where, in, args)
	}
}

// rawInput is the input member of a call body, flat or in an envelope.
func rawInput(body []byte) []byte {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return nil
	}
	if inner, ok := top["request"]; ok {
		top = nil
		if json.Unmarshal(inner, &top) != nil {
			return nil
		}
	}
	return top["input"]
}

// answer writes an HTTP answer, {{captures}} expanded, and records its
// developer messages.
func (r *run) answer(w http.ResponseWriter, a *httpAnswer) {
	body := r.expand(a.body)
	var v any
	if json.Unmarshal([]byte(body), &v) == nil {
		var devs []string
		walkMembers(v, "developer_message", func(s string) { devs = append(devs, s) })
		r.mu.Lock()
		for _, d := range devs {
			if !slices.Contains(r.devMessages, d) {
				r.devMessages = append(r.devMessages, d)
			}
		}
		r.mu.Unlock()
	}
	for _, h := range a.header {
		w.Header().Add(h.Name, r.expand(h.Value))
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, body)
}

// walkMembers calls f with every string value of a member named key.
func walkMembers(v any, key string, f func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == key && s != "" {
				f(s)
			}
			walkMembers(e, key, f)
		}
	case []any:
		for _, e := range x {
			walkMembers(e, key, f)
		}
	}
}

// ---------------------------------------------------------------------------
// The MCP client over stdio.

// client is the MCP host side of ServeStdio, read from one goroutine.
type client struct {
	in    *io.PipeWriter
	lines chan []byte
	done  chan error
	// responses by id (JSON), all frames, and what is not a response.
	responses   map[string][]byte
	all         [][]byte
	unsolicited []string
	stray       []string
}

func startClient(t *testing.T, front *bridge.MCPFront) *client {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &client{in: inW, lines: make(chan []byte, 256), done: make(chan error, 1), responses: map[string][]byte{}}
	go func() {
		c.done <- front.Server().ServeStdio(context.Background(), inR, outW)
		outW.Close()
	}()
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			c.lines <- bytes.Clone(sc.Bytes())
		}
	}()
	return c
}

func (c *client) write(t *testing.T, frame string) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := c.in.Write([]byte(frame + "\n"))
		errc <- err
	}()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("writing to the front: %v", err)
		}
	case <-time.After(wait):
		t.Fatalf("the front did not read a frame within %v", wait)
	}
}

// take files one line from stdout.
func (c *client) take(line []byte) {
	c.all = append(c.all, line)
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(line, &msg); err != nil {
		c.stray = append(c.stray, string(line))
		return
	}
	_, hasResult := msg["result"]
	_, hasError := msg["error"]
	id, hasID := msg["id"]
	switch {
	case hasID && (hasResult || hasError):
		c.responses[string(id)] = line
	default:
		c.unsolicited = append(c.unsolicited, string(line))
	}
}

// await returns the response with the given id, reading stdout for up to d.
func (c *client) await(id string, d time.Duration) ([]byte, bool) {
	deadline := time.After(d)
	for {
		if f, ok := c.responses[id]; ok {
			delete(c.responses, id)
			return f, true
		}
		select {
		case line, ok := <-c.lines:
			if !ok {
				return nil, false
			}
			c.take(line)
		case <-deadline:
			return nil, false
		}
	}
}

// collect reads stdout for d.
func (c *client) collect(d time.Duration) {
	deadline := time.After(d)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				return
			}
			c.take(line)
		case <-deadline:
			return
		}
	}
}

// stop ends the input and waits for ServeStdio, after releasing the
// upstream's hanging requests.
func (c *client) stop(t *testing.T, release func()) {
	release()
	c.in.Close()
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(2 * wait):
		t.Errorf("ServeStdio did not return within %v of EOF", 2*wait)
	}
	for range c.lines { // drain until stdout ends
	}
}

// ---------------------------------------------------------------------------
// Comparing JSON as data.

// formatJSON writes a frame indented in its own member order, for -update,
// keeping want's placeholders where they still match and writing a string
// that a capture recorded as its {{reference}}.
func formatJSON(frame []byte, want any, captures map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	dec := json.NewDecoder(bytes.NewReader(frame))
	dec.UseNumber()
	if err := (wiretest.Writer{Captures: captures, KeepAny: true, OneLine: 96}).WriteOrdered(&buf, dec, want, ""); err != nil {
		return nil, fmt.Errorf("the frame is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// TestMCPFrontConformanceLoader shows that the loader refuses malformed
// vectors.
func TestMCPFrontConformanceLoader(t *testing.T) {
	const tools = "-- tools.upstream.response --\n200\nContent-Type: application/json\n\n{\"items\": []}\n"
	const list = "-- 1.mcp --\n{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/list\"}\n"
	const listed = list + "-- 1.mcp.response --\n{\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {\"tools\": []}}\n"
	const call = "-- 1.mcp --\n{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": {\"name\": \"x\"}}\n"
	const upReq = "-- 1.upstream.request --\nPOST /tools/call\n\n{\"tool_id\": \"<uuid:c>\"}\n"
	const upResp = "-- 1.upstream.response --\n200\nContent-Type: application/json\n\n{\"call_id\": \"{{c}}\", \"success\": true}\n"
	const resp = "-- 1.mcp.response --\n\"<any>\"\n"
	if _, err := parseScenario([]byte("c\n"+tools+listed), false); err != nil {
		t.Fatalf("a good vector is refused: %v", err)
	}
	if _, err := parseScenario([]byte("c\n"+tools+call+upReq+upResp+resp), false); err != nil {
		t.Fatalf("a good vector is refused: %v", err)
	}
	bad := []struct{ vector, why string }{
		{tools + listed, "no comment header"},
		{"c\n" + listed, "no tools.upstream.response"},
		{"c\n" + tools, "no steps"},
		{"c\n" + tools + listed + "-- 1.reply --\n{}\n", "unknown section"},
		{"c\n" + tools + listed + "-- notes.txt --\nx\n", "unknown section"},
		{"c\n" + tools + list, "has no 1.mcp.response"},
		{"c\n" + tools + list + "-- 1.mcp.response --\n", "is empty (run with -update"},
		{"c\n" + tools + "-- 1.mcp --\n{\"jsonrpc\": \"2.0\", \"method\": \"notifications/initialized\"}\n-- 1.mcp.response --\n{}\n", "a notification"},
		{"c\n" + tools + listed + "-- 3.mcp --\n{\"jsonrpc\": \"2.0\", \"method\": \"x\"}\n", "2 is missing"},
		{"c\n" + tools + listed + "-- 1.mcp --\n{}\n", "appears twice"},
		{"c\n" + tools + "-- 1.mcp.response --\n{}\n", "has no 1.mcp"},
		{"c\n" + tools + "-- 1.mcp --\n{\"id\": 1, \"method\": \"tools/list\"}\n-- 1.mcp.response --\n{}\n", `"jsonrpc": "2.0"`},
		{"c\n" + tools + "-- 1.mcp --\n{\"jsonrpc\": \"2.0\", \"id\": \"initialize\", \"method\": \"ping\"}\n-- 1.mcp.response --\n{}\n", "harness's own"},
		{"c\n" + tools + listed + "-- 2.mcp --\n{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"}\n-- 2.mcp.response --\n{}\n", "already used"},
		{"c\n" + tools + call + upReq + resp, "has no 1.upstream.response"},
		{"c\n" + tools + call + upResp + resp, "has no 1.upstream.request"},
		{"c\n" + tools + call + upReq + "-- 1.upstream.response --\nrefused\n" + resp, "refused upstream receives no request"},
		{"c\n" + tools + call + upReq + "-- 1.upstream.response --\nhang\nContent-Type: x\n" + resp, "takes no headers"},
		{"c\n" + tools + call + upReq + "-- 1.upstream.response --\nOK\n" + resp, "want a status code"},
		{"c\n" + tools + call + "-- 1.upstream.request --\n/tools/call\n\n{}\n" + upResp + resp, "want METHOD /path"},
		{"c\n" + tools + call + "-- 1.upstream.request --\nPOST /tools/call\nOXP-Version 1.0\n\n{}\n" + upResp + resp, "bad header line"},
		{"c\n" + tools + call + "-- 1.upstream.request --\nPOST /tools/call\n\n{\"call_id\": \"<uid>\"}\n-- 1.upstream.response --\n200\n\n{}\n" + resp, "unknown placeholder"},
		{"c\n" + tools + call + "-- 1.upstream.request --\nPOST /tools/call\n\n{\"call_id\": \"<uuid:c>\"}\n-- 1.upstream.response --\n200\n\n{}\n" + resp, "no later section uses {{c}}"},
		{"c\n" + tools + call + "-- 1.upstream.request --\nPOST /tools/call\n\n{}\n-- 1.upstream.response --\n200\n\n{\"call_id\": \"{{c}}\"}\n" + resp, "not captured"},
		{"c\n" + tools + call + "-- 1.upstream.request --\nPOST /tools/call\n\n{not json}\n" + upResp + resp, "body is not JSON"},
		{"c\n-- options.json --\n{\"dialectt\": \"auto\"}\n" + tools + listed, "unknown field"},
		{"c\n" + tools + "-- options.json --\n{}\n" + listed, "must be the first section"},
		{"c\n-- options.json --\n{\"dialect\": \"oxp-2\"}\n" + tools + listed, "unknown OTC dialect"},
		{"c\n-- options.json --\n{\"call_timeout\": \"soon\"}\n" + tools + listed, "positive Go duration"},
		{"c\n-- options.json --\n{\"api_key\": \"k\"}\n" + tools + listed, "too short"},
		{"c\n-- options.json --\n{\"known_deviation\": {\"what\": \"x\"}}\n" + tools + listed, "known_deviation"},
		{"c\n-- options.json --\n{\"no_initialize\": true, \"capabilities\": {}}\n" + tools + listed, "no_initialize"},
		{"c\n" + tools + "-- startup.error --\nclash\n" + listed, "startup.error and steps"},
		{"c\n" + "-- tools.upstream.request --\nPOST /tools\n" + tools + listed, "want GET /tools"},
		{"c\n" + "-- tools.upstream.response --\nhang\n" + listed, "for calls only"},
	}
	for _, b := range bad {
		_, err := parseScenario([]byte(b.vector), false)
		if err == nil || !strings.Contains(err.Error(), b.why) {
			t.Errorf("%q: error %v, want one saying %q", b.vector, err, b.why)
		}
	}
}

// TestMCPFrontConformanceDetects shows that the harness fails a scenario
// for each kind of difference it is there to find.
func TestMCPFrontConformanceDetects(t *testing.T) {
	defer func(w time.Duration) { wait = w }(wait)
	wait = time.Second
	const head = "c\n-- tools.upstream.response --\n200\nContent-Type: application/json\n\n" +
		`{"$schema": "urn:oxp:1.0", "items": [{"id": "Calculator.Add@1.0.0", "name": "Calculator_Add", "description": "d", "version": "1.0.0", "input_schema": {"type": "object"}, "output_schema": {}}]}` + "\n"
	call := func(args string) string {
		return "-- 1.mcp --\n" + `{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "Calculator_Add", "arguments": ` + args + "}}\n"
	}
	upReq := func(body string) string { return "-- 1.upstream.request --\nPOST /tools/call\n\n" + body + "\n" }
	const goodReq = `{"$schema": "urn:oxp:1.0", "request": {"tool_id": "Calculator.Add@1.0.0", "call_id": "<uuid>", "input": {"a": 1}}}`
	upResp := func(value string) string {
		return "-- 1.upstream.response --\n200\nContent-Type: application/json\n\n" +
			`{"$schema": "urn:oxp:1.0", "result": {"call_id": "c-1", "duration": 1, "success": true, "value": ` + value + "}}\n"
	}
	resp := func(frame string) string { return "-- 1.mcp.response --\n" + frame + "\n" }
	const goodResp = `{"jsonrpc": "2.0", "id": 1, "result": {"_meta": {"mcpotc/otc-call": {"call_id": "c-1", "duration": 1, "value": 1}}, "content": [{"type": "text", "text": "1"}]}}`
	cases := []struct{ name, vector, want string }{
		{"conforming", head + call(`{"a": 1}`) + upReq(goodReq) + upResp("1") + resp(goodResp), ""},
		{"wrong text", head + call(`{"a": 1}`) + upReq(goodReq) + upResp("2") + resp(goodResp), `.result.content[0].text: "2", want "1"`},
		{"number literal", head + call(`{"a": 1}`) + upReq(goodReq) + upResp(`{"n": 1.0}`) +
			resp(`{"jsonrpc": "2.0", "id": 1, "result": {"_meta": "<any>", "content": "<any>", "structuredContent": {"n": 1}}}`), ".result.structuredContent.n: 1.0, want 1"},
		{"unexpected member", head + call(`{"a": 1}`) + upReq(goodReq) + upResp(`{"x": 1}`) + resp(goodResp), ".result.structuredContent: unexpected member"},
		{"wrong tool id", head + call(`{"a": 1}`) + upReq(strings.Replace(goodReq, "@1.0.0", "", 1)) + upResp("1") + resp(goodResp), `.request.tool_id: "Calculator.Add@1.0.0", want "Calculator.Add"`},
		{"absent header present", head + call(`{"a": 1}`) + "-- 1.upstream.request --\nPOST /tools/call\nContent-Type:\n\n" + goodReq + "\n" + upResp("1") + resp(goodResp), "header Content-Type"},
		{"input value", head + call(`{"a": 1}`) + upReq(strings.Replace(goodReq, `"a": 1`, `"a": 1.0`, 1)) + upResp("1") + resp(goodResp), `.request.input.a: 1, want 1.0`},
		{"unused upstream expectation", head + strings.Replace(call(`{"a": 1}`), "Calculator_Add", "Nope", 1) + upReq(goodReq) + upResp("1") + resp(`"<any>"`), "received no call"},
		{"unexpected call", head + call(`{"a": 1}`) + resp(`"<any>"`), "a call no step expects"},
		{"never aborted", head + call(`{"a": 1}`) + upReq(goodReq) + "-- 1.upstream.response --\nhang\n" + resp(`"<any>"`), "did not abort"},
		{"response that must not come", head + call(`{"a": 1}`) + upReq(goodReq) + upResp("1") + resp("none"), "none expected"},
		{"credential in a frame", strings.Replace(head, "c\n", "c\n-- options.json --\n{\"secrets\": {\"S\": \"s3cr3t-value\"}}\n", 1) + call(`{"a": 1}`) + upReq(goodReq) + upResp(`"s3cr3t-value"`) + resp(`"<any>"`), "credential appears in a frame"},
		{"developer message in content", head + call(`{"a": 1}`) + upReq(goodReq) + upResp(`{"developer_message": "internal"}`) + resp(`"<any>"`), "reaches a model-facing part"},
		{"log", head + call(`{"a": 1}`) + upReq(goodReq) + upResp("1") + resp(goodResp) + "-- log.contains --\nno such text\n", "is not in the log"},
		{"startup", head + "-- startup.error --\nclash\n", "NewMCPFront succeeded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc, err := parseScenario([]byte(c.vector), false)
			if err != nil {
				t.Fatal(err)
			}
			problems := strings.Join(runScenario(t, sc), "\n")
			switch {
			case c.want == "" && problems != "":
				t.Errorf("a conforming scenario fails:\n%s", problems)
			case c.want != "" && !strings.Contains(problems, c.want):
				t.Errorf("problems %q, want one saying %q", problems, c.want)
			}
		})
	}
}
