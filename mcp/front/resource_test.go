package front

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The MCP front as an OAuth 2.1 protected resource: its metadata (RFC
// 9728) at the path-suffixed and the root well-known URLs; 401 with
// resource_metadata and scope without a token, 401 invalid_token for a
// refused, expired or other-audience token, 403 insufficient_scope, 503
// when the verifier cannot tell; a good token reaches the tools with its
// identity.
func TestFrontHTTPProtectedResource(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	const resource = "https://mcp.example.com/mcp"
	auth := &ResourceAuth{
		Resource:             resource,
		AuthorizationServers: []string{"https://as.example.com"},
		Scopes:               []string{"mcp:tools"},
		Verify: func(_ context.Context, token string) (*Identity, error) {
			id := &Identity{Subject: "alice", Scopes: []string{"mcp:tools"}, Audience: []string{resource}, Expiry: time.Now().Add(time.Hour)}
			switch token {
			case "tok-good":
				return id, nil
			case "tok-bob":
				id.Subject = "bob"
				return id, nil
			case "tok-other-audience":
				id.Audience = []string{"https://other.example.com/mcp"}
			case "tok-expired":
				id.Expiry = time.Now().Add(-time.Second)
			case "tok-no-scope":
				id.Scopes = []string{"profile"}
			case "tok-down":
				return nil, errors.New("connection refused")
			default:
				return nil, ErrInvalidToken
			}
			return id, nil
		},
	}
	srv, _ := startFrontHTTP(t, f, &HTTPOptions{Resource: auth})
	meta := `{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://as.example.com"],"scopes_supported":["mcp:tools"],"bearer_methods_supported":["header"]}`
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		status, _, body := rawRequest(t, context.Background(), http.MethodGet, srv.URL+path, "", nil)
		if status != http.StatusOK {
			t.Errorf("GET %s: %d", path, status)
		}
		sameJSON(t, []byte(body), meta)
	}
	const md = `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`
	for _, tc := range []struct {
		token     string
		status    int
		challenge string
	}{
		{"", http.StatusUnauthorized, `Bearer ` + md},
		{"tok-refused", http.StatusUnauthorized, `Bearer error="invalid_token", ` + md},
		{"tok-other-audience", http.StatusUnauthorized, `Bearer error="invalid_token", ` + md},
		{"tok-expired", http.StatusUnauthorized, `Bearer error="invalid_token", ` + md},
		{"tok-no-scope", http.StatusForbidden, `Bearer error="insufficient_scope", ` + md},
		{"tok-down", http.StatusServiceUnavailable, ""},
		{"tok-good", http.StatusOK, ""},
	} {
		auth := ""
		if tc.token != "" {
			auth = "Bearer " + tc.token
		}
		status, challenge, body := sendInitialize(t, http.MethodPost, srv.URL+StreamablePath,
			map[string]string{"Accept": "application/json, text/event-stream", "Authorization": auth})
		if status != tc.status || challenge != tc.challenge {
			t.Errorf("token %q: %d %q, want %d %q: %s", tc.token, status, challenge, tc.status, tc.challenge, body)
		}
		if tc.token != "" && strings.Contains(string(body), tc.token) {
			t.Errorf("token %q: the answer echoes it: %s", tc.token, body)
		}
	}
	c := &httpTestClient{url: srv.URL + StreamablePath, token: "tok-good"}
	initialize(t, c)
	sameJSON(t, callTool(t, c, 2, "tools/call", callParams("whois", `{}`)),
		`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"subject alice"}]}}`)

	// Alice's session is hers: bob's token with its id finds no session.
	bob := &httpTestClient{url: c.url, token: "tok-bob", session: c.session, version: c.version}
	r, err := bob.post(t, context.Background(), request(3, "tools/call", callParams("whois", `{}`)), nil)
	if err != nil || r.status != http.StatusNotFound {
		t.Errorf("bob in alice's session: %d %s %v, want 404", r.status, r.body, err)
	}
	sameJSON(t, callTool(t, c, 4, "tools/call", callParams("whois", `{}`)),
		`{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"subject alice"}]}}`)
	bobOwn := &httpTestClient{url: c.url, token: "tok-bob"}
	initialize(t, bobOwn)
	sameJSON(t, callTool(t, bobOwn, 2, "tools/call", callParams("whois", `{}`)),
		`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"subject bob"}]}}`)
}
