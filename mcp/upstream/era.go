package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Protocol eras (MCP 2026-07-28, "Versioning and Compatibility").
//
// A modern server (2026-07-28) has no initialize handshake and no
// sessions: every request carries its protocol version, the client's
// capabilities and identity in _meta, and over HTTP the headers
// MCP-Protocol-Version, Mcp-Method, Mcp-Name and Mcp-Param-*. A legacy
// server (2025-11-25 and earlier) is opened with initialize. Config.Protocol
// chooses:
//
//	auto (default)  probe with server/discover; a DiscoverResult or a modern
//	                error (-32020, -32021, -32022) means modern; anything else
//	                (another JSON-RPC error, an HTTP 4xx, or 5xx, without a
//	                modern error body, no answer from a stdio child within
//	                discoverProbeWait) means legacy: initialize follows (and
//	                says what is wrong when no server is there at all)
//	2026-07-28      the probe only; a legacy server is an error that says so
//	2025-11-25      initialize only (a modern-only server is an error that says so)
//
// The era is decided on every connection (each restart or reconnection
// probes again) and kept in Status.ProtocolVersion. Legacy SSE and
// in-process upstreams are legacy under auto.
//
// A -32022 (UnsupportedProtocolVersion) later on, to a call, a listing or a
// health probe, names the versions the server supports: the connection
// moves to another modern version both speak and the request is sent again
// once; when there is none, the connection is closed and the next one
// probes again.
const (
	ProtocolAuto   = "auto"
	ProtocolModern = mcpgo.ProtocolVersion20260728
	ProtocolLegacy = mcpgo.ProtocolVersion20251125
)

// protocolVersion is the revision asked for in initialize: the newest one
// with the initialize handshake and sessions.
const protocolVersion = mcpgo.LATEST_LEGACY_PROTOCOL_VERSION

// Bounds of the era negotiation and of a modern upstream's catalog.
const (
	// discoverProbeWait bounds the server/discover probe of a stdio child
	// under auto: a legacy server may ignore a request before initialize,
	// and its silence means "legacy" (spec: stdio, backward compatibility).
	discoverProbeWait = 5 * time.Second
	// listRefreshMin and listRefreshMax bound the wait before a modern
	// upstream's tool list is read again when no subscriptions/listen stream
	// tells of changes: the list result's ttlMs, within these bounds, plus up
	// to a tenth of jitter. A ttlMs of 0 (or none) waits listRefreshMin.
	listRefreshMin = 15 * time.Second
	listRefreshMax = 30 * time.Minute
	// errBodyKeep bounds the bytes of an HTTP error answer kept to read a
	// modern JSON-RPC error from it (see sendProbe.errBody).
	errBodyKeep = 16 << 10
)

// Modern JSON-RPC error codes (2026-07-28, "Error Codes"): their presence
// identifies a modern server.
const (
	codeHeaderMismatch     = mcpgo.HEADER_MISMATCH
	codeMissingCapability  = mcpgo.MISSING_REQUIRED_CLIENT_CAPABILITY
	codeUnsupportedVersion = mcpgo.UNSUPPORTED_PROTOCOL_VERSION
)

func isModernCode(code int) bool {
	return code == codeHeaderMismatch || code == codeMissingCapability || code == codeUnsupportedVersion
}

// normalProtocol checks Config.Protocol; "" is auto.
func normalProtocol(p string) (string, error) {
	switch p {
	case "", ProtocolAuto:
		return ProtocolAuto, nil
	case ProtocolModern, ProtocolLegacy:
		return p, nil
	}
	return "", fmt.Errorf("protocol %q: want %q, %q or %q", p, ProtocolAuto, ProtocolModern, ProtocolLegacy)
}

// clientCapabilities are declared in initialize and in every modern
// request's _meta: URL elicitation only. The bridge cannot show a form, but
// it can tell its caller which URL to open.
var clientCapabilities = json.RawMessage(`{"elicitation":{"url":{}}}`)

// rpcErrorIn reads a JSON-RPC error response from an HTTP error answer's
// body; nil when it holds none.
func rpcErrorIn(body []byte) *Error {
	if len(body) == 0 {
		return nil
	}
	var m struct {
		Error *struct {
			Code    *int            `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &m) != nil || m.Error == nil || m.Error.Code == nil {
		return nil
	}
	e := &Error{Code: *m.Error.Code, Message: m.Error.Message}
	if len(m.Error.Data) > 0 && string(m.Error.Data) != "null" {
		e.Data = m.Error.Data
	}
	return e
}

// answeredError is the JSON-RPC error a request got: the response's error,
// or one read from the body of an HTTP error answer that mcp-go did not
// decode (a 404, or a 4xx to initialize); nil when there is none.
func answeredError(r sendResult) *Error {
	if r.err == nil && r.resp != nil && r.resp.Error != nil {
		return upstreamError(r.resp.Error)
	}
	if r.err != nil && r.status >= 400 {
		return rpcErrorIn(r.errBody)
	}
	return nil
}

// supportedVersions reads data.supported of a -32022 error.
func supportedVersions(e *Error) []string {
	var d struct {
		Supported []string `json:"supported"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.Supported
}

// eraStep is what the era negotiation does after one server/discover.
type eraStep int

const (
	stepModern eraStep = iota // the server is modern and speaks the version asked
	stepRetry                 // a modern server that speaks another modern version: probe again with it
	stepLegacy                // not a modern server, or one that names only legacy versions: initialize (auto)
	stepFail                  // the attempt fails (unreachable, credentials, timeout, no common version…)
)

// discoverOutcome is the classification of one server/discover.
type discoverOutcome struct {
	step    eraStep
	version string // stepModern, stepRetry: the version to speak
	// supported lists the versions the server named, when it did.
	supported []string
	// why says what the server answered, for logs and Status.Reason.
	why string
}

// classifyDiscover decides what a server/discover sent with version got
// (spec: versioning, and the stdio and streamable HTTP backward
// compatibility sections). It only reads r; timedOut tells that the probe's
// own bound passed (stdio) without an answer.
func classifyDiscover(kind connKind, version string, r sendResult, timedOut bool) discoverOutcome {
	if r.err == nil && r.resp != nil && r.resp.Error == nil {
		var res struct {
			SupportedVersions []string        `json:"supportedVersions"`
			Capabilities      json.RawMessage `json:"capabilities"`
		}
		if err := json.Unmarshal(r.resp.Result, &res); err != nil {
			return discoverOutcome{step: stepFail, why: "server/discover answered a malformed result"}
		}
		if res.SupportedVersions == nil && res.Capabilities == nil {
			// Not a DiscoverResult (both are what one is made of): a
			// legacy server that answers any method it does not know
			// with an empty result (the conformance runner's 2025-11-25
			// servers do). Taken for modern, it would be spoken to
			// without a session and its streams never resumed.
			return discoverOutcome{step: stepLegacy, why: "server/discover answered a result that is not a DiscoverResult"}
		}
		if len(res.SupportedVersions) == 0 || slices.Contains(res.SupportedVersions, version) {
			return discoverOutcome{step: stepModern, version: version, supported: res.SupportedVersions, why: "server/discover answered"}
		}
		return fromSupported(version, res.SupportedVersions, "server/discover listed versions "+strings.Join(res.SupportedVersions, ", "))
	}
	if e := answeredError(r); e != nil {
		switch {
		case e.Code == codeUnsupportedVersion:
			s := supportedVersions(e)
			out := fromSupported(version, s, fmt.Sprintf("server/discover answered %d (supported: %s)", e.Code, strings.Join(s, ", ")))
			if out.step == stepModern {
				// It refused the version it names: nothing to retry with.
				out.step, out.why = stepFail, out.why+", refusing the version it names"
			}
			return out
		case isModernCode(e.Code):
			// A modern server that refused this request: no fallback.
			return discoverOutcome{step: stepFail, why: fmt.Sprintf("server/discover answered %d %s", e.Code, e.Message)}
		}
		why := fmt.Sprintf("server/discover answered %d %s", e.Code, e.Message)
		if r.status >= 400 {
			why = fmt.Sprintf("server/discover answered HTTP %d with %d %s", r.status, e.Code, e.Message)
		}
		return discoverOutcome{step: stepLegacy, why: why}
	}
	var authErr *mcptransport.AuthorizationRequiredError
	switch {
	case timedOut && kind == kindStdio:
		return discoverOutcome{step: stepLegacy, why: "server/discover got no answer in time"}
	case authorizationURL(r.err) != "", errors.As(r.err, &authErr),
		r.status == http.StatusUnauthorized, r.status == http.StatusForbidden:
		return discoverOutcome{step: stepFail, why: "credentials"}
	case r.status >= 400:
		// HTTP: a 4xx (or 5xx) without a modern error body.
		return discoverOutcome{step: stepLegacy, why: fmt.Sprintf("server/discover answered HTTP %d", r.status)}
	}
	return discoverOutcome{step: stepFail, why: "no answer"}
}

// fromSupported decides from the versions a modern server named.
func fromSupported(asked string, supported []string, why string) discoverOutcome {
	v := mcpgo.NegotiateMutuallySupportedVersion(supported)
	switch {
	case v == "":
		return discoverOutcome{step: stepFail, supported: supported, why: why + ": none is a version mcpotc speaks"}
	case mcpgo.IsModernProtocol(v) && v != asked:
		return discoverOutcome{step: stepRetry, version: v, supported: supported, why: why}
	case mcpgo.IsModernProtocol(v):
		return discoverOutcome{step: stepModern, version: v, supported: supported, why: why}
	}
	return discoverOutcome{step: stepLegacy, version: v, supported: supported, why: why}
}

// negotiate opens the connection in the era Config.Protocol allows: see
// the table above. On failure it returns a reason for Status.
func (c *connection) negotiate(ctx context.Context) (string, error) {
	mode := c.u.cfg.Protocol
	if mode == ProtocolLegacy || c.kind == kindSSE || c.kind == kindInProcess {
		return c.initialize(ctx)
	}
	version := ProtocolModern
	var out discoverOutcome
	var r sendResult
	for range 2 {
		r, out = c.discover(ctx, version)
		if out.step != stepRetry {
			break
		}
		c.u.log.Debug("the server speaks another modern protocol version; probing again with it", "version", out.version, "answer", out.why)
		version = out.version
	}
	switch out.step {
	case stepModern:
		return c.openModern(out.version, r.resp.Result)
	case stepLegacy:
		c.setVersion("")
		if mode == ProtocolModern {
			err := fmt.Errorf("mcp: the server does not speak MCP %s: %s", ProtocolModern, out.why)
			return fmt.Sprintf("the server does not speak MCP %s (%s); protocol is pinned to %s: set it to %q or %q",
				ProtocolModern, out.why, ProtocolModern, ProtocolAuto, ProtocolLegacy), err
		}
		c.u.log.Debug("not a 2026-07-28 server; opening with initialize", "answer", out.why)
		return c.initialize(ctx)
	}
	c.setVersion("")
	return c.discoverFailed(ctx, r, out)
}

// discoverFailed is the reason and error of a server/discover that
// neither opened a modern connection nor fell back to initialize.
func (c *connection) discoverFailed(ctx context.Context, r sendResult, out discoverOutcome) (string, error) {
	var authErr *mcptransport.AuthorizationRequiredError
	switch {
	case r.err == nil || answeredError(r) != nil:
		// The server answered, and what it said is the reason.
		return out.why, errors.New("mcp: " + out.why)
	case errors.Is(r.err, context.DeadlineExceeded), ctx.Err() != nil:
		return fmt.Sprintf("server/discover timed out after %s", c.u.cfg.InitTimeout), r.err
	case authorizationURL(r.err) != "":
		return "waiting for a user to authorize the bridge (OAuth)", r.err
	case c.u.cfg.Auth != nil && (errors.As(r.err, &authErr) || r.status == http.StatusUnauthorized || r.status == http.StatusForbidden):
		return fmt.Sprintf("the server refused the bridge's credentials (HTTP %d): %s", max(r.status, http.StatusUnauthorized), safeError(r.err)), r.err
	case errors.As(r.err, &authErr), r.status == http.StatusUnauthorized, r.status == http.StatusForbidden:
		return fmt.Sprintf("the server refused the bridge's credentials (HTTP %d)", max(r.status, http.StatusUnauthorized)), r.err
	case c.kind.isHTTP() && !r.sent:
		return "unreachable: " + safeError(r.err), r.err
	}
	return "server/discover failed: " + safeError(r.err), r.err
}

// discover sends server/discover as version, the connection set to speak
// it (the _meta and MCP-Protocol-Version must agree), and classifies the
// answer. A stdio probe under auto is bounded by discoverProbeWait.
func (c *connection) discover(ctx context.Context, version string) (sendResult, discoverOutcome) {
	c.setVersion(version)
	pctx := ctx
	if c.kind == kindStdio && c.u.cfg.Protocol == ProtocolAuto {
		wait := discoverProbeWait
		if c.u.opts.probeWait > 0 {
			wait = c.u.opts.probeWait
		}
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	r := c.send(pctx, string(mcpgo.MethodServerDiscover), nil, nil)
	timedOut := r.err != nil && pctx.Err() != nil && ctx.Err() == nil
	return r, classifyDiscover(c.kind, version, r, timedOut)
}

// openModern records what a DiscoverResult says of the server.
func (c *connection) openModern(version string, result json.RawMessage) (string, error) {
	var res struct {
		Capabilities struct {
			Tools *struct {
				ListChanged bool `json:"listChanged"`
			} `json:"tools"`
		} `json:"capabilities"`
		Meta       map[string]json.RawMessage `json:"_meta"`
		ServerInfo json.RawMessage            `json:"serverInfo"`
	}
	_ = json.Unmarshal(result, &res)
	var info struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		Title   string `json:"title"`
	}
	// A server names itself in _meta (mcp-go, the runner's mock) or at the
	// top of the result as initialize did (the TypeScript SDK 2.x, the
	// runner's scenario servers): both are read, _meta first, so that a
	// server is never left nameless (its toolkit then "_").
	if json.Unmarshal(res.Meta[mcpgo.MetaKeyServerInfo], &info) != nil || info.Name == "" {
		info.Name, info.Version, info.Title = "", "", ""
		_ = json.Unmarshal(res.ServerInfo, &info)
	}
	c.infoMu.Lock()
	c.server = ServerInfo{Name: info.Name, Version: info.Version, Title: info.Title}
	c.infoMu.Unlock()
	c.listChanged.Store(res.Capabilities.Tools != nil && res.Capabilities.Tools.ListChanged)
	c.setVersion(version)
	return "", nil
}

// setVersion makes the connection speak a modern version ("": none, the
// legacy era until initialize says which): the _meta of every request, and
// over HTTP the MCP-Protocol-Version header and no session.
func (c *connection) setVersion(version string) {
	var meta json.RawMessage
	if version != "" {
		meta, _ = json.Marshal(map[string]any{
			mcpgo.MetaKeyProtocolVersion:    version,
			mcpgo.MetaKeyClientCapabilities: clientCapabilities,
			mcpgo.MetaKeyClientInfo:         map[string]string{"name": c.u.opts.ClientName, "version": c.u.opts.ClientVersion},
		})
	}
	c.infoMu.Lock()
	c.protocol = version
	c.modernMeta = meta
	c.infoMu.Unlock()
	c.modern.Store(version != "")
	if hc, ok := c.t.(mcptransport.HTTPConnection); ok {
		hc.SetProtocolVersion(version)
	}
}

// isModern reports whether the connection speaks 2026-07-28 or later.
func (c *connection) isModern() bool { return c.modern.Load() }

// version is the modern version spoken and its _meta.
func (c *connection) version() (string, json.RawMessage) {
	c.infoMu.Lock()
	defer c.infoMu.Unlock()
	return c.protocol, c.modernMeta
}

// renegotiate handles a -32022 to a request sent as version sent: when
// the server names another modern version both speak, the connection moves
// to it (true: send the request again); when another request already moved
// it, true as well. Otherwise the connection is closed with a reason; the
// next one probes again.
func (c *connection) renegotiate(e *Error, sent string) bool {
	current, _ := c.version()
	if current != sent && current != "" {
		return true
	}
	s := supportedVersions(e)
	v := mcpgo.NegotiateMutuallySupportedVersion(s)
	if v != "" && mcpgo.IsModernProtocol(v) && v != current {
		c.u.log.Info("the server asked for another protocol version; switching", "from", current, "to", v)
		c.setVersion(v)
		c.u.setProtocol(c, v)
		return true
	}
	c.die(fmt.Sprintf("the server no longer accepts protocol %s (supported: %s)", current, strings.Join(s, ", ")))
	return false
}

// withModernMeta merges the connection's _meta (protocol version, client
// capabilities and info) into params, a JSON object or nil: top-level keys
// are kept as raw bytes (arguments are never decoded), and keys of an
// existing _meta are kept except the three it sets.
func withModernMeta(params, meta json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(params)) == 0 {
		return json.Marshal(map[string]json.RawMessage{"_meta": meta})
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(params, &top); err != nil || top == nil {
		return nil, fmt.Errorf("mcp: request params are not a JSON object")
	}
	if old, ok := top["_meta"]; ok && len(bytes.TrimSpace(old)) > 0 && string(bytes.TrimSpace(old)) != "null" {
		var m, add map[string]json.RawMessage
		if err := json.Unmarshal(old, &m); err != nil || m == nil {
			return nil, fmt.Errorf("mcp: request _meta is not a JSON object")
		}
		_ = json.Unmarshal(meta, &add)
		for k, v := range add {
			m[k] = v
		}
		merged, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		top["_meta"] = merged
	} else {
		top["_meta"] = meta
	}
	return json.Marshal(top)
}

// protocolHeaders are the headers of a modern streamable HTTP request:
// Mcp-Method, Mcp-Name (encoded as the spec says) and, for tools/call, the
// Mcp-Param-* headers of the tool's x-mcp-header parameters.
// (MCP-Protocol-Version is set by mcp-go's transport.)
func (c *connection) protocolHeaders(version, method string, params json.RawMessage) http.Header {
	std := mcpgo.StandardHeaders(version, mcpgo.MCPMethod(method), params)
	if len(std) == 0 {
		return nil
	}
	h := make(http.Header, len(std)+2)
	for k, v := range std {
		h.Set(k, v)
	}
	if method == string(mcpgo.MethodToolsCall) {
		if name, ok := mcpgo.ExtractHeaderName(mcpgo.MethodToolsCall, params); ok {
			if tool := c.headerTool(name); tool != nil {
				for k, v := range mcpgo.GenerateParamHeaders(tool, params) {
					h.Set(k, v)
				}
			}
		}
	}
	return h
}

// headerTool is the tool named name of the latest tools/list when its
// input schema has x-mcp-header parameters; nil otherwise.
func (c *connection) headerTool(name string) *mcpgo.Tool {
	c.headerMu.Lock()
	defer c.headerMu.Unlock()
	return c.headerTools[name]
}

// paramHeaderTool checks the x-mcp-header annotations of a listed tool's
// raw inputSchema (spec: streamable HTTP, "Custom Headers from Tool
// Parameters"). It returns the tool to mirror headers from (nil: it has no
// annotation), or why the tool must be left out of the list.
func paramHeaderTool(name string, inputSchema json.RawMessage) (*mcpgo.Tool, error) {
	if !bytes.Contains(inputSchema, []byte(`"x-mcp-header"`)) {
		return nil, nil
	}
	tool := &mcpgo.Tool{Name: name, RawInputSchema: inputSchema}
	if err := mcpgo.ValidateParamHeaderAnnotations(tool); err != nil {
		return nil, err
	}
	var schema any
	if err := json.Unmarshal(inputSchema, &schema); err != nil {
		return nil, fmt.Errorf("inputSchema is not JSON: %w", err)
	}
	if path := unreachableHeader(schema, "inputSchema", true, false); path != "" {
		return nil, fmt.Errorf("%s: x-mcp-header on a property not reachable through properties alone", path)
	}
	if len(mcpgo.ExtractParamHeaderBindings(tool)) == 0 {
		return nil, nil
	}
	return tool, nil
}

// unreachableHeader returns the path of an x-mcp-header annotation that is
// not on a property reachable from the schema root through "properties"
// keys alone (not through items, anyOf, $ref, $defs…), "" when there is
// none. onChain: node is the root or such a property; property: node is a
// property's schema. Values of const, default, enum and examples are data,
// not schemas, and are not searched.
func unreachableHeader(node any, path string, onChain, property bool) string {
	switch n := node.(type) {
	case map[string]any:
		if _, ok := n["x-mcp-header"]; ok && !(onChain && property) {
			return path
		}
		for _, k := range sortedKeys(n) {
			v := n[k]
			switch k {
			case "const", "default", "enum", "examples", "x-mcp-header":
				continue
			case "properties":
				if props, ok := v.(map[string]any); ok {
					for _, pk := range sortedKeys(props) {
						if p := unreachableHeader(props[pk], path+".properties."+pk, onChain, true); p != "" {
							return p
						}
					}
					continue
				}
			}
			if p := unreachableHeader(v, path+"."+k, false, false); p != "" {
				return p
			}
		}
	case []any:
		for i, v := range n {
			if p := unreachableHeader(v, fmt.Sprintf("%s[%d]", path, i), false, false); p != "" {
				return p
			}
		}
	}
	return ""
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// listRefresh is the wait before a modern upstream's tool list is read
// again without a change notification: ttl (ms, from the list result;
// negative: none) bounded by min and max, plus up to a tenth of jitter.
func listRefresh(ttl int64, lo, hi time.Duration) time.Duration {
	d := lo
	if ttl > 0 && ttl < int64(hi/time.Millisecond)+1 {
		d = time.Duration(ttl) * time.Millisecond
	} else if ttl > 0 {
		d = hi
	}
	d = min(max(d, lo), hi)
	return d + rand.N(d/10+1)
}

// InputRequiredError is a modern upstream's input_required answer to a
// call (2026-07-28, multi round-trip requests). Its text names what was
// asked; Result is the raw result.
//
// When every input request is a URL elicitation (URLs is set), the call
// can go on once the user opened them: CallToolResume sends the call again
// with the answers and RequestState. The error then also unwraps to the
// *Error a 2025-11-25 server answers for it (-32042 with data.elicitations:
// each request's params as sent, _meta included, with the request's key
// as elicitationId when it has none, since 2026-07-28 dropped the field),
// so that callers that only read -32042 handle both eras alike. Otherwise
// it asks for something the bridge cannot give: a form, a sampling, the
// roots.
type InputRequiredError struct {
	Upstream string
	Tool     string
	Asked    []string // one description per input request, sorted by key
	// URLs are the URL elicitations, sorted by key, when every input
	// request is one; nil otherwise.
	URLs []URLRequest
	// RequestState is the result's requestState ("" when it has none):
	// opaque state of the server, to send back with the answers.
	RequestState string
	Result       json.RawMessage

	legacy *Error // the -32042 form, when URLs is set
}

// InputAsked is the number of URL requests (len(URLs)) and a description
// of each request (Asked).
func (e *InputRequiredError) InputAsked() (int, []string) { return len(e.URLs), e.Asked }

// URLRequest is one URL elicitation of an input_required result.
type URLRequest struct {
	Key     string // its key in inputRequests: the key of its answer
	URL     string
	Message string
}

func (e *InputRequiredError) Error() string {
	if len(e.URLs) > 0 {
		return fmt.Sprintf("mcp: upstream %q asked the user to open %d URL(s) to finish %q", e.Upstream, len(e.URLs), e.Tool)
	}
	return fmt.Sprintf("mcp: upstream %q asked for input to finish %q, which the bridge cannot give: %s",
		e.Upstream, e.Tool, strings.Join(e.Asked, "; "))
}

// Unwrap gives the -32042 *Error of a URL-only request (nil otherwise).
func (e *InputRequiredError) Unwrap() error {
	if e.legacy == nil {
		return nil
	}
	return e.legacy
}

// inputRequest is one entry of an input_required result's inputRequests.
type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// inputRequired turns an input_required result of tool into the
// *InputRequiredError CallTool returns (see there).
func (u *Upstream) inputRequired(tool string, result json.RawMessage) error {
	var res struct {
		InputRequests map[string]inputRequest `json:"inputRequests"`
		RequestState  string                  `json:"requestState"`
	}
	_ = json.Unmarshal(result, &res)
	keys := make([]string, 0, len(res.InputRequests))
	for k := range res.InputRequests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var urls []map[string]json.RawMessage
	var reqs []URLRequest
	var asked []string
	for _, k := range keys {
		in := res.InputRequests[k]
		var p struct {
			Mode    string `json:"mode"`
			Message string `json:"message"`
			URL     string `json:"url"`
		}
		_ = json.Unmarshal(in.Params, &p)
		var params map[string]json.RawMessage
		switch {
		case in.Method == string(mcpgo.MethodElicitationCreate) && p.Mode == mcpgo.ElicitationModeURL && p.URL != "" &&
			json.Unmarshal(in.Params, &params) == nil:
			if _, ok := params["elicitationId"]; !ok {
				params["elicitationId"], _ = json.Marshal(k)
			}
			urls = append(urls, params)
			reqs = append(reqs, URLRequest{Key: k, URL: p.URL, Message: p.Message})
			asked = append(asked, fmt.Sprintf("%s: open a URL", k))
		case in.Method == string(mcpgo.MethodElicitationCreate):
			asked = append(asked, fmt.Sprintf("%s: a form (%q)", k, p.Message))
		default:
			asked = append(asked, fmt.Sprintf("%s: %s", k, in.Method))
		}
	}
	e := &InputRequiredError{Upstream: u.Name(), Tool: tool, Asked: asked, RequestState: res.RequestState, Result: result}
	if len(urls) > 0 && len(urls) == len(keys) {
		data, _ := json.Marshal(map[string]any{"elicitations": urls})
		u.log.Info("upstream asked the user to open a URL (input_required)", "tool", tool, "urls", len(urls))
		e.URLs = reqs
		e.legacy = &Error{Code: mcpgo.URL_ELICITATION_REQUIRED, Message: "URL elicitation required", Data: data}
		return e
	}
	if len(e.Asked) == 0 {
		e.Asked = []string{"nothing the bridge can read"}
	}
	u.log.Info("upstream asked for input the bridge cannot give (input_required)", "tool", tool, "asked", strings.Join(e.Asked, "; "))
	return e
}

// resultType reads the resultType of a modern result ("" when absent,
// which means complete).
func resultType(result json.RawMessage) string {
	var r struct {
		ResultType string `json:"resultType"`
	}
	_ = json.Unmarshal(result, &r)
	return r.ResultType
}

// modernOnly returns the versions named by a -32022 answer to initialize
// when none of them is a legacy version mcpotc speaks: the server is
// modern-only. "" otherwise.
func modernOnly(e *Error) string {
	if e == nil || e.Code != codeUnsupportedVersion {
		return ""
	}
	s := supportedVersions(e)
	if v := mcpgo.NegotiateMutuallySupportedVersion(s); v != "" && !mcpgo.IsModernProtocol(v) {
		return ""
	}
	if len(s) == 0 {
		return "an unnamed version"
	}
	return strings.Join(s, ", ")
}

// modernOnlyReason is Status.Reason for a modern-only server met with
// initialize.
func (c *connection) modernOnlyReason(versions string) string {
	reason := fmt.Sprintf("the server speaks only MCP %s: it answered initialize with %d (unsupported protocol version)", versions, codeUnsupportedVersion)
	switch {
	case c.u.cfg.Protocol == ProtocolLegacy:
		reason += fmt.Sprintf("; protocol is pinned to %s: set it to %q or %q", ProtocolLegacy, ProtocolAuto, ProtocolModern)
	case c.kind == kindSSE:
		reason += "; legacy SSE carries 2025-11-25 and earlier only: use the server's streamable HTTP endpoint"
	}
	return reason
}

// listenParams asks a subscriptions/listen stream for tools list changes.
var listenParams = json.RawMessage(`{"notifications":{"toolsListChanged":true}}`)

// listen keeps a subscriptions/listen stream open on a modern connection
// whose server declared tools.listChanged (2026-07-28, subscriptions):
// notifications/tools/list_changed on it make the catalog read the list
// again (handleNotification). When the stream ends it is opened again
// after the restart backoff, and the list is read again (a change may have
// been missed). A server that refuses the request leaves the catalog to the
// list's ttlMs (see Upstream.catalog). It returns when the connection ends.
func (c *connection) listen() {
	defer c.u.wg.Done()
	attempt := 0
	for {
		start := time.Now()
		r := c.send(c.ctx, string(mcpgo.MethodSubscriptionsListen), listenParams, nil)
		c.listening.Store(false)
		if c.ctx.Err() != nil {
			return
		}
		if e := answeredError(r); e != nil {
			if e.Code == codeUnsupportedVersion && c.renegotiate(e, r.version) {
				continue
			}
			c.u.log.Info("subscriptions/listen refused; the tool list is read again after its ttlMs", "code", e.Code, "message", e.Message)
			return
		}
		if r.err != nil {
			c.u.log.Debug("subscriptions/listen stream lost", "error", safeError(r.err))
		} else {
			c.u.log.Debug("the server closed the subscriptions/listen stream")
		}
		c.u.triggerRelist()
		if time.Since(start) >= c.u.cfg.StableAfter {
			attempt = 0
		}
		d := c.u.backoff(attempt)
		attempt++
		t := time.NewTimer(d)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// acknowledged takes notifications/subscriptions/acknowledged: the stream
// carries tools list changes when the server agreed to send them.
func (c *connection) acknowledged(n mcpgo.JSONRPCNotification) {
	params, err := json.Marshal(n.Params)
	if err != nil {
		return
	}
	var p struct {
		Notifications struct {
			ToolsListChanged bool `json:"toolsListChanged"`
		} `json:"notifications"`
	}
	_ = json.Unmarshal(params, &p)
	c.listening.Store(p.Notifications.ToolsListChanged)
	c.u.log.Debug("subscriptions/listen acknowledged", "tools_list_changed", p.Notifications.ToolsListChanged)
}

// protocolOf is the protocol version the connection speaks.
func (c *connection) protocolOf() string {
	v, _ := c.version()
	return v
}
