package bridge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/wiretest"
	"github.com/mcpotc/mcpotc/mcp/front"
)

// user_id_from_token: behind an OAuth-protected MCP front, each caller's
// token subject is the OTC call's context.user_id; an upstream without it
// keeps its configured user_id.
func TestUserIDFromToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var seen []string
	tools := `{"$schema":"urn:oxp:1.0","items":[{"id":"Me.Who@1.0.0","name":"Me_Who","description":"d","version":"1.0.0","input_schema":{"type":"object"},"requirements":{"user_id":true}}]}`
	otcServer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/tools" {
			_, _ = io.WriteString(w, tools)
			return
		}
		var req struct {
			Request struct {
				Context struct {
					UserID string `json:"user_id"`
				} `json:"context"`
			} `json:"request"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		seen = append(seen, req.Request.Context.UserID)
		mu.Unlock()
		_, _ = io.WriteString(w, `{"$schema":"urn:oxp:1.0","result":{"call_id":"c","success":true,"value":"ok"}}`)
	})
	for _, tc := range []struct {
		fromToken bool
		want      []string
	}{
		{true, []string{"alice", "bob"}},
		{false, []string{"static", "static"}},
	} {
		up := otcUpstreamOn(t, "me", "", otcServer)
		up.UserID, up.UserIDFromToken = "static", tc.fromToken
		f, err := NewMCPFront(ctx, []OTCServer{up}, nil)
		if err != nil {
			t.Fatal(err)
		}
		const resource = "http://mcp.test/mcp"
		h := f.Server().StreamableHTTPHandler(&front.HTTPOptions{Stateless: true, DisableLocalhostProtection: true, Resource: &front.ResourceAuth{
			Resource: resource, AuthorizationServers: []string{"http://as.test"},
			Verify: func(_ context.Context, token string) (*front.Identity, error) {
				return &front.Identity{Subject: strings.TrimPrefix(token, "token-of-"), Audience: []string{resource}}, nil
			},
		}})
		srv := httptest.NewServer(h)
		seen = nil
		for _, user := range []string{"alice", "bob"} {
			status, _, body := wiretest.MCPHTTP(t, ctx, http.MethodPost, srv.URL+"/mcp",
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Me_Who","arguments":{}}}`,
				http.Header{"Authorization": {"Bearer token-of-" + user}, "Mcp-Protocol-Version": {"2025-11-25"}})
			if status != http.StatusOK || !strings.Contains(body, `"ok"`) {
				t.Fatalf("call as %s: %d %s", user, status, body)
			}
		}
		srv.Close()
		mu.Lock()
		if strings.Join(seen, ",") != strings.Join(tc.want, ",") {
			t.Errorf("user_id_from_token %t: the OTC server saw user ids %q, want %q", tc.fromToken, seen, tc.want)
		}
		mu.Unlock()
	}
}
