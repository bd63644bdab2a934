package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// limitBody: mcp-go's streamable HTTP transport, on a client of its own
// (no limitBody), hands over a JSON answer of any size whole.
func TestUpstreamCanaryMCPGoReadsHTTPAnswersWhole(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 3<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"big":"` + big + `"}}`))
	}))
	defer srv.Close()
	tr, err := mcptransport.NewStreamableHTTP(srv.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tr.SendRequest(ctx, mcptransport.JSONRPCRequest{JSONRPC: mcpgo.JSONRPC_VERSION, ID: mcpgo.NewRequestId(int64(1)), Method: "tools/list"})
	if err != nil || resp == nil || len(resp.Result) < len(big) {
		t.Fatalf("mcp-go no longer reads a %d-byte answer whole (%v): reconsider limitBody", len(big), err)
	}
}

// Config.Auth: mcp-go's OAuthHandler remembers one expected state, so a
// second authorization started for another user makes the first one's
// callback fail.
func TestUpstreamCanaryMCPGoOAuthOneExpectedState(t *testing.T) {
	t.Parallel()
	h := mcptransport.NewOAuthHandler(mcptransport.OAuthConfig{ClientID: "c", RedirectURI: "http://127.0.0.1/cb", PKCEEnabled: true})
	h.SetExpectedState("state-of-user-a")
	h.SetExpectedState("state-of-user-b")
	err := h.ProcessAuthorizationResponse(context.Background(), "code", "state-of-user-a", "verifier")
	if !errors.Is(err, mcptransport.ErrInvalidState) {
		t.Fatalf("mcp-go's OAuthHandler now keeps more than one pending authorization (%v): reconsider package mcp/oauth", err)
	}
}
