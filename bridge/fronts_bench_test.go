package bridge_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge"
	"github.com/mcpotc/mcpotc/internal/otctest"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/mcp/mcpsample"
	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/otcsample"
)

// Benchmarks of one call through each front, everything in-process but
// the hop the front makes upstream:
//
//	OTC front: an OTC request → otc.Handler → the front's router → the
//	           built-in sample MCP server, in-process (no I/O)
//	MCP front: a JSON-RPC tools/call → mcp Front (mcp-go server, hooks,
//	           middleware) → otc.Client → the sample OTC toolkit behind
//	           httptest (loopback HTTP)
//
// Logs go to io.Discard through a real zerolog logger, as in the binary.
// No timing is asserted: run go test -bench Front -benchmem ./bridge.

// benchLogger logs as the binary does (JSON lines at info), to nowhere.
func benchLogger() zerolog.Logger {
	return zerolog.New(io.Discard).Level(zerolog.InfoLevel).With().Timestamp().Logger()
}

// newBenchOTCFront serves the sample MCP server (in-process) over OTC and
// waits until its tools are served.
func newBenchOTCFront(b *testing.B, server otc.Options) http.Handler {
	b.Helper()
	ctx := context.Background()
	f, err := bridge.NewOTCFront(ctx, []bridge.MCPServer{{
		Toolkit: "Sample",
		Config:  upstream.Config{Name: "sample", InProcess: upstream.Piped(mcpsample.ServeStdio)},
	}}, &bridge.OTCFrontOptions{Server: server, Logger: benchLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = f.Close(cctx)
	})
	h := f.Handler()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/health", nil))
		if w.Code == http.StatusOK {
			return h
		}
		if time.Now().After(deadline) {
			b.Fatalf("the OTC front never became healthy: %s", w.Body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// otcCallBody is an oxp-1.0 envelope calling tool with input (call_id
// omitted when empty).
func otcCallBody(tool, callID, input string) []byte {
	id := ""
	if callID != "" {
		id = `,"call_id":"` + callID + `"`
	}
	return []byte(`{"$schema":"urn:oxp:1.0","request":{"tool_id":"` + tool + `"` + id + `,"input":` + input + `}}`)
}

func serveOTC(b *testing.B, h http.Handler, body []byte) {
	req := httptest.NewRequest(http.MethodPost, "/tools/call", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"success":true`)) {
		b.Fatalf("status %d: %s", w.Code, w.Body)
	}
}

func BenchmarkOTCFrontCall(b *testing.B) {
	h := newBenchOTCFront(b, otc.Options{})
	for _, c := range []struct{ name, tool, input string }{
		{"echo", "Sample.echo@1.0.0", `{"message":"hello, benchmark"}`},
		{"add-structured", "Sample.add", `{"a":2,"b":3}`},
	} {
		body := otcCallBody(c.tool, "", c.input)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				serveOTC(b, h, body)
			}
		})
	}
	for _, n := range []int{1 << 10, 64 << 10, 1 << 20} {
		body := otcCallBody("Sample.echo@1.0.0", "", `{"message":"`+strings.Repeat("x", n)+`"}`)
		b.Run(fmt.Sprintf("echo-%dKiB", n>>10), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				serveOTC(b, h, body)
			}
		})
	}
}

// BenchmarkOTCFrontCallIdempotent is the serve-otc default: a caller's
// call_id is an idempotency key (every call a new one).
func BenchmarkOTCFrontCallIdempotent(b *testing.B) {
	h := newBenchOTCFront(b, otc.Options{IdempotencyTTL: 10 * time.Minute})
	input := `{"message":"hello, benchmark"}`
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		serveOTC(b, h, otcCallBody("Sample.echo@1.0.0", fmt.Sprintf("call-%d", i), input))
	}
}

// newBenchMCPFront serves the sample OTC toolkit (behind httptest) and an
// echo OTC tool over MCP.
func newBenchMCPFront(b *testing.B) *bridge.MCPFront {
	b.Helper()
	h, err := otcsample.New(nil).Handler(nil)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	echo, err := otc.NewHandler([]otc.Tool{otctest.BenchEcho()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	esrv := httptest.NewServer(echo)
	b.Cleanup(esrv.Close)
	var ups []bridge.OTCServer
	for name, url := range map[string]string{"sample": srv.URL, "bench": esrv.URL} {
		c, err := otc.NewClient(url, nil)
		if err != nil {
			b.Fatal(err)
		}
		ups = append(ups, bridge.OTCServer{Name: name, Client: c})
	}
	f, err := bridge.NewMCPFront(context.Background(), ups, &bridge.MCPFrontOptions{Logger: benchLogger()})
	if err != nil {
		b.Fatal(err)
	}
	return f
}

func mcpCallMessage(tool, args string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`)
}

func BenchmarkMCPFrontCall(b *testing.B) {
	f := newBenchMCPFront(b)
	server := f.Server()
	ctx := context.Background()
	call := func(b *testing.B, msg []byte) {
		out := server.HandleMessage(ctx, msg)
		if !bytes.Contains(out, []byte(`"result"`)) || bytes.Contains(out, []byte(`"isError":true`)) {
			b.Fatalf("%.300s", out)
		}
	}
	for _, c := range []struct{ name, tool, args string }{
		{"add", "Calculator_Add", `{"a":2,"b":3}`},
		{"echo", "Bench_Echo", `{"message":"hello, benchmark"}`},
	} {
		msg := mcpCallMessage(c.tool, c.args)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				call(b, msg)
			}
		})
	}
	for _, n := range []int{1 << 10, 64 << 10, 1 << 20} {
		msg := mcpCallMessage("Bench_Echo", `{"message":"`+strings.Repeat("x", n)+`"}`)
		b.Run(fmt.Sprintf("echo-%dKiB", n>>10), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				call(b, msg)
			}
		})
	}
}

// BenchmarkMCPFrontCallStreamableHTTP adds the front's streamable HTTP
// transport (stateless: one POST per call, JSON answer).
func BenchmarkMCPFrontCallStreamableHTTP(b *testing.B) {
	f := newBenchMCPFront(b)
	h := f.Server().StreamableHTTPHandler(&front.HTTPOptions{Stateless: true})
	msg := mcpCallMessage("Calculator_Add", `{"a":2,"b":3}`)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, front.StreamablePath, bytes.NewReader(msg))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"sum"`)) {
			b.Fatalf("status %d: %.300s", w.Code, w.Body)
		}
	}
}
