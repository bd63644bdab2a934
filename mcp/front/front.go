package front

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/internal/jsonscan"
	"github.com/mcpotc/mcpotc/internal/shutdown"
)

// CodeRequestTimeout reports a call that got no answer in time. It is
// implementation-defined (-32000…-32019), as in the TypeScript SDK.
const CodeRequestTimeout = -32001

// CodeStarting answers a tools/call of a tool the front does not serve
// (or the caller may not see) while its catalog is not complete yet
// (Options.Starting): the tool may be served in a moment, so the client
// is told to retry, never that the tool does not exist. Its data holds
// "retry_after_ms"; over streamable HTTP the answer also carries
// Retry-After (its status stays 200: see postWriter.finish).
//
// -32007: not -32004, which the Go SDK's client reads as "server is
// closing" and reports as a closed connection (its jsonrpc2.ErrServerClosing),
// nor another code an SDK reserves (-32000, -32001, -32003, -32005).
const CodeStarting = -32007

// StartingRetryAfterSeconds is the Retry-After of a CodeStarting answer
// over HTTP, in seconds.
const StartingRetryAfterSeconds = 1

// RPCError is a JSON-RPC error a tool handler returns, possibly wrapped, to
// answer its tools/call with exactly this error object. Return it as a
// pointer. A Code of zero is sent as -32603; Data that does not encode is
// left out.
//
// To ask the user to open a URL return an *InputRequired (or
// mcpgo.URLElicitationRequiredError) instead: it is sent as -32042 with
// data {"elicitations": […]} to clients before 2026-07-28, and to
// 2026-07-28 clients as an input_required result asking for the same URLs,
// whose retry the handler reads with Resumed (inputstate.go). Either way
// the handler should first check ClientSupportsURLElicitation. A result's
// own RequestState is not honoured on a retry: the front answers only
// states it sealed. Any other error is sent as -32603 with its text,
// unless it is a CodedError.
type RPCError struct {
	Code    int
	Message string
	Data    any
}

func (e *RPCError) Error() string { return e.Message }

// RPCCode is the error's JSON-RPC code (CodedError).
func (e *RPCError) RPCCode() int { return e.Code }

// RPCData is the error's data (CodedError).
func (e *RPCError) RPCData() any { return e.Data }

// CodedError is a handler's error, possibly wrapped, answered with a code
// of its own: its RPCCode, its text (Error) as the message and its RPCData.
// An *RPCError is one; so is any package's error with these methods (the
// mapping between OTC and MCP makes its own, without importing this
// package).
type CodedError interface {
	error
	RPCCode() int
	RPCData() any
}

// DefaultStdioGrace is Options.StdioGrace when zero.
const DefaultStdioGrace = 5 * time.Second

// Options configure a Server. A nil *Options is the zero value.
type Options struct {
	// Logger receives transport diagnostics; tokens are never logged.
	// Nil: nothing is logged.
	Logger *slog.Logger
	// StdioGrace is how long ServeStdio lets in-flight tool calls finish
	// once ctx ends or its input reaches EOF, before their contexts are
	// cancelled. Zero means DefaultStdioGrace; negative means no grace.
	StdioGrace time.Duration
	// OnCallRefused is told of each tools/call the front answers itself,
	// without running a tool's handler (CallRefusal says why), before it
	// is answered: so that the calls a handler never sees are logged,
	// counted, traced and audited as the others are. It must not block.
	// Nil: nothing is told.
	OnCallRefused func(ctx context.Context, req mcpgo.CallToolRequest, r CallRefusal)
	// Visibility, when set, is the tools the caller of a request may see
	// and call (visibility.go): tools/list lists only those, and a
	// tools/call of any other is answered as one of a tool the front does
	// not serve. A nil *ToolFilter allows every tool. Nil: every caller
	// sees every tool. It is the first catalog's (SetCatalog replaces it).
	Visibility func(ctx context.Context) *ToolFilter
	// Starting, when set, is asked when a tools/call names a tool the
	// front does not serve or the caller may not see: a non-nil answer
	// (its Code should be CodeStarting) says the catalog is not complete
	// yet and is sent instead of "not found" (see CodeStarting). Nil:
	// such a call is always "not found".
	Starting func(ctx context.Context) *RPCError
	// ListTTL is how long a 2026-07-28 client may cache tools/list's
	// answer (its ttlMs): how often the tools may change, such as the
	// period at which they are listed again. Zero (or an empty catalog):
	// 0, stale at once.
	ListTTL time.Duration
	// PrivateList says tools/list's answer may differ per caller, or must
	// not be shared across authorization contexts: its cacheScope is
	// "private". Set it when callers are identified (OAuth, a bearer
	// token) or per-caller behaviour applies. Zero: "public".
	PrivateList bool
	// StateKeys seal the requestState of input_required results
	// (inputstate.go): the first seals, each one opens (rotation); 32
	// bytes or more, random. Replicas that share them continue each
	// other's calls. Nil: a random key of this process (a retry reaching
	// another process, or this one restarted, is refused).
	StateKeys [][]byte
	// InputStateTTL is how long a requestState is valid: the time a user
	// has to answer. Zero: DefaultInputStateTTL.
	InputStateTTL time.Duration
	// UsedStates records the requestStates retries used, each used once
	// (usedstates.go): replicas that share StateKeys must share it too.
	// Nil: this process's memory, bounded (MaxUsedStates,
	// MaxUsedStatesPerPrincipal).
	UsedStates UsedStateStore
}

// ToolHandler answers a tools/call. req.Params.RawArguments holds the
// arguments exactly as the client sent them ({} when absent);
// req.Params.Arguments is not filled in.
type ToolHandler func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error)

// Tool is one tool a Server serves.
type Tool struct {
	Tool    mcpgo.Tool
	Handler ToolHandler
}

// Server is an MCP server of tools: it answers MCP's methods for them
// (initialize, ping, tools/list, tools/call, notifications, and the
// 2026-07-28 server/discover and subscriptions/listen) over stdio
// (ServeStdio), streamable HTTP and legacy SSE (HTTPHandler).
//
// A tool handler's context is cancelled when the client sends
// notifications/cancelled for its request, when the client goes away
// (streamable HTTP: the POST's connection; legacy SSE: the session's
// stream; stdio: after the grace once input ends), and when the transport
// shuts down after its grace period.
type Server struct {
	name, version string
	log           *slog.Logger
	grace         time.Duration
	onRefused     func(context.Context, mcpgo.CallToolRequest, CallRefusal)
	starting      func(context.Context) *RPCError
	listMeta      json.RawMessage // tools/list's ttlMs and cacheScope (2026-07-28)
	sealer        *inputSealer    // requestStates (inputstate.go)
	usedStates    UsedStateStore  // the requestStates used (usedstates.go)
	tasks         *tasks          // nil: tasks are off (SetTasks, tasks.go)

	setMu   sync.Mutex // serializes SetCatalog
	cat     atomic.Pointer[catalog]
	changes listeners // told of each new catalog (notifications/tools/list_changed)
}

// catalog is the tools a Server serves, and tools/list's answer, encoded
// once per catalog.
type catalog struct {
	byName map[string]*Tool
	tools  json.RawMessage // the JSON array of the tools
	// names and spans are each listed tool's name and where its encoding
	// is in tools, for the lists of filtered callers (visibility.go).
	names    []string
	spans    [][2]int
	filtered filteredLists
	// visibility is who may see and call these tools (Options.Visibility),
	// published with them: a request reads both in one load.
	visibility func(context.Context) *ToolFilter
}

// New returns a Server named name (serverInfo) serving no tool.
func New(name, version string, opts *Options) *Server {
	if opts == nil {
		opts = &Options{}
	}
	f := &Server{name: name, version: version, log: opts.Logger, grace: opts.StdioGrace, onRefused: opts.OnCallRefused,
		starting: opts.Starting,
		listMeta: listCacheMeta(opts.ListTTL, opts.PrivateList), sealer: newInputSealer(opts.StateKeys, opts.InputStateTTL)}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	f.usedStates = opts.UsedStates
	if f.usedStates == nil {
		f.usedStates = newMemoryUsedStates(MaxUsedStates, MaxUsedStatesPerPrincipal, func() time.Time { return f.sealer.now() })
	}
	if f.grace == 0 {
		f.grace = DefaultStdioGrace
	}
	f.SetCatalog(opts.Visibility)
	return f
}

// SetTools replaces the front's tools, seen by whom the catalog they
// replace let see them (see SetCatalog).
func (f *Server) SetTools(tools ...Tool) {
	f.setMu.Lock()
	defer f.setMu.Unlock()
	f.setCatalog(f.cat.Load().visibility, tools)
}

// SetCatalog replaces the front's tools and who may see and call them
// (as Options.Visibility; nil: every caller, every tool) in one store, and
// tells the clients that listen (notifications/tools/list_changed). A
// tools/list or tools/call reads both at once, so tools are never served
// under another catalog's visibility. tools/list is answered from an
// encoding made here, once.
func (f *Server) SetCatalog(visibility func(context.Context) *ToolFilter, tools ...Tool) {
	f.setMu.Lock()
	defer f.setMu.Unlock()
	f.setCatalog(visibility, tools)
}

func (f *Server) setCatalog(visibility func(context.Context) *ToolFilter, tools []Tool) {
	c := &catalog{byName: make(map[string]*Tool, len(tools)), visibility: visibility}
	defs := make([]mcpgo.Tool, 0, len(tools))
	for i := range tools {
		t := &tools[i]
		if _, dup := c.byName[t.Tool.Name]; !dup {
			defs = append(defs, t.Tool)
		}
		c.byName[t.Tool.Name] = t
	}
	// Each tool encoded alone, then joined: the array encoding/json writes,
	// with each tool's place in it.
	b := []byte{'['}
	for i := range defs {
		piece, err := encode(defs[i])
		if err != nil {
			f.log.Error("mcp front: the tool list does not encode; serving none", "error", err, "tool", defs[i].Name)
			b, c.byName, c.names, c.spans = []byte("["), map[string]*Tool{}, nil, nil
			break
		}
		if i > 0 {
			b = append(b, ',')
		}
		c.names = append(c.names, defs[i].Name)
		c.spans = append(c.spans, [2]int{len(b), len(b) + len(piece)})
		b = append(b, piece...)
	}
	c.tools = append(b, ']')
	first := f.cat.Swap(c) == nil
	if !first {
		f.changes.tell(notificationFrame(mcpgo.MethodNotificationToolsListChanged, nil))
	}
}

// Tools returns the tools served now.
func (f *Server) Tools() []mcpgo.Tool {
	var out []mcpgo.Tool
	_ = json.Unmarshal(f.cat.Load().tools, &out)
	return out
}

// HandleMessage answers one message without a transport (in process: tests
// and benchmarks): the answer frame, nil for a notification. Nothing is
// kept between messages: initialize is answered, and what it declared
// forgotten.
func (f *Server) HandleMessage(ctx context.Context, msg []byte) []byte {
	m, failure := decode(msg)
	if failure != nil {
		return errorFrame(nil, failure)
	}
	return f.serve(ctx, m, &exchange{p: &peer{}})
}

// listeners are the streams that receive notifications: a stdio run, a
// legacy SSE session, a streamable HTTP GET stream or a 2026-07-28
// subscriptions/listen stream.
type listeners struct {
	mu  sync.Mutex
	set map[*listener]struct{}
}

// listener is one of them: send delivers a frame (it must not block).
type listener struct{ send func(frame []byte) }

func (l *listeners) add(send func([]byte)) (remove func()) {
	ln := &listener{send: send}
	l.mu.Lock()
	if l.set == nil {
		l.set = map[*listener]struct{}{}
	}
	l.set[ln] = struct{}{}
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.set, ln)
		l.mu.Unlock()
	}
}

func (l *listeners) tell(frame []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ln := range l.set {
		ln.send(frame)
	}
}

// peer is what the front keeps of a client that opened a session
// (initialize) between its messages: a stdio run, a legacy SSE session, a
// streamable HTTP session. 2026-07-28 requests have none: each carries
// what it needs in its _meta.
type peer struct {
	mu      sync.Mutex
	version string                    // negotiated by initialize
	caps    *mcpgo.ClientCapabilities // declared at initialize
	id      string                    // a streamable HTTP session's id, for logs and spans
}

// exchange is where one message came from and how it is answered.
type exchange struct {
	p      *peer          // nil for a 2026-07-28 request (and a stateless handler)
	modern *modernRequest // a 2026-07-28 request's _meta, nil before
	calls  *callRegistry  // where a request in flight can be cancelled from
	scope  string         // calls' key prefix: whose ids these are
	// notify writes a notification on the request's own stream (false
	// when the transport has none).
	notify func(frame []byte) bool
	// life bounds the tool calls of the transport instance (nil: none).
	life context.Context
	// stream: answers share one stream (stdio, legacy SSE), where a
	// request the client cancelled is not answered (MCP cancellation: the
	// receiver should not respond); a streamable HTTP POST is answered
	// whatever happened, as its response is its own.
	stream bool
}

// callRegistry records the requests in flight, by scope and id, so that
// notifications/cancelled can end them. A cancel that arrives before its
// request is registered (the request still queued, or its POST not yet
// read: the transports give no order between them) is kept for a while and
// ends the request when it begins.
type callRegistry struct {
	mu    sync.Mutex
	calls map[string]context.CancelCauseFunc
	early map[string]time.Time // cancels of requests not (yet) in flight
	order []string             // early's keys, oldest first
}

// Bounds of the cancels kept before their request: how many (the oldest
// go first: one client's flood only costs others the race it covers) and
// for how long: the race is one of milliseconds, and a cancel that came
// after its answer must not outlive the id (a client that starts over
// numbers its requests from 1 again).
const (
	earlyCancels   = 1024
	earlyCancelTTL = 2 * time.Second
)

func (r *callRegistry) begin(key string, cancel context.CancelCauseFunc) {
	r.mu.Lock()
	at, early := r.early[key]
	if early {
		delete(r.early, key)
	}
	if r.calls == nil {
		r.calls = map[string]context.CancelCauseFunc{}
	}
	r.calls[key] = cancel
	r.mu.Unlock()
	if early && time.Since(at) < earlyCancelTTL {
		cancel(errClientCancelled)
	}
}

func (r *callRegistry) end(key string) {
	r.mu.Lock()
	delete(r.calls, key)
	r.mu.Unlock()
}

func (r *callRegistry) cancel(key string, cause error) {
	r.mu.Lock()
	c := r.calls[key]
	if c == nil {
		r.keepEarly(key)
	}
	r.mu.Unlock()
	if c != nil {
		c(cause)
	}
}

// keepEarly records the cancel of a request not in flight, under mu.
func (r *callRegistry) keepEarly(key string) {
	if r.early == nil {
		r.early = map[string]time.Time{}
	}
	for len(r.order) > 0 && (len(r.order) >= earlyCancels || time.Since(r.early[r.order[0]]) >= earlyCancelTTL) {
		delete(r.early, r.order[0])
		r.order = r.order[1:]
	}
	if _, dup := r.early[key]; !dup {
		r.order = append(r.order, key)
	}
	r.early[key] = time.Now()
}

// errClientCancelled is the cause of a call the client cancelled.
var errClientCancelled = fmt.Errorf("mcp front: the client cancelled the request: %w", context.Canceled)

// errFrontShutdown is the cause of a call ended by a shutdown: the
// grace of HTTPHandler.Shutdown or Options.StdioGrace ran out. The call is
// answered with CodeShuttingDown (internal/shutdown).
var errFrontShutdown = fmt.Errorf("mcp front: %w: %w", shutdown.ErrShutdown, context.Canceled)

// CodeShuttingDown answers a call that a shutdown ended before it finished
// (implementation-defined, -32000…-32099; not a code an SDK reserves, see
// CodeStarting): its
// data holds retryAfter, in seconds; over HTTP a JSON answer has
// Retry-After too.
const CodeShuttingDown = -32006

// shuttingDown is the answer to a call a shutdown ended.
func shuttingDown() *RPCError {
	secs := int(shutdown.RetryAfter / time.Second)
	return &RPCError{Code: CodeShuttingDown, Message: shutdown.Message, Data: map[string]any{"retryAfter": secs}}
}

// serve answers one message: the frame to send back, nil for a
// notification or a response. It is the front's one dispatch table.
func (f *Server) serve(ctx context.Context, m *message, x *exchange) []byte {
	if m.response {
		return nil // an answer to a request the front never sends
	}
	if x.modern == nil && m.params != nil {
		// A 2026-07-28 request names its version in _meta, whatever the
		// transport; the HTTP transport has read it already.
		mr, failure := readModern(m.params)
		if failure != nil {
			return f.answer(m, nil, failure)
		}
		x.modern = mr
	}
	if m.id == nil {
		f.notification(ctx, m, x)
		return nil
	}
	ctx = context.WithValue(ctx, requestKey{}, &requestInfo{id: m.id, x: x})
	switch modern := x.modern != nil; mcpgo.MCPMethod(m.method) {
	case mcpgo.MethodInitialize:
		if modern {
			return f.answer(m, nil, removed(m.method))
		}
		res, failure := f.initialize(m, x)
		return f.answer(m, res, failure)
	case mcpgo.MethodPing:
		if modern {
			return f.answer(m, nil, removed(m.method))
		}
		return f.answer(m, json.RawMessage("{}"), nil)
	case mcpgo.MethodServerDiscover:
		if !modern {
			return f.answer(m, nil, &RPCError{Code: mcpgo.METHOD_NOT_FOUND,
				Message: strconv.Quote(m.method) + " requires protocol version " + mcpgo.ProtocolVersion20260728 + " or later"})
		}
		return f.answer(m, f.discover(x), nil)
	case mcpgo.MethodToolsList:
		return f.answer(m, f.list(ctx, x), nil)
	case mcpgo.MethodToolsCall:
		return f.call(ctx, m, x)
	case mcpgo.MethodSubscriptionsListen:
		return f.listen(ctx, m, x)
	case "tasks/get", "tasks/update", "tasks/cancel", "tasks/result", "tasks/list":
		return f.taskMethod(ctx, m, x)
	case mcpgo.MethodSetLogLevel:
		return f.answer(m, nil, &RPCError{Code: mcpgo.METHOD_NOT_FOUND, Message: "logging not supported"})
	case mcpgo.MethodResourcesList, mcpgo.MethodResourcesTemplatesList, mcpgo.MethodResourcesRead,
		mcpgo.MethodResourcesSubscribe, mcpgo.MethodResourcesUnsubscribe:
		return f.answer(m, nil, &RPCError{Code: mcpgo.METHOD_NOT_FOUND, Message: "resources not supported"})
	case mcpgo.MethodPromptsList, mcpgo.MethodPromptsGet:
		return f.answer(m, nil, &RPCError{Code: mcpgo.METHOD_NOT_FOUND, Message: "prompts not supported"})
	case mcpgo.MethodCompletionComplete:
		return f.answer(m, nil, &RPCError{Code: mcpgo.METHOD_NOT_FOUND, Message: "completions not supported"})
	default:
		return f.answer(m, nil, &RPCError{Code: mcpgo.METHOD_NOT_FOUND, Message: "Method " + m.method + " not found"})
	}
}

// answer is m's response: result, or failure. A 2026-07-28 result gets
// what that revision adds to every result (modern.go).
func (f *Server) answer(m *message, result any, failure *RPCError) []byte {
	if failure != nil {
		return errorFrame(m.id, failure)
	}
	return resultFrame(m.id, result)
}

// notification handles a message without an id.
func (f *Server) notification(ctx context.Context, m *message, x *exchange) {
	switch mcpgo.MCPMethod(m.method) {
	case mcpgo.MethodNotificationCancelled:
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.params, &p) == nil && p.RequestID != nil && x.calls != nil {
			x.calls.cancel(x.scope+idKey(p.RequestID), errClientCancelled)
		}
	}
	// notifications/initialized and anything else: nothing to do.
}

// idKey is the canonical form of a JSON-RPC id: 1, 1.0 and 1e0 are one id.
func idKey(id json.RawMessage) string {
	if len(id) > 0 && id[0] != '"' {
		if n, err := strconv.ParseFloat(string(id), 64); err == nil {
			return strconv.FormatFloat(n, 'g', -1, 64)
		}
	}
	return string(id)
}

// initialize opens a session: the protocol version (the client's when it
// is one before 2026-07-28 this front speaks, else the latest such), and
// what the client declared.
func (f *Server) initialize(m *message, x *exchange) (any, *RPCError) {
	var p struct {
		ProtocolVersion string                   `json:"protocolVersion"`
		Capabilities    mcpgo.ClientCapabilities `json:"capabilities"`
	}
	if m.params != nil {
		if err := json.Unmarshal(m.params, &p); err != nil {
			return nil, &RPCError{Code: mcpgo.INVALID_REQUEST, Message: "unparsable initialize request: " + err.Error()}
		}
	}
	version := mcpgo.NegotiateLegacyVersion(p.ProtocolVersion)
	if x.p != nil {
		x.p.mu.Lock()
		x.p.version, x.p.caps = version, &p.Capabilities
		x.p.mu.Unlock()
	}
	res := mcpgo.InitializeResult{
		ProtocolVersion: version,
		Capabilities:    serverCapabilities,
		ServerInfo:      mcpgo.Implementation{Name: f.name, Version: f.version},
	}
	if f.tasks != nil {
		return f.withLegacyTasks(res), nil
	}
	return res, nil
}

// serverCapabilities are the front's: tools, whose list changes.
var serverCapabilities = mcpgo.ServerCapabilities{Tools: &struct {
	ListChanged bool `json:"listChanged,omitempty"`
}{ListChanged: true}}

// list answers tools/list from the catalog's encoding (the tools the
// caller may see: visibility.go).
func (f *Server) list(ctx context.Context, x *exchange) json.RawMessage {
	cat := f.cat.Load() // the tools and their visibility: one generation
	tf := cat.filter(ctx)
	tools := f.toolsFor(tf, cat)
	if x.modern != nil {
		meta := f.listMeta
		if tf != nil {
			// Lists differ per caller (Visibility): no shared cache may
			// keep one for another caller.
			meta = json.RawMessage(`{"ttlMs":` + string(memberOf(meta, "ttlMs")) + `,"cacheScope":"private"}`)
		}
		if len(tools) <= 2 { // "[]": nothing listed yet, or an empty catalog; not worth keeping
			meta = json.RawMessage(`{"ttlMs":0,"cacheScope":` + string(memberOf(meta, "cacheScope")) + `}`)
		}
		return f.modernResult(meta, "tools", tools)
	}
	out := make([]byte, 0, len(tools)+12)
	out = append(out, `{"tools":`...)
	out = append(out, tools...)
	return append(out, '}')
}

// call answers tools/call: the tool's handler with the request decoded
// once, under a context that notifications/cancelled, the client leaving
// and the transport's shutdown end.
func (f *Server) call(ctx context.Context, m *message, x *exchange) []byte {
	req, failure := callRequest(m.params)
	if failure != nil {
		return f.refuse(ctx, m, req, RefusedParams, failure)
	}
	cat := f.cat.Load() // the tools and their visibility: one generation, for the whole call
	t := cat.byName[req.Params.Name]
	hidden := t != nil && !cat.allows(ctx, req.Params.Name)
	if hidden {
		t = nil // as if it were not served (visibility.go)
	}
	if t == nil && f.starting != nil {
		// Not served yet, perhaps: a hidden tool is answered alike.
		if failure := f.starting(ctx); failure != nil {
			return f.refuse(ctx, m, req, RefusedStarting, failure)
		}
	}
	if t == nil {
		kind := RefusedUnknownTool
		if hidden {
			kind = RefusedAccess
		}
		return f.refuse(ctx, m, req, kind, unknownTool(req.Params.Name, suggest(ctx, cat, req.Params.Name)))
	}
	if failure := f.taskGate(m, x, t); failure != nil {
		// A tool that runs only as a task, for a client that cannot take
		// one (tasks.go); without tasks (SetTasks), params.task is ignored.
		return f.refuse(ctx, m, req, RefusedTask, failure)
	}
	if x.modern != nil {
		// A retry answering an input_required result (inputstate.go).
		resumed, failure := f.resume(ctx, &req)
		if failure != nil {
			return f.refuse(ctx, m, req, RefusedRetry, failure)
		}
		ctx = resumed
	} else {
		req.Params.RequestState, req.Params.InputResponses = "", nil // no multi round-trip before 2026-07-28
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if x.life != nil {
		defer context.AfterFunc(x.life, func() { cancel(errFrontShutdown) })()
	}
	if x.calls != nil {
		key := x.scope + idKey(m.id)
		x.calls.begin(key, cancel)
		defer x.calls.end(key)
	}
	res, taskFrame, err := f.runCall(ctx, m, x, t, req) // as a task, perhaps (tasks.go)
	if taskFrame != nil {
		return taskFrame
	}
	if x.stream && errors.Is(context.Cause(ctx), errClientCancelled) {
		return nil
	}
	if shutdown.Is(ctx) {
		return f.answer(m, nil, shuttingDown())
	}
	if err == nil && res == nil {
		err = &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: fmt.Sprintf("tool '%s' returned no result", req.Params.Name)}
	}
	if err != nil {
		if ask, ok := inputRequest(err); ok {
			if x.modern != nil {
				return f.answer(m, f.inputRequired(ctx, req, ask), nil)
			}
			return f.answer(m, nil, legacyInputRequired(ask))
		}
		var coded CodedError
		if errors.As(err, &coded) && coded != nil {
			return f.answer(m, nil, &RPCError{Code: coded.RPCCode(), Message: coded.Error(), Data: coded.RPCData()})
		}
		return f.answer(m, nil, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: err.Error()})
	}
	b, err := f.callResult(res, x.modern != nil)
	if err != nil {
		return f.answer(m, nil, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "Internal error: the result could not be encoded: " + err.Error()})
	}
	return resultFrame(m.id, b)
}

// Why the front answered a tools/call itself (CallRefusal.Kind).
const (
	// RefusedParams: the params are not those of a tools/call (-32602);
	// the request's name may be empty.
	RefusedParams = "invalid_params"
	// RefusedUnknownTool: the front serves no such tool (-32602).
	RefusedUnknownTool = "unknown_tool"
	// RefusedAccess: the tool is served, but not to this caller
	// (Options.Visibility); the caller is answered as for
	// RefusedUnknownTool.
	RefusedAccess = "access_denied"
	// RefusedStarting: the tool is not served, while the catalog is not
	// complete yet (Options.Starting's answer: the bridge is starting).
	RefusedStarting = "starting"
	// RefusedTask: the tool can only run as a task (-32601).
	RefusedTask = "task_required"
	// RefusedRetry: a retry's requestState or inputResponses were
	// refused (-32602; inputstate.go).
	RefusedRetry = "invalid_retry"
)

// CallRefusal is why the front answered a tools/call itself
// (Options.OnCallRefused): Kind (RefusedParams, …) and the error it
// answered.
type CallRefusal struct {
	Kind string
	Err  *RPCError
}

// refuse answers m with failure, telling Options.OnCallRefused first.
func (f *Server) refuse(ctx context.Context, m *message, req mcpgo.CallToolRequest, kind string, failure *RPCError) []byte {
	if f.onRefused != nil {
		f.onRefused(ctx, req, CallRefusal{Kind: kind, Err: failure})
	}
	return f.answer(m, nil, failure)
}

// unknownTool is the answer to a call of a tool the front does not serve
// (or the caller may not see), with the names suggested.
func unknownTool(name string, suggested []string) *RPCError {
	return &RPCError{Code: mcpgo.INVALID_PARAMS, Message: fmt.Sprintf("tool '%s' not found: tool not found", name) + didYouMean(suggested)}
}

// runHandler runs h, turning a panic into an error (a bad tool must not
// take the transport down).
func runHandler(ctx context.Context, h ToolHandler, req mcpgo.CallToolRequest) (res *mcpgo.CallToolResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("the tool failed: panic: %v", r)
		}
	}()
	return h(ctx, req)
}

// callRequest decodes the params of a tools/call: its name and _meta; the
// arguments stay the client's bytes. Params of the wrong shape are -32602
// Invalid params (JSON-RPC 2.0 §5.1: the request itself is valid), with a
// message a model can act on.
func callRequest(params json.RawMessage) (mcpgo.CallToolRequest, *RPCError) {
	req := mcpgo.CallToolRequest{}
	req.Method = string(mcpgo.MethodToolsCall)
	if params == nil {
		return req, invalidCallParams("params", "an object", params)
	}
	var room [8]member
	members, ok := objectMembers(room[:0], params)
	if !ok {
		return req, invalidCallParams("params", "an object", params)
	}
	for i, mb := range members {
		// A key given twice is read by one reader as its first value and
		// by another as its last: refused, as in the arguments.
		for _, before := range members[:i] {
			if before.key == mb.key {
				return req, &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "invalid tools/call params: params has the member " +
					strconv.Quote(mb.key) + " more than once; give each member once"}
			}
		}
	}
	for _, mb := range members {
		v := params[mb.start:mb.end]
		switch mb.key {
		case "name":
			name, ok := jsonString(v)
			if !ok {
				return req, invalidCallParams("params.name", "a string", v)
			}
			req.Params.Name = name
		case "arguments":
			switch v[0] {
			case 'n': // null: none
				req.Params.RawArguments = nil
			case '{':
				if n, bad := hugeNumber(v); bad {
					return req, &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "invalid arguments: the number " + n +
						" is out of range: a number must be within ±1.8e308 (a 64-bit float)"}
				}
				if k, dup := duplicateKey(v); dup {
					// The tool, the upstream behind it and the requestState's
					// digest (inputstate.go) could each read another of its
					// values.
					return req, &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "invalid arguments: the key " + strconv.Quote(k) +
						" is given more than once in one object; give each key once"}
				}
				req.Params.RawArguments = json.RawMessage(v)
			default:
				return req, invalidCallParams("params.arguments", "an object", v)
			}
		case "requestState": // a retry (inputstate.go)
			s, ok := jsonString(v)
			if !ok {
				return req, invalidCallParams("params.requestState", "a string", v)
			}
			req.Params.RequestState = s
		case "inputResponses":
			if v[0] != '{' {
				return req, invalidCallParams("params.inputResponses", "an object", v)
			}
			var responses mcpgo.InputResponses // on the heap only here: req stays on the stack
			if err := json.Unmarshal(v, &responses); err != nil {
				return req, invalidCallParams("params.inputResponses", "an object", v)
			}
			req.Params.InputResponses = responses
		case "_meta":
			req.Params.Meta = nil
			if v[0] == '{' {
				var meta mcpgo.Meta
				if err := json.Unmarshal(v, &meta); err != nil {
					return req, &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "invalid tools/call params: params._meta: " + err.Error()}
				}
				req.Params.Meta = &meta
			} else if v[0] != 'n' {
				return req, invalidCallParams("params._meta", "an object", v)
			}
		}
	}
	if req.Params.Name == "" {
		return req, &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "invalid tools/call params: params.name is required: the name of a tool from tools/list"}
	}
	if req.Params.RawArguments == nil {
		req.Params.RawArguments = json.RawMessage("{}") // absent or null: none
	}
	return req, nil
}

// invalidCallParams is -32602 for a member of a tools/call's params that
// is not what it must be.
func invalidCallParams(what, want string, got json.RawMessage) *RPCError {
	return &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "invalid tools/call params: " + what + " must be " + want + ", not " + jsonKind(got)}
}

// jsonKind names the kind of the JSON value v ("a number", …).
func jsonKind(v json.RawMessage) string {
	if len(v) == 0 {
		return "absent"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// hugeNumber finds in the valid JSON text v a number beyond float64 (as
// 1e400): JSON allows it, but no tool behind the front could read it
// (encoding/json refuses it; OTC servers read float64). Only numbers with
// an exponent or of 300 digits or more can be; others are passed over
// without being parsed.
func hugeNumber(v []byte) (string, bool) {
	for i := 0; i < len(v); {
		switch c := v[i]; {
		case c == '"':
			i = jsonscan.StringEnd(v, i)
		case c == '-' || c >= '0' && c <= '9':
			j, exp := i, false
			for j < len(v) && (v[j] == '-' || v[j] == '+' || v[j] == '.' || v[j] == 'e' || v[j] == 'E' || v[j] >= '0' && v[j] <= '9') {
				exp = exp || v[j] == 'e' || v[j] == 'E'
				j++
			}
			if exp || j-i >= 300 {
				if _, err := strconv.ParseFloat(string(v[i:j]), 64); err != nil {
					return string(v[i:j]), true
				}
			}
			i = j
		default:
			i++
		}
	}
	return "", false
}

// duplicateKey finds, in the valid JSON text v, an object (at any depth)
// that has a key more than once (keys compared unescaped): the key and
// true; "", false when there is none. It walks v's bytes once and
// allocates nothing for keys without escapes in objects of up to
// dupSmall keys (a tools/call's arguments, nearly always): those are
// compared in place; a larger object's keys go through a map.
func duplicateKey(v []byte) (string, bool) {
	k, dup, _ := dupScan(v, jsonscan.SkipSpace(v, 0))
	return k, dup
}

// dupSmall is how many keys an object may have before duplicateKey
// compares them through a map rather than each with the others.
const dupSmall = 16

// dupScan checks the value at v[i] and returns the index after it.
func dupScan(v []byte, i int) (string, bool, int) {
	if i >= len(v) {
		return "", false, len(v)
	}
	switch v[i] {
	case '{':
		var small [dupSmall][]byte
		var seen map[string]struct{}
		n := 0
		i = jsonscan.SkipSpace(v, i+1)
		for i < len(v) && v[i] != '}' {
			end := jsonscan.StringEnd(v, i)
			if end < 0 {
				return "", false, len(v)
			}
			key := v[i+1 : end-1]
			if bytes.IndexByte(key, '\\') >= 0 {
				var u string
				if json.Unmarshal(v[i:end], &u) == nil {
					key = []byte(u)
				}
			}
			switch {
			case seen != nil:
				if _, ok := seen[string(key)]; ok {
					return string(key), true, len(v)
				}
				seen[string(key)] = struct{}{}
			case n < dupSmall:
				for _, k := range small[:n] {
					if bytes.Equal(k, key) {
						return string(key), true, len(v)
					}
				}
				small[n] = key
				n++
			default:
				seen = make(map[string]struct{}, 2*dupSmall)
				for _, k := range small[:n] {
					seen[string(k)] = struct{}{}
				}
				if _, ok := seen[string(key)]; ok {
					return string(key), true, len(v)
				}
				seen[string(key)] = struct{}{}
			}
			i = jsonscan.SkipSpace(v, end)
			if i < len(v) && v[i] == ':' {
				i = jsonscan.SkipSpace(v, i+1)
			}
			k, dup, next := dupScan(v, i)
			if dup {
				return k, true, len(v)
			}
			i = jsonscan.SkipSpace(v, next)
			if i < len(v) && v[i] == ',' {
				i = jsonscan.SkipSpace(v, i+1)
			}
		}
		return "", false, i + 1
	case '[':
		i = jsonscan.SkipSpace(v, i+1)
		for i < len(v) && v[i] != ']' {
			k, dup, next := dupScan(v, i)
			if dup {
				return k, true, len(v)
			}
			i = jsonscan.SkipSpace(v, next)
			if i < len(v) && v[i] == ',' {
				i = jsonscan.SkipSpace(v, i+1)
			}
		}
		return "", false, i + 1
	}
	end := jsonscan.ValueEnd(v, i)
	if end <= i {
		return "", false, len(v)
	}
	return "", false, end
}

// urlElicitation finds a URLElicitationRequiredError in err's chain,
// returned as a value or a pointer.
func urlElicitation(err error) (mcpgo.URLElicitationRequiredError, bool) {
	var v mcpgo.URLElicitationRequiredError
	if errors.As(err, &v) {
		return v, true
	}
	var p *mcpgo.URLElicitationRequiredError
	if errors.As(err, &p) && p != nil {
		return *p, true
	}
	return v, false
}

// removed is the error of a method 2026-07-28 removed.
func removed(method string) *RPCError {
	return &RPCError{Code: mcpgo.METHOD_NOT_FOUND, Message: strconv.Quote(method) + " was removed in protocol version " + mcpgo.ProtocolVersion20260728}
}

// requestKey holds, in a request's context, which request it is.
type requestKey struct{}

type requestInfo struct {
	id json.RawMessage
	x  *exchange
}

func requestFrom(ctx context.Context) *requestInfo {
	r, _ := ctx.Value(requestKey{}).(*requestInfo)
	return r
}

// RequestID is the JSON-RPC id of the request being handled, as the
// client sent it; false outside one.
func RequestID(ctx context.Context) (json.RawMessage, bool) {
	if r := requestFrom(ctx); r != nil {
		return r.id, true
	}
	return nil, false
}

// SessionID is the id of the streamable HTTP session of the request being
// handled, "" when it has none.
func SessionID(ctx context.Context) string {
	if r := requestFrom(ctx); r != nil && r.x.p != nil {
		return r.x.p.id
	}
	return ""
}

// Notify sends a notification to the client of the request being handled,
// on that request's stream (notifications/progress, for one); false when
// it cannot be delivered.
func Notify(ctx context.Context, method string, params any) bool {
	r := requestFrom(ctx)
	if r == nil || r.x.notify == nil {
		return false
	}
	return r.x.notify(notificationFrame(method, params))
}

type tokenKey struct{}

// secretToken keeps a caller's token out of fmt's rendering of a context.
type secretToken struct{ s string }

// CallerBearerToken returns the bearer token the HTTP request that carried
// the current MCP request presented (streamable HTTP, or the SSE message
// POST), whether or not the front requires one. It is for forwarding the
// caller's own token upstream; never log it.
func CallerBearerToken(ctx context.Context) (string, bool) {
	t, ok := ctx.Value(tokenKey{}).(secretToken)
	return t.s, ok
}

type traceHeadersKey struct{}

// TraceHeaders returns the W3C trace context headers (traceparent,
// tracestate) of the HTTP request that carried the current MCP request,
// "" when it had none (or on stdio).
func TraceHeaders(ctx context.Context) (traceparent, tracestate string) {
	h, _ := ctx.Value(traceHeadersKey{}).([2]string)
	return h[0], h[1]
}

// ClientSupportsURLElicitation reports whether the client declared URL-mode
// elicitation (capabilities.elicitation.url, 2025-11-25): in the request's
// _meta for 2026-07-28 requests, else at initialize (which a signed session
// id carries, see HTTPOptions.SessionKeys). A stateless HTTP handler does
// not remember initialize, so it says false.
func ClientSupportsURLElicitation(ctx context.Context) bool {
	r := requestFrom(ctx)
	if r == nil {
		return false
	}
	var caps *mcpgo.ClientCapabilities
	switch {
	case r.x.modern != nil:
		caps = r.x.modern.caps
	case r.x.p != nil:
		r.x.p.mu.Lock()
		caps = r.x.p.caps
		r.x.p.mu.Unlock()
	}
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}
