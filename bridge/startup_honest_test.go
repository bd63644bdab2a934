package bridge

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/internal/wiretest"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/mcp/mcpsample"
	"github.com/mcpotc/mcpotc/mcp/upstream"
)

// freeAddr is a loopback address nothing listens at (a dead URL's).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// otcDo answers one request of an OTC front's handler.
func otcDo(f *OTCFront, method, path, body string) (int, http.Header, map[string]any) {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("OXP-Version", "1.0")
	f.Handler().ServeHTTP(w, r)
	var m map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &m)
	return w.Code, w.Header(), m
}

// A call that comes while serve-otc's catalog is not complete gets what
// GET /tools answers then — 503, Retry-After, the servers still
// connecting — never "no tool … is served" (issue 34, start-up). A tool
// the catalog holds runs meanwhile.
func TestOTCFrontCallWhileStartingIsRetry(t *testing.T) {
	f, err := NewOTCFront(context.Background(), []MCPServer{
		{Toolkit: "Sample", Config: upstream.Config{Name: "sample", InProcess: upstream.Piped(mcpsample.ServeStdio)}},
		{Toolkit: "Late", Config: upstream.Config{Name: "late", URL: "http://" + freeAddr(t) + "/mcp", Protocol: upstream.ProtocolLegacy}},
	}, &OTCFrontOptions{Logger: zerolog.Nop(), StartupWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	for _, tool := range []string{"Late.hello", "Nobody.serves"} {
		code, h, body := otcDo(f, http.MethodPost, "/tools/call", `{"request":{"tool_id":"`+tool+`"}}`)
		msg, _ := body["message"].(string)
		dev, _ := body["developer_message"].(string)
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" ||
			!strings.HasPrefix(msg, "The tool list is not complete yet") || !strings.Contains(dev, "late (") {
			t.Errorf("call of %s while starting = %d %v %v, want 503 Retry-After 1 naming late", tool, code, h, body)
		}
		// The same answer GET /tools gives; how many servers are still
		// connecting may have changed in between (the sample connects).
		lcode, _, lbody := otcDo(f, http.MethodGet, "/tools", "")
		if lmsg, _ := lbody["message"].(string); lcode != code || !strings.HasPrefix(lmsg, "The tool list is not complete yet") {
			t.Errorf("GET /tools = %d %v, the call %d %v: not the same answer", lcode, lbody, code, body)
		}
	}
	// The honest flow: once the sample is listed, its tools run.
	waitListed(context.Background(), []*upConn{f.upstreams()[0].upConn}, 10*time.Second)
	if code, _, body := otcDo(f, http.MethodPost, "/tools/call", `{"request":{"tool_id":"Sample.echo","input":{"message":"hi"}}}`); code != 200 {
		t.Errorf("call of Sample.echo while late starts = %d %v", code, body)
	}
}

// serve-mcp's tools/call of a tool not served while an OTC server it
// started with was never listed is -32007 "starting, retry" (over HTTP
// with Retry-After), not -32602 "not found"; after the start-up wait it
// is "not found" again.
func TestMCPFrontCallWhileStartingIsRetry(t *testing.T) {
	ctx := context.Background()
	live, late := &recordingOTC{}, &switchable{}
	live.set(toolDef("A.Open@1.0.0", "A_Open"))
	late.set(http.StatusServiceUnavailable, `[]`)
	f, err := NewMCPFront(ctx, []OTCServer{otcUpstreamOn(t, "a", "", live), otcUpstreamOn(t, "late", "", late)},
		&MCPFrontOptions{Logger: zerolog.Nop(), StartupWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.Server().StreamableHTTPHandler(&front.HTTPOptions{Stateless: true, DisableLocalhostProtection: true}))
	defer srv.Close()
	call := func(name string) (int, http.Header, map[string]any) {
		status, h, body := wiretest.MCPHTTP(t, ctx, http.MethodPost, srv.URL+"/mcp",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+name+`","arguments":{}}}`,
			http.Header{"Mcp-Protocol-Version": {"2025-11-25"}})
		var m map[string]any
		_ = json.Unmarshal([]byte(body), &m)
		return status, h, m
	}
	start := time.Now()
	status, h, frame := call("B_Later")
	e, _ := frame["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if time.Since(start) < 2*time.Second { // within the wait (a loaded machine may have passed it)
		if status != 200 || h.Get("Retry-After") != "1" || e["code"] != float64(front.CodeStarting) ||
			!strings.Contains(msg, "The bridge is starting") || !strings.Contains(msg, "late") {
			t.Errorf("tools/call while starting = %d %v %v, want -32007 naming late, Retry-After 1", status, h, frame)
		}
	}
	// The honest flow: a served tool runs meanwhile.
	if _, _, frame := call("A_Open"); frame["result"] == nil {
		t.Errorf("tools/call A_Open while late starts = %v", frame)
	}
	// After the wait: "not found", as for any tool nobody serves.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, frame := call("B_Later")
		e, _ := frame["error"].(map[string]any)
		if e["code"] == float64(mcpgo.INVALID_PARAMS) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools/call after the start-up wait = %v, want -32602", frame)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// One dead MCP server does not take serve-otc's catalog down (issue 34,
// item 13): after the start-up wait GET /tools lists the live server's
// tools, /ready is 200, /health names the missing server and why, the
// log says the wait ended without it; once something listens at its URL
// its tools join.
func TestOTCFrontDeadUpstreamLeftOutAfterStartupWait(t *testing.T) {
	addr := freeAddr(t)
	logs := &syncBuffer{}
	f, err := NewOTCFront(context.Background(), []MCPServer{
		{Toolkit: "Sample", Config: upstream.Config{Name: "sample", InProcess: upstream.Piped(mcpsample.ServeStdio)}},
		{Toolkit: "Late", Config: upstream.Config{Name: "late", URL: "http://" + addr + "/mcp", Protocol: upstream.ProtocolLegacy}},
	}, &OTCFrontOptions{Logger: zerolog.New(logs), StartupWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	ids := func(body map[string]any) string {
		items, _ := body["items"].([]any)
		var out []string
		for _, it := range items {
			out = append(out, it.(map[string]any)["id"].(string))
		}
		return strings.Join(out, " ")
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, _, body := otcDo(f, http.MethodGet, "/tools", "")
		if code == 200 {
			if got := ids(body); !strings.Contains(got, "Sample.echo@") || strings.Contains(got, "Late.") {
				t.Fatalf("GET /tools after the wait = %s", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /tools = %d %v 15 s after start, want 200 with the sample's tools", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, _, health := otcDo(f, http.MethodGet, "/health", "")
	ups, _ := health["upstreams"].(map[string]any)
	if reason, _ := ups["late"].(string); code != 503 || ups["sample"] != "ready" || !strings.HasPrefix(reason, "unreachable") {
		t.Errorf("GET /health = %d %v, want 503 naming late unreachable", code, health)
	}
	if code, _, ready := otcDo(f, http.MethodGet, "/ready", ""); code != 200 {
		t.Errorf("GET /ready after the wait = %d %v, want 200 (the live server's tools are served)", code, ready)
	}
	// The log line comes from its own goroutine when the wait ends.
	for !strings.Contains(logs.String(), "start-up wait over") {
		if time.Now().After(deadline) {
			t.Fatalf("no log line says the start-up wait ended: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), `"missing":["late (unreachable`) {
		t.Errorf("the wait's log line does not name late: %s", logs.String())
	}
	// The dead server comes up: its tools join.
	s := mcpserver.NewMCPServer("late", "1.0.0", mcpserver.WithToolCapabilities(true))
	s.AddTool(mcpgo.NewTool("hello"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("hello"), nil
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	ts := httptest.NewUnstartedServer(mcpserver.NewStreamableHTTPServer(s, mcpserver.WithStateful(true)))
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = f.Close(context.Background()) }) // first: its GET stream would hold ts.Close
	deadline = time.Now().Add(15 * time.Second)
	for {
		_, _, body := otcDo(f, http.MethodGet, "/tools", "")
		if strings.Contains(ids(body), "Late.hello@") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /tools = %v 15 s after late listened", ids(body))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _, body := otcDo(f, http.MethodPost, "/tools/call", `{"request":{"tool_id":"Late.hello"}}`); code != 200 {
		t.Errorf("call of Late.hello once it joined = %d %v", code, body)
	}
}
