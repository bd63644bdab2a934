package sample_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/mcpotc/mcpotc/internal/wiretest"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/sample"
)

var update = flag.Bool("update", false, "rewrite the response sections of the conformance vectors from the server's answers")

const vectorDir = "../../testdata/conformance/otc"

// clock is the fixed instant of every conformance server.
var clock = time.Date(2025, 3, 17, 12, 0, 0, 0, time.UTC)

// dialects are the file-name suffixes of dialect-specific vectors.
var dialects = []string{"otc-1.0", "oxp-1.0", "oxp-flat"}

// TestConformance runs the wire-level conformance vectors against the sample
// toolkit's OTC server. Each file in testdata/conformance/otc is one
// scenario, in txtar form:
//
//	A comment: what the scenario shows and which spec rule it covers
//	(required, never empty).
//
//	-- options.json --            optional, at most once, first
//	{"api_key": "k"}              otc.Options: api_key, jwt_secret,
//	                              jwt_audiences, max_body_bytes
//	-- 1.request --
//	POST /tools/call              method and target: a path, or {{name}}
//	OXP-Version: 1.0              headers sent, as written
//	Content-Type: application/json
//	                              blank line, then the body, sent as
//	{"tool_id": "…"}              written (one trailing newline dropped)
//	-- 1.response --
//	200                           the status code
//	Content-Type: application/json
//	OXP-Version: 1.0              headers asserted: only those listed;
//	                              "Name:" with no value asserts absence
//	{"call_id": "…"}              the body
//
// Exchanges are numbered 1, 2, … with no gap; each request has exactly one
// response and runs in order against one server per file (state such as an
// authorization challenge carries over). Content-Type must be listed in
// every response: when it names JSON (application/json or …+json) the
// bodies are compared as data (both decoded, numbers compared by value,
// objects by key set, arrays by length and order); otherwise as text, byte
// for byte after dropping trailing newlines. An empty expected body asserts
// an empty answer.
//
// Placeholders, allowed as JSON strings in expected bodies only:
//
//	"<uuid>"     any UUID string (8-4-4-4-12 hex digits)
//	"<number>"   any JSON number (durations)
//	"<url>"      any absolute http(s) URL
//	"<rfc3339>"  any RFC 3339 timestamp string
//	"<string>"   any string
//	"<any>"      any JSON value (the member must still be present)
//
// Any of them may name a capture, "<url:check>": the value it matched is
// recorded as check, and {{check}} in the method line, the headers or the
// body of a later request is replaced by it. A capture must be unique in its
// file and used by a later request. A string that looks like a placeholder
// but names an unknown kind fails the load.
//
// Files are named scenario.txtar, or scenario.DIALECT.txtar where DIALECT is
// otc-1.0, oxp-1.0 or oxp-flat. A dialect file comes with its two siblings
// (every scenario written in one dialect is written in all three), and its
// requests to /tools, /tools/call and /call must be written in that dialect:
// the envelope dialects put their $schema in the body and send no
// OXP-Version; oxp-flat sends OXP-Version and no envelope.
//
// The server is sample.New(clock).Handler(opts) with a fixed clock, also set
// as opts.Now: timestamps are deterministic and JWTs in the vectors are
// checked against that instant.
//
// go test ./otc/sample -run Conformance -update rewrites the response
// sections from what the server answered, keeping the listed headers and,
// where they still match, the placeholders.
func TestConformance(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(vectorDir, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no vectors in %s", vectorDir)
	}
	names := map[string]bool{}
	for _, f := range files {
		names[filepath.Base(f)] = true
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(strings.TrimSuffix(name, ".txtar"), func(t *testing.T) {
			t.Parallel()
			sc, err := loadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if sc.dialect != "" {
				for _, d := range dialects {
					if sib := sc.name + "." + d + ".txtar"; !names[sib] {
						t.Errorf("%s has no sibling %s: a dialect scenario is written in every dialect", name, sib)
					}
				}
			}
			runScenario(t, sc)
		})
	}
}

// scenario is one loaded vector file.
type scenario struct {
	path      string
	name      string // file name without dialect and .txtar
	dialect   string // "" or one of dialects
	archive   *txtar.Archive
	options   *otc.Options
	exchanges []*exchange
}

type exchange struct {
	n        int
	request  *request
	response *response
	respFile int // index of the response section in archive.Files
}

type request struct {
	method, target string
	header         []wiretest.Header
	body           string
}

type response struct {
	status int
	header []wiretest.Header
	json   bool   // compare bodies as data
	body   string // as written
	want   any    // decoded body when json and not empty
}

// vectorOptions is options.json.
type vectorOptions struct {
	APIKey       string   `json:"api_key"`
	JWTSecret    string   `json:"jwt_secret"`
	JWTAudiences []string `json:"jwt_audiences"`
	MaxBodyBytes int64    `json:"max_body_bytes"`
}

// matcher compares what the server sent with a vector.
var matcher = wiretest.Matcher{Root: "(body)"}

var (
	sectionName  = regexp.MustCompile(`^([1-9][0-9]*)\.(request|response)$`)
	scenarioName = regexp.MustCompile(`^[a-z0-9_]+$`)
	methodToken  = regexp.MustCompile(`^[A-Z]+$`)
)

func loadFile(path string) (*scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sc, err := parseScenario(filepath.Base(path), data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sc.path = path
	return sc, nil
}

// parseScenario loads one vector strictly.
func parseScenario(file string, data []byte) (*scenario, error) {
	sc := &scenario{archive: txtar.Parse(data)}
	base, ok := strings.CutSuffix(file, ".txtar")
	if !ok {
		return nil, errors.New("a vector's name ends in .txtar")
	}
	for _, d := range dialects {
		if name, ok := strings.CutSuffix(base, "."+d); ok {
			base, sc.dialect = name, d
			break
		}
	}
	if !scenarioName.MatchString(base) {
		return nil, fmt.Errorf("name %q: want scenario.txtar or scenario.DIALECT.txtar with scenario in [a-z0-9_] and DIALECT one of %s", file, strings.Join(dialects, ", "))
	}
	sc.name = base
	if len(bytes.TrimSpace(sc.archive.Comment)) == 0 {
		return nil, errors.New("no comment header: say what the scenario shows and which spec rule it covers")
	}
	requests := map[int]int{} // exchange number → file index
	responses := map[int]int{}
	for i, f := range sc.archive.Files {
		if f.Name == "options.json" {
			if i != 0 {
				return nil, errors.New("options.json must be the first section")
			}
			var vo vectorOptions
			if err := wiretest.DecodeStrict([]byte(f.Data), &vo); err != nil {
				return nil, fmt.Errorf("options.json: %w", err)
			}
			sc.options = &otc.Options{APIKey: vo.APIKey, JWTAudiences: vo.JWTAudiences, MaxBodyBytes: vo.MaxBodyBytes}
			if vo.JWTSecret != "" {
				sc.options.JWTSecret = []byte(vo.JWTSecret)
			}
			continue
		}
		m := sectionName.FindStringSubmatch(f.Name)
		if m == nil {
			return nil, fmt.Errorf("unknown section %q (want options.json, N.request or N.response)", f.Name)
		}
		n, _ := strconv.Atoi(m[1])
		seen := requests
		if m[2] == "response" {
			seen = responses
		}
		if _, dup := seen[n]; dup {
			return nil, fmt.Errorf("section %q appears twice", f.Name)
		}
		seen[n] = i
	}
	if len(requests) == 0 && len(responses) == 0 {
		return nil, errors.New("no exchanges")
	}
	if sc.options == nil {
		sc.options = &otc.Options{}
	}
	sc.options.Now = func() time.Time { return clock }
	captured := map[string]int{} // capture name → exchange that records it
	used := map[string]bool{}
	for n := 1; n <= len(requests) || n <= len(responses); n++ {
		qi, okq := requests[n]
		pi, okp := responses[n]
		switch {
		case !okq && !okp:
			return nil, fmt.Errorf("exchanges are not numbered 1..%d without a gap: %d is missing", max(len(requests), len(responses)), n)
		case !okp:
			return nil, fmt.Errorf("%d.request has no %d.response", n, n)
		case !okq:
			return nil, fmt.Errorf("%d.response has no %d.request", n, n)
		case pi < qi:
			return nil, fmt.Errorf("%d.response comes before %d.request", n, n)
		}
		rq, err := parseRequest(string(sc.archive.Files[qi].Data))
		if err != nil {
			return nil, fmt.Errorf("%d.request: %w", n, err)
		}
		for _, name := range references(rq) {
			if _, ok := captured[name]; !ok {
				return nil, fmt.Errorf("%d.request: {{%s}} is not captured by an earlier response", n, name)
			}
			used[name] = true
		}
		if sc.dialect != "" {
			if err := checkDialect(sc.dialect, rq); err != nil {
				return nil, fmt.Errorf("%d.request is not written in %s: %w", n, sc.dialect, err)
			}
		}
		rp, err := parseResponse(string(sc.archive.Files[pi].Data))
		if err != nil {
			return nil, fmt.Errorf("%d.response: %w", n, err)
		}
		var perr error
		wiretest.WalkPlaceholders(rp.want, func(text string) {
			m := wiretest.Placeholder.FindStringSubmatch(text)
			switch {
			case perr != nil:
			case m == nil || wiretest.Kinds[m[1]] == nil:
				perr = fmt.Errorf("%d.response: unknown placeholder %s", n, text)
			case m[2] == "":
			case captured[m[2]] != 0:
				perr = fmt.Errorf("%d.response: capture %q is recorded twice", n, m[2])
			default:
				captured[m[2]] = n
			}
		})
		if perr != nil {
			return nil, perr
		}
		sc.exchanges = append(sc.exchanges, &exchange{n: n, request: rq, response: rp, respFile: pi})
	}
	for name, at := range captured {
		if !used[name] {
			return nil, fmt.Errorf("%d.response captures %q but no later request uses {{%s}}", at, name, name)
		}
	}
	return sc, nil
}

func parseRequest(s string) (*request, error) {
	first, header, body, err := wiretest.SplitMessage(s)
	if err != nil {
		return nil, err
	}
	method, target, ok := strings.Cut(first, " ")
	target = strings.TrimSpace(target)
	if !ok || !methodToken.MatchString(method) || target == "" || strings.Contains(target, " ") {
		return nil, fmt.Errorf("first line %q: want METHOD /path (or METHOD {{capture}})", first)
	}
	if !strings.HasPrefix(target, "/") && !strings.HasPrefix(target, "{{") {
		return nil, fmt.Errorf("target %q: want a path or a {{capture}}", target)
	}
	for _, h := range header {
		if h.Value == "" {
			return nil, fmt.Errorf("header %s has no value", h.Name)
		}
	}
	return &request{method: method, target: target, header: header, body: body}, nil
}

func parseResponse(s string) (*response, error) {
	first, header, body, err := wiretest.SplitMessage(s)
	if err != nil {
		return nil, err
	}
	status, err := strconv.Atoi(first)
	if err != nil || status < 100 || status > 599 {
		return nil, fmt.Errorf("status line %q: want a status code such as 200", first)
	}
	rp := &response{status: status, header: header, body: body}
	ct := ""
	for _, h := range header {
		if strings.EqualFold(h.Name, "Content-Type") {
			ct = h.Value
		}
	}
	if ct == "" {
		return nil, errors.New("Content-Type is not listed: it says how the bodies are compared")
	}
	rp.json = wiretest.IsJSON(ct)
	if rp.json && strings.TrimSpace(body) != "" {
		if err := wiretest.DecodeStrict([]byte(body), &rp.want); err != nil {
			return nil, fmt.Errorf("body is not valid JSON: %w", err)
		}
	}
	return rp, nil
}

// references lists the {{name}} references in a request.
func references(rq *request) []string {
	var names []string
	texts := []string{rq.target, rq.body}
	for _, h := range rq.header {
		texts = append(texts, h.Value)
	}
	for _, s := range texts {
		for _, m := range wiretest.Reference.FindAllStringSubmatch(s, -1) {
			names = append(names, m[1])
		}
	}
	return names
}

// checkDialect makes sure a request to an OTC endpoint is written in dialect.
func checkDialect(dialect string, rq *request) error {
	path := rq.target
	if path != "/tools" && path != "/tools/call" && path != "/call" {
		return nil
	}
	hasVersion := slices.ContainsFunc(rq.header, func(h wiretest.Header) bool { return strings.EqualFold(h.Name, otc.VersionHeader) })
	var body map[string]json.RawMessage
	if strings.TrimSpace(rq.body) != "" {
		if err := wiretest.DecodeStrict([]byte(rq.body), &body); err != nil {
			return fmt.Errorf("body is not a JSON object: %w", err)
		}
	}
	_, envelope := body["request"]
	var schema string
	if raw, ok := body["$schema"]; ok {
		_ = json.Unmarshal(raw, &schema)
	}
	if dialect == "oxp-flat" {
		switch {
		case !hasVersion:
			return errors.New("no OXP-Version header")
		case envelope:
			return errors.New("the body is an envelope")
		}
		return nil
	}
	want := otc.SchemaOTC10
	if dialect == "oxp-1.0" {
		want = otc.SchemaOXP10
	}
	switch {
	case hasVersion:
		return errors.New("an envelope dialect sends no OXP-Version header")
	case rq.method == http.MethodPost && !envelope:
		return errors.New(`the body has no "request" envelope`)
	case schema != want && (body != nil || dialect == "otc-1.0"):
		// A list request may omit its body, but not in otc-1.0, whose only
		// version marker it is.
		return fmt.Errorf("$schema is %q, want %q", schema, want)
	}
	return nil
}

func runScenario(t *testing.T, sc *scenario) {
	h, err := sample.New(func() time.Time { return clock }).Handler(sc.options)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	base, _ := url.Parse(srv.URL)

	captures := map[string]string{}
	changed := false
	for _, ex := range sc.exchanges {
		status, header, body, err := send(client, base, ex.request, captures)
		if err != nil {
			t.Fatalf("exchange %d: %v", ex.n, err)
		}
		problems := compare(ex.response, status, header, body, captures)
		if *update {
			updated, err := formatResponse(ex.response, status, header, body)
			if err != nil {
				t.Fatalf("exchange %d: %v", ex.n, err)
			}
			f := &sc.archive.Files[ex.respFile]
			if !bytes.Equal(f.Data, updated) {
				f.Data, changed = updated, true
			}
			continue
		}
		for _, p := range problems {
			t.Errorf("exchange %d (%s %s): %s", ex.n, ex.request.method, ex.request.target, p)
		}
		if len(problems) > 0 {
			t.Logf("exchange %d: the server answered %d\n%s", ex.n, status, body)
		}
	}
	if changed {
		if err := os.WriteFile(sc.path, txtar.Format(sc.archive), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", sc.path)
	}
}

// send performs one request, {{captures}} substituted.
func send(client *http.Client, base *url.URL, rq *request, captures map[string]string) (int, http.Header, []byte, error) {
	expand := func(s string) string {
		return wiretest.Reference.ReplaceAllStringFunc(s, func(m string) string { return captures[m[2:len(m)-2]] })
	}
	target := expand(rq.target)
	u, err := base.Parse(target)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("target %q: %w", target, err)
	}
	if u.Host != base.Host {
		return 0, nil, nil, fmt.Errorf("target %q is not on the test server %s", target, base.Host)
	}
	var body io.Reader
	if rq.body != "" {
		body = strings.NewReader(expand(rq.body))
	}
	req, err := http.NewRequest(rq.method, u.String(), body)
	if err != nil {
		return 0, nil, nil, err
	}
	for _, h := range rq.header {
		req.Header.Add(h.Name, expand(h.Value))
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data, err
}

// compare checks an answer against the expected response and records
// captures; it returns what differs.
func compare(want *response, status int, header http.Header, body []byte, captures map[string]string) []string {
	var problems []string
	if status != want.status {
		problems = append(problems, fmt.Sprintf("status %d, want %d", status, want.status))
	}
	for _, h := range want.header {
		got := strings.Join(header.Values(h.Name), ", ")
		if got != h.Value {
			if h.Value == "" {
				problems = append(problems, fmt.Sprintf("header %s: %q, want it absent", h.Name, got))
			} else {
				problems = append(problems, fmt.Sprintf("header %s: %q, want %q", h.Name, got, h.Value))
			}
		}
	}
	switch {
	case strings.TrimSpace(want.body) == "":
		if len(bytes.TrimSpace(body)) != 0 {
			problems = append(problems, fmt.Sprintf("body %q, want none", body))
		}
	case !want.json:
		if got := strings.TrimRight(string(body), "\n"); got != want.body {
			problems = append(problems, fmt.Sprintf("body %q, want %q", got, want.body))
		}
	default:
		var got any
		if err := wiretest.DecodeStrict(body, &got); err != nil {
			return append(problems, fmt.Sprintf("body is not JSON (%v): %q", err, body))
		}
		problems = append(problems, matcher.Match("", want.want, got, captures)...)
	}
	return problems
}

// formatResponse writes a response section from an answer, for -update: the
// listed headers with their values now (empty when absent), and the body
// indented in the server's member order, keeping the expected placeholders
// that still match.
func formatResponse(want *response, status int, header http.Header, body []byte) ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%d\n", status)
	jsonBody := false
	for _, h := range want.header {
		v := strings.Join(header.Values(h.Name), ", ")
		if strings.EqualFold(h.Name, "Content-Type") {
			jsonBody = wiretest.IsJSON(v)
		}
		if v == "" {
			fmt.Fprintf(&buf, "%s:\n", h.Name)
		} else {
			fmt.Fprintf(&buf, "%s: %s\n", h.Name, v)
		}
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return buf.Bytes(), nil
	}
	buf.WriteByte('\n')
	if !jsonBody {
		buf.Write(bytes.TrimRight(body, "\n"))
		buf.WriteByte('\n')
		return buf.Bytes(), nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	if err := (wiretest.Writer{}).WriteOrdered(&buf, dec, want.want, ""); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// TestConformanceLoader shows that the loader refuses malformed vectors and
// that placeholders refuse what they do not describe.
func TestConformanceLoader(t *testing.T) {
	const ok = "comment\n-- 1.request --\nGET /health\n-- 1.response --\n200\nContent-Type: application/json\n\n{\"status\": \"ok\"}\n"
	if _, err := parseScenario("health.txtar", []byte(ok)); err != nil {
		t.Fatalf("a good vector is refused: %v", err)
	}
	const resp = "-- 1.response --\n200\nContent-Type: application/json\n"
	bad := []struct{ file, vector, why string }{
		{"x.txtar", "-- 1.request --\nGET /health\n" + resp, "no comment header"},
		{"x.txtar", "c\n-- 1.request --\nGET /health\n-- 1.reply --\n200\n", "unknown section"},
		{"x.txtar", "c\n-- 1.request --\nGET /health\n", "has no 1.response"},
		{"x.txtar", "c\n" + resp, "has no 1.request"},
		{"x.txtar", "c\n-- 2.request --\nGET /health\n-- 2.response --\n200\nContent-Type: application/json\n", "1 is missing"},
		{"x.txtar", "c\n-- 1.request --\nGET /health\n-- 1.request --\nGET /health\n" + resp, "appears twice"},
		{"x.txtar", "c\n" + resp + "-- 1.request --\nGET /health\n", "comes before"},
		{"x.txtar", "c\n-- 1.request --\nGET /health\n" + resp + "\n{\"status\": ok}\n", "not valid JSON"},
		{"x.txtar", "c\n-- 1.request --\nGET /health\n-- 1.response --\n200\n\n{}\n", "Content-Type is not listed"},
		{"x.txtar", "c\n-- 1.request --\nGET /health\n-- 1.response --\nOK\nContent-Type: application/json\n", "status line"},
		{"x.txtar", "c\n-- 1.request --\n/health\n" + resp, "first line"},
		{"x.txtar", "c\n-- 1.request --\nGET /health\nOXP-Version 1.0\n" + resp, "bad header line"},
		{"x.txtar", "c\n-- 1.request --\nGET /health\n" + resp + "\n{\"status\": \"<uid>\"}\n", "unknown placeholder"},
		{"x.txtar", "c\n-- 1.request --\nGET {{check}}\n" + resp, "not captured"},
		{"x.txtar", "c\n-- 1.request --\nGET /health\n" + resp + "\n{\"status\": \"<string:s>\"}\n", "no later request uses"},
		{"x.txtar", "c\n-- options.json --\n{\"apikey\": \"k\"}\n-- 1.request --\nGET /health\n" + resp, "unknown field"},
		{"x.oxp-flat.txtar", "c\n-- 1.request --\nGET /tools\n" + resp, "no OXP-Version header"},
		{"x.otc-1.0.txtar", "c\n-- 1.request --\nPOST /tools/call\n\n{\"$schema\": \"urn:oxp:1.0\", \"request\": {}}\n" + resp, "want \"otc://1.0\""},
		{"Calc.txtar", ok, "want scenario.txtar"},
		{"calc.oxp-2.0.txtar", ok, "want scenario.txtar"},
		{"calc.json", ok, "ends in .txtar"},
	}
	for _, b := range bad {
		_, err := parseScenario(b.file, []byte(b.vector))
		if err == nil || !strings.Contains(err.Error(), b.why) {
			t.Errorf("%s %q: error %v, want one saying %q", b.file, b.vector, err, b.why)
		}
	}

	refuse := map[string][]any{
		"uuid":    {"123e4567-e89b-12d3-a456-42661417400", "x", json.Number("1"), nil},
		"number":  {"15", true, nil},
		"url":     {"/sample/oauth/check", "ftp://h/x", "http://", json.Number("1")},
		"rfc3339": {"2025-03-17", "2025-03-17 12:00:00Z", json.Number("0")},
		"string":  {json.Number("1"), nil, map[string]any{}},
	}
	for kind, values := range refuse {
		for _, v := range values {
			if wiretest.Kinds[kind](v) {
				t.Errorf("<%s> matches %s", kind, wiretest.Show(v))
			}
		}
	}
	accept := map[string]any{
		"uuid":    "123e4567-e89b-12d3-a456-426614174000",
		"number":  json.Number("0.125"),
		"url":     "http://127.0.0.1:8080/sample/oauth/check?challenge=x",
		"rfc3339": "2025-03-17T12:00:00Z",
		"string":  "",
		"any":     nil,
	}
	for kind, v := range accept {
		if !wiretest.Kinds[kind](v) {
			t.Errorf("<%s> does not match %s", kind, wiretest.Show(v))
		}
	}
	if p := matcher.Match("", map[string]any{"n": json.Number("15")}, map[string]any{"n": json.Number("15.0")}, nil); p != nil {
		t.Errorf("15 and 15.0 differ: %v", p)
	}
	if p := matcher.Match("", map[string]any{"n": json.Number("15")}, map[string]any{"n": json.Number("15"), "x": true}, nil); p == nil {
		t.Error("an unexpected member is not reported")
	}
}
