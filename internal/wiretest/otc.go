package wiretest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpotc/mcpotc/otc"
)

// The OTC runners' sections are HTTP messages: N.request and N.response.

var methodToken = regexp.MustCompile(`^[A-Z]+$`)

// Request is a request section: "METHOD /path" (or "METHOD {{capture}}"),
// header lines, a body; {{name}} anywhere is a captured value.
type Request struct {
	Method, Target string
	Header         []Header
	Body           string
}

// Response is a response section: a status line (or "none": the client
// gives up and reads no answer), header lines that must be listed with
// Content-Type among them, and a body compared as data when it is JSON.
type Response struct {
	None   bool
	Status int
	Header []Header
	JSON   bool   // Content-Type is JSON: bodies are compared as data
	Body   string // as written; may hold {{captures}}
}

// ParseRequest reads a request section.
func ParseRequest(s string) (*Request, error) {
	first, header, body, err := SplitMessage(s)
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
	return &Request{Method: method, Target: target, Header: header, Body: body}, nil
}

// ParseResponse reads a response section; "none" only when allowNone. A
// JSON body must be JSON once its {{captures}} are filled in.
func ParseResponse(s string, allowNone bool) (*Response, error) {
	if allowNone && strings.TrimSpace(s) == "none" {
		return &Response{None: true}, nil
	}
	first, header, body, err := SplitMessage(s)
	if err != nil {
		return nil, err
	}
	status, err := strconv.Atoi(first)
	if err != nil || status < 100 || status > 599 {
		want := "a status code such as 200"
		if allowNone {
			want += ", or none"
		}
		return nil, fmt.Errorf("status line %q: want %s", first, want)
	}
	rp := &Response{Status: status, Header: header, Body: body}
	ct := ""
	for _, h := range header {
		if strings.EqualFold(h.Name, "Content-Type") {
			ct = h.Value
		}
	}
	if ct == "" {
		return nil, errors.New("Content-Type is not listed: it says how the bodies are compared")
	}
	rp.JSON = IsJSON(ct)
	if rp.JSON && strings.TrimSpace(body) != "" {
		if _, err := rp.Want(nil); err != nil {
			return nil, fmt.Errorf("body is not valid JSON: %w", err)
		}
	}
	return rp, nil
}

// Want is the expected JSON body with captures filled in (nil captures:
// each {{name}} as 0, to read its shape).
func (rp *Response) Want(captures map[string]string) (any, error) {
	var w any
	err := DecodeStrict([]byte(Expand(rp.Body, captures)), &w)
	return w, err
}

// Expand fills in the {{name}} of s from captures (nil: each as 0).
func Expand(s string, captures map[string]string) string {
	if captures == nil {
		return Reference.ReplaceAllString(s, "0")
	}
	return Reference.ReplaceAllStringFunc(s, func(m string) string { return captures[m[2:len(m)-2]] })
}

// References lists the captures a request uses.
func (rq *Request) References() []string {
	texts := []string{rq.Target, rq.Body}
	for _, h := range rq.Header {
		texts = append(texts, h.Value)
	}
	var names []string
	for _, s := range texts {
		for _, m := range Reference.FindAllStringSubmatch(s, -1) {
			names = append(names, m[1])
		}
	}
	return names
}

// CheckDialect reports how a request to /tools, /tools/call or /call is
// not what an OTC client of dialect sends (a vector for one dialect must
// speak it).
func CheckDialect(dialect string, rq *Request) error {
	if rq.Target != "/tools" && rq.Target != "/tools/call" && rq.Target != "/call" {
		return nil
	}
	hasVersion := slices.ContainsFunc(rq.Header, func(h Header) bool { return strings.EqualFold(h.Name, otc.VersionHeader) })
	var body map[string]json.RawMessage
	if strings.TrimSpace(rq.Body) != "" {
		if err := DecodeStrict([]byte(rq.Body), &body); err != nil {
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
	case rq.Method == http.MethodPost && !envelope:
		return errors.New(`the body has no "request" envelope`)
	// A list request may omit its body, but not in otc-1.0, whose only
	// version marker it is.
	case schema != want && (body != nil || dialect == "otc-1.0"):
		return fmt.Errorf("$schema is %q, want %q", schema, want)
	}
	return nil
}

// Send sends rq to the server at base, captures filled in; abort > 0 gives
// up after that long.
func Send(client *http.Client, base *url.URL, rq *Request, captures map[string]string, abort time.Duration) (int, http.Header, []byte, error) {
	target := Expand(rq.Target, captures)
	u, err := base.Parse(target)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("target %q: %w", target, err)
	}
	if u.Host != base.Host {
		return 0, nil, nil, fmt.Errorf("target %q is not on the test server %s", target, base.Host)
	}
	ctx := context.Background()
	if abort > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, abort)
		defer cancel()
	}
	var body io.Reader
	if rq.Body != "" {
		body = strings.NewReader(Expand(rq.Body, captures))
	}
	req, err := http.NewRequestWithContext(ctx, rq.Method, u.String(), body)
	if err != nil {
		return 0, nil, nil, err
	}
	for _, h := range rq.Header {
		req.Header.Add(h.Name, Expand(h.Value, captures))
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data, err
}

// Compare returns how an answer differs from want: its status, each listed
// header (listed empty: absent), and its body (as data when JSON).
func (m Matcher) Compare(want *Response, status int, header http.Header, body []byte, captures map[string]string) []string {
	var problems []string
	if status != want.Status {
		problems = append(problems, fmt.Sprintf("status %d, want %d", status, want.Status))
	}
	problems = append(problems, CompareHeaders(want.Header, header)...)
	if captures == nil {
		captures = map[string]string{}
	}
	expected := Expand(want.Body, captures)
	switch {
	case strings.TrimSpace(expected) == "":
		if len(bytes.TrimSpace(body)) != 0 {
			problems = append(problems, fmt.Sprintf("body %q, want none", body))
		}
	case !want.JSON:
		if got := strings.TrimRight(string(body), "\n"); got != expected {
			problems = append(problems, fmt.Sprintf("body %q, want %q", got, expected))
		}
	default:
		w, err := want.Want(captures)
		if err != nil {
			return append(problems, fmt.Sprintf("the expected body with captures is not JSON: %v", err))
		}
		var got any
		if err := DecodeStrict(body, &got); err != nil {
			return append(problems, fmt.Sprintf("body is not JSON (%v): %q", err, body))
		}
		problems = append(problems, m.Match("", w, got, captures)...)
	}
	return problems
}

// CompareHeaders returns how the headers got differ from want, one line
// each: a listed header must have the listed value (its values joined by
// ", "), and one listed with no value ("Name:") must be absent.
func CompareHeaders(want []Header, got http.Header) []string {
	var problems []string
	for _, h := range want {
		v := strings.Join(got.Values(h.Name), ", ")
		if v != h.Value {
			if h.Value == "" {
				problems = append(problems, fmt.Sprintf("header %s: %q, want it absent", h.Name, v))
			} else {
				problems = append(problems, fmt.Sprintf("header %s: %q, want %q", h.Name, v, h.Value))
			}
		}
	}
	return problems
}

// OTCCall is the body and headers of a POST /tools/call carrying req (the
// dialect-free CallToolRequest) in the dialect whose envelope $schema is
// schema: {"$schema": schema, "request": req}, or for "" (oxp-flat) req
// itself with the OXP-Version header.
func OTCCall(schema string, req map[string]any) ([]byte, map[string]string, error) {
	hdr := map[string]string{"Content-Type": "application/json"}
	var v any = req
	if schema == "" {
		hdr["OXP-Version"] = "1.0" // spelled out: a wire test does not take the wire from the code under test
	} else {
		v = map[string]any{"$schema": schema, "request": req}
	}
	body, err := json.Marshal(v)
	return body, hdr, err
}

// OTCAnswer is the whole body an OTC server answers with status in the
// dialect whose envelope $schema is schema, from the dialect-free one
// (inner: the CallToolResponse for 200, the error body otherwise): inner
// itself for "" (oxp-flat), {"$schema", "result": inner} for 200, else
// inner with its "$schema" member. inner is not modified.
func OTCAnswer(schema string, status int, inner map[string]any) map[string]any {
	switch {
	case schema == "":
		return inner
	case status == http.StatusOK:
		return map[string]any{"$schema": schema, "result": inner}
	default:
		out := maps.Clone(inner)
		out["$schema"] = schema
		return out
	}
}

// FormatResponse writes a response section from an answer, for -update:
// the listed headers with their values now (empty when absent), and the
// body in the vector's form (Writer), keeping the placeholders of want
// that still match.
func FormatResponse(want *Response, status int, header http.Header, body []byte) ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%d\n", status)
	jsonBody := false
	for _, h := range want.Header {
		v := strings.Join(header.Values(h.Name), ", ")
		if strings.EqualFold(h.Name, "Content-Type") {
			jsonBody = IsJSON(v)
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
	w, _ := want.Want(nil)
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	if err := (Writer{}).WriteOrdered(&buf, dec, w, ""); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}
