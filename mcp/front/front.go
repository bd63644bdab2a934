package front

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// JSON-RPC error codes the MCP front sends besides mcp-go's own constants.
const (
	// CodeRequestTimeout reports a call that got no answer in time. It is
	// implementation-defined (-32000…-32019), as in the TypeScript SDK.
	CodeRequestTimeout = -32001
)

// RPCError is a JSON-RPC error a tool handler registered on a Front's server
// returns, possibly wrapped, to answer that tools/call with exactly this
// error object instead of mcp-go's -32603. Return it as a pointer.
//
// It is sent verbatim whatever the request's protocol version, so RPCError
// with code -32042 is sent as is even to a 2026-07-28 client, for which the
// code is reserved. For URL elicitation return mcpgo.URLElicitationRequiredError
// instead: the front sends it as -32042 with data {"elicitations": […]} to
// clients before 2026-07-28 (mcp-go does) and, to 2026-07-28 clients, as an
// input_required result asking for the same URL elicitations (the front
// does). Either way the handler should first check
// ClientSupportsURLElicitation.
//
// A Code of zero is sent as -32603. Data must marshal to JSON; when it does
// not, the answer stays mcp-go's -32603 and the failure is logged.
type RPCError struct {
	Code    int
	Message string
	Data    any
}

func (e *RPCError) Error() string { return e.Message }

// DefaultMaxPendingErrors is Options.MaxPendingErrors when zero.
const DefaultMaxPendingErrors = 1024

// DefaultStdioGrace is Options.StdioGrace when zero.
const DefaultStdioGrace = 5 * time.Second

// Options configure a Front. A nil *Options is the zero value.
type Options struct {
	// Logger receives transport diagnostics; tokens are never logged.
	// Nil: nothing is logged.
	Logger *slog.Logger
	// MaxPendingErrors bounds, per stdio stream, SSE session or HTTP
	// request, the coded errors recorded for responses not yet written; the
	// oldest is dropped first. Entries are removed when their response is
	// written, so the bound only matters for responses that never are.
	// Zero means DefaultMaxPendingErrors.
	MaxPendingErrors int
	// StdioGrace is how long ServeStdio lets in-flight tool calls finish
	// once ctx ends or its input reaches EOF, before their contexts are
	// cancelled. Zero means DefaultStdioGrace; negative means no grace.
	StdioGrace time.Duration
}

// Front is the MCP server front: an mcp-go MCPServer with the hooks that let
// tool handlers answer with any JSON-RPC error (RPCError), served over stdio
// (ServeStdio), streamable HTTP and legacy SSE (HTTPHandler).
//
// A tool handler's context is cancelled when the client sends
// notifications/cancelled for its request (every transport), when the
// client goes away (streamable HTTP: the POST's connection; legacy SSE: the
// session's stream), and when the transport shuts down after its grace
// period.
type Front struct {
	server     *mcpserver.MCPServer
	log        *slog.Logger
	maxPending int
	grace      time.Duration
	ids        requestIDs // the JSON-RPC ids of calls in flight (RequestID)
	cacheState            // tools/list from an encoding per catalog (toolslist.go)
}

// New returns a Front whose server is created with serverOpts. The
// server always has the tools capability with listChanged=true, so that
// replacing tools (SetTools, AddTool, DeleteTools) sends
// notifications/tools/list_changed. serverOpts may carry WithHooks: the
// front adds its own hooks to those; it panics on WithHooks(nil), which
// would silently disable them.
func New(name, version string, opts *Options, serverOpts ...mcpserver.ServerOption) *Front {
	if opts == nil {
		opts = &Options{}
	}
	f := &Front{log: opts.Logger, maxPending: opts.MaxPendingErrors, grace: opts.StdioGrace}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if f.maxPending <= 0 {
		f.maxPending = DefaultMaxPendingErrors
	}
	if f.grace == 0 {
		f.grace = DefaultStdioGrace
	}

	hooks := &mcpserver.Hooks{}
	all := make([]mcpserver.ServerOption, 0, len(serverOpts)+3)
	all = append(all, mcpserver.WithHooks(hooks), mcpserver.WithToolHandlerMiddleware(f.middleware))
	all = append(all, serverOpts...)
	all = append(all, mcpserver.WithToolCapabilities(true))
	f.server = mcpserver.NewMCPServer(name, version, all...)
	h := f.server.GetHooks() // ours, or those of a WithHooks in serverOpts
	if h == nil {
		panic("mcp: New: WithHooks(nil) would disable the front's hooks")
	}
	f.addHooks(h)
	return f
}

// Server returns the MCP server, to add, replace and delete tools.
func (f *Front) Server() *mcpserver.MCPServer { return f.server }

func (f *Front) addHooks(h *mcpserver.Hooks) {
	h.AddOnError(f.onError)
	h.AddOnError(f.onUnparsable)
	h.AddOnError(func(_ context.Context, _ any, _ mcpgo.MCPMethod, message any, _ error) {
		if req, ok := message.(*mcpgo.CallToolRequest); ok {
			f.ids.end(req)
		}
	})
	h.AddAfterCallTool(func(_ context.Context, _ any, req *mcpgo.CallToolRequest, _ any) { f.ids.end(req) })
	h.AddAfterListTools(f.afterListTools)
	h.AddBeforeCallTool(func(ctx context.Context, id any, req *mcpgo.CallToolRequest) {
		f.ids.begin(id, req)
		if st := streamFrom(ctx); st != nil && st.trackOpen {
			st.open(idKey(id))
		}
		// The front declares no tasks capability, so a task-augmented
		// tools/call is processed normally, its params.task ignored (MCP
		// 2025-11-25, Tasks: "Receivers that do not declare the task
		// capability for a request type MUST process requests of that type
		// normally"). mcp-go v1.2.1 instead runs it on its own task store
		// when the tool's execution.taskSupport is "optional" or "required",
		// capability or not, where a task without a ttl is kept forever.
		req.Params.Task = nil
	})
	h.AddOnRegisterSession(func(ctx context.Context, session mcpserver.ClientSession) {
		if b, ok := ctx.Value(sseBindKey{}).(*sseBinding); ok {
			b.bind(session.SessionID())
		}
	})
}

// onError records a handler's RPCError for the response frame that mcp-go
// is about to write for request id, in the stream carried by ctx.
func (f *Front) onError(ctx context.Context, id any, method mcpgo.MCPMethod, _ any, err error) {
	var rpcErr *RPCError
	if !errors.As(err, &rpcErr) || rpcErr == nil || id == nil {
		return
	}
	st := streamFrom(ctx)
	if st == nil {
		f.log.Warn("mcp front: coded error sent as -32603: request did not arrive through a Front transport",
			"method", string(method), "code", rpcErr.Code)
		return
	}
	details := mcpgo.JSONRPCErrorDetails{Code: rpcErr.Code, Message: rpcErr.Message, Data: rpcErr.Data}
	if details.Code == 0 {
		details.Code = mcpgo.INTERNAL_ERROR
	}
	obj, merr := json.Marshal(details)
	if merr != nil {
		f.log.Error("mcp front: coded error sent as -32603: data does not marshal",
			"method", string(method), "code", details.Code, "error", merr)
		return
	}
	if evicted := st.put(idKey(id), coded{obj: obj, code: details.Code, modern: mcpserver.IsModernRequest(ctx)}); evicted {
		f.log.Warn("mcp front: dropped the oldest coded error never written", "limit", st.max)
	}
}

// middleware wraps every tool handler: it bounds the handler's life by its
// transport's (see lifecycle) and turns URL elicitation into a multi
// round-trip result for 2026-07-28 clients.
func (f *Front) middleware(next mcpserver.ToolHandlerFunc) mcpserver.ToolHandlerFunc {
	return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		if l, ok := ctx.Value(lifeKey{}).(*lifecycle); ok {
			var cancel context.CancelCauseFunc
			ctx, cancel = l.bind(ctx)
			defer cancel(nil)
		}
		res, err := next(ctx, req)
		if err != nil && mcpserver.IsModernRequest(ctx) {
			if required, ok := urlElicitation(err); ok {
				return inputRequired(required), nil
			}
		}
		return res, err
	}
}

// urlElicitation finds a URLElicitationRequiredError in err's chain,
// returned as a value or a pointer (as mcp-go does).
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

// inputRequired asks a 2026-07-28 client for the URL elicitations in
// required, each keyed by its elicitationId: protocol 2026-07-28 reserves
// -32042 and asks for input through a multi round-trip request instead.
// The client retries the call once it has the user's answer.
func inputRequired(required mcpgo.URLElicitationRequiredError) *mcpgo.CallToolResult {
	b := mcpserver.NewInputRequestBuilder("")
	for i, e := range required.Elicitations {
		if e.Mode == "" {
			e.Mode = mcpgo.ElicitationModeURL
		}
		key := e.ElicitationID
		if key == "" {
			key = "elicitation-" + strconv.Itoa(i)
		}
		b.Elicit(key, e)
	}
	return b.ToolResult()
}

// lifecycle bounds the tool calls of one transport instance: they end when
// stop is cancelled. On stdio the calls are also detached from the
// cancellation mcp-go applies to every request when input ends, once
// draining is closed, so that they can finish within the grace period.
type lifecycle struct {
	stop     context.Context
	draining chan struct{} // nil: never detach (HTTP)
}

type lifeKey struct{}

// bind returns the context a tool handler runs with.
func (l *lifecycle) bind(ctx context.Context) (context.Context, context.CancelCauseFunc) {
	if l.draining == nil {
		hctx, cancel := context.WithCancelCause(ctx)
		stop := context.AfterFunc(l.stop, func() { cancel(errFrontShutdown) })
		return hctx, func(cause error) { stop(); cancel(cause) }
	}
	// Stdio: mcp-go cancels ctx for notifications/cancelled and, when input
	// ends, for every request. Follow the first at once; for the second,
	// which comes after draining is closed, wait for stop.
	hctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopParent := context.AfterFunc(ctx, func() {
		select {
		case <-l.draining:
			select {
			case <-l.stop.Done():
				cancel(errFrontShutdown)
			case <-hctx.Done():
			}
		default:
			cancel(context.Cause(ctx))
		}
	})
	stop := context.AfterFunc(l.stop, func() { cancel(errFrontShutdown) })
	return hctx, func(cause error) { stop(); stopParent(); cancel(cause) }
}

var errFrontShutdown = fmt.Errorf("mcp front: shutting down: %w", context.Canceled)

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
// _meta for 2026-07-28 requests, else in the session's initialize request
// (as a signed session id carries it, see HTTPOptions.SessionKeys).
// A stateless HTTP session does not remember initialize, so it says false.
func ClientSupportsURLElicitation(ctx context.Context) bool {
	var caps *mcpgo.ClientCapabilities
	if info := mcpserver.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		caps = info.ClientCapabilities
	} else if s, ok := mcpserver.ClientSessionFromContext(ctx).(mcpserver.SessionWithClientInfo); ok {
		c := s.GetClientCapabilities()
		caps = &c
	}
	if caps == nil || caps.Elicitation == nil {
		// A session opened on another replica (HTTPOptions.SessionKeys):
		// mcp-go serves it with a session that saw no initialize.
		if c := sessionClaimsFrom(ctx); c != nil {
			caps = c.Capabilities
		}
	}
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}
