package front

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// A 2026-07-28 routing header (Mcp-Protocol-Version, Mcp-Method, Mcp-Name,
// Mcp-Param-*) sent more than once, under any spelling, is refused (issue
// 34, item 11): HTTP 400 with -32020 naming the header, and the tool does
// not run — the front would check one value while an intermediary may
// route by another. The honest call, each header once, runs.
func TestFrontRepeatedRoutingHeaders(t *testing.T) {
	f, runs := visibleFront(t, "open", "secret")
	srv, _ := startFrontHTTP(t, f, &HTTPOptions{BearerToken: "holder-token"})
	honest := func() http.Header {
		return http.Header{"Authorization": {"Bearer holder-token"}, "Mcp-Protocol-Version": {mcpgo.ProtocolVersion20260728},
			"Mcp-Method": {"tools/call"}, "Mcp-Name": {"secret"}, "Mcp-Param-Region": {"us"}}
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"secret","arguments":{"region":"us"},"_meta":{%q:%q,%q:{}}}}`,
		mcpgo.MetaKeyProtocolVersion, mcpgo.ProtocolVersion20260728, mcpgo.MetaKeyClientCapabilities)
	post := func(h http.Header) (int, map[string]any) {
		status, _, got := rawRequest(t, context.Background(), http.MethodPost, srv.URL+StreamablePath, body, h)
		var frame map[string]any
		if err := json.Unmarshal([]byte(got), &frame); err != nil {
			t.Fatalf("not a JSON-RPC frame: %d %s", status, got)
		}
		return status, frame
	}
	if status, frame := post(honest()); status != http.StatusOK || frame["error"] != nil || runs.Load() != 1 {
		t.Fatalf("the honest call: %d %v (runs %d)", status, frame, runs.Load())
	}
	for _, tc := range []struct {
		header string
		set    func(http.Header)
	}{
		{"Mcp-Name", func(h http.Header) { h["Mcp-Name"] = []string{"secret", "open"} }},
		{"Mcp-Name", func(h http.Header) { h["mcp-name"] = []string{"open"} }}, // two spellings, two lines
		{"Mcp-Method", func(h http.Header) { h.Add("Mcp-Method", "tools/list") }},
		{"Mcp-Param-Region", func(h http.Header) { h.Add("Mcp-Param-Region", "eu") }},
		{"Mcp-Protocol-Version", func(h http.Header) { h.Add("Mcp-Protocol-Version", "2025-11-25") }},
	} {
		h := honest()
		tc.set(h)
		status, frame := post(h)
		want := map[string]any{"jsonrpc": "2.0", "id": 7.0, "error": map[string]any{"code": float64(mcpgo.HEADER_MISMATCH),
			"message": tc.header + " header is sent more than once: a 2026-07-28 routing header (Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*) must have exactly one value"}}
		if status != http.StatusBadRequest || !reflect.DeepEqual(frame, want) {
			t.Errorf("%s twice: %d %v\nwant 400 %v", tc.header, status, frame, want)
		}
	}
	if runs.Load() != 1 {
		t.Errorf("secret ran %d times, want once (the honest call)", runs.Load())
	}
}
