package otc

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultMaxResponseBytes bounds a response body when
// ClientOptions.MaxResponseBytes is zero.
const DefaultMaxResponseBytes = 16 << 20

// Error classes of a *StatusError, for errors.Is:
//
//	status                    class
//	401, 403                  ErrUnauthorized
//	422                       ErrValidation
//	any other 4xx (400, 404)  ErrBadRequest
//	5xx                       ErrServerFailure
//	anything else (3xx)       none
var (
	ErrBadRequest    = errors.New("otc: request rejected")
	ErrUnauthorized  = errors.New("otc: unauthorized")
	ErrValidation    = errors.New("otc: input validation failed")
	ErrServerFailure = errors.New("otc: server failure")
)

// ErrMalformedResponse is wrapped by the error of a successful (2xx) answer
// whose body cannot be read as the expected shape. It is not a *StatusError.
var ErrMalformedResponse = errors.New("otc: malformed response body")

// ErrResponseTooLarge is wrapped by the error of a successful (2xx) answer
// whose body exceeds ClientOptions.MaxResponseBytes: bodies are never
// silently truncated.
var ErrResponseTooLarge = errors.New("otc: response body too large")

// StatusError is a non-2xx answer. Its fields are decoded tolerantly from a
// ServerErrorResponse or ValidationErrorResponse (with or without $schema)
// or a FastAPI {"detail": …} body; a body that is none of these leaves
// them empty.
type StatusError struct {
	StatusCode int
	// Message may be shown to a user or a model.
	Message string
	// DeveloperMessage is for logs only; Error does not include it.
	DeveloperMessage string
	// ParameterErrors maps input parameters to what is wrong with them. A
	// FastAPI detail list is keyed by the last element of each loc.
	ParameterErrors     map[string]string
	MissingRequirements *MissingRequirements
	// Body is the raw body, at most 64 KiB of it (error bodies are only
	// read that far).
	Body []byte
	// Ext holds the body's "x-" members (carriers).
	Ext Extensions
}

// Error is the status and Message: never the body, the developer message
// or anything the client sent.
func (e *StatusError) Error() string {
	s := strings.TrimSpace(fmt.Sprintf("otc: server answered %d %s", e.StatusCode, http.StatusText(e.StatusCode)))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is reports whether target is the error class of e.StatusCode (see ErrBadRequest).
func (e *StatusError) Is(target error) bool {
	class := e.class()
	return class != nil && target == class
}

func (e *StatusError) class() error {
	switch c := e.StatusCode; {
	case c == http.StatusUnauthorized, c == http.StatusForbidden:
		return ErrUnauthorized
	case c == http.StatusUnprocessableEntity:
		return ErrValidation
	case c >= 400 && c < 500:
		return ErrBadRequest
	case c >= 500 && c < 600:
		return ErrServerFailure
	default:
		// 1xx and 3xx (a redirect that was not followed): no class.
		return nil
	}
}

// ClientOptions configure a Client. A nil *ClientOptions is the zero value.
type ClientOptions struct {
	// Dialect is the dialect calls are written in. Zero (or DialectAuto):
	// learn it from the server's GET /tools answer (see Client.Call).
	Dialect Dialect
	// HTTPClient sends the requests. Nil: a client created for this Client
	// with pooled connections (64 idle per host), dial, TLS handshake and
	// response header timeouts, and no redirects to another origin. There
	// is no overall timeout: bound each request with its context.
	HTTPClient *http.Client
	// APIKey, when set, is sent in the OXP-API-Key header. Empty: not sent.
	APIKey string
	// BearerToken, when set, is sent as "Authorization: Bearer …". Empty: not sent.
	BearerToken string
	// BearerTokenFunc, when set, gives the bearer token of each request
	// (for example a short-lived JWT from NewJWTSource); it wins over
	// BearerToken. Nil: BearerToken is used.
	BearerTokenFunc func(ctx context.Context) (string, error)
	// Header holds extra headers sent with every request. Headers the
	// client sets itself (Accept, Content-Type, OXP-Version, and
	// OXP-API-Key / Authorization when APIKey / BearerToken are set) take
	// precedence. Nil: none.
	Header http.Header
	// MaxResponseBytes bounds a successful response body; a bigger one is
	// an ErrResponseTooLarge error. Zero or negative: DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

// Client calls an OTC/OXP server. It is safe for concurrent use.
type Client struct {
	http       *http.Client
	header     http.Header // sent with every request
	maxBody    int64
	configured Dialect
	dialect    atomic.Value  // Dialect: configured, or learned in auto mode
	learning   chan struct{} // a one-slot lock that waits with a context
	bearer     func(context.Context) (string, error)

	healthURL, toolsURL, callURL string
}

// The endpoints, relative to the base URL.
const (
	healthPath = "health"
	toolsPath  = "tools"
	callPath   = "tools/call"
)

// NewClient returns a client for the server at baseURL (http or https, with
// a host). Endpoint paths are joined onto its path: base http://h/prefix
// calls http://h/prefix/tools. A query in baseURL is kept on every request;
// credentials in it are refused (use APIKey or BearerToken), so that no
// error ever carries them.
func NewClient(baseURL string, opts *ClientOptions) (*Client, error) {
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	dialect, err := ParseDialect(string(o.Dialect))
	if err != nil {
		return nil, err
	}
	base, err := url.Parse(baseURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the url.Error quotes the URL, credentials and all
		}
		return nil, fmt.Errorf("otc: base URL is not a valid URL: %w", err)
	}
	switch {
	case base.User != nil:
		return nil, fmt.Errorf("otc: base URL %s carries credentials: use APIKey or BearerToken", base.Redacted())
	case base.Scheme != "http" && base.Scheme != "https":
		return nil, fmt.Errorf("otc: base URL %s: scheme must be http or https", base.Redacted())
	case base.Host == "":
		return nil, fmt.Errorf("otc: base URL %s has no host", base.Redacted())
	}
	base.Fragment, base.RawFragment = "", ""

	c := &Client{
		http:       o.HTTPClient,
		header:     http.Header{},
		maxBody:    o.MaxResponseBytes,
		configured: dialect,
		learning:   make(chan struct{}, 1),
		healthURL:  base.JoinPath(healthPath).String(),
		toolsURL:   base.JoinPath(toolsPath).String(),
		callURL:    base.JoinPath(callPath).String(),
	}
	c.dialect.Store(dialect)
	if c.http == nil {
		c.http = newHTTPClient()
	}
	if c.maxBody <= 0 {
		c.maxBody = DefaultMaxResponseBytes
	}
	for k, vs := range o.Header {
		for _, v := range vs {
			c.header.Add(k, v) // canonicalizes k
		}
	}
	c.header.Set("Accept", contentTypeJSON)
	if o.APIKey != "" {
		c.header.Set(APIKeyHeader, o.APIKey)
	}
	if o.BearerToken != "" {
		c.header.Set("Authorization", "Bearer "+o.BearerToken)
	}
	c.bearer = o.BearerTokenFunc
	return c, nil
}

// maxIdleConns bounds the connections the default HTTP client keeps open
// between calls (each an idle socket and its buffers, closed after
// IdleConnTimeout). A pool smaller than the calls in flight closes the
// surplus when a burst ends and dials them again at the next one; this one
// keeps a burst of a thousand calls' connections for the next burst.
const maxIdleConns = 1024

// newHTTPClient is the default HTTP client: pooled connections, timeouts on
// each phase up to the response header (generous, as a tool runs before its
// server answers; callers bound calls with their context), and redirects
// followed only within the same origin, so that the API key header is never
// sent to another host.
func newHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          maxIdleConns,
			MaxIdleConnsPerHost:   maxIdleConns,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			ResponseHeaderTimeout: 5 * time.Minute,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			if from := via[0].URL; req.URL.Scheme != from.Scheme || req.URL.Host != from.Host {
				return errors.New("refusing a redirect to another origin")
			}
			return nil
		},
	}
}

// Dialect is the configured dialect or, in auto mode, the learned one
// (DialectAuto until the first successful ListTools or Call).
func (c *Client) Dialect() Dialect { return c.dialect.Load().(Dialect) }

// BaseURL is the server's base URL: the endpoints less their path.
func (c *Client) BaseURL() string { return strings.TrimSuffix(c.toolsURL, "/tools") }

// Health checks GET /health: nil on a 2xx answer, else a *StatusError
// (a 503 is ErrServerFailure) or a transport error.
func (c *Client) Health(ctx context.Context) error {
	_, _, err := c.do(ctx, http.MethodGet, c.healthURL, nil, c.configured == DialectOXPFlat, nil)
	return err
}

// ListTools fetches GET /tools and reads every list shape: {"tools": […]},
// {"items": […]}, both, with or without $schema, or a bare array. In auto
// mode it also learns the server's dialect from the answer (see
// Client.Call) and never sends OXP-Version, so that the answer is the
// server's own choice; in oxp-flat mode it sends OXP-Version: 1.0.
//
// Tool definitions are read as given, with two repairs: the RFC draft's
// "input": {"parameters": S} becomes InputSchema {"parameters": S} and its
// "output": {"value": S} becomes OutputSchema S; a missing version is taken
// from the id's @x.y.z (@x means x.0.0).
func (c *Client) ListTools(ctx context.Context) ([]ToolDefinition, error) {
	data, header, err := c.do(ctx, http.MethodGet, c.toolsURL, nil, c.configured == DialectOXPFlat, nil)
	if err != nil {
		return nil, err
	}
	tools, learned, err := decodeToolList(data, header)
	if err != nil {
		return nil, err
	}
	if c.configured == DialectAuto {
		c.dialect.Store(learned)
	}
	return tools, nil
}

// CatalogDigest identifies a tool listing as a server sent it: a SHA-256
// of its body and of the header that names its dialect.
type CatalogDigest [32]byte

// ListToolsChanged is ListTools for a caller that polls a catalog: when
// the listing hashes to prev (the digest it returned last time), it
// reports unchanged without decoding the listing again, and tools is nil.
// A failed listing returns the error and a zero digest.
func (c *Client) ListToolsChanged(ctx context.Context, prev CatalogDigest) (tools []ToolDefinition, digest CatalogDigest, unchanged bool, err error) {
	data, header, err := c.do(ctx, http.MethodGet, c.toolsURL, nil, c.configured == DialectOXPFlat, nil)
	if err != nil {
		return nil, CatalogDigest{}, false, err
	}
	h := sha256.New()
	h.Write([]byte(header.Get(VersionHeader)))
	h.Write([]byte{0})
	h.Write(data)
	h.Sum(digest[:0])
	if digest == prev {
		return nil, digest, true, nil
	}
	tools, learned, err := decodeToolList(data, header)
	if err != nil {
		return nil, CatalogDigest{}, false, err
	}
	if c.configured == DialectAuto {
		c.dialect.Store(learned)
	}
	return tools, digest, false, nil
}

// Call sends POST /tools/call and returns the response of a call that
// reached the tool (success or not). A call refused before the tool ran is a
// *StatusError: ErrBadRequest (unknown tool or version, missing
// requirements), ErrValidation (input rejected), ErrUnauthorized.
//
// The request is written in the dialect: otc-1.0 as {"$schema":"otc://1.0",
// "request": …}; oxp-1.0 and loose as {"$schema":"urn:oxp:1.0","request": …};
// oxp-flat as the bare request with OXP-Version: 1.0. An empty or null
// Input is sent as {}; req itself is not modified, and a missing CallID is
// not generated (see NewCallID).
//
// In auto mode, a Call before any ListTools lists the tools first to learn
// the dialect; concurrent calls wait for that one listing rather than list
// again. If the listing fails (and ctx is not done), calls fall back to
// oxp-1.0, which Dialect then reports, until a later ListTools learns the
// dialect.
func (c *Client) Call(ctx context.Context, req *CallToolRequest) (*CallToolResponse, error) {
	if req == nil || req.ToolID == "" {
		return nil, errors.New("otc: Call needs a request with a tool id")
	}
	d, err := c.callDialect(ctx)
	if err != nil {
		return nil, err
	}
	r := *req
	if len(r.Input) == 0 || isJSONNull(r.Input) {
		r.Input = json.RawMessage("{}")
	}
	var body any = &r
	if d.envelope() {
		body = callEnvelope{Schema: d.schemaURI(), Request: &r}
	}
	data, err := marshal(body)
	if err != nil {
		return nil, fmt.Errorf("otc: encoding the call of %s: %w", r.ToolID, err)
	}
	// A trace_id that is a W3C traceparent also goes as the HTTP header,
	// for a server (or a proxy) that reads trace context there.
	var extra http.Header
	if IsTraceparent(r.TraceID) {
		extra = http.Header{"Traceparent": {r.TraceID}}
	}
	answer, _, err := c.do(ctx, http.MethodPost, c.callURL, data, d == DialectOXPFlat, extra)
	if err != nil {
		return nil, err
	}
	return decodeCallResponse(answer)
}

type callEnvelope struct {
	Schema  string           `json:"$schema"`
	Request *CallToolRequest `json:"request"`
}

// callDialect is the dialect to write a call in, learning it first in auto
// mode (see Call).
func (c *Client) callDialect(ctx context.Context) (Dialect, error) {
	if d := c.Dialect(); d != DialectAuto {
		return d, nil
	}
	select {
	case c.learning <- struct{}{}:
		defer func() { <-c.learning }()
	case <-ctx.Done():
		return "", fmt.Errorf("otc: %w", ctx.Err())
	}
	if d := c.Dialect(); d != DialectAuto {
		return d, nil // learned while this call waited
	}
	if _, err := c.ListTools(ctx); err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		c.dialect.CompareAndSwap(DialectAuto, DialectOXP10)
	}
	return c.Dialect(), nil
}

// do sends one request and returns the body and headers of a 2xx answer.
// Any other status is a *StatusError.
func (c *Client) do(ctx context.Context, method, target string, body []byte, flat bool, extra http.Header) ([]byte, http.Header, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, nil, fmt.Errorf("otc: %w", err)
	}
	req.Header = c.header.Clone()
	for k, v := range extra {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", contentTypeJSON)
	}
	if flat {
		req.Header.Set(VersionHeader, HeaderVersion10)
	}
	if c.bearer != nil {
		token, err := c.bearer(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("otc: bearer token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("otc: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The status is the answer; a body cut short or unreadable only
		// leaves the decoded fields empty.
		data, _ := readAtMost(resp.Body, min(c.maxBody, maxErrorBodyBytes))
		return nil, nil, decodeStatusError(resp.StatusCode, data)
	}
	data, err := readAtMostSized(resp.Body, c.maxBody, resp.ContentLength)
	switch {
	case errors.Is(err, ErrResponseTooLarge):
		return nil, nil, fmt.Errorf("%w from %s %s: more than %d bytes", err, method, req.URL.Path, c.maxBody)
	case err != nil:
		return nil, nil, fmt.Errorf("otc: reading the answer of %s %s: %w", method, req.URL.Path, err)
	}
	return data, resp.Header, nil
}

// readAtMost reads r to its end, failing with ErrResponseTooLarge (and
// returning the first limit bytes) when it holds more than limit bytes.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	return readAtMostSized(r, limit, -1)
}

// readAtMostSized is readAtMost for a body of announced size (negative:
// unknown; a Content-Length): read into one buffer of that size instead of
// one grown from 512 bytes, which copies a large body a dozen times.
func readAtMostSized(r io.Reader, limit, size int64) ([]byte, error) {
	n := int64(512)
	if size >= 0 && size <= limit {
		n = size + 1 // room for the read that sees the end
	}
	data, err := readAll(io.LimitReader(r, limit+1), int(n))
	if err == nil && int64(len(data)) > limit {
		return data[:limit], ErrResponseTooLarge
	}
	return data, err
}

// readAll is io.ReadAll starting with a buffer of capacity n.
func readAll(r io.Reader, n int) ([]byte, error) {
	b := make([]byte, 0, n)
	for {
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // let append grow it
		}
	}
}

func malformed(endpoint string, data []byte, err error) error {
	return fmt.Errorf("%w from %s: %s", ErrMalformedResponse, endpoint, describeJSONError(data, err))
}

// wireTool is a ToolDefinition as any dialect lists it.
type wireTool struct {
	ToolDefinition
	// The RFC draft's names for the schemas.
	Input *struct {
		Parameters json.RawMessage `json:"parameters"`
	} `json:"input"`
	Output *struct {
		Value json.RawMessage `json:"value"`
	} `json:"output"`
}

// decodeToolList reads a GET /tools answer and tells the dialect it shows:
//
//	OXP-Version response header             oxp-flat
//	bare JSON array                          loose
//	$schema otc://1.0 or OpenToolCalling URL otc-1.0
//	$schema urn:oxp:1.0 or OpenExecProtocol  oxp-1.0
//	no known $schema: tools and items        oxp-1.0
//	                  items only             oxp-flat
//	                  tools only             otc-1.0
func decodeToolList(data []byte, header http.Header) ([]ToolDefinition, Dialect, error) {
	const endpoint = "GET /tools"
	list := data
	dialect := DialectLoose
	if trimmed := bytes.TrimSpace(data); len(trimmed) == 0 || trimmed[0] != '[' {
		var body struct {
			Schema string          `json:"$schema"`
			Tools  json.RawMessage `json:"tools"`
			Items  json.RawMessage `json:"items"`
		}
		if err := strictUnmarshal(data, &body); err != nil {
			return nil, "", malformed(endpoint, data, err)
		}
		bySchema, known := dialectOfSchema(body.Schema)
		switch {
		case body.Tools == nil && body.Items == nil:
			return nil, "", fmt.Errorf("%w from %s: neither tools nor items", ErrMalformedResponse, endpoint)
		case known:
			dialect = bySchema
		case body.Tools != nil && body.Items != nil:
			dialect = DialectOXP10
		case body.Items != nil:
			dialect = DialectOXPFlat
		default:
			dialect = DialectOTC10
		}
		list = body.Tools
		if (list == nil || isJSONNull(list)) && body.Items != nil {
			list = body.Items
		}
	}
	if header.Get(VersionHeader) != "" {
		dialect = DialectOXPFlat
	}
	var wire []wireTool
	if err := strictUnmarshal(list, &wire); err != nil {
		return nil, "", malformed(endpoint, list, err)
	}
	tools := make([]ToolDefinition, len(wire))
	for i, w := range wire {
		t := w.ToolDefinition
		if t.InputSchema == nil && w.Input != nil && w.Input.Parameters != nil {
			t.InputSchema = json.RawMessage(`{"parameters":` + string(w.Input.Parameters) + `}`)
		}
		if t.OutputSchema == nil && w.Output != nil {
			t.OutputSchema = w.Output.Value
		}
		if t.Version == "" {
			if id, err := ParseToolID(t.ID); err == nil && id.Version != "" {
				t.Version = id.Version
				if !strings.Contains(t.Version, ".") {
					t.Version += ".0.0"
				}
			}
		}
		tools[i] = t
	}
	return tools, dialect, nil
}

// callOutcome is what a call produced: a value or a tool error.
type callOutcome struct {
	Value json.RawMessage `json:"value"`
	Error *ToolError      `json:"error"`
}

// wireCallResponse is a 200 call answer in any dialect: an envelope
// ("result", or the RFC draft's "response") or the CallToolResponse itself,
// with the RFC draft's execution_id and output.
type wireCallResponse struct {
	callOutcome
	CallID      string          `json:"call_id"`
	ExecutionID string          `json:"execution_id"`
	Duration    float64         `json:"duration"`
	Success     *bool           `json:"success"`
	Output      *callOutcome    `json:"output"`
	Result      json.RawMessage `json:"result"`
	Response    json.RawMessage `json:"response"`
}

// decodeCallResponse reads a 200 call answer. Value keeps its bytes as
// sent (absent: nil; null: "null"). A missing success is inferred from the
// absence of an error.
func decodeCallResponse(data []byte) (*CallToolResponse, error) {
	const endpoint = "POST /tools/call"
	var w wireCallResponse
	if err := strictUnmarshal(data, &w); err != nil {
		return nil, malformed(endpoint, data, err)
	}
	body := data
	if inner := w.Result; inner != nil || w.Response != nil {
		if inner == nil {
			inner = w.Response
		}
		body = inner
		w = wireCallResponse{}
		if err := json.Unmarshal(inner, &w); err != nil {
			return nil, malformed(endpoint, inner, err)
		}
	}
	if o := w.Output; o != nil {
		if w.Value == nil {
			w.Value = o.Value
		}
		w.Error = cmp.Or(w.Error, o.Error)
	}
	if w.Success == nil && w.Value == nil && w.Error == nil {
		return nil, fmt.Errorf("%w from %s: no success, value or error", ErrMalformedResponse, endpoint)
	}
	resp := &CallToolResponse{
		CallID:   cmp.Or(w.CallID, w.ExecutionID),
		Duration: w.Duration,
		Success:  w.Error == nil,
		Value:    w.Value,
		Error:    w.Error,
		Ext:      extensionsOf(body),
	}
	if w.Success != nil {
		resp.Success = *w.Success
	}
	return resp, nil
}

// decodeStatusError reads what it can of a non-2xx body.
func decodeStatusError(status int, body []byte) *StatusError {
	e := &StatusError{StatusCode: status, Body: body}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return e // not a JSON object (an HTML page from a proxy): status and body only
	}
	// Each member on its own, so that one of an unexpected type spoils nothing else.
	member(top, "message", &e.Message)
	member(top, "developer_message", &e.DeveloperMessage)
	member(top, "parameter_errors", &e.ParameterErrors)
	member(top, "missing_requirements", &e.MissingRequirements)
	for k, v := range top {
		if strings.HasPrefix(k, "x-") {
			if e.Ext == nil {
				e.Ext = Extensions{}
			}
			e.Ext[k] = v
		}
	}
	if detail, ok := top["detail"]; ok {
		e.decodeDetail(detail)
	}
	return e
}

// member sets *dst to top[key] when that member is present and decodes as a T.
func member[T any](top map[string]json.RawMessage, key string, dst *T) {
	var v T
	if raw, ok := top[key]; ok && json.Unmarshal(raw, &v) == nil {
		*dst = v
	}
}

// decodeDetail reads FastAPI's {"detail": "…"} or {"detail": [{"loc": […,
// "b"], "msg": "…"}]}, keying each message by the last element of its loc.
func (e *StatusError) decodeDetail(detail json.RawMessage) {
	var text string
	if json.Unmarshal(detail, &text) == nil {
		e.Message = cmp.Or(e.Message, text)
		return
	}
	var items []struct {
		Loc []json.RawMessage `json:"loc"`
		Msg string            `json:"msg"`
	}
	if json.Unmarshal(detail, &items) != nil || len(items) == 0 {
		return
	}
	if e.ParameterErrors == nil {
		e.ParameterErrors = make(map[string]string, len(items))
	}
	for _, it := range items {
		key := "input"
		if n := len(it.Loc); n > 0 {
			last := it.Loc[n-1]
			if json.Unmarshal(last, &key) != nil {
				key = string(bytes.TrimSpace(last)) // an array index
			}
		}
		if _, seen := e.ParameterErrors[key]; !seen {
			e.ParameterErrors[key] = it.Msg
		}
	}
	e.Message = cmp.Or(e.Message, validationMessage(e.ParameterErrors))
}
