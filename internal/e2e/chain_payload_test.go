//go:build e2e

package e2e

// The round-trip carriers cost only the chains that read them (docs/mapping.md,
// Round trips): server-filesystem reads a ~404 KB file
//
//	directly, over stdio                      the MCP result, as bytes
//	through serve-otc, as a plain OTC client  at most 1.1 × the file's text
//	through serve-otc + serve-mcp             the MCP result again, byte for byte
//
// and GET /tools lists the x-mcp-tool carrier only to a caller that sends
// Mcpotc-Carriers: x-mcp.
//
// A second, smaller file holds <, > and &: the MCP front writes its
// answers with mcp-go's JSON encoding, which escapes them (\u003c …) where
// the Node server wrote them as they are. Its result is the direct one
// once those escapes are read back, and exactly the direct one when the
// front writes without HTML escaping.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// payloadFileBytes is the size of the file read (the 404 KB of the report
// that asked for this).
const payloadFileBytes = 404 << 10

// payloadText is a deterministic text of n bytes: lines of words with what
// JSON escapes (quotes, a tab, a backslash) and text beyond ASCII; with
// markup, also what Go's encoder escapes for HTML (<, >, &).
func payloadText(n int, markup bool) string {
	words := []string{"lorem", "ipsum", "dolor", `"sit"`, "amet", "ünïcødé", "✓", "tab\there", `back\slash`, "ελληνικά"}
	if markup {
		words = append(words, "<b>", "&amp;", "a->b")
	}
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(words[(i*7+i/len(words))%len(words)])
		if i%11 == 10 {
			b.WriteByte('\n')
		} else {
			b.WriteByte(' ')
		}
	}
	s := b.String()
	for n > 0 && !utf8.ValidString(s[:n]) { // cut on a rune boundary
		n--
	}
	return s[:n]
}

// payloadResult reads the result of the JSON-RPC response in a streamable
// HTTP body (application/json, or the data of an event stream), as bytes.
func payloadResult(t *testing.T, body string) json.RawMessage {
	t.Helper()
	frame := body
	if strings.HasPrefix(body, "event:") || strings.HasPrefix(body, "data:") {
		var data []string
		for _, line := range strings.Split(body, "\n") {
			if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data:"); ok {
				data = append(data, strings.TrimPrefix(d, " "))
			}
		}
		frame = strings.Join(data, "\n")
	}
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal([]byte(frame), &m); err != nil || m.Result == nil {
		t.Fatalf("no JSON-RPC result (%v): %s", err, truncate(body, 2000))
	}
	return m.Result
}

func TestE2EChainPayload(t *testing.T) {
	buildMcpotc(t)
	node, fs := nodeBin(t), peerBin(t, "mcp-server-filesystem")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	dir := t.TempDir()
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // the server compares real paths
	}
	text := payloadText(payloadFileBytes, false)
	path, markupPath := filepath.Join(dir, "big.txt"), filepath.Join(dir, "markup.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(markupPath, []byte(payloadText(64<<10, true)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"path": path}

	// Directly: the MCP result as the server writes it.
	direct := startPeer(t, ctx, "mcp-server-filesystem", []string{dir}, nil)
	direct.rpcCall(t, 1, "initialize", map[string]any{"protocolVersion": proto20251125, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "mcpotc-e2e-payload", "version": "0"}}, callTimeout)
	direct.rpcNotify(t, "notifications/initialized", nil)
	want := direct.rpcCall(t, 2, "tools/call", map[string]any{"name": "read_text_file", "arguments": args}, callTimeout)
	wantMarkup := direct.rpcCall(t, 3, "tools/call", map[string]any{"name": "read_text_file", "arguments": map[string]any{"path": markupPath}}, callTimeout)
	if !bytes.Contains(want, []byte(`"structuredContent"`)) {
		t.Logf("server-filesystem's result has no structuredContent: %s", truncate(string(want), 300))
	}

	// serve-otc, read by a plain OTC client.
	otcb := otcfStart(t, []string{"--", node, fs, dir}, peerEnv(t))
	chainWaitOTCTools(t, otcb.base, 1)
	const toolID = "secure_filesystem_server.read_text_file"
	call := func(hdr map[string]string) *otcfResp {
		t.Helper()
		h := map[string]string{"Content-Type": "application/json", "OXP-Version": "1.0"}
		for k, v := range hdr {
			h[k] = v
		}
		body, _ := json.Marshal(map[string]any{"tool_id": toolID, "input": args})
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		r, err := otcfDo(cctx, http.MethodPost, otcb.base+"/tools/call", h, body)
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("POST /tools/call %s: %v %s", toolID, err, truncate(string(r.Raw), 500))
		}
		return r
	}
	plain := call(nil)
	var got struct {
		Success bool `json:"success"`
		Value   struct {
			Content string `json:"content"`
		} `json:"value"`
	}
	if err := json.Unmarshal(plain.Raw, &got); err != nil || !got.Success || got.Value.Content != text {
		t.Fatalf("the plain OTC answer is not the file's text (%v): %s", err, truncate(string(plain.Raw), 500))
	}
	for k := range plain.Body.(map[string]any) {
		if strings.HasPrefix(k, "x-") {
			t.Errorf("the plain OTC answer has the carrier %s", k)
		}
	}
	ratio := float64(len(plain.Raw)) / float64(len(text))
	t.Logf("file text %d bytes; plain OTC answer %d bytes (%.3f×)", len(text), len(plain.Raw), ratio)
	if ratio > 1.1 {
		t.Errorf("the plain OTC answer is %d bytes, %.3f× the file's %d: want ≤ 1.1×", len(plain.Raw), ratio, len(text))
	}
	carried := call(map[string]string{"Mcpotc-Carriers": "x-mcp"})
	if _, ok := carried.Body.(map[string]any)["x-mcp-result"]; !ok {
		t.Errorf("an answer to a caller that reads x-mcp has no x-mcp-result: %s", truncate(string(carried.Raw), 300))
	}
	t.Logf("the same answer with Mcpotc-Carriers: x-mcp: %d bytes", len(carried.Raw))

	// GET /tools: the carrier only for a caller that reads it.
	list := func(hdr map[string]string) (*otcfResp, int) {
		t.Helper()
		h := map[string]string{"OXP-Version": "1.0"}
		for k, v := range hdr {
			h[k] = v
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		r, err := otcfDo(cctx, http.MethodGet, otcb.base+"/tools", h, nil)
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("GET /tools: %v", err)
		}
		return r, bytes.Count(r.Raw, []byte(`"x-mcp-tool"`))
	}
	plainList, n := list(nil)
	if n != 0 {
		t.Errorf("GET /tools without Mcpotc-Carriers lists %d x-mcp-tool carriers, want none", n)
	}
	carriedList, n := list(map[string]string{"Mcpotc-Carriers": "x-mcp"})
	items, _ := carriedList.Body.(map[string]any)["items"].([]any)
	if n == 0 || n != len(items) {
		t.Errorf("GET /tools with Mcpotc-Carriers: x-mcp lists %d x-mcp-tool carriers for %d tools", n, len(items))
	}
	t.Logf("GET /tools: %d bytes plain, %d bytes with Mcpotc-Carriers: x-mcp", len(plainList.Raw), len(carriedList.Raw))

	// serve-mcp in front of serve-otc: the direct result, byte for byte.
	mcpb := startBridge(t, ctx, "http", []string{"--otc", otcb.base}, nil)
	status, hdr, body := postMessage(t, mcpb.url, initializeBody, nil)
	session := hdr.Get("Mcp-Session-Id")
	if status != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %s", status, truncate(body, 300))
	}
	sh := http.Header{"Mcp-Session-Id": {session}, "Mcp-Protocol-Version": {proto20251125}}
	postMessage(t, mcpb.url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, sh)
	read := func(id int, args map[string]any) json.RawMessage {
		t.Helper()
		params, _ := json.Marshal(map[string]any{"name": "read_text_file", "arguments": args})
		status, _, body := postMessage(t, mcpb.url, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, params), sh)
		if status != http.StatusOK {
			t.Fatalf("tools/call through serve-otc + serve-mcp: %d %s", status, truncate(body, 500))
		}
		return payloadResult(t, body)
	}
	chained := read(2, args)
	t.Logf("MCP result: %d bytes directly, %d bytes through serve-otc + serve-mcp", len(want), len(chained))
	payloadSame(t, "the 404 KB file", want, chained)

	chainedMarkup := read(3, map[string]any{"path": markupPath})
	if bytes.Equal(chainedMarkup, wantMarkup) {
		t.Logf("the file with <, > and &: byte for byte the direct result")
	} else {
		unescaped := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(chainedMarkup))
		t.Logf("the file with <, > and &: %d bytes directly, %d through both bridges (the MCP front's encoder escapes them)", len(wantMarkup), len(chainedMarkup))
		payloadSame(t, "the file with <, > and &, its HTML escapes read back", wantMarkup, json.RawMessage(unescaped))
	}
}

// payloadSame fails the test when chained is not want, byte for byte,
// showing where they part.
func payloadSame(t *testing.T, what string, want, chained json.RawMessage) {
	t.Helper()
	if bytes.Equal(chained, want) {
		return
	}
	i := 0
	for i < len(want) && i < len(chained) && want[i] == chained[i] {
		i++
	}
	t.Errorf("%s: through serve-otc + serve-mcp the MCP result differs from the direct one at byte %d:\n direct: …%s…\n  chain: …%s…",
		what, i, truncate(string(want[max(0, i-80):]), 200), truncate(string(chained[max(0, i-80):]), 200))
}
