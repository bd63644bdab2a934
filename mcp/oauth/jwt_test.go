package oauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// jwtIssuer is an issuer's metadata and key set, served for the verifier.
type jwtIssuer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetches atomic.Int32
}

func newJWTIssuer(t *testing.T) *jwtIssuer {
	is := &jwtIssuer{}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": is.srv.URL, "authorization_endpoint": is.srv.URL + "/authorize",
				"token_endpoint": is.srv.URL + "/token", "jwks_uri": is.srv.URL + "/jwks", "response_types_supported": []string{"code"},
				"code_challenge_methods_supported": []string{"S256"}})
		case "/jwks":
			is.fetches.Add(1)
			is.mu.Lock()
			_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: is.keys})
			is.mu.Unlock()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(is.srv.Close)
	return is
}

// publish adds key's public half to the set under kid.
func (is *jwtIssuer) publish(key crypto.Signer, kid, alg string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = append(is.keys, jose.JSONWebKey{Key: key.Public(), KeyID: kid, Algorithm: alg, Use: "sig"})
}

func sign(t *testing.T, key crypto.Signer, kid string, alg jose.SignatureAlgorithm, claims any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestJWTVerifier(t *testing.T) {
	t.Parallel()
	is := newJWTIssuer(t)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	is.publish(rs, "rs", "RS256")
	is.publish(ec, "ec", "ES256")
	is.publish(ed, "ed", "EdDSA")
	now := time.Now()
	v := NewJWTVerifier([]string{is.srv.URL + "/"}, is.srv.Client())
	v.now = func() time.Time { return now }
	ctx := t.Context()
	claims := func(mod func(m map[string]any)) map[string]any {
		m := map[string]any{"iss": is.srv.URL, "sub": "alice", "aud": []string{"https://r/mcp"}, "exp": now.Add(time.Hour).Unix(),
			"iat": now.Unix(), "scope": "mcp:tools read", "client_id": "c1"}
		if mod != nil {
			mod(m)
		}
		return m
	}
	for name, tok := range map[string]string{
		"RS256": sign(t, rs, "rs", jose.RS256, claims(nil)),
		"ES256": sign(t, ec, "ec", jose.ES256, claims(nil)),
		"EdDSA": sign(t, ed, "ed", jose.EdDSA, claims(nil)),
		"skew":  sign(t, rs, "rs", jose.RS256, claims(func(m map[string]any) { m["exp"] = now.Add(-JWTSkew / 2).Unix() })),
	} {
		info, err := v.Verify(ctx, tok)
		if err != nil || info.Subject != "alice" || info.ClientID != "c1" || !slices.Equal(info.Scopes, []string{"mcp:tools", "read"}) ||
			!slices.Equal(info.Audience, []string{"https://r/mcp"}) {
			t.Errorf("%s: %+v %v", name, info, err)
		}
	}
	if is.fetches.Load() != 1 {
		t.Errorf("the key set was fetched %d times, want once", is.fetches.Load())
	}

	pub, _ := x509.MarshalPKIXPublicKey(rs.Public())
	hs, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: pub}, nil)
	hsTok, _ := jwt.Signed(hs).Claims(claims(nil)).Serialize()
	body, _ := json.Marshal(claims(nil))
	noneTok := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + base64.RawURLEncoding.EncodeToString(body) + "."
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	for name, tok := range map[string]string{
		"alg none":                noneTok,
		"HS256 with a public key": hsTok,
		"expired":                 sign(t, rs, "rs", jose.RS256, claims(func(m map[string]any) { m["exp"] = now.Add(-2 * JWTSkew).Unix() })),
		"not yet":                 sign(t, rs, "rs", jose.RS256, claims(func(m map[string]any) { m["nbf"] = now.Add(2 * JWTSkew).Unix() })),
		"no exp":                  sign(t, rs, "rs", jose.RS256, claims(func(m map[string]any) { delete(m, "exp") })),
		"other issuer":            sign(t, rs, "rs", jose.RS256, claims(func(m map[string]any) { m["iss"] = "https://evil.example" })),
		"other key, same kid":     sign(t, other, "rs", jose.RS256, claims(nil)),
		"key of another alg":      sign(t, rs, "ec", jose.RS256, claims(nil)),
		"opaque":                  "not-a-jwt",
	} {
		if _, err := v.Verify(ctx, tok); !errors.Is(err, ErrTokenInactive) {
			t.Errorf("%s: %v, want ErrTokenInactive", name, err)
		}
	}

	// A new key (rotation): an unknown kid fetches the set again, at most
	// every JWKSMinRefresh.
	rotated, _ := rsa.GenerateKey(rand.Reader, 2048)
	is.publish(rotated, "rs2", "RS256")
	before := is.fetches.Load()
	if _, err := v.Verify(ctx, sign(t, rotated, "rs2", jose.RS256, claims(nil))); !errors.Is(err, ErrTokenInactive) || is.fetches.Load() != before {
		t.Errorf("an unknown kid right after a fetch: %v, %d fetches", err, is.fetches.Load()-before)
	}
	now = now.Add(JWKSMinRefresh)
	if _, err := v.Verify(ctx, sign(t, rotated, "rs2", jose.RS256, claims(nil))); err != nil || is.fetches.Load() != before+1 {
		t.Errorf("a rotated key: %v, %d fetches", err, is.fetches.Load()-before)
	}

	// An issuer that cannot be reached: an error, not a refusal.
	down := NewJWTVerifier([]string{"http://127.0.0.1:1"}, nil)
	tok := sign(t, rs, "rs", jose.RS256, claims(func(m map[string]any) { m["iss"] = "http://127.0.0.1:1" }))
	if _, err := down.Verify(ctx, tok); err == nil || errors.Is(err, ErrTokenInactive) {
		t.Errorf("an unreachable issuer: %v", err)
	}
	if !LooksLikeJWT(tok) || LooksLikeJWT("3f2c1a9e-uuid-like") {
		t.Error("LooksLikeJWT")
	}
}
