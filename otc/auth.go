package otc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpotc/mcpotc/internal/httpguard"
	"github.com/mcpotc/mcpotc/internal/principal"
)

// CallerAPIKey is Caller.ID of a caller that sent the static API key
// (there is one key): its holder is one principal.
const CallerAPIKey = principal.APIKey

// Caller is who a request's transport authentication established.
type Caller struct {
	// ID names a caller that authenticated: CallerAPIKey for the static
	// key, a JWT's issuer and subject (principal.Token) for a JWT; "" for
	// a caller that did not. Principal is the name every per-caller bound
	// and record uses.
	ID string
	// Authenticated is set when credentials were checked (API key or JWT).
	Authenticated bool
	// User is the end user the credentials themselves name: the JWT's
	// Options.JWTUserClaim ("" when the token has none); "" for the API
	// key, whose holder is trusted to name users in context.user_id.
	User string
	// Addr is the client's IP address: the connection's peer, or the
	// client a trusted proxy names (Options.TrustedProxies).
	Addr string
	// Issuer, Subject, Scopes and Claims are a JWT caller's token: its
	// iss ("" when it has none or it is not a string), sub, scope
	// (space-separated) or else scp, and every claim as JSON decodes
	// them. Empty for other callers. For decisions on who calls (access
	// rules); read only.
	Issuer  string
	Subject string
	Scopes  []string
	Claims  map[string]any
}

// Principal is the caller as one string (package internal/principal), for
// everything bound to or recorded of the caller — call_id idempotency,
// rate limits, held calls, kept states, pending authorizations, the audit
// log: its ID when it authenticated (the API key's holder; a JWT's issuer
// and subject), else its client address, an IPv6 address by its /64.
func (c Caller) Principal() string {
	if c.Authenticated {
		return c.ID
	}
	return principal.AddressOf(c.Addr)
}

// authorized checks transport credentials when any are configured and
// answers 401 when they are missing or bad. With no APIKey and no
// JWTSecret, every request passes, Authorization is ignored and the
// caller is unauthenticated.
func (h *Handler) authorized(rp *reply) (Caller, bool) {
	caller, reason := h.Authenticate(rp.r)
	if reason == "" {
		return caller, true
	}
	rp.w.Header().Set("WWW-Authenticate", `Bearer realm="otc"`)
	rp.headers()
	writeJSON(rp.w, http.StatusUnauthorized, map[string]string{"message": "Unauthorized: " + reason})
	return Caller{}, false
}

// Authenticate checks r's transport credentials as the handler does for
// its own routes: the caller, or a reason (naming no secret) for a 401.
// With transport auth off every request passes, unauthenticated. For
// routes served beside the handler (the bridge's OAuth confirmation).
func (h *Handler) Authenticate(r *http.Request) (Caller, string) {
	c := Caller{Addr: httpguard.ClientHost(r, h.opts.TrustedProxies)}
	if h.opts.APIKey == "" && len(h.opts.JWTSecret) == 0 {
		return c, ""
	}
	if h.opts.APIKey != "" {
		for _, name := range []string{APIKeyHeader, oldAPIKeyHeader, rfcAPIKeyHeader} {
			if v := r.Header.Get(name); v != "" {
				if httpguard.EqualSecret(v, h.opts.APIKey) {
					c.ID, c.Authenticated = CallerAPIKey, true
					return c, ""
				}
				return c, "the API key is not valid"
			}
		}
	}
	bearer, hasBearer := httpguard.Bearer(r.Header.Get("Authorization"))
	if !hasBearer {
		if h.opts.APIKey != "" {
			return c, "send the API key in the OXP-API-Key header or a bearer token"
		}
		return c, "send a bearer JWT in the Authorization header"
	}
	// OXP SDK clients send their API key as a bearer token.
	if h.opts.APIKey != "" && httpguard.EqualSecret(bearer, h.opts.APIKey) {
		c.ID, c.Authenticated = CallerAPIKey, true
		return c, ""
	}
	if len(h.opts.JWTSecret) == 0 {
		return c, "the bearer token is not valid"
	}
	sub, user, claims, err := h.checkJWT(bearer)
	if err != nil {
		return c, "the bearer token is not valid: " + err.Error()
	}
	c.Issuer, _ = claims["iss"].(string)
	c.ID, c.Authenticated, c.User = principal.Token(c.Issuer, sub), true, user
	c.Subject, c.Claims, c.Scopes = sub, claims, jwtScopes(claims)
	return c, ""
}

// checkJWT verifies an HS256 JWT: signature, exp (required), nbf/iat, and
// aud against the allow-list when the token has one, and returns its sub
// and the user its Options.JWTUserClaim names ("" when it has none), and
// its claims.
// aud must be a string or a non-empty array of strings (RFC 7519 §4.1.3);
// sub and the user claim, when present, strings.
func (h *Handler) checkJWT(token string) (sub, user string, claims jwt.MapClaims, err error) {
	claims = jwt.MapClaims{}
	_, err = jwt.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return h.opts.JWTSecret, nil },
		jwt.WithValidMethods([]string{"HS256"}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(30*time.Second),
		jwt.WithTimeFunc(h.opts.Now),
	)
	if err != nil {
		switch {
		case errors.Is(err, jwt.ErrTokenExpired):
			return "", "", nil, errors.New("expired")
		case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
			return "", "", nil, errors.New("exp is required")
		case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
			return "", "", nil, errors.New("bad signature")
		case errors.Is(err, jwt.ErrTokenMalformed):
			return "", "", nil, errors.New("malformed")
		}
		return "", "", nil, errors.New("rejected")
	}
	if raw, ok := claims["sub"]; ok {
		if sub, ok = raw.(string); !ok {
			return "", "", nil, errors.New("sub is malformed")
		}
	}
	claim := h.opts.JWTUserClaim
	if claim == "" {
		claim = "sub"
	}
	if raw, ok := claims[claim]; ok {
		if user, ok = raw.(string); !ok {
			return "", "", nil, fmt.Errorf("%s is malformed", claim)
		}
	}
	aud, present, ok := audience(claims)
	if !ok {
		return "", "", nil, errors.New("aud is malformed: want a string or a non-empty array of strings")
	}
	if !present {
		return sub, user, claims, nil
	}
	for _, a := range aud {
		if slices.Contains(h.opts.JWTAudiences, a) {
			return sub, user, claims, nil
		}
	}
	return "", "", nil, errors.New("audience not allowed")
}

// jwtScopes are the scopes a JWT grants: its scope claim (space-separated,
// RFC 9068 §2.2.3), else its scp (an array of strings).
func jwtScopes(claims jwt.MapClaims) []string {
	if s, ok := claims["scope"].(string); ok {
		return strings.Fields(s)
	}
	list, _ := claims["scp"].([]any)
	var out []string
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// audience reads the aud claim, strictly: a string, or a non-empty array
// of strings. jwt/v5's GetAudience also takes an empty array, and is not
// used.
func audience(claims jwt.MapClaims) (aud []string, present, ok bool) {
	raw, present := claims["aud"]
	if !present {
		return nil, false, true
	}
	switch v := raw.(type) {
	case string:
		return []string{v}, true, true
	case []any:
		if len(v) == 0 {
			return nil, true, false
		}
		for _, a := range v {
			s, isString := a.(string)
			if !isString {
				return nil, true, false
			}
			aud = append(aud, s)
		}
		return aud, true, true
	}
	return nil, true, false
}

// NewJWTSource returns a BearerTokenFunc that signs HS256 JWTs with secret,
// each valid for ttl (zero: 5 minutes; the spec recommends at most 15) and
// carrying aud when audience is set. A token is reused until less than a
// third of its life is left.
func NewJWTSource(secret []byte, audience string, ttl time.Duration, now func() time.Time) func(context.Context) (string, error) {
	if ttl <= 0 {
		ttl = 5 * time.Minute
	}
	if now == nil {
		now = time.Now
	}
	var (
		mu      sync.Mutex
		token   string
		expires time.Time
	)
	return func(context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		t := now()
		if token != "" && expires.Sub(t) > ttl/3 {
			return token, nil
		}
		claims := jwt.MapClaims{"iat": t.Unix(), "exp": t.Add(ttl).Unix()}
		if audience != "" {
			claims["aud"] = audience
		}
		signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
		if err != nil {
			return "", err
		}
		token, expires = signed, t.Add(ttl)
		return token, nil
	}
}
