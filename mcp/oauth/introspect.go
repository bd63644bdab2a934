package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Introspector checks opaque access tokens at an authorization server's
// introspection endpoint (RFC 7662), for the MCP front as a protected
// resource. An active token's answer is cached until it expires and at
// most IntrospectionCacheTTL; the cache is bounded and keyed by a hash of
// the token. Safe for concurrent use.
type Introspector struct {
	url          string
	clientID     string
	clientSecret string
	hc           *http.Client
	now          func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]cached
}

type cached struct {
	info  *TokenInfo
	until time.Time
}

// TokenInfo is what the introspection endpoint said of an active token.
type TokenInfo struct {
	// Issuer is who issued the token: for a JWT, the verified iss as the
	// trusted issuer is configured (NewJWTVerifier's spelling); from
	// introspection, the answer's iss, "" when it has none (the caller
	// knows whose endpoint it asked).
	Issuer   string
	Subject  string
	ClientID string
	Scopes   []string
	Audience []string
	Expiry   time.Time // zero: not said
}

// ErrTokenInactive is the error of a token the authorization server says
// is not active (unknown, expired, revoked, or not for this client).
var ErrTokenInactive = errors.New("the token is not active")

// Bounds of the introspection cache.
const (
	IntrospectionCacheTTL = time.Minute
	introspectionCacheMax = 10000
)

// NewIntrospector returns an Introspector of the endpoint at endpoint,
// authenticating with clientID and clientSecret (HTTP Basic) when given.
// hc nil: a client with a 10 s timeout.
func NewIntrospector(endpoint, clientID, clientSecret string, hc *http.Client) *Introspector {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return &Introspector{url: endpoint, clientID: clientID, clientSecret: clientSecret, hc: hc, now: time.Now, cache: map[[sha256.Size]byte]cached{}}
}

// Introspect returns what the endpoint says of an active token; an error
// wrapping ErrTokenInactive for one it does not accept; another error when
// it cannot tell (unreachable, a malformed answer). Nothing of the token
// reaches an error.
func (i *Introspector) Introspect(ctx context.Context, token string) (*TokenInfo, error) {
	key := sha256.Sum256([]byte(token))
	now := i.now()
	i.mu.Lock()
	c, ok := i.cache[key]
	i.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.info, nil
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, i.url, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if i.clientID != "" {
		req.SetBasicAuth(url.QueryEscape(i.clientID), url.QueryEscape(i.clientSecret))
	}
	resp, err := i.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("introspection: %w", redactErr(err))
	}
	defer resp.Body.Close()
	var body struct {
		Active   bool            `json:"active"`
		Scope    string          `json:"scope"`
		ClientID string          `json:"client_id"`
		Sub      string          `json:"sub"`
		Iss      string          `json:"iss"`
		Aud      json.RawMessage `json:"aud"`
		Exp      json.Number     `json:"exp"`
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, 1<<20))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf("introspection: HTTP %d, not a JSON answer", resp.StatusCode)
	}
	if !body.Active {
		// RFC 7662 §2.2 answers 200 {"active": false}; some servers answer
		// 4xx with it.
		if resp.StatusCode < 500 {
			return nil, ErrTokenInactive
		}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("introspection: HTTP %d", resp.StatusCode)
	}
	info := &TokenInfo{Issuer: body.Iss, Subject: body.Sub, ClientID: body.ClientID, Scopes: strings.Fields(body.Scope), Audience: audience(body.Aud)}
	if exp, err := body.Exp.Int64(); err == nil && exp > 0 {
		info.Expiry = time.Unix(exp, 0)
		if !now.Before(info.Expiry) {
			return nil, ErrTokenInactive
		}
	}
	until := now.Add(IntrospectionCacheTTL)
	if !info.Expiry.IsZero() && info.Expiry.Before(until) {
		until = info.Expiry
	}
	i.mu.Lock()
	if len(i.cache) >= introspectionCacheMax {
		for k, v := range i.cache {
			if !now.Before(v.until) {
				delete(i.cache, k)
			}
		}
		if len(i.cache) >= introspectionCacheMax {
			clear(i.cache) // all live: start over rather than grow
		}
	}
	i.cache[key] = cached{info: info, until: until}
	i.mu.Unlock()
	return info, nil
}

// audience reads "aud": one string or a list (RFC 7662 §2.2, RFC 7519
// §4.1.3).
func audience(raw json.RawMessage) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil && one != "" {
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(raw, &many)
	return many
}
