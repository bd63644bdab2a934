package bridge

import (
	"context"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/bridge/tracing"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/otc"
)

// mcpCall is one answered tools/call of the MCP front, as it is recorded:
// its log line ("call"), its metric, its audit line and its span are all
// written from it, once, by finish — whichever way the call ended: a
// front-level refusal (frontRefused), a refusal of the handler (a rate
// limit, a malformed idempotency_key, an authorization declined), or the
// OTC server's answer.
type mcpCall struct {
	f     *MCPFront
	ctx   context.Context // the call's, with its span
	t     *frontTool      // nil: a tool the catalog does not hold (or a call refused before its tool was known)
	name  string          // the tool as asked
	start time.Time
	span  trace.Span // the call's (tracing.NoSpan when tracing is off)
	cspan trace.Span // the OTC request's, once made

	// What is known of the call when it ends.
	req       *otc.CallToolRequest // the OTC request, once built
	outcome   string               // metrics.OK, …: the metric's and the audit line's outcome
	said      string               // the log line's outcome, in words ("" for an answer the OTC server gave)
	detail    string               // the audit line's detail: the refusal's reason, in the front's fixed words
	success   *bool                // the OTC answer's success, when it answered
	replayed  bool                 // answered from the idempotency_key answers
	round     int                  // the authorization round a retry answered (0: none)
	errText   string               // the error (redacted), for the log line
	developer string               // the OTC answer's developer_message (redacted), for the log line
	ended     bool
}

// beginCall starts the record of a tools/call of t (nil: not in the
// catalog) named name, and its span: the call's span continues the host's
// trace, _meta.traceparent (2026-07-28) else the HTTP request's
// traceparent header. With tracing off no span is built: the caller's
// trace context alone goes on (tracing.Records).
func (f *MCPFront) beginCall(ctx context.Context, t *frontTool, name string, req mcpgo.CallToolRequest) *mcpCall {
	c := &mcpCall{f: f, t: t, name: name, start: time.Now(), span: tracing.NoSpan, cspan: tracing.NoSpan}
	tp, ts := front.TraceHeaders(ctx)
	if m := traceparent(req); m != "" {
		tp, ts = m, ""
	}
	ctx = tracing.Continue(ctx, tp, ts)
	if f.records {
		attrs := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(tracing.KeyMCPMethod.String("tools/call"), tracing.KeyToolName.String(name),
				tracing.KeyOperation.String(tracing.OperationExecuteTool))}
		if t != nil {
			attrs = append(attrs, trace.WithAttributes(tracing.KeyUpstream.String(t.up.Name)))
		}
		ctx, c.span = f.tracer.Start(ctx, "tools/call "+name, attrs...)
		if s := front.SessionID(ctx); s != "" {
			c.span.SetAttributes(tracing.KeyMCPSession.String(s))
		}
		if id, ok := front.RequestID(ctx); ok {
			c.span.SetAttributes(tracing.KeyRequestID.String(requestIDString(id)))
		}
	}
	c.ctx = ctx
	return c
}

// refused sets how a call refused before (or instead of) the OTC server's
// answer ended: its outcome, the log line's words and the audit line's
// detail.
func (c *mcpCall) refused(outcome, said string) {
	c.outcome, c.said, c.detail = outcome, said, said
}

// finish writes the call's log line, metric, audit line and span, once:
// outcome when the call set none is read from what the handler answered.
func (c *mcpCall) finish(res *mcpgo.CallToolResult, err error) {
	if c.ended {
		return
	}
	c.ended = true
	d := time.Since(c.start)
	f := c.f
	if c.outcome == "" {
		switch {
		case err != nil:
			c.outcome = metrics.Internal
		case res != nil && res.IsError:
			c.outcome = metrics.ToolError
		default:
			c.outcome = metrics.OK
		}
	}
	upstream, tool := metrics.Other, metrics.Other
	if c.t != nil {
		upstream, tool = c.t.up.Name, c.t.Tool.Name
	}

	ev := f.log.Info()
	if c.req != nil {
		ev = ev.Str("call_id", cutID(c.req.CallID))
	}
	ev = ev.Str("tool", cutID(c.name))
	if c.req != nil {
		ev = ev.Str("tool_id", c.req.ToolID)
	}
	if c.t != nil {
		ev = ev.Str("upstream", upstream)
	}
	if c.replayed {
		ev = ev.Bool("replayed", true)
	}
	if id := tracing.TraceID(c.ctx); id != "" {
		ev = ev.Str("trace_id", id)
	} else if c.req != nil && c.req.TraceID != "" {
		ev = ev.Str("trace_id", cutID(c.req.TraceID))
	}
	if id, ok := front.CallerIdentity(c.ctx); ok && id.Subject != "" {
		// Who called (OAuth): issuer and subject; never the token.
		ev = ev.Str("issuer", cutID(id.Issuer)).Str("subject", cutID(id.Subject))
	}
	if c.round > 0 {
		ev = ev.Int("round", c.round)
	}
	if c.success != nil {
		ev = ev.Bool("success", *c.success)
	}
	if c.said != "" {
		ev = ev.Str("outcome", c.said)
	}
	if c.errText != "" {
		ev = ev.Str("error", c.errText)
	}
	if c.developer != "" {
		ev = ev.Str("developer_message", c.developer)
	}
	ev.Dur("duration", d).Msg("call")

	f.opts.Metrics.Call(metrics.FrontMCP, upstream, tool, c.outcome, d)
	f.auditCall(c.ctx, c.t, c.name, c.req, c.outcome, c.detail, d)
	failed(c.span, c.outcome)
	failed(c.cspan, c.outcome)
	c.cspan.End()
	c.span.End()
}

// frontRefused records a tools/call the MCP front answered itself
// (front.Options.OnCallRefused): a tool it does not serve or the caller
// may not see, params of the wrong shape, a tool that needs tasks, a
// retry whose requestState it refused. Each is one call record, as the
// handler's calls are.
func (f *MCPFront) frontRefused(ctx context.Context, req mcpgo.CallToolRequest, r front.CallRefusal) {
	var t *frontTool
	if r.Kind != front.RefusedUnknownTool && r.Kind != front.RefusedParams && r.Kind != front.RefusedStarting {
		t = f.toolNamed(req.Params.Name)
	}
	c := f.beginCall(ctx, t, req.Params.Name, req)
	switch r.Kind {
	case front.RefusedUnknownTool:
		c.refused(metrics.UnknownTool, "no such tool")
	case front.RefusedStarting:
		c.refused(metrics.Unavailable, "the bridge is starting: the tool list is not complete yet")
	case front.RefusedAccess:
		// Answered as a tool not served; the operator reads why.
		c.refused(metrics.UnknownTool, "not granted by the access policy")
	case front.RefusedTask:
		c.refused(metrics.InvalidInput, "the tool runs only as a task")
	case front.RefusedRetry:
		c.refused(metrics.InvalidInput, "retry refused: its requestState or inputResponses")
	default:
		c.refused(metrics.InvalidInput, "invalid tools/call params")
	}
	var err error
	if r.Err != nil {
		err = r.Err
	}
	c.finish(nil, err)
}

// toolNamed is the tool of the served catalog named name; nil when there
// is none. It takes no lock: a refusal may be answered while a reload
// holds f.mu (it reads the catalog publish stored last).
func (f *MCPFront) toolNamed(name string) *frontTool {
	if named := f.named.Load(); named != nil {
		return (*named)[name]
	}
	return nil
}
