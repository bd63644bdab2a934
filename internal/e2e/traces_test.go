//go:build e2e

package e2e

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver (POST /v1/traces, protobuf):
// it keeps every span it is sent, with its service's name.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	service string
	span    *tracepb.Span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	var req coltracepb.ExportTraceServiceRequest
	if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				o.spans = append(o.spans, receivedSpan{service, sp})
			}
		}
	}
	o.mu.Unlock()
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// trace returns the spans of trace id (hex) received so far.
func (o *otlpReceiver) trace(id string) []receivedSpan {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []receivedSpan
	for _, s := range o.spans {
		if hex.EncodeToString(s.span.GetTraceId()) == id {
			out = append(out, s)
		}
	}
	return out
}

// traceChain is the trace TestTraceAcrossBothBridges expects, from the
// host's span down; the README's "trace-tree" block draws it.
var traceChain = []struct{ name, service, kind string }{
	{"tools/call ping", "serve-mcp", "server"},
	{"execute_tool traced.ping@1.0.0", "serve-mcp", "client"},
	{"execute_tool traced.ping@1.0.0", "serve-otc", "server"},
	{"tools/call ping", "serve-otc", "client"},
}

// TestTraceAcrossBothBridges: an MCP host (the official Go SDK client)
// calls a tool through serve-mcp → serve-otc → an MCP server, with a
// traceparent in _meta; both bridges export OTLP over HTTP to a receiver
// started by the test. One trace holds four spans, each the child of the
// one before: serve-mcp's server span, its client span (the OTC request),
// serve-otc's server span, its client span (the MCP request); the MCP
// server receives that last span's traceparent; both bridges' call log
// lines name the trace id.
func TestTraceAcrossBothBridges(t *testing.T) {
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}

	var mu sync.Mutex
	var upstreamTP string
	srv := sdk.NewServer(&sdk.Implementation{Name: "traced", Version: "1.0.0"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "ping", Description: "Answers pong."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			mu.Lock()
			if m := req.Params.GetMeta(); m != nil {
				upstreamTP, _ = m["traceparent"].(string)
			}
			mu.Unlock()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "pong"}}}, nil, nil
		})
	up := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{JSONResponse: true}))
	t.Cleanup(up.Close)

	bin := buildMcpotc(t)
	otcPort := strconv.Itoa(freePort(t))
	otcBridge := startProcess(t, context.Background(), bin, []string{"serve-otc", "--listen", "127.0.0.1:" + otcPort, "--mcp", up.URL + "/mcp", "--log-format", "json"}, env)
	otcBridge.waitHTTP(t, "http://127.0.0.1:"+otcPort+"/ready", 60*time.Second)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if status, _ := getJSONOr("http://127.0.0.1:" + otcPort + "/ready"); status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve-otc never ready:\n%s", otcBridge.Stderr())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mcpBridge := startBridge(t, ctx, "http", []string{"--otc", "http://127.0.0.1:" + otcPort, "--log-format", "json"}, env)

	client := sdk.NewClient(&sdk.Implementation{Name: "host", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: mcpBridge.url}, &sdk.ClientSessionOptions{ProtocolVersion: proto20251125})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 {
		t.Fatalf("tools/list: %v %v", err, tools)
	}
	const traceID, hostSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	params := &sdk.CallToolParams{Name: tools.Tools[0].Name, Arguments: map[string]any{}}
	params.SetMeta(map[string]any{"traceparent": "00-" + traceID + "-" + hostSpan + "-01"})
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("tools/call: %v %v", err, res)
	}

	var spans []receivedSpan
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if spans = recv.trace(traceID); len(spans) >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver got %d spans of the trace, want 4", len(spans))
		}
	}
	// Order the spans from the host's down, each the child of the last.
	var chain []string
	parent := hostSpan
	for range 4 {
		var next *receivedSpan
		for i := range spans {
			if hex.EncodeToString(spans[i].span.GetParentSpanId()) == parent {
				next = &spans[i]
			}
		}
		if next == nil {
			t.Fatalf("no span has parent %s; spans: %v", parent, describe(spans))
		}
		chain = append(chain, next.service+" "+next.span.GetKind().String()+" "+next.span.GetName())
		parent = hex.EncodeToString(next.span.GetSpanId())
	}
	var want []string
	for _, s := range traceChain {
		want = append(want, "mcpotc "+s.service+" SPAN_KIND_"+strings.ToUpper(s.kind)+" "+s.name)
	}
	if strings.Join(chain, "\n") != strings.Join(want, "\n") {
		t.Errorf("the trace:\n%s\nwant:\n%s", strings.Join(chain, "\n"), strings.Join(want, "\n"))
	}
	mu.Lock()
	if wantTP := "00-" + traceID + "-" + parent + "-01"; upstreamTP != wantTP {
		t.Errorf("the MCP server got _meta.traceparent %q, want %q (serve-otc's client span)", upstreamTP, wantTP)
	}
	mu.Unlock()
	for name, p := range map[string]*proc{"serve-mcp": mcpBridge.p, "serve-otc": otcBridge} {
		if !strings.Contains(p.Stderr(), `"trace_id":"`+traceID+`"`) {
			t.Errorf("%s's call log line does not name the trace id:\n%s", name, truncate(p.Stderr(), 3000))
		}
	}
	t.Logf("one trace, %d spans:\n  %s", len(chain), strings.Join(chain, "\n  "))
}

func describe(spans []receivedSpan) string {
	var b strings.Builder
	for _, s := range spans {
		b.WriteString(s.service + " " + s.span.GetName() + " parent " + hex.EncodeToString(s.span.GetParentSpanId()) + "; ")
	}
	return b.String()
}
