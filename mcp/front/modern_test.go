package front

import (
	"context"
	"testing"
)

// server/discover (2026-07-28): the versions the front speaks, newest
// first, its capabilities, not to be cached, and what every 2026-07-28
// result carries. Before 2026-07-28 it is not a method.
func TestFrontDiscover(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	ctx := context.Background()
	got := f.HandleMessage(ctx, request(1, "server/discover", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`))
	sameJSON(t, got, `{"jsonrpc":"2.0","id":1,"result":{
		"supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"],
		"capabilities":{"tools":{"listChanged":true}},
		"ttlMs":0,"cacheScope":"private","resultType":"complete",
		"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"front-test","version":"1.0.0"}}}}`)
	got = f.HandleMessage(ctx, request(2, "server/discover", `{}`))
	sameJSON(t, got, `{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"\"server/discover\" requires protocol version 2026-07-28 or later"}}`)
}
