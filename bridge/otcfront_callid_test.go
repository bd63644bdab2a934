package bridge

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/mapping"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
)

// serve-otc passes a call_id on to an MCP front scoped to its JWT caller,
// and as it is for the API key's holder, whom it does not tell apart
// (issue 34, item 9): the API key's holder sending a JWT caller's scoped
// call_id must not reach the MCP front with that very id (where it would
// claim or replay the JWT caller's call); its own call_ids still go as
// they are. The MCP upstream is an MCP front serving a restored OTC tool
// that records the carrier's call_id.
func TestOTCFrontUnscopedCallIDNeverScoped(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	def, _ := json.Marshal(map[string]any{"id": "Me.Who@1.0.0", "name": "Me_Who", "description": "d", "version": "1.0.0",
		"input_schema": map[string]any{"type": "object"}})
	tool := mcpgo.NewTool("Me_Who", mcpgo.WithDescription("d"))
	tool.Meta = &mcpgo.Meta{AdditionalFields: map[string]any{mapping.MetaOTCTool: mapping.OTCToolMeta{ID: "Me.Who@1.0.0", Version: "1.0.0",
		Definitions: []json.RawMessage{def}}}}
	mcp := front.New("me", "1.0.0", nil)
	mcp.SetTools(front.Tool{Tool: tool, Handler: func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		var carrier mapping.OTCRequestMeta
		if req.Params.Meta != nil {
			b, _ := json.Marshal(req.Params.Meta.AdditionalFields[mapping.MetaOTCRequest])
			_ = json.Unmarshal(b, &carrier)
		}
		mu.Lock()
		seen = append(seen, carrier.CallID)
		mu.Unlock()
		return mcpgo.NewToolResultText("ok"), nil
	}})
	secret := []byte("callid-test-secret")
	f, err := NewOTCFront(context.Background(), []MCPServer{{Config: upstream.Config{Name: "me", InProcess: upstream.Piped(mcp.ServeStdio)}}},
		&OTCFrontOptions{Logger: zerolog.Nop(), Server: otc.Options{APIKey: "the-key", JWTSecret: secret}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	waitOTCReady(t, f)
	alice, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
	call := func(header, value, callID string) string {
		t.Helper()
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/tools/call", strings.NewReader(`{"tool_id":"Me.Who@1.0.0","call_id":"`+callID+`","input":{}}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("OXP-Version", "1.0")
		r.Header.Set(header, value)
		f.Handler().ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("call %s: %d %s", callID, w.Code, w.Body)
		}
		mu.Lock()
		defer mu.Unlock()
		return seen[len(seen)-1]
	}
	scoped := call("Authorization", "Bearer "+alice, "c1")
	if scoped == "c1" || !strings.HasSuffix(scoped, "-c1") {
		t.Fatalf("alice's call_id reached the MCP front as %q: want it scoped", scoped)
	}
	if got := call(otc.APIKeyHeader, "the-key", scoped); got == scoped {
		t.Errorf("the API key's holder sent alice's scoped call_id %q and the MCP front received it as it is", scoped)
	}
	if got := call(otc.APIKeyHeader, "the-key", "mine-1"); got != "mine-1" {
		t.Errorf("the API key's holder's own call_id reached the MCP front as %q, want it as it is", got)
	}
}
