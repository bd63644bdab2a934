package front

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// signedReplica is one replica of a front whose session ids are signed
// with keys: its own Front (nothing shared with the others but the keys),
// with a tool "caps" that tells whether the session's client declared URL
// elicitation, as the front reads it.
func signedReplica(t *testing.T, opts HTTPOptions, keys ...string) (url string, h *HTTPHandler) {
	t.Helper()
	f, _ := testFront(t, nil)
	addTool(f, mcpgo.NewTool("caps"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText(fmt.Sprint("url elicitation: ", ClientSupportsURLElicitation(ctx))), nil
	})
	for _, k := range keys {
		opts.SessionKeys = append(opts.SessionKeys, []byte(k))
	}
	srv, h := startFrontHTTP(t, f, &opts)
	return srv.URL + StreamablePath, h
}

const (
	keyA = "0123456789abcdef0123456789abcdef-a"
	keyB = "0123456789abcdef0123456789abcdef-b"
)

// status posts a tools/call of "add" in session to url and returns the
// HTTP status.
func status(t *testing.T, url, session string) int {
	t.Helper()
	c := &httpTestClient{url: url, session: session, version: "2025-11-25"}
	r, err := c.post(t, context.Background(), request(9, "tools/call", callParams("add", `{"a":1,"b":2}`)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.status
}

// A session opened on one replica is served by another that holds the
// same key, with the client capabilities of its initialize; an id that is
// tampered with, signed with another key, expired or deleted is 404, and
// keys rotate.
func TestFrontSignedSessionsAcrossReplicas(t *testing.T) {
	t.Parallel()
	a, _ := signedReplica(t, HTTPOptions{}, keyA)
	b, hb := signedReplica(t, HTTPOptions{}, keyA)
	c := &httpTestClient{url: a}
	initialize(t, c)
	if !strings.HasPrefix(c.session, sessionIDPrefix) {
		t.Fatalf("session id %q, want a signed one (%s…)", c.session, sessionIDPrefix)
	}

	c.url = b
	sameJSON(t, callTool(t, c, 2, "tools/call", callParams("add", `{"a":1,"b":2}`)),
		`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"3"}],"structuredContent":{"sum":3}}}`)
	sameJSON(t, callTool(t, c, 3, "tools/call", callParams("caps", `{}`)),
		`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"url elicitation: true"}]}}`)
	if hb.Sessions() != 0 {
		t.Errorf("replica B holds %d sessions, want 0: the session is A's", hb.Sessions())
	}

	// A client without URL elicitation, seen from B.
	plain := &httpTestClient{url: a}
	await(t, plain.send(t, 1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}`))
	plain.url = b
	sameJSON(t, callTool(t, plain, 2, "tools/call", callParams("caps", `{}`)),
		`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"url elicitation: false"}]}}`)

	payload, sig, _ := strings.Cut(strings.TrimPrefix(c.session, sessionIDPrefix), ".")
	other, _ := signedReplica(t, HTTPOptions{}, keyB)
	rotated, _ := signedReplica(t, HTTPOptions{}, keyB, keyA)
	for _, tc := range []struct {
		what, url, session string
		want               int
	}{
		{"another key", other, c.session, http.StatusNotFound},
		{"rotated keys (new first, old kept)", rotated, c.session, http.StatusOK},
		{"payload changed", b, sessionIDPrefix + strings.Replace(payload, payload[:4], "AAAA", 1) + "." + sig, http.StatusNotFound},
		{"mac changed", b, sessionIDPrefix + payload + "." + strings.Repeat("A", len(sig)), http.StatusNotFound},
		{"no mac", b, sessionIDPrefix + payload, http.StatusNotFound},
		{"random id", b, "mcp-session-" + strings.Repeat("x", 26), http.StatusNotFound},
		{"huge id", b, sessionIDPrefix + strings.Repeat("A", 5000) + "." + sig, http.StatusNotFound},
	} {
		if got := status(t, tc.url, tc.session); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.what, got, tc.want)
		}
	}

	// DELETE on B ends the session there; A, which cannot know, still
	// serves it (nothing is shared but the key).
	if got := deleteSession(t, b, c.session); got != http.StatusOK {
		t.Fatalf("DELETE on B: %d", got)
	}
	if got := status(t, b, c.session); got != http.StatusNotFound {
		t.Errorf("after DELETE, on B: %d, want 404", got)
	}
	if got := status(t, a, c.session); got != http.StatusOK {
		t.Errorf("after DELETE on B, on A: %d, want 200", got)
	}
}

// A signed session id expires after SessionLifetime on every replica.
func TestFrontSignedSessionsExpire(t *testing.T) {
	t.Parallel()
	a, ha := signedReplica(t, HTTPOptions{SessionLifetime: time.Hour}, keyA)
	b, hb := signedReplica(t, HTTPOptions{SessionLifetime: time.Hour}, keyA)
	c := &httpTestClient{url: a}
	initialize(t, c)
	if got := status(t, b, c.session); got != http.StatusOK {
		t.Fatalf("fresh session on B: %d", got)
	}
	later := func() time.Time { return time.Now().Add(time.Hour + time.Second) }
	ha.ids.signer.now, hb.ids.signer.now = later, later
	for _, u := range []string{a, b} {
		if got := status(t, u, c.session); got != http.StatusNotFound {
			t.Errorf("expired session on %s: %d, want 404", u, got)
		}
	}
}

// subjectAuth authenticates callers whose token is "tok-" and their
// subject.
func subjectAuth() *ResourceAuth {
	return &ResourceAuth{
		Resource:             "https://mcp.example.com/mcp",
		AuthorizationServers: []string{"https://as.example.com"},
		Verify: func(_ context.Context, token string) (*Identity, error) {
			sub, ok := strings.CutPrefix(token, "tok-")
			if !ok {
				return nil, ErrInvalidToken
			}
			return &Identity{Subject: sub, Audience: []string{"https://mcp.example.com/mcp"}, Expiry: time.Now().Add(time.Hour)}, nil
		},
	}
}

// A signed session stays its opener's on every replica: another caller's
// token with its id finds no session.
func TestFrontSignedSessionsOwner(t *testing.T) {
	t.Parallel()
	auth := subjectAuth()
	a, _ := signedReplica(t, HTTPOptions{Resource: auth}, keyA)
	b, _ := signedReplica(t, HTTPOptions{Resource: auth}, keyA)
	alice := &httpTestClient{url: a, token: "tok-alice"}
	initialize(t, alice)
	if strings.Contains(alice.session, "alice") {
		t.Errorf("the session id names its owner: %s", alice.session)
	}
	for _, tc := range []struct {
		token string
		want  int
	}{{"tok-alice", http.StatusOK}, {"tok-bob", http.StatusNotFound}} {
		c := &httpTestClient{url: b, token: tc.token, session: alice.session, version: "2025-11-25"}
		r, err := c.post(t, context.Background(), request(2, "tools/call", callParams("whois", `{}`)), nil)
		if err != nil || r.status != tc.want {
			t.Errorf("%s on B in alice's session: %d %s %v, want %d", tc.token, r.status, r.body, err, tc.want)
		}
	}
}

// The ids ended here are bounded: beyond max, the oldest is forgotten.
func TestFrontEndedIDsBounded(t *testing.T) {
	t.Parallel()
	e := &endedIDs{max: 3, at: make(map[string]time.Time)}
	now := time.Now()
	for i := range 5 {
		e.add(fmt.Sprint(i), now.Add(time.Hour), now)
	}
	if len(e.at) != 3 || len(e.order) != 3 || e.has("0", now) || e.has("1", now) || !e.has("4", now) {
		t.Errorf("ended ids %v, want the last 3", e.order)
	}
	e.add("5", now.Add(time.Hour), now.Add(2*time.Hour)) // the others expired
	if len(e.at) != 1 || !e.has("5", now) {
		t.Errorf("ended ids %v, want only 5", e.order)
	}
}
