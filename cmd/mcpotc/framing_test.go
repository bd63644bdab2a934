package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/conntest"
)

// Request smuggling (RFC 9112 §6.1, §11.2) at each front's listener, over
// a raw TCP connection: a request with both Content-Length and
// Transfer-Encoding is answered and its connection closed, so the request
// a proxy framing by Content-Length would have read behind it is never
// answered (one response, then EOF). The same request framed by
// Content-Length alone is answered and its connection kept open.
func TestFrontsCloseAfterAmbiguousFraming(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := map[string]string{"TOKEN": "s3cret-bearer"}
	common := []string{"--listen", "127.0.0.1:0", "--log-level", "error"}
	sampleOTC := startCommand(t, ctx, nil, append([]string{"sample-otc"}, common...)...)
	serveOTC := startCommand(t, ctx, nil, append([]string{"serve-otc"}, common...)...)
	mcpHTTP := startCommand(t, ctx, env, append([]string{"serve-mcp", "--transport", "http", "--bearer-token-env", "TOKEN", "--otc", sampleOTC}, common...)...)
	mcpSSE := startCommand(t, ctx, env, append([]string{"serve-mcp", "--transport", "sse", "--otc", sampleOTC}, common...)...)

	const call = `{"$schema":"urn:oxp:1.0","request":{"tool_id":"Calculator.Add@1.0.0","input":{"a":10,"b":5}}}`
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, tc := range []struct {
		front, base, path, header, body, answer string
	}{
		{"sample-otc", sampleOTC, "/tools/call", "Content-Type: application/json\r\n", call, `"value":15`},
		{"serve-otc", serveOTC, "/tools/call", "Content-Type: application/json\r\n", `{"$schema":"urn:oxp:1.0","request":{"tool_id":"Nope.Nope@1.0.0","input":{}}}`, `"message"`},
		{"serve-otc /oauth/", serveOTC, "/oauth/check/nope", "Content-Type: application/json\r\n", `{}`, ``},
		{"serve-mcp http", mcpHTTP, "/mcp", "Authorization: Bearer s3cret-bearer\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n", initialize, `"protocolVersion":"2025-11-25"`},
		{"serve-mcp sse", mcpSSE, "/message?sessionId=none", "Content-Type: application/json\r\n", initialize, ``},
	} {
		addr := strings.TrimPrefix(tc.base, "http://")
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\n%s", tc.path, addr, tc.header)
		hidden := fmt.Sprintf("GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(tc.body), tc.body)
		smuggling := head + fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n", len(chunked)+len(hidden)) + chunked + hidden
		honest := head + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(tc.body)) + tc.body

		answer, closed, err := conntest.RawExchange(addr, smuggling, 2*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", tc.front, err)
		}
		if n := strings.Count(answer, "HTTP/1.1 "); !closed || n != 1 || !strings.Contains(answer, "\r\nConnection: close\r\n") || !strings.Contains(answer, tc.answer) {
			t.Errorf("%s: Content-Length and Transfer-Encoding: closed=%t, %d answers, want the request's answer (%q) and EOF:\n%s", tc.front, closed, n, tc.answer, answer)
		}
		answer, closed, err = conntest.RawExchange(addr, honest, 300*time.Millisecond)
		if err != nil {
			t.Fatalf("%s: %v", tc.front, err)
		}
		if closed || strings.Count(answer, "HTTP/1.1 ") != 1 || strings.Contains(answer, "Connection: close") || !strings.Contains(answer, tc.answer) {
			t.Errorf("%s: Content-Length alone: closed=%t, want one answer (%q) and the connection kept:\n%s", tc.front, closed, tc.answer, answer)
		}
	}
}
