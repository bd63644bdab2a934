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
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// JWTVerifier checks JWT access tokens (RFC 9068) locally, for the MCP
// front as a protected resource: typed at+jwt (RFC 9068 §2.1; see
// AllowUntyped), signed with RS256, ES256 or EdDSA (never "none", never an
// HMAC: a public key is no secret) by a key of the JWKS of one of its
// issuers, found through the issuer's metadata (RFC 8414, then OpenID
// Connect discovery); iss one of the issuers; exp required, exp and nbf
// with JWTSkew of leeway. The audience is the caller's to check.
//
// Key sets are cached, fetched again after JWKSMaxAge and on an unknown kid
// (at most every JWKSMinRefresh), by one fetch per issuer however many
// tokens wait for it. A failed fetch is remembered: no fetch of that
// issuer's keys for JWKSFailureBackoff, doubled at each failure in a row
// up to JWKSMaxBackoff, during which a token of that issuer without a
// known key gets an error that is not ErrTokenInactive ("cannot tell").
// So tokens with made-up key ids cost the authorization server at most one
// request per issuer every JWKSMinRefresh. Safe for concurrent use.
type JWTVerifier struct {
	issuers      []string
	hc           *http.Client
	now          func() time.Time
	allowUntyped atomic.Bool

	mu   sync.Mutex
	sets map[string]*issuerKeys // by issuer (one of issuers: bounded)
}

type keySet struct {
	keys    jose.JSONWebKeySet
	fetched time.Time
}

// issuerKeys is what the verifier knows of one issuer's key set.
type issuerKeys struct {
	set      *keySet     // the last set fetched; nil before the first
	tried    time.Time   // when the last fetch started
	failures int         // fetches failed in a row
	retryAt  time.Time   // after a failure: no fetch before
	flight   *jwksFlight // the fetch under way, if any
}

// jwksFlight is a key set fetch shared by the tokens that wait for it.
type jwksFlight struct {
	done chan struct{}
	err  error
}

// Bounds of JWT verification.
const (
	JWTSkew            = time.Minute
	JWKSMinRefresh     = 30 * time.Second
	JWKSMaxAge         = time.Hour
	JWKSFailureBackoff = 5 * time.Second
	JWKSMaxBackoff     = 5 * time.Minute
	maxJWKSKeys        = 100
	jwksFetchTimeout   = 20 * time.Second // metadata and key set, one fetch
)

// jwtAlgorithms are the signature algorithms accepted.
var jwtAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

// NewJWTVerifier returns a verifier of tokens issued by issuers. hc nil:
// NewHTTPClient with the issuers as its own hosts.
func NewJWTVerifier(issuers []string, hc *http.Client) *JWTVerifier {
	if hc == nil {
		hc = NewHTTPClient(&FetchOptions{Hosts: issuers})
	}
	return &JWTVerifier{issuers: issuers, hc: hc, now: time.Now, sets: map[string]*issuerKeys{}}
}

// AllowUntyped makes v accept, besides at+jwt, JWTs whose header has no
// typ or the generic "JWT" or "application/jwt": for issuers that do not
// type their access tokens as RFC 9068 §2.1 asks. Other types (an ID
// token's, a logout token's…) are still refused. It returns v; call it
// before the first Verify.
func (v *JWTVerifier) AllowUntyped() *JWTVerifier {
	v.allowUntyped.Store(true)
	return v
}

// typed reports whether the JWS header h has a typ v accepts, compared
// without case (RFC 8725 §3.11; RFC 9068 §2.1 allows both forms).
func (v *JWTVerifier) typed(h jose.Header) bool {
	raw, present := h.ExtraHeaders[jose.HeaderType]
	typ, isString := raw.(string)
	switch {
	case present && !isString:
		return false
	case strings.EqualFold(typ, "at+jwt"), strings.EqualFold(typ, "application/at+jwt"):
		return true
	}
	return v.allowUntyped.Load() && (!present || strings.EqualFold(typ, "JWT") || strings.EqualFold(typ, "application/jwt"))
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
	if !v.typed(h) {
		return nil, fmt.Errorf("%w: the JWT's header does not type it an access token (typ at+jwt, RFC 9068 §2.1)", ErrTokenInactive)
	}
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
	var all map[string]any
	if err := tok.Claims(key, &claims, &extra, &all); err != nil {
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
	return &TokenInfo{Issuer: iss, Subject: claims.Subject, ClientID: extra.ClientID, Scopes: scopes, Audience: claims.Audience, Expiry: claims.Expiry.Time(),
		Claims: all}, nil
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
	set, err := v.keySet(ctx, iss, kid, alg)
	if set == nil {
		return nil, err
	}
	if k := find(set, kid, alg); k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("%w: signed with a key the issuer does not publish", ErrTokenInactive)
}

// keySet returns the issuer's key set to look kid up in, after a fetch
// when one is due and allowed (see JWTVerifier): the known set and a
// fetch's error when it failed, nil and an error when no set is known.
func (v *JWTVerifier) keySet(ctx context.Context, iss, kid, alg string) (*keySet, error) {
	v.mu.Lock()
	st := v.sets[iss]
	if st == nil {
		st = &issuerKeys{}
		v.sets[iss] = st
	}
	now := v.now()
	due := st.set == nil || now.Sub(st.set.fetched) >= JWKSMaxAge ||
		(find(st.set, kid, alg) == nil && now.Sub(st.tried) >= JWKSMinRefresh)
	if !due {
		set := st.set
		v.mu.Unlock()
		return set, nil
	}
	f := st.flight
	if f == nil {
		if now.Before(st.retryAt) {
			set := st.set
			v.mu.Unlock()
			return set, fmt.Errorf("issuer %s: its keys could not be fetched; the next try is in %s", iss, st.retryAt.Sub(now).Round(time.Second))
		}
		f = &jwksFlight{done: make(chan struct{})}
		st.flight, st.tried = f, now
		go v.refresh(iss, st, f)
	}
	v.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return st.set, f.err
}

// refresh fetches the issuer's key set for f, on its own clock (the
// tokens waiting may give up; the fetch serves the next ones).
func (v *JWTVerifier) refresh(iss string, st *issuerKeys, f *jwksFlight) {
	ctx, cancel := context.WithTimeout(context.Background(), jwksFetchTimeout)
	defer cancel()
	fresh, err := v.fetch(ctx, iss)
	v.mu.Lock()
	if err != nil {
		st.failures++
		st.retryAt = v.now().Add(jwksBackoff(st.failures))
	} else {
		st.set, st.failures, st.retryAt = fresh, 0, time.Time{}
	}
	st.flight, f.err = nil, err
	v.mu.Unlock()
	close(f.done)
}

// jwksBackoff is how long no fetch is made after n failures in a row.
func jwksBackoff(n int) time.Duration {
	d := JWKSFailureBackoff
	for i := 1; i < n && d < JWKSMaxBackoff; i++ {
		d *= 2
	}
	return min(d, JWKSMaxBackoff)
}

func find(set *keySet, kid, alg string) *jose.JSONWebKey {
	if set == nil {
		return nil
	}
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

// fetch reads the issuer's key set (jwks_uri of its metadata) through the
// verifier's client.
func (v *JWTVerifier) fetch(ctx context.Context, iss string) (*keySet, error) {
	mctx, tr := withTrace(ctx)
	asm, err := auth.GetAuthServerMetadata(mctx, rootless(iss), v.hc)
	if err != nil {
		return nil, fmt.Errorf("issuer %s: %w", iss, tr.fail("authorization server metadata", rootless(iss), err))
	}
	if asm == nil || asm.JWKSURI == "" {
		return nil, fmt.Errorf("issuer %s publishes no jwks_uri", iss)
	}
	jctx, tr := withTrace(ctx)
	req, err := http.NewRequestWithContext(jctx, http.MethodGet, asm.JWKSURI, nil)
	if err != nil {
		return nil, fmt.Errorf("issuer %s: its jwks_uri is not a URL", iss)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("issuer %s: %w", iss, tr.fail("JWKS", asm.JWKSURI, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("issuer %s: %w", iss, &fetchError{what: "JWKS", url: errorURL(req.URL), status: resp.StatusCode})
	}
	var keys jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxFetchBody)).Decode(&keys); err != nil {
		return nil, fmt.Errorf("issuer %s: %w", iss, tr.fail("JWKS", asm.JWKSURI, err))
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
