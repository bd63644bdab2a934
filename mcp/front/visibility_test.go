package front

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// whoKey holds, in a test's context, who calls (HandleMessage).
type whoKey struct{}

// visibleFront serves open, secret (bound to the parameter header
// X-Region through its input schema) and other; callers other than
// "alice" may not see secret. It counts secret's runs.
func visibleFront(t *testing.T, tools ...string) (*Server, *atomic.Int32) {
	t.Helper()
	var runs atomic.Int32
	f := New("front-test", "1.0.0", &Options{Visibility: func(ctx context.Context) *ToolFilter {
		who, _ := ctx.Value(whoKey{}).(string)
		if who == "alice" {
			return nil
		}
		if p := CallerPrincipal(ctx); strings.HasPrefix(p, "bearer") {
			return nil // the bearer token's holder, over HTTP
		}
		return &ToolFilter{Key: "not-alice", Allows: func(name string) bool { return name != "secret" }}
	}})
	var list []Tool
	for _, name := range tools {
		tool := mcpgo.NewTool(name, mcpgo.WithString("region"), mcpgo.WithDescription("the "+name+" tool"))
		if name == "secret" {
			tool = mcpgo.NewToolWithRawSchema(name, "the secret tool", json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`))
		}
		list = append(list, Tool{Tool: tool, Handler: func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			if name == "secret" {
				runs.Add(1)
			}
			return mcpgo.NewToolResultText(name + " ran"), nil
		}})
	}
	f.SetTools(list...)
	return f, &runs
}

func asWho(who string) context.Context { return context.WithValue(context.Background(), whoKey{}, who) }

// A filtered caller's tools/list is, byte for byte, the list of a front
// that serves only the tools it may see (both protocol eras); a caller
// without a filter gets the whole list; calling a hidden tool is, byte for
// byte, calling one the front does not serve, and it does not run.
func TestVisibilityListAndCall(t *testing.T) {
	f, runs := visibleFront(t, "open", "other", "secret")
	without, _ := visibleFront(t, "open", "other")
	modern := `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`
	for _, params := range []string{`{}`, modern} {
		for i := 0; i < 2; i++ { // cut, then kept
			got := f.HandleMessage(asWho("bob"), request(1, "tools/list", params))
			want := without.HandleMessage(asWho("alice"), request(1, "tools/list", params))
			// A filtered list is one caller's: never for a shared cache.
			want = bytes.Replace(want, []byte(`"cacheScope":"public"`), []byte(`"cacheScope":"private"`), 1)
			if string(got) != string(want) {
				t.Errorf("bob's tools/list (%d):\n got %s\nwant %s", i, got, want)
			}
		}
		if all := f.HandleMessage(asWho("alice"), request(1, "tools/list", params)); !strings.Contains(string(all), `"name":"secret"`) {
			t.Errorf("alice's tools/list lacks secret: %s", all)
		}
	}
	if len(f.cat.Load().filtered.m) != 1 {
		t.Errorf("%d filtered lists kept, want 1", len(f.cat.Load().filtered.m))
	}
	for _, params := range []string{`{"name":"secret","arguments":{}}`, `{"name":"secret","arguments":{"region":"eu"}}`} {
		got := f.HandleMessage(asWho("bob"), request(2, "tools/call", params))
		want := without.HandleMessage(asWho("bob"), request(2, "tools/call", params))
		if string(got) != string(want) {
			t.Errorf("bob calling secret:\n got %s\nwant %s", got, want)
		}
	}
	if runs.Load() != 0 {
		t.Errorf("secret ran %d times for bob", runs.Load())
	}
	if got := f.HandleMessage(asWho("alice"), request(3, "tools/call", `{"name":"secret","arguments":{}}`)); !strings.Contains(string(got), "secret ran") {
		t.Errorf("alice calling secret: %s", got)
	}
	// A new catalog drops the kept lists.
	f.SetTools(*f.cat.Load().byName["open"], *f.cat.Load().byName["secret"])
	if got := f.HandleMessage(asWho("bob"), request(4, "tools/list", `{}`)); strings.Contains(string(got), `"other"`) || !strings.Contains(string(got), `"open"`) {
		t.Errorf("bob's list after a catalog change: %s", got)
	}
}

// Over streamable HTTP, a 2026-07-28 tools/call of a hidden tool with a
// mismatching parameter header gets the answer of an unknown tool, not
// the header check's (which would tell the tool exists); the caller that
// may see it gets the header check.
func TestVisibilityHidesParamHeaderCheck(t *testing.T) {
	f, _ := visibleFront(t, "open", "secret")
	srv, _ := startFrontHTTP(t, f, nil)
	withBearer, _ := startFrontHTTP(t, f, &HTTPOptions{BearerToken: "holder-token"})
	call := func(url, name string, bearer bool) (int, string) {
		h := http.Header{"Mcp-Protocol-Version": {mcpgo.ProtocolVersion20260728}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {name},
			"Mcp-Param-Region": {"us"}}
		if bearer {
			h.Set("Authorization", "Bearer holder-token")
		}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":%q,"arguments":{"region":"eu"},"_meta":{%q:%q,%q:{}}}}`,
			name, mcpgo.MetaKeyProtocolVersion, mcpgo.ProtocolVersion20260728, mcpgo.MetaKeyClientCapabilities)
		status, _, got := rawRequest(t, context.Background(), http.MethodPost, url+StreamablePath, body, h)
		return status, strings.ReplaceAll(got, name, "NAME")
	}
	hs, hidden := call(srv.URL, "secret", false)
	us, unknown := call(srv.URL, "nothing", false)
	if hs != us || hidden != unknown || !strings.Contains(hidden, "not found") {
		t.Errorf("a hidden tool: %d %s\nan unknown one: %d %s", hs, hidden, us, unknown)
	}
	if status, seen := call(withBearer.URL, "secret", true); status == hs && seen == hidden {
		t.Errorf("the caller that may see secret got the unknown tool's answer: %d %s", status, seen)
	}
}
