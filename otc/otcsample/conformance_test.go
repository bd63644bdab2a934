package otcsample_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/mcpotc/mcpotc/internal/wiretest"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/otcsample"
)

var update = flag.Bool("update", false, "rewrite the response sections of the conformance vectors from the server's answers")

const vectorDir = "../../testdata/conformance/otc"

// clock is the fixed instant of every conformance server.
var clock = time.Date(2025, 3, 17, 12, 0, 0, 0, time.UTC)

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
// The server is otcsample.New(clock).Handler(opts) with a fixed clock, also set
// as opts.Now: timestamps are deterministic and JWTs in the vectors are
// checked against that instant.
//
// go test ./otc/otcsample -run Conformance -update rewrites the response
// sections from what the server answered, keeping the listed headers and,
// where they still match, the placeholders.
func TestConformance(t *testing.T) {
	wiretest.RunVectors(t, vectorDir, func(t *testing.T, path string) {
		sc := wiretest.MustLoadVector(t, path, parseScenario)
		sc.path = path
		runScenario(t, sc)
	})
}

// scenario is one loaded vector file.
type scenario struct {
	path      string
	name      string // file name without dialect and .txtar
	dialect   string // "" or one of wiretest.Dialects
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

type request = wiretest.Request

type response = wiretest.Response

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
	sectionName = regexp.MustCompile(`^([1-9][0-9]*)\.(request|response)$`)
)

// parseScenario loads one vector strictly.
func parseScenario(file string, data []byte) (*scenario, error) {
	v, err := wiretest.ParseVector(file, data, "spec rule")
	if err != nil {
		return nil, err
	}
	sc := &scenario{archive: v.Archive, name: v.Name, dialect: v.Dialect}
	requests := map[int]int{} // exchange number → file index
	responses := map[int]int{}
	for i, f := range sc.archive.Files {
		if f.Name == "options.json" {
			var vo vectorOptions
			if err := wiretest.DecodeOptions(i, f.Data, &vo); err != nil {
				return nil, err
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
		rq, err := wiretest.ParseRequest(string(sc.archive.Files[qi].Data))
		if err != nil {
			return nil, fmt.Errorf("%d.request: %w", n, err)
		}
		for _, name := range rq.References() {
			if _, ok := captured[name]; !ok {
				return nil, fmt.Errorf("%d.request: {{%s}} is not captured by an earlier response", n, name)
			}
			used[name] = true
		}
		if sc.dialect != "" {
			if err := wiretest.CheckDialect(sc.dialect, rq); err != nil {
				return nil, fmt.Errorf("%d.request is not written in %s: %w", n, sc.dialect, err)
			}
		}
		rp, err := wiretest.ParseResponse(string(sc.archive.Files[pi].Data), false)
		if err != nil {
			return nil, fmt.Errorf("%d.response: %w", n, err)
		}
		var want any
		if rp.JSON {
			want, _ = rp.Want(nil)
		}
		if err := wiretest.RecordCaptures(fmt.Sprintf("%d.response", n), want, captured, n); err != nil {
			return nil, err
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

func runScenario(t *testing.T, sc *scenario) {
	h, err := otcsample.New(func() time.Time { return clock }).Handler(sc.options)
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
		status, header, body, err := wiretest.Send(client, base, ex.request, captures, 0)
		if err != nil {
			t.Fatalf("exchange %d: %v", ex.n, err)
		}
		problems := matcher.Compare(ex.response, status, header, body, captures)
		if *update {
			updated, err := wiretest.FormatResponse(ex.response, status, header, body)
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
			t.Errorf("exchange %d (%s %s): %s", ex.n, ex.request.Method, ex.request.Target, p)
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
