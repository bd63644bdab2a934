//go:build e2e

package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/oauth2/clientcredentials"
)

// zitadelOP serves zitadel/oidc's example OpenID Provider
// (github.com/zitadel/oidc/v3/example/server/exampleop) in this process,
// over its in-memory example storage: discovery, the JWKS, the token
// endpoint and the signing are the library's. The storage is wrapped in
// one respect: a client-credentials token is a JWT (RFC 9068 style) for
// the audience the test gives its client, as an authorization server with
// resource indicators issues (the example storage issues opaque tokens to
// its one service client, for its own id).
type zitadelOP struct {
	issuer string
	store  *jwtStorage
}

type jwtStorage struct {
	*storage.Storage
	mu       sync.Mutex
	audience map[string]string // client id → the audience of its tokens
}

// client registers id (secret "secret-"+id), whose tokens are for aud.
func (s *jwtStorage) client(id, aud string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.audience[id] = aud
}

func (s *jwtStorage) audienceOf(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	aud, ok := s.audience[id]
	return aud, ok
}

func (s *jwtStorage) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if _, ok := s.audienceOf(id); !ok || secret != "secret-"+id {
		return nil, errors.New("wrong client or secret")
	}
	// The example's service client gives the settings (grant types, skew).
	base, err := s.Storage.ClientCredentials(ctx, "sid1", "verysecret")
	if err != nil {
		return nil, err
	}
	return jwtClient{Client: base, id: id}, nil
}

func (s *jwtStorage) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	aud, ok := s.audienceOf(id)
	if !ok {
		return nil, errors.New("wrong client")
	}
	return &oidc.JWTTokenRequest{Subject: id, Audience: []string{aud}, Scopes: scopes}, nil
}

type jwtClient struct {
	op.Client
	id string
}

func (c jwtClient) GetID() string                       { return c.id }
func (c jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

func startZitadelOP(t *testing.T) *zitadelOP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String() + "/"
	s := &jwtStorage{Storage: storage.NewStorage(storage.NewUserStore(issuer)), audience: map[string]string{}}
	// SetupServer makes its logger slog's default for the process: its
	// request lines would fill the test's output.
	quiet := slog.New(slog.DiscardHandler)
	srv := &http.Server{Handler: exampleop.SetupServer(issuer, s, quiet, false), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &zitadelOP{issuer: issuer, store: s}
}

// token gets a client-credentials access token for client id.
func (o *zitadelOP) token(t *testing.T, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, o.issuer+".well-known/openid-configuration", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		TokenEndpoint string `json:"token_endpoint"`
	}
	err = json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if err != nil || meta.TokenEndpoint == "" {
		t.Fatalf("the OP's discovery: %v %+v", err, meta)
	}
	cc := clientcredentials.Config{ClientID: id, ClientSecret: "secret-" + id, TokenURL: meta.TokenEndpoint}
	tok, err := cc.Token(ctx)
	if err != nil {
		t.Fatalf("client credentials for %s: %v", id, err)
	}
	if strings.Count(tok.AccessToken, ".") != 2 {
		t.Fatalf("the OP's access token for %s is not a JWT", id)
	}
	return tok.AccessToken
}

// signingKey is the OP's RSA signing key and its kid, read through the
// storage interface the OP signs with.
func (o *zitadelOP) signingKey(t *testing.T) (*rsa.PrivateKey, string) {
	t.Helper()
	k, err := o.store.SigningKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	priv, ok := k.Key().(*rsa.PrivateKey)
	if !ok {
		t.Fatalf("the OP's key is a %T", k.Key())
	}
	return priv, k.ID()
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// TestOAuthMCPFrontJWT: serve-mcp as a protected resource whose tokens are
// JWTs of zitadel/oidc's example OpenID Provider, checked against the
// provider's JWKS (found through its discovery): the provider's token for
// the front's resource is served, and its subject is logged (never the
// token); at the wire, a token for another audience, an expired one
// (signed with the provider's own key), alg "none", HS256 signed with the
// provider's public key, and a token signed by a key the provider does not
// publish are 401 invalid_token; a good token at a front that wants a
// scope the token lacks is 403 insufficient_scope. RFC 9068's typ: the
// example OP signs its access tokens with typ "JWT" (zitadel/oidc's
// pkg/op/signer.go), not "at+jwt", so the fronts above run with
// --oauth-allow-untyped-jwt (what an operator of such an issuer does); a
// front without it refuses the OP's token (401 invalid_token) and serves
// one signed with the OP's key and typed at+jwt.
func TestOAuthMCPFrontJWT(t *testing.T) {
	o := startZitadelOP(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := startBridge(t, ctx, "http", []string{"--oauth-issuer", o.issuer, "--oauth-allow-untyped-jwt"}, nil)
	scoped := startBridge(t, ctx, "http", []string{"--oauth-issuer", o.issuer, "--oauth-scope", "admin", "--oauth-allow-untyped-jwt"}, nil)
	typed := startBridge(t, ctx, "http", []string{"--oauth-issuer", o.issuer}, nil)
	o.store.client("front-svc", a.url)
	o.store.client("typed-svc", typed.url)
	o.store.client("other-svc", "https://other.example.com/mcp")
	o.store.client("scoped-svc", scoped.url)
	good := o.token(t, "front-svc")

	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"0"}}}`
	post := func(url, token, body, session string) (int, http.Header, string) {
		t.Helper()
		h := http.Header{}
		if token != "" {
			h.Set("Authorization", "Bearer "+token)
		}
		if session != "" {
			h.Set("Mcp-Session-Id", session)
			h.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		return httpDo(t, http.MethodPost, url, body, h)
	}
	status, hdr, body := post(a.url, good, init, "")
	if status != http.StatusOK || hdr.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize with the OP's token: %d %s", status, truncate(body, 300))
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Calculator_Add","arguments":{"a":2,"b":3}}}`
	status, _, body = post(a.url, good, call, hdr.Get("Mcp-Session-Id"))
	if status != http.StatusOK || !strings.Contains(body, `"sum":5`) {
		t.Fatalf("tools/call with the OP's token: %d %s", status, truncate(body, 300))
	}

	priv, kid := o.signingKey(t)
	now := time.Now()
	claims := func(exp time.Time) map[string]any {
		return map[string]any{"iss": o.issuer, "sub": "front-svc", "aud": []string{a.url}, "exp": exp.Unix(), "iat": now.Add(-2 * time.Hour).Unix(), "client_id": "front-svc"}
	}
	signTyped := func(typ jose.ContentType, key any, c map[string]any) string {
		t.Helper()
		opts := (&jose.SignerOptions{}).WithHeader("kid", kid)
		if typ != "" {
			opts = opts.WithType(typ)
		}
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, opts)
		if err != nil {
			t.Fatal(err)
		}
		payload, _ := json.Marshal(c)
		jws, err := signer.Sign(payload)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := jws.CompactSerialize()
		return s
	}
	sign := func(key any, c map[string]any) string { return signTyped("JWT", key, c) }
	unsigned := func(alg string, c map[string]any) (header, payload string) {
		h, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT", "kid": kid})
		p, _ := json.Marshal(c)
		return b64(h), b64(p)
	}
	valid := claims(now.Add(time.Hour))
	// The test's own signing with the OP's key is good: what makes the
	// cases below fail is what each changes.
	if status, _, body := post(a.url, sign(priv, valid), init, ""); status != http.StatusOK {
		t.Fatalf("a token signed with the OP's key: %d %s", status, truncate(body, 300))
	}
	h, p := unsigned("none", valid)
	algNone := h + "." + p + "."
	pubDER, _ := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	h, p = unsigned("HS256", valid)
	mac := hmac.New(sha256.New, pubPEM)
	mac.Write([]byte(h + "." + p))
	hs256 := h + "." + p + "." + b64(mac.Sum(nil))
	stranger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}

	base := strings.TrimSuffix(a.url, "/mcp")
	invalid := fmt.Sprintf(`Bearer error="invalid_token", resource_metadata="%s/.well-known/oauth-protected-resource/mcp"`, base)
	for _, tc := range []struct {
		name, token string
	}{
		{"another audience (the OP's token for other-svc)", o.token(t, "other-svc")},
		{"expired an hour ago (signed with the OP's key)", sign(priv, claims(now.Add(-time.Hour)))},
		{`alg "none"`, algNone},
		{"HS256 with the OP's public key as the secret", hs256},
		{"signed by a key the OP does not publish", sign(stranger, valid)},
		{"not a JWT", "opaque-token"},
	} {
		status, hdr, body := post(a.url, tc.token, init, "")
		if status != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") != invalid {
			t.Errorf("%s: %d %q, want 401 %q: %s", tc.name, status, hdr.Get("WWW-Authenticate"), invalid, truncate(body, 300))
		}
	}
	scopedBase := strings.TrimSuffix(scoped.url, "/mcp")
	status, hdr, body = post(scoped.url, o.token(t, "scoped-svc"), init, "")
	if want := fmt.Sprintf(`Bearer error="insufficient_scope", resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="admin"`, scopedBase); status != http.StatusForbidden || hdr.Get("WWW-Authenticate") != want {
		t.Errorf("a token without the scope: %d %q, want 403 %q: %s", status, hdr.Get("WWW-Authenticate"), want, truncate(body, 300))
	}
	// RFC 9068 §2.1 at a front without --oauth-allow-untyped-jwt.
	typedClaims := map[string]any{"iss": o.issuer, "sub": "typed-svc", "aud": []string{typed.url}, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "client_id": "typed-svc"}
	typedBase := strings.TrimSuffix(typed.url, "/mcp")
	typedInvalid := fmt.Sprintf(`Bearer error="invalid_token", resource_metadata="%s/.well-known/oauth-protected-resource/mcp"`, typedBase)
	for _, tc := range []struct {
		name, token string
	}{
		{`the OP's own token (typ "JWT")`, o.token(t, "typed-svc")},
		{`signed with the OP's key, typ "JWT"`, sign(priv, typedClaims)},
		{"signed with the OP's key, no typ", signTyped("", priv, typedClaims)},
	} {
		status, hdr, body := post(typed.url, tc.token, init, "")
		if status != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") != typedInvalid {
			t.Errorf("without --oauth-allow-untyped-jwt, %s: %d %q, want 401 %q: %s", tc.name, status, hdr.Get("WWW-Authenticate"), typedInvalid, truncate(body, 300))
		}
	}
	if status, _, body := post(typed.url, signTyped("at+jwt", priv, typedClaims), init, ""); status != http.StatusOK {
		t.Errorf("without --oauth-allow-untyped-jwt, a token signed with the OP's key and typed at+jwt: %d %s", status, truncate(body, 300))
	}

	logs := a.p.Stderr()
	if !strings.Contains(logs, `"subject":"front-svc"`) {
		t.Errorf("the call's log line does not name the token's subject:\n%s", truncate(logs, 3000))
	}
	if strings.Contains(logs, good) || strings.Contains(logs, strings.Split(good, ".")[2]) {
		t.Error("the token is in serve-mcp's log")
	}
	t.Logf("zitadel/oidc example OP: its JWT for the front's resource served (initialize, tools/call, subject logged); 401 for another audience, expired, alg none, HS256 with the public key, an unknown key, not a JWT; 403 for a missing scope; without --oauth-allow-untyped-jwt, 401 for typ JWT or none, 200 for typ at+jwt")
}
