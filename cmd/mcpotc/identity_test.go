package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcpotc/mcpotc/mcp/front"
)

// testIssuer is a JWT issuer on loopback: its RFC 8414 metadata and JWKS,
// and tokens it signs.
type testIssuer struct {
	url string
	key *ecdsa.PrivateKey
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &testIssuer{key: key}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": is.url, "authorization_endpoint": is.url + "/authorize",
				"token_endpoint": is.url + "/token", "jwks_uri": is.url + "/jwks", "response_types_supported": []string{"code"},
				"code_challenge_methods_supported": []string{"S256"}})
		case "/jwks":
			_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	is.url = srv.URL
	return is
}

// token is an access token of sub for audience aud.
func (is *testIssuer) token(t *testing.T, sub, aud string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: is.key, KeyID: "k1"}}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(s).Claims(jwt.Claims{Issuer: is.url, Subject: sub, Audience: jwt.Audience{aud},
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// userIDRecorder is an OTC server with one tool that needs a user id; it
// records the context.user_id of each call.
type userIDRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (u *userIDRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/tools" {
		_, _ = io.WriteString(w, `{"$schema":"urn:oxp:1.0","items":[{"id":"Me.Who@1.0.0","name":"Me_Who","description":"d","version":"1.0.0","input_schema":{"type":"object"},"requirements":{"user_id":true}}]}`)
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
	u.mu.Lock()
	u.seen = append(u.seen, req.Request.Context.UserID)
	u.mu.Unlock()
	_, _ = io.WriteString(w, `{"$schema":"urn:oxp:1.0","result":{"call_id":"c","success":true,"value":"ok"}}`)
}

func (u *userIDRecorder) last() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		return ""
	}
	return u.seen[len(u.seen)-1]
}

// A principal is issuer + subject (issue 25, item 8), through serve-mcp
// with two --oauth-issuer whose tokens are JWTs checked against each
// issuer's JWKS: subject u1 of issuer B presenting the Mcp-Session-Id of
// subject u1 of issuer A gets 404, each is served in its own session, and
// the OTC upstream receives two different user ids (user_id_from_token),
// each the issuer-qualified name the README documents; with one issuer
// the user id is the subject as it is.
func TestServeMCPTwoIssuersSameSubject(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := newTestIssuer(t), newTestIssuer(t)
	rec := &userIDRecorder{}
	otcSrv := httptest.NewServer(rec)
	defer otcSrv.Close()
	cfg := writeConfig(t, `{"upstreams":[{"url":"`+otcSrv.URL+`","user_id_from_token":true}]}`)
	const resource = "http://mcp.test/mcp"
	common := []string{"serve-mcp", "--transport", "http", "--listen", "127.0.0.1:0", "--log-level", "error", "--config", cfg, "--oauth-resource", resource}
	two := startCommand(t, ctx, nil, append(common, "--oauth-issuer", a.url, "--oauth-issuer", b.url)...) + "/mcp"
	one := startCommand(t, ctx, nil, append(common, "--oauth-issuer", a.url)...) + "/mcp"

	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	const call = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Me_Who","arguments":{}}}`
	headers := func(token, session string) map[string]string {
		h := map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
		if session != "" {
			h["Mcp-Session-Id"], h["Mcp-Protocol-Version"] = session, "2025-11-25"
		}
		return h
	}
	open := func(url, token string) string {
		t.Helper()
		ans := send(t, "POST", url, headers(token, ""), initialize)
		if ans.status != http.StatusOK || ans.header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize: %d %s", ans.status, ans.body)
		}
		return ans.header.Get("Mcp-Session-Id")
	}
	callAs := func(url, token, session string) (int, string) {
		t.Helper()
		ans := send(t, "POST", url, headers(token, session), call)
		if ans.status != http.StatusOK {
			return ans.status, ""
		}
		if !strings.Contains(ans.body, `"ok"`) {
			t.Fatalf("tools/call: %s", ans.body)
		}
		return ans.status, rec.last()
	}

	tokA, tokB := a.token(t, "u1", resource), b.token(t, "u1", resource)
	sessA := open(two, tokA)
	if status, _ := callAs(two, tokB, sessA); status != http.StatusNotFound {
		t.Errorf("u1 of issuer B in the session of u1 of issuer A: %d, want 404", status)
	}
	_, userA := callAs(two, tokA, sessA)
	sessB := open(two, tokB)
	_, userB := callAs(two, tokB, sessB)
	if userA != a.url+"#u1" || userB != b.url+"#u1" {
		t.Errorf("user ids at the OTC upstream: %q and %q, want %q and %q", userA, userB, a.url+"#u1", b.url+"#u1")
	}
	if status, _ := callAs(two, tokA, sessB); status != http.StatusNotFound {
		t.Errorf("u1 of issuer A in the session of u1 of issuer B: %d, want 404", status)
	}

	// One issuer: the user id is the subject, as before.
	if _, user := callAs(one, tokA, open(one, tokA)); user != "u1" {
		t.Errorf("one issuer: user id %q, want u1", user)
	}
	if ans := send(t, "POST", one, headers(tokB, ""), initialize); ans.status != http.StatusUnauthorized {
		t.Errorf("a token of an issuer not named: %d, want 401", ans.status)
	}
}

// Where an introspected token's issuer comes from when the answer names
// none: the only issuer, else the one the endpoint is under.
func TestIntrospectionIssuer(t *testing.T) {
	for _, tc := range []struct {
		issuers  []string
		endpoint string
		want     string
	}{
		{[]string{"https://as.example"}, "https://elsewhere.example/introspect", "https://as.example"},
		{[]string{"https://kc.example/realms/a", "https://kc.example/realms/b"}, "https://kc.example/realms/b/protocol/openid-connect/token/introspect", "https://kc.example/realms/b"},
		{[]string{"https://kc.example/", "https://kc.example/realms/b"}, "https://kc.example/realms/b/introspect", "https://kc.example/realms/b"},
		{[]string{"https://kc.example/", "https://kc.example/realms/b"}, "https://kc.example/introspect", "https://kc.example/"},
		{[]string{"https://kc.example/realms/a", "https://kc.example/realms/b"}, "https://kc.example/realms/ab/introspect", ""},
		{[]string{"https://a.example", "https://b.example"}, "http://a.example/introspect", ""},
	} {
		if got := introspectionIssuer(tc.issuers, tc.endpoint); got != tc.want {
			t.Errorf("%v, %s: %q, want %q", tc.issuers, tc.endpoint, got, tc.want)
		}
	}
}

// --oauth-forwarder names a caller as ISSUER#SUBJECT (the issuer
// percent-encoded as user_id_from_token writes it), or SUBJECT with one
// issuer; anything else is refused.
func TestOAuthForwarderFlag(t *testing.T) {
	two := []string{"https://a.example/", "https://b.example#x"}
	for _, tc := range []struct {
		issuers []string
		name    string
		want    front.Identity
		err     bool
	}{
		{two, "https://a.example#otc-front", front.Identity{Issuer: "https://a.example/", Subject: "otc-front"}, false},
		{two, "https://b.example%23x#sub#with#hashes", front.Identity{Issuer: "https://b.example#x", Subject: "sub#with#hashes"}, false},
		{two, "otc-front", front.Identity{}, true},
		{two, "https://c.example#otc-front", front.Identity{}, true},
		{[]string{"https://a.example"}, "otc-front", front.Identity{Issuer: "https://a.example", Subject: "otc-front"}, false},
		{[]string{"https://a.example"}, "weird#subject", front.Identity{Issuer: "https://a.example", Subject: "weird#subject"}, false},
	} {
		got, err := forwarder(tc.issuers, tc.name)
		if (err != nil) != tc.err || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q: %+v %v, want %+v (error %t)", tc.name, got, err, tc.want, tc.err)
		}
	}
	var l prefixList
	for _, s := range []string{"10.0.0.0/8", "192.0.2.7", "::1"} {
		if err := l.Set(s); err != nil {
			t.Errorf("--trusted-proxy %s: %v", s, err)
		}
	}
	if want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("::1/128")}; fmt.Sprint([]netip.Prefix(l)) != fmt.Sprint(want) {
		t.Errorf("--trusted-proxy: %v", l)
	}
	if err := l.Set("proxy.example"); err == nil {
		t.Error("--trusted-proxy proxy.example: no error")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve-mcp", "--max-sessions-per-client", "5"}, "--max-sessions-per-client needs --transport http or sse"},
		{[]string{"serve-mcp", "--trusted-proxy", "10.0.0.1"}, "--trusted-proxy needs --transport http or sse"},
		{[]string{"serve-mcp", "--transport", "http", "--oauth-forwarder", "x"}, "--oauth-forwarder needs --oauth-issuer"},
		{[]string{"serve-mcp", "--transport", "http", "--max-sessions-per-client", "-1"}, "--max-sessions-per-client must not be negative"},
		{[]string{"serve-mcp", "--transport", "http", "--oauth-issuer", "https://a.example", "--oauth-issuer", "https://b.example", "--oauth-forwarder", "otc-front"}, `--oauth-forwarder "otc-front": want ISSUER#SUBJECT`},
	} {
		code, _, stderr := run(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("mcpotc %q: code %d: %s, want %q", tc.args, code, stderr, tc.want)
		}
	}
}
