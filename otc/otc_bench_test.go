package otc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/otctest"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/otcsample"
)

// Benchmarks of the OTC server and client on their own: the per-call path
// (decode, version resolution, validation, answer) and catalog-time work
// (SetTools, GET /tools) at 10,000 tools. No timing is asserted.

var benchSink any

// benchCatalog is n tools: Bench.Echo and synthetic ones, gen naming the
// last one (a catalog change).
func benchCatalog(n, gen int) []otc.Tool {
	tools := []otc.Tool{otctest.BenchEcho()}
	ok := func(context.Context, *otc.Call) (json.RawMessage, error) { return json.RawMessage(`"ok"`), nil }
	for i := 1; i < n; i++ {
		name := fmt.Sprintf("Tool_%05d", i)
		if i == n-1 && gen > 0 {
			name = fmt.Sprintf("Tool_g%d_%05d", gen, i)
		}
		tools = append(tools, otc.Tool{Definition: otc.ToolDefinition{
			ID: "Bench." + name + "@1.0.0", Name: "Bench_" + name, Description: "Synthetic tool.", Version: "1.0.0",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"q"},` +
				`"limit":{"type":"number","description":"l","minimum":1,"maximum":100}}}`),
			OutputSchema: json.RawMessage(`{}`)}, Func: ok})
	}
	return tools
}

func serve(b *testing.B, h http.Handler, method, path string, body []byte, hdr map[string]string, want int) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != want {
		b.Fatalf("%s %s: %d %.300s", method, path, w.Code, w.Body)
	}
	return w
}

func BenchmarkHandlerCall(b *testing.B) {
	sh, err := otcsample.New(nil).Handler(nil)
	if err != nil {
		b.Fatal(err)
	}
	eh, err := otc.NewHandler([]otc.Tool{otctest.BenchEcho()}, &otc.Options{IdempotencyTTL: 10 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	json := map[string]string{"Content-Type": "application/json"}
	cases := []struct {
		name string
		h    http.Handler
		body string
		hdr  map[string]string
	}{
		{"envelope-exact-version", sh, `{"$schema":"urn:oxp:1.0","request":{"tool_id":"Calculator.Add@1.1.0","input":{"a":2,"b":3}}}`, json},
		{"envelope-latest", sh, `{"$schema":"urn:oxp:1.0","request":{"tool_id":"Calculator.Add","input":{"a":2,"b":3}}}`, json},
		{"flat", sh, `{"tool_id":"Calculator.Add@1.1.0","input":{"a":2,"b":3}}`, map[string]string{"Content-Type": "application/json", "OXP-Version": "1.0"}},
		{"call-id-idempotent", eh, `{"$schema":"urn:oxp:1.0","request":{"tool_id":"Bench.Echo@1.0.0","call_id":"%d","input":{"message":"hello, benchmark"}}}`, json},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				body := c.body
				if strings.Contains(body, "%d") {
					i++
					body = fmt.Sprintf(body, i)
				}
				serve(b, c.h, http.MethodPost, "/tools/call", []byte(body), c.hdr, http.StatusOK)
			}
		})
	}
	for _, n := range []int{1 << 10, 64 << 10, 1 << 20} {
		body := []byte(`{"$schema":"urn:oxp:1.0","request":{"tool_id":"Bench.Echo@1.0.0","input":{"message":"` + strings.Repeat("x", n) + `"}}}`)
		b.Run(fmt.Sprintf("echo-%dKiB", n>>10), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				serve(b, eh, http.MethodPost, "/tools/call", body, json, http.StatusOK)
			}
		})
	}
}

func BenchmarkHandlerErrors(b *testing.B) {
	sh, err := otcsample.New(nil).Handler(nil)
	if err != nil {
		b.Fatal(err)
	}
	hdr := map[string]string{"Content-Type": "application/json"}
	for _, c := range []struct {
		name, body string
		want       int
	}{
		{"422", `{"$schema":"urn:oxp:1.0","request":{"tool_id":"Calculator.Add@1.1.0","input":{"a":2,"b":"x"}}}`, http.StatusUnprocessableEntity},
		{"400-unknown", `{"$schema":"urn:oxp:1.0","request":{"tool_id":"Nope.Nope@1.0.0","input":{}}}`, http.StatusBadRequest},
		{"400-malformed", `{"$schema":"urn:oxp:1.0","request":`, http.StatusBadRequest},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				serve(b, sh, http.MethodPost, "/tools/call", []byte(c.body), hdr, c.want)
			}
		})
	}
}

func BenchmarkClientCall(b *testing.B) {
	h, err := otc.NewHandler([]otc.Tool{otctest.BenchEcho()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, err := otc.NewClient(srv.URL, &otc.ClientOptions{Dialect: otc.DialectOXP10})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range []int{16, 64 << 10, 1 << 20} {
		input := json.RawMessage(`{"message":"` + strings.Repeat("x", n) + `"}`)
		b.Run(fmt.Sprintf("echo-%dB", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.Call(ctx, &otc.CallToolRequest{ToolID: "Bench.Echo@1.0.0", CallID: "c", Input: input})
				if err != nil || !resp.Success {
					b.Fatal(err, resp)
				}
			}
		})
	}
}

// BenchmarkSetTools is a catalog change of 10,000 tools: the first
// catalog, and a change of one tool in it.
func BenchmarkSetTools(b *testing.B) {
	const n = 10000
	b.Run("first", func(b *testing.B) {
		tools := benchCatalog(n, 0)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := otc.NewHandler(tools, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-changed", func(b *testing.B) {
		h, err := otc.NewHandler(benchCatalog(n, 0), nil)
		if err != nil {
			b.Fatal(err)
		}
		cats := [][]otc.Tool{benchCatalog(n, 1), benchCatalog(n, 2)}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			if err := h.SetTools(cats[i%2]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkListTools10000(b *testing.B) {
	h, err := otc.NewHandler(benchCatalog(10000, 0), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		hdr  map[string]string
	}{{"envelope", nil}, {"flat", map[string]string{"OXP-Version": "1.0"}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := serve(b, h, http.MethodGet, "/tools", nil, c.hdr, http.StatusOK)
				b.SetBytes(int64(w.Body.Len()))
			}
		})
	}
}

func BenchmarkToolIDs(b *testing.B) {
	b.Run("ParseToolID", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			id, err := otc.ParseToolID("Calculator.Add@1.1.0")
			if err != nil {
				b.Fatal(err)
			}
			benchSink = id
		}
	})
	versions := []string{"0.9.0", "1.0.0", "1.1.0", "1.10.2", "2.0.0"}
	for _, req := range []string{"", "1", "1.10.2"} {
		b.Run("ResolveVersion-"+req, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v, ok := otc.ResolveVersion(req, versions)
				if !ok {
					b.Fatal(req)
				}
				benchSink = v
			}
		})
	}
	b.Run("NewCallID", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchSink = otc.NewCallID()
		}
	})
}
