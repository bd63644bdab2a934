package tracing

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Attribute keys of the OpenTelemetry semantic conventions (MCP, GenAI,
// JSON-RPC, errors) that the fronts' spans carry.
const (
	KeyMCPMethod     = attribute.Key("mcp.method.name")
	KeyMCPSession    = attribute.Key("mcp.session.id")
	KeyToolName      = attribute.Key("gen_ai.tool.name")
	KeyOperation     = attribute.Key("gen_ai.operation.name")
	KeyToolCallID    = attribute.Key("gen_ai.tool.call.id")
	KeyRequestID     = attribute.Key("jsonrpc.request.id")
	KeyErrorType     = attribute.Key("error.type")
	KeyServerAddress = attribute.Key("server.address")
	// KeyUpstream is mcpotc's own: the configured name of the upstream.
	KeyUpstream = attribute.Key("mcpotc.upstream")
)

// OperationExecuteTool is gen_ai.operation.name of a tool call.
const OperationExecuteTool = "execute_tool"

// propagator is W3C Trace Context, the only format either protocol names
// (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// or OTEL_TRACES_EXPORTER=otlp, unless OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch strings.ToLower(getenv("OTEL_TRACES_EXPORTER")) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup returns the tracer provider of a process and what flushes and
// stops it: a no-op provider when the environment asks for no traces
// (Enabled), else one that exports spans in batches over OTLP/HTTP, the
// exporter configured by the OTEL_EXPORTER_OTLP_* variables and the
// service named service (OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// override it).
func Setup(ctx context.Context, getenv func(string) string, service, version string) (trace.TracerProvider, func(context.Context) error, error) {
	if !Enabled(getenv) {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service), attribute.String("service.version", version)),
		resource.WithFromEnv())
	if err != nil {
		return nil, nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// Tracer is the fronts' tracer from tp; a nil tp gives a no-op tracer.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer("github.com/mcpotc/mcpotc")
}

// Records reports whether t records spans: false for the no-op tracer
// (tracing off). With it, Start keeps ctx's span context as it is (the
// OpenTelemetry API's behaviour without an SDK), so a caller may skip
// Start, and the span's name and attributes, and continue the caller's
// trace (Continue) alone: what is propagated is the same.
func Records(t trace.Tracer) bool {
	_, off := t.(noop.Tracer)
	return !off
}

// NoSpan is a span that records nothing and is no other span: what a
// caller that skipped Start (Records) ends and marks, so that it never
// ends or marks a span of ctx that someone else started.
var NoSpan trace.Span = noop.Span{}

// Continue returns ctx with the remote span context of traceparent (and
// tracestate) as its parent, when ctx holds no span yet and traceparent
// is valid; else ctx.
func Continue(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	carrier := propagation.MapCarrier{"traceparent": traceparent}
	if tracestate != "" {
		carrier["tracestate"] = tracestate
	}
	return propagator.Extract(ctx, carrier)
}

// Traceparent is the W3C traceparent of the span in ctx, "" when there is
// none (tracing off and no remote parent).
func Traceparent(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	propagator.Inject(ctx, carrier)
	return carrier["traceparent"]
}

// TraceID is the trace id of the span in ctx, as hex, "" when none.
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}
