package front

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// listFixture is a catalog of n tools with what an encoding can get wrong:
// HTML characters (escaped by encoding/json), annotations, an output
// schema, a raw input schema.
func listFixture(n int, note string) []mcpserver.ServerTool {
	var out []mcpserver.ServerTool
	for i := range n {
		tool := mcpgo.NewTool(fmt.Sprintf("tool_%03d", n-i), // added out of order: mcp-go sorts
			mcpgo.WithDescription(fmt.Sprintf("Tool %d: <b>bold</b> & more %s", i, note)),
			mcpgo.WithString("x", mcpgo.Required(), mcpgo.Description("an \"x\"")),
			mcpgo.WithTitleAnnotation(fmt.Sprintf("Tool %d", i)),
			mcpgo.WithReadOnlyHintAnnotation(i%2 == 0))
		if i%3 == 0 {
			tool.RawOutputSchema = json.RawMessage(`{"type":"object","properties":{"v":{"type":"number"}}}`)
		}
		out = append(out, mcpserver.ServerTool{Tool: tool, Handler: func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText("ok"), nil
		}})
	}
	return out
}

// listOver posts tools/list (params as given) in c's session and returns
// the response body.
func listOver(t *testing.T, c *httpTestClient, id int, params string, header http.Header) []byte {
	t.Helper()
	r, err := c.post(t, context.Background(), request(id, "tools/list", params), header)
	if err != nil || r.status != http.StatusOK {
		t.Fatalf("tools/list: %v %d %s", err, r.status, r.body)
	}
	return r.body
}

// tools/list through a front whose tools were set with SetTools is
// answered from one encoding per catalog, byte for byte what mcp-go
// writes itself (a front set through Server()): over streamable HTTP in
// a 2025-11-25 session and as a 2026-07-28 request, and over stdio. A new
// SetTools is seen at once; a request with a cursor is mcp-go's.
func TestFrontToolsListEncodedOnce(t *testing.T) {
	cached, _ := testFront(t, nil)
	plain, _ := testFront(t, nil)
	cached.SetTools(listFixture(300, "v1")...)
	plain.Server().SetTools(listFixture(300, "v1")...)
	a, _ := startFrontHTTP(t, cached, nil)
	b, _ := startFrontHTTP(t, plain, nil)
	ca, cb := &httpTestClient{url: a.URL + StreamablePath}, &httpTestClient{url: b.URL + StreamablePath}
	initialize(t, ca)
	initialize(t, cb)
	ca.version, cb.version = "2025-11-25", "2025-11-25"

	same := func(what string, got, want []byte) {
		t.Helper()
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the cached answer differs from mcp-go's\n got: %.300s…\nwant: %.300s…", what, got, want)
		}
	}
	first := listOver(t, ca, 2, `{}`, nil)
	same("legacy session", first, listOver(t, cb, 2, `{}`, nil))
	same("legacy session, again (from the cache)", listOver(t, ca, 3, `{}`, nil), listOver(t, cb, 3, `{}`, nil))
	if gen := cached.toolsCache.Load(); gen == nil || gen.gen != cached.toolsGen.Load() {
		t.Fatal("the list was not cached")
	}

	modern := fmt.Sprintf(`{"_meta":{%q:%q,%q:{}}}`, mcpgo.MetaKeyProtocolVersion, mcpgo.ProtocolVersion20260728, mcpgo.MetaKeyClientCapabilities)
	mh := http.Header{"Mcp-Protocol-Version": {mcpgo.ProtocolVersion20260728}}
	for k, v := range mcpgo.StandardHeaders(mcpgo.ProtocolVersion20260728, mcpgo.MethodToolsList, json.RawMessage(modern)) {
		mh.Set(k, v)
	}
	ma, mb := &httpTestClient{url: ca.url}, &httpTestClient{url: cb.url}
	same("2026-07-28 request", listOver(t, ma, 4, modern, mh), listOver(t, mb, 4, modern, mh))

	// A new catalog is listed at once.
	cached.SetTools(listFixture(5, "v2")...)
	plain.Server().SetTools(listFixture(5, "v2")...)
	same("after SetTools", listOver(t, ca, 5, `{}`, nil), listOver(t, cb, 5, `{}`, nil))
	// A cursor is mcp-go's to answer (here: an invalid one).
	ra, _ := ca.post(t, context.Background(), request(6, "tools/list", `{"cursor":"bogus"}`), nil)
	rb, _ := cb.post(t, context.Background(), request(6, "tools/list", `{"cursor":"bogus"}`), nil)
	same("with a cursor", ra.body, rb.body)

	// stdio: the same frame as mcp-go's own encoding of the response.
	c := startFrontStdio(t, context.Background(), cached)
	initialize(t, c)
	got := await(t, c.send(t, 7, "tools/list", `{}`))
	want, _ := json.Marshal(plain.Server().HandleMessage(context.Background(), request(7, "tools/list", `{}`)))
	same("stdio", got, want)
}
