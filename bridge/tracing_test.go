package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpotc/mcpotc/bridge/tracing"
	"github.com/mcpotc/mcpotc/internal/mcpgotest"
	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/otcsample"
)

const (
	parentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentSpan  = "00f067aa0ba902b7"
	parentTP    = "00-" + parentTrace + "-" + parentSpan + "-01"
)

func recorder() (*tracetest.SpanRecorder, trace.Tracer) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	return rec, tracing.Tracer(tp)
}

// spanView is what a test compares of a span.
type spanView struct {
	Name, Kind, Trace, Parent, Status string
	Attrs                             map[string]string
}

func view(s sdktrace.ReadOnlySpan) spanView {
	v := spanView{Name: s.Name(), Kind: s.SpanKind().String(), Trace: s.SpanContext().TraceID().String(),
		Parent: s.Parent().SpanID().String(), Attrs: map[string]string{}}
	if s.Status().Code == codes.Error {
		v.Status = "error"
	}
	for _, kv := range s.Attributes() {
		v.Attrs[string(kv.Key)] = kv.Value.String()
	}
	return v
}

func traceparentOf(s sdktrace.ReadOnlySpan) string {
	return "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"
}

func sameView(t *testing.T, what string, got spanView, want spanView) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s\n got: %s\nwant: %s", what, g, w)
	}
}

// The MCP front: a tools/call with _meta.traceparent gets a server span
// in that trace (MCP semantic conventions), and a client span for the OTC
// request whose traceparent the OTC server receives as the HTTP header and
// as trace_id; a failed call marks both with error.type.
func TestMCPFrontSpans(t *testing.T) {
	probe, seenTraces := traceProbe(t)
	rec, tracer := recorder()
	f, err := NewMCPFront(context.Background(), []OTCServer{otcUpstreamOn(t, "calc", "", probe)}, &MCPFrontOptions{Logger: zerolog.Nop(), Tracer: tracer})
	if err != nil {
		t.Fatal(err)
	}
	s := f.Server()
	ctx := context.Background()
	s.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
	s.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Calculator_Add","arguments":{"a":2,"b":3},"_meta":{"traceparent":"`+parentTP+`"}}}`))
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	client, server := spans[0], spans[1]
	sameView(t, "server span", view(server), spanView{Name: "tools/call Calculator_Add", Kind: "server", Trace: parentTrace, Parent: parentSpan,
		Attrs: map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "Calculator_Add", "gen_ai.operation.name": "execute_tool", "mcpotc.upstream": "calc", "jsonrpc.request.id": "1"}})
	cv := view(client)
	delete(cv.Attrs, "gen_ai.tool.call.id")
	sameView(t, "client span", cv, spanView{Name: "execute_tool Calculator.Add@1.1.0", Kind: "client", Trace: parentTrace, Parent: server.SpanContext().SpanID().String(),
		Attrs: map[string]string{"gen_ai.tool.name": "Calculator.Add@1.1.0", "gen_ai.operation.name": "execute_tool", "mcpotc.upstream": "calc"}})
	if want, seen := traceparentOf(client), seenTraces(); len(seen) != 2 || seen[0] != want || seen[1] != want {
		t.Errorf("the OTC server saw traceparent / trace_id %q, want the client span's %s twice", seen, want)
	}

	s.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Calculator_Add","arguments":{"a":"two","b":3}}}`))
	spans = rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	for _, sp := range spans[2:] {
		v := view(sp)
		if v.Status != "error" || v.Attrs["error.type"] != "invalid_input" || v.Trace == parentTrace {
			t.Errorf("span of a refused call without a parent: %+v", v)
		}
	}

	// A tool the front does not serve: mcp-go answers, the span is there.
	s.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope","arguments":{},"_meta":{"traceparent":"`+parentTP+`"}}}`))
	spans = rec.Ended()
	if len(spans) != 5 {
		t.Fatalf("%d spans, want 5", len(spans))
	}
	sameView(t, "unknown tool span", view(spans[4]), spanView{Name: "tools/call nope", Kind: "server", Trace: parentTrace, Parent: parentSpan, Status: "error",
		Attrs: map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "nope", "gen_ai.operation.name": "execute_tool", "jsonrpc.request.id": "3", "error.type": "unknown_tool"}})
}

// The OTC front: a call with a traceparent header (or a trace_id that is
// one) gets a server span in that trace, and a client span for the MCP
// request whose traceparent the MCP server receives in _meta; an unknown
// tool's span has error.type unknown_tool.
func TestOTCFrontSpans(t *testing.T) {
	var mu sync.Mutex
	var metaTP []string
	srv := mcpserver.NewMCPServer("probe", "1.0.0", mcpserver.WithToolCapabilities(false))
	srv.AddTool(mcpgo.NewTool("probe"), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		tp := ""
		if req.Params.Meta != nil {
			tp, _ = req.Params.Meta.AdditionalFields["traceparent"].(string)
		}
		mu.Lock()
		metaTP = append(metaTP, tp)
		mu.Unlock()
		return mcpgo.NewToolResultText("ok"), nil
	})
	srv.AddTool(mcpgo.NewTool("fail"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultError("no"), nil
	})
	srv.AddTool(mcpgo.NewTool("slow"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
		return mcpgo.NewToolResultText("late"), nil
	})
	rec, tracer := recorder()
	f, err := NewOTCFront(context.Background(), []MCPServer{{Toolkit: "Probe", Config: upstream.Config{Name: "probe", InProcess: mcpgotest.InProcess(srv), CallTimeout: 200 * time.Millisecond}}},
		&OTCFrontOptions{Logger: zerolog.Nop(), Tracer: tracer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	waitOTCReady(t, f)
	call := func(body, traceparent string) {
		r := httptest.NewRequest(http.MethodPost, "/tools/call", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if traceparent != "" {
			r.Header.Set("traceparent", traceparent)
		}
		f.Handler().ServeHTTP(httptest.NewRecorder(), r)
	}
	call(`{"tool_id":"Probe.probe","call_id":"c1","input":{}}`, parentTP)
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	client, server := spans[0], spans[1]
	sameView(t, "server span", view(server), spanView{Name: "execute_tool Probe.probe", Kind: "server", Trace: parentTrace, Parent: parentSpan,
		Attrs: map[string]string{"gen_ai.tool.name": "Probe.probe@1.0.0", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "c1"}})
	cv := view(client)
	if cv.Attrs["jsonrpc.request.id"] == "" {
		t.Errorf("client span without jsonrpc.request.id: %+v", cv)
	}
	delete(cv.Attrs, "jsonrpc.request.id")
	sameView(t, "client span", cv, spanView{Name: "tools/call probe", Kind: "client", Trace: parentTrace, Parent: server.SpanContext().SpanID().String(),
		Attrs: map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "probe", "gen_ai.operation.name": "execute_tool", "mcpotc.upstream": "probe"}})
	mu.Lock()
	if len(metaTP) != 1 || metaTP[0] != traceparentOf(client) {
		t.Errorf("the MCP server saw _meta.traceparent %q, want the client span's %s", metaTP, traceparentOf(client))
	}
	mu.Unlock()

	other := "00-" + strings.Repeat("ab", 16) + "-" + strings.Repeat("cd", 8) + "-01"
	call(fmt.Sprintf(`{"tool_id":"Probe.probe","trace_id":%q,"input":{}}`, other), "")
	if sp := rec.Ended()[3]; sp.SpanContext().TraceID().String() != strings.Repeat("ab", 16) || sp.Parent().SpanID().String() != strings.Repeat("cd", 8) {
		t.Errorf("a trace_id that is a traceparent: span %s, parent %s", sp.SpanContext().TraceID(), sp.Parent().SpanID())
	}
	// Each outcome is the error.type of the call's server span, and of the
	// client span when the MCP request failed.
	for _, tc := range []struct{ body, server, client string }{
		{`{"tool_id":"Probe.nope","input":{}}`, "unknown_tool", ""},
		{`{"tool_id":"Probe.fail","input":{}}`, "tool_error", "ok"},
		{`{"tool_id":"Probe.slow","input":{}}`, "timeout", "timeout"},
		{`{"tool_id":"Probe.probe","input":{"x":1},"context":{"user_id":"u"}}`, "ok", "ok"},
	} {
		before := len(rec.Ended())
		call(tc.body, "")
		spans := rec.Ended()[before:]
		var server, client spanView
		for _, sp := range spans {
			if v := view(sp); v.Kind == "server" {
				server = v
			} else {
				client = v
			}
		}
		errType := func(v spanView) string {
			if v.Status != "error" {
				return "ok"
			}
			return v.Attrs["error.type"]
		}
		if errType(server) != tc.server || (tc.client != "" && errType(client) != tc.client) || (tc.client == "" && len(spans) != 1) {
			t.Errorf("%s: server span %+v, client span %+v; want outcomes %s / %s", tc.body, server, client, tc.server, tc.client)
		}
	}
}

// TestMCPFrontTracingOff: without a tracer (tracing off) the MCP front
// builds no span, and propagates the host's trace context exactly as the
// no-op tracer's Start did: the OTC server gets the host's traceparent
// (header and trace_id), the call's log line its trace id; a call without
// one sends none. A span of the caller's context is neither ended nor
// marked by the call.
func TestMCPFrontTracingOff(t *testing.T) {
	probe, seenTraces := traceProbe(t)
	var logs syncBuffer
	f, err := NewMCPFront(context.Background(), []OTCServer{otcUpstreamOn(t, "calc", "", probe)}, &MCPFrontOptions{Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	if f.records {
		t.Fatal("the front records spans without a tracer")
	}
	// A span the caller started, of another tracer: the call leaves it be.
	rec, tracer := recorder()
	ctx, outer := tracer.Start(context.Background(), "outer")
	s := f.Server()
	s.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
	s.HandleMessage(context.Background(), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Calculator_Add","arguments":{"a":2,"b":3},"_meta":{"traceparent":"`+parentTP+`"}}}`))
	s.HandleMessage(context.Background(), []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Calculator_Add","arguments":{"a":2,"b":3}}}`))
	s.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"Calculator_Add","arguments":{"a":"two","b":3}}}`))
	outerTP := traceparentOfContext(ctx)
	if want, seen := []string{parentTP, parentTP, "", "", outerTP, outerTP}, seenTraces(); !slices.Equal(seen, want) {
		t.Errorf("the OTC server saw traceparent / trace_id %q, want %q", seen, want)
	}
	if n := len(rec.Ended()); n != 0 || !outer.IsRecording() {
		t.Errorf("the caller's span: %d ended, recording %v", n, outer.IsRecording())
	}
	var traces []string
	logs.mu.Lock()
	text := logs.b.String()
	logs.mu.Unlock()
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["message"] == "call" {
			traces = append(traces, fmt.Sprint(m["trace_id"]))
		}
	}
	if want := []string{parentTrace, "<nil>", outer.SpanContext().TraceID().String()}; !slices.Equal(traces, want) {
		t.Errorf("the call lines' trace_id: %q, want %q", traces, want)
	}
	outer.End()
}

// traceparentOfContext is the W3C traceparent of ctx's span.
func traceparentOfContext(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// traceProbe is the sample OTC server, recording for each call the
// traceparent header and the body's trace_id (flat or in the OXP
// envelope); seen returns them, in pairs.
func traceProbe(t *testing.T) (probe http.Handler, seen func() []string) {
	t.Helper()
	h, err := otcsample.New(nil).Handler(&otc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var traces []string
	probe = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tools/call" {
			body, _ := io.ReadAll(r.Body)
			var req struct {
				TraceID string `json:"trace_id"`
				Request struct {
					TraceID string `json:"trace_id"`
				} `json:"request"`
			}
			_ = json.Unmarshal(body, &req)
			mu.Lock()
			traces = append(traces, r.Header.Get("traceparent"), req.TraceID+req.Request.TraceID)
			mu.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		h.ServeHTTP(w, r)
	})
	return probe, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(traces)
	}
}
