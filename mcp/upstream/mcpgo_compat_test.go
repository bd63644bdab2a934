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

// answeredError: mcp-go's streamable HTTP transport drops the body of a
// 4xx answer to initialize and of a 404, where a modern server says which
// versions it speaks.
func TestUpstreamCanaryMCPGoDropsHTTPErrorBodies(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"]}}}`))
		}))
		tr, err := mcptransport.NewStreamableHTTP(srv.URL + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := tr.SendRequest(ctx, mcptransport.JSONRPCRequest{JSONRPC: mcpgo.JSONRPC_VERSION, ID: mcpgo.NewRequestId(int64(1)), Method: "initialize"})
		cancel()
		_ = tr.Close()
		srv.Close()
		if resp != nil || err == nil || strings.Contains(err.Error(), "-32022") {
			t.Errorf("HTTP %d: mcp-go now reads the error body of an initialize (%v, %v): reconsider sendProbe.errBody", status, resp, err)
		}
	}
}

// unreachableHeader: mcp-go checks x-mcp-header annotations on chains of
// properties only.
func TestUpstreamCanaryMCPGoHeaderAnnotationsOnPropertiesOnly(t *testing.T) {
	t.Parallel()
	tool := &mcpgo.Tool{Name: "t", RawInputSchema: []byte(`{"type":"object","properties":{"xs":{"type":"array","items":{"type":"string","x-mcp-header":"X"}}}}`)}
	if err := mcpgo.ValidateParamHeaderAnnotations(tool); err != nil {
		t.Errorf("mcp-go now refuses an x-mcp-header under items (%v): reconsider unreachableHeader", err)
	}
}
