package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// JWTVerifier checks JWT access tokens (RFC 9068) locally, for the MCP
// front as a protected resource: signed with RS256, ES256 or EdDSA (never
// "none", never an HMAC: a public key is no secret) by a key of the JWKS
// of one of its issuers, found through the issuer's metadata (RFC 8414,
// then OpenID Connect discovery); iss one of the issuers; exp required,
// exp and nbf with JWTSkew of leeway. The audience is the caller's to
// check. Key sets are cached, fetched again on an unknown kid (at most
// every JWKSMinRefresh) and after JWKSMaxAge. Safe for concurrent use.
type JWTVerifier struct {
	issuers []string
	hc      *http.Client
	now     func() time.Time

	mu   sync.Mutex
	sets map[string]*keySet // by issuer
}

type keySet struct {
	keys    jose.JSONWebKeySet
	fetched time.Time
}

// Bounds of JWT verification.
const (
	JWTSkew         = time.Minute
	JWKSMinRefresh  = 30 * time.Second
	JWKSMaxAge      = time.Hour
	maxJWKSKeys     = 100
	maxJWKSBodySize = 1 << 20
)

// jwtAlgorithms are the signature algorithms accepted.
var jwtAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

// NewJWTVerifier returns a verifier of tokens issued by issuers. hc nil: a
// client with a 10 s timeout.
func NewJWTVerifier(issuers []string, hc *http.Client) *JWTVerifier {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return &JWTVerifier{issuers: issuers, hc: hc, now: time.Now, sets: map[string]*keySet{}}
}

// LooksLikeJWT reports whether token has the shape of a JWS compact
// serialization (three base64url parts), as opposed to an opaque token.
func LooksLikeJWT(token string) bool {
	return strings.Count(token, ".") == 2 && strings.HasPrefix(token, "eyJ")
}

// Verify checks token; an error wrapping ErrTokenInactive for a token it
// refuses, another error when it cannot tell (the issuer's keys cannot be
// fetched).
func (v *JWTVerifier) Verify(ctx context.Context, token string) (*TokenInfo, error) {
	tok, err := jwt.ParseSigned(token, jwtAlgorithms)
	if err != nil {
		return nil, fmt.Errorf("%w: not a JWT signed with RS256, ES256 or EdDSA", ErrTokenInactive)
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, fmt.Errorf("%w: unreadable claims", ErrTokenInactive)
	}
	iss := v.issuer(unverified.Issuer)
	if iss == "" {
		return nil, fmt.Errorf("%w: issued by an issuer the bridge does not trust", ErrTokenInactive)
	}
	h := tok.Headers[0]
	key, err := v.key(ctx, iss, h.KeyID, h.Algorithm)
	if err != nil {
		return nil, err
	}
	var claims jwt.Claims
	var extra struct {
		Scope    string   `json:"scope"`
		Scp      []string `json:"scp"`
		ClientID string   `json:"client_id"`
	}
	if err := tok.Claims(key, &claims, &extra); err != nil {
		return nil, fmt.Errorf("%w: the signature does not verify", ErrTokenInactive)
	}
	if claims.Expiry == nil {
		return nil, fmt.Errorf("%w: no exp", ErrTokenInactive)
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{Issuer: unverified.Issuer, Time: v.now()}, JWTSkew); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTokenInactive, err)
	}
	scopes := strings.Fields(extra.Scope)
	if len(scopes) == 0 {
		scopes = extra.Scp
	}
	return &TokenInfo{Issuer: iss, Subject: claims.Subject, ClientID: extra.ClientID, Scopes: scopes, Audience: claims.Audience, Expiry: claims.Expiry.Time()}, nil
}

// issuer returns the trusted issuer iss names (a final slash ignored), ""
// when none.
func (v *JWTVerifier) issuer(iss string) string {
	for _, i := range v.issuers {
		if iss != "" && strings.TrimSuffix(i, "/") == strings.TrimSuffix(iss, "/") {
			return i
		}
	}
	return ""
}

// key finds the verification key of kid (any key of a one-key set when the
// token names none) for alg, fetching the issuer's key set when it is not
// known yet, is old, or lacks kid.
func (v *JWTVerifier) key(ctx context.Context, iss, kid, alg string) (*jose.JSONWebKey, error) {
	v.mu.Lock()
	set := v.sets[iss]
	v.mu.Unlock()
	now := v.now()
	if set == nil || now.Sub(set.fetched) >= JWKSMaxAge || (find(set, kid, alg) == nil && now.Sub(set.fetched) >= JWKSMinRefresh) {
		fresh, err := v.fetch(ctx, iss)
		if err != nil {
			if set == nil {
				return nil, err
			}
		} else {
			set = fresh
			v.mu.Lock()
			v.sets[iss] = set
			v.mu.Unlock()
		}
	}
	if k := find(set, kid, alg); k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("%w: signed with a key the issuer does not publish", ErrTokenInactive)
}

func find(set *keySet, kid, alg string) *jose.JSONWebKey {
	candidates := set.keys.Keys
	if kid != "" {
		candidates = set.keys.Key(kid)
	} else if len(candidates) != 1 {
		return nil
	}
	for i := range candidates {
		k := &candidates[i]
		if k.IsPublic() && (k.Use == "" || k.Use == "sig") && (k.Algorithm == "" || k.Algorithm == alg) {
			return k
		}
	}
	return nil
}

// fetch reads the issuer's key set (jwks_uri of its metadata).
func (v *JWTVerifier) fetch(ctx context.Context, iss string) (*keySet, error) {
	asm, err := auth.GetAuthServerMetadata(ctx, rootless(iss), v.hc)
	if err != nil {
		return nil, fmt.Errorf("issuer %s: %w", iss, redactErr(err))
	}
	if asm == nil || asm.JWKSURI == "" {
		return nil, fmt.Errorf("issuer %s publishes no jwks_uri", iss)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, asm.JWKSURI, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("issuer %s: JWKS: %w", iss, redactErr(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("issuer %s: JWKS: HTTP %d", iss, resp.StatusCode)
	}
	var keys jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJWKSBodySize)).Decode(&keys); err != nil {
		return nil, fmt.Errorf("issuer %s: JWKS: %w", iss, err)
	}
	if len(keys.Keys) > maxJWKSKeys {
		keys.Keys = keys.Keys[:maxJWKSKeys]
	}
	keys.Keys = slices.DeleteFunc(keys.Keys, func(k jose.JSONWebKey) bool { return !k.IsPublic() })
	if len(keys.Keys) == 0 {
		return nil, errors.New("issuer " + iss + ": the JWKS has no public key")
	}
	return &keySet{keys: keys, fetched: v.now()}, nil
}

// rootless is an issuer URL without a path of just "/": the official Go
// SDK's GetAuthServerMetadata (auth/shared.go, v1.8.0) inserts the
// well-known segment before a path of "/" as before any other, which finds
// nothing at "/.well-known/oauth-authorization-server/".
func rootless(iss string) string {
	if u, err := url.Parse(iss); err == nil && u.Path == "/" && u.RawQuery == "" {
		return strings.TrimSuffix(iss, "/")
	}
	return iss
}
