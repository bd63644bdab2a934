//go:build e2e

package e2e

// Identity on the MCP front (issue 25, items 8, 9 and 14) through the
// built binary: a principal is issuer + subject (two zitadel/oidc example
// OPs whose clients share a subject), forwarded context only from the
// chain peer, and sessions that one client cannot exhaust.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// otcRecorder is an OTC tool server in the test: one tool, Me_Who, that
// needs a user id; it records the call_id and context.user_id of each
// call and answers the user id.
type otcRecorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []map[string]string
}

func startOTCRecorder(t *testing.T) *otcRecorder {
	t.Helper()
	o := &otcRecorder{}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/tools" {
			_, _ = io.WriteString(w, `{"$schema":"urn:oxp:1.0","items":[{"id":"Me.Who@1.0.0","name":"Me_Who","description":"d","version":"1.0.0","input_schema":{"type":"object"},"requirements":{"user_id":true}}]}`)
			return
		}
		var req struct {
			Request struct {
				CallID  string `json:"call_id"`
				Context struct {
					UserID string `json:"user_id"`
				} `json:"context"`
			} `json:"request"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		o.mu.Lock()
		o.seen = append(o.seen, map[string]string{"call_id": req.Request.CallID, "user_id": req.Request.Context.UserID})
		o.mu.Unlock()
		fmt.Fprintf(w, `{"$schema":"urn:oxp:1.0","result":{"call_id":%q,"success":true,"value":%q}}`, req.Request.CallID, req.Request.Context.UserID)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *otcRecorder) last(t *testing.T) map[string]string {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.seen) == 0 {
		t.Fatal("the OTC server received no call")
	}
	return o.seen[len(o.seen)-1]
}

// serveMCPConfig writes a serve-mcp config file naming one upstream.
func serveMCPConfig(t *testing.T, upstream map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"upstreams": []any{upstream}})
	path := filepath.Join(t.TempDir(), "serve-mcp.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mcpPost sends one JSON-RPC message to url with token and session, and
// returns status, session id and body.
func mcpPost(t *testing.T, url, token, session, body string) (int, string, string) {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		h.Set("Mcp-Session-Id", session)
		h.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	status, hdr, got := httpDo(t, http.MethodPost, url, body, h)
	return status, hdr.Get("Mcp-Session-Id"), got
}

const whoCall = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Me_Who","arguments":{}}}`

// TestE2EPrincipalIsIssuerAndSubject: serve-mcp trusts two zitadel/oidc
// example OPs, and each has a client "u1" whose JWT subject is u1. The
// attack: u1 of OP B presents the Mcp-Session-Id of u1 of OP A — 404. Each
// is served its own session, and the OTC server (user_id_from_token)
// receives two different user ids, each OP's issuer then "#u1"; a third
// OP's token is 401.
func TestE2EPrincipalIsIssuerAndSubject(t *testing.T) {
	a, b, stranger := startZitadelOP(t), startZitadelOP(t), startZitadelOP(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	otc := startOTCRecorder(t)
	cfg := serveMCPConfig(t, map[string]any{"url": otc.srv.URL, "user_id_from_token": true})
	// zitadel/oidc's example OP types its access tokens "JWT", not
	// "at+jwt" (RFC 9068): --oauth-allow-untyped-jwt, as an operator of
	// such an issuer does.
	br := startBridge(t, ctx, "http", []string{"--config", cfg, "--oauth-issuer", a.issuer, "--oauth-issuer", b.issuer, "--oauth-allow-untyped-jwt"}, nil)
	for _, o := range []*zitadelOP{a, b, stranger} {
		o.store.client("u1", br.url)
	}
	tokA, tokB := a.token(t, "u1"), b.token(t, "u1")

	status, sessA, body := mcpPost(t, br.url, tokA, "", initializeBody)
	if status != http.StatusOK || sessA == "" {
		t.Fatalf("initialize as u1 of A: %d %s", status, truncate(body, 300))
	}
	if status, _, body := mcpPost(t, br.url, tokB, sessA, whoCall); status != http.StatusNotFound {
		t.Errorf("u1 of B with the session of u1 of A: %d %s, want 404", status, truncate(body, 300))
	}
	if status, _, body := mcpPost(t, br.url, tokA, sessA, whoCall); status != http.StatusOK {
		t.Fatalf("u1 of A in its session: %d %s", status, truncate(body, 300))
	}
	userA := otc.last(t)["user_id"]
	status, sessB, body := mcpPost(t, br.url, tokB, "", initializeBody)
	if status != http.StatusOK || sessB == "" || sessB == sessA {
		t.Fatalf("initialize as u1 of B: %d %s", status, truncate(body, 300))
	}
	if status, _, body := mcpPost(t, br.url, tokB, sessB, whoCall); status != http.StatusOK {
		t.Fatalf("u1 of B in its session: %d %s", status, truncate(body, 300))
	}
	userB := otc.last(t)["user_id"]
	if userA != a.issuer+"#u1" || userB != b.issuer+"#u1" {
		t.Errorf("the OTC server received user ids %q and %q, want %q and %q", userA, userB, a.issuer+"#u1", b.issuer+"#u1")
	}
	if status, _, _ := mcpPost(t, br.url, stranger.token(t, "u1"), "", initializeBody); status != http.StatusUnauthorized {
		t.Errorf("the token of an OP serve-mcp does not trust: %d, want 401", status)
	}
	logs := br.p.Stderr()
	for _, iss := range []string{a.issuer, b.issuer} {
		if !strings.Contains(logs, `"issuer":"`+iss+`","subject":"u1"`) {
			t.Errorf("no call line names issuer %s and subject u1:\n%s", iss, truncate(logs, 3000))
		}
	}
	t.Logf("two OPs, one subject u1: B's u1 gets 404 in A's session; user ids %q and %q", userA, userB)
}

// TestE2EForwardedContextFromChainPeerOnly: serve-mcp behind one OP, with
// accept_forwarded_context and --oauth-forwarder naming the OP's client
// "otc-front". The attack: client "alice" sends a forged
// mcpotc/otc-request carrier naming user "victim" — the OTC server
// receives the configured user, and her call_id scoped to her. The chain
// peer otc-front's carrier still reaches it as sent.
func TestE2EForwardedContextFromChainPeerOnly(t *testing.T) {
	o := startZitadelOP(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	otc := startOTCRecorder(t)
	cfg := serveMCPConfig(t, map[string]any{"url": otc.srv.URL, "user_id": "static", "accept_forwarded_context": true})
	br := startBridge(t, ctx, "http", []string{"--config", cfg, "--oauth-issuer", o.issuer, "--oauth-forwarder", "otc-front", "--oauth-allow-untyped-jwt"}, nil)
	o.store.client("alice", br.url)
	o.store.client("otc-front", br.url)
	carrier := func(callID, user string) string {
		return `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"Me_Who","arguments":{},"_meta":{"mcpotc/otc-request":` +
			`{"call_id":"` + callID + `","context":{"user_id":"` + user + `"}}}}}`
	}
	for _, tc := range []struct {
		client, callID string
		wantUser       string
		asIs           bool
	}{
		{"alice", "forged-1", "static", false},
		{"otc-front", "chain-1", "user-chain", true},
	} {
		tok := o.token(t, tc.client)
		status, sess, body := mcpPost(t, br.url, tok, "", initializeBody)
		if status != http.StatusOK {
			t.Fatalf("initialize as %s: %d %s", tc.client, status, truncate(body, 300))
		}
		user := "victim"
		if tc.asIs {
			user = "user-chain"
		}
		if status, _, body := mcpPost(t, br.url, tok, sess, carrier(tc.callID, user)); status != http.StatusOK {
			t.Fatalf("%s's call: %d %s", tc.client, status, truncate(body, 300))
		}
		got := otc.last(t)
		if got["user_id"] != tc.wantUser || (got["call_id"] == tc.callID) != tc.asIs || !strings.HasSuffix(got["call_id"], tc.callID) {
			t.Errorf("%s's carrier (user %q, call_id %q): the OTC server received %v, want user %q, call_id as sent: %t",
				tc.client, user, tc.callID, got, tc.wantUser, tc.asIs)
		}
	}
}

// TestE2ESessionExhaustion: the attack of issue 25, item 14 — one
// unauthenticated client opening sessions without end. With the
// per-client bound (default 100) it is refused with 503 -32003 beyond its
// 100 while a client from another address (127.0.0.2) connects, lists and
// calls. With --max-sessions 20 and no per-client bound, 200 sessions that
// never make a call leave the server holding 20, the oldest of them
// ended (404), and an honest client still connects and calls.
func TestE2ESessionExhaustion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	honest := func(t *testing.T, url, local string) {
		t.Helper()
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 10 * time.Second}
		hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
		client := sdk.NewClient(&sdk.Implementation{Name: "honest", Version: "1.0.0"}, nil)
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		cs, err := client.Connect(cctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("an honest client from %s: %v", local, err)
		}
		defer closeSession(t, cs)
		res := mustCall(t, ctx, cs, "Calculator_Add", map[string]any{"a": 2, "b": 3})
		if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), "5") {
			t.Errorf("an honest client's call: %s", b)
		}
	}

	t.Run("per client", func(t *testing.T) {
		b := startBridge(t, ctx, "http", nil, nil)
		refused := 0
		for i := range 110 {
			status, id, body := mcpPost(t, b.url, "", "", initializeBody)
			switch {
			case i < 100 && (status != http.StatusOK || id == ""):
				t.Fatalf("initialize %d: %d %s", i, status, truncate(body, 300))
			case i >= 100:
				if status != http.StatusServiceUnavailable || !strings.Contains(body, `"code":-32003`) || !strings.Contains(body, "too many sessions for this client") {
					t.Fatalf("initialize %d beyond the client's bound: %d %s", i, status, truncate(body, 300))
				}
				refused++
			}
		}
		honest(t, b.url, "127.0.0.2")
		t.Logf("one client: 100 sessions, the next %d refused (503, -32003); a client from 127.0.0.2 connects and calls", refused)
	})

	t.Run("never used", func(t *testing.T) {
		b := startBridge(t, ctx, "http", []string{"--max-sessions", "20", "--max-sessions-per-client", "0"}, nil)
		var first string
		for i := range 200 {
			status, id, body := mcpPost(t, b.url, "", "", initializeBody)
			if status != http.StatusOK || id == "" {
				t.Fatalf("initialize %d of sessions never used: %d %s", i, status, truncate(body, 300))
			}
			if i == 0 {
				first = id
			}
		}
		honest(t, b.url, "127.0.0.1")
		if status, _, body := mcpPost(t, b.url, "", first, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); status != http.StatusNotFound {
			t.Errorf("the first session, ended to admit others: %d %s, want 404", status, truncate(body, 200))
		}
		t.Logf("--max-sessions 20: 200 sessions never used all admitted, the oldest ended (404); an honest client connects and calls")
	})
}
