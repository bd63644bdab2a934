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
// most IntrospectionCacheTTL; an inactive one for IntrospectionNegativeTTL
// (made-up tokens repeated cost one request each per that time). The
// callers with one token share one request, and at most
// MaxIntrospectionsInFlight requests are in flight: past that, a caller
// waits up to introspectionQueueWait, then gets an error that is not
// ErrTokenInactive ("cannot tell"). The caches are bounded and keyed by a
// hash of the token. Safe for concurrent use.
type Introspector struct {
	url          string
	clientID     string
	clientSecret string
	hc           *http.Client
	now          func() time.Time
	slots        chan struct{} // requests in flight
	queueWait    time.Duration // introspectionQueueWait; tests lower it

	mu      sync.Mutex
	cache   map[[sha256.Size]byte]cached
	refused map[[sha256.Size]byte]time.Time // inactive answers: until
	flights map[[sha256.Size]byte]*introspection
}

type cached struct {
	info  *TokenInfo
	until time.Time
}

// introspection is one request, shared by the callers with its token.
type introspection struct {
	done chan struct{}
	info *TokenInfo
	err  error
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
	// Claims are every member of the token (a JWT's claims, an
	// introspection answer's members) as JSON decodes them, for access
	// rules on claims such as groups (docs/operations.md, Operator controls). Nil:
	// none read.
	Claims map[string]any
}

// ErrTokenInactive is the error of a token the authorization server says
// is not active (unknown, expired, revoked, or not for this client).
var ErrTokenInactive = errors.New("the token is not active")

// Bounds of introspection.
const (
	IntrospectionCacheTTL     = time.Minute
	IntrospectionNegativeTTL  = 15 * time.Second
	MaxIntrospectionsInFlight = 32
	introspectionQueueWait    = 2 * time.Second
	introspectionCacheMax     = 10000 // each of the two caches
)

// NewIntrospector returns an Introspector of the endpoint at endpoint,
// authenticating with clientID and clientSecret (HTTP Basic) when given.
// hc nil: NewHTTPClient with the endpoint as its own host.
func NewIntrospector(endpoint, clientID, clientSecret string, hc *http.Client) *Introspector {
	if hc == nil {
		hc = NewHTTPClient(&FetchOptions{Hosts: []string{endpoint}})
	}
	return &Introspector{url: endpoint, clientID: clientID, clientSecret: clientSecret, hc: hc, now: time.Now,
		slots: make(chan struct{}, MaxIntrospectionsInFlight), queueWait: introspectionQueueWait, cache: map[[sha256.Size]byte]cached{},
		refused: map[[sha256.Size]byte]time.Time{}, flights: map[[sha256.Size]byte]*introspection{}}
}

// Introspect returns what the endpoint says of an active token; an error
// wrapping ErrTokenInactive for one it does not accept; another error when
// it cannot tell (unreachable, a malformed answer, too busy). Nothing of
// the token reaches an error.
func (i *Introspector) Introspect(ctx context.Context, token string) (*TokenInfo, error) {
	key := sha256.Sum256([]byte(token))
	now := i.now()
	i.mu.Lock()
	if c, ok := i.cache[key]; ok && now.Before(c.until) {
		i.mu.Unlock()
		return c.info, nil
	}
	if until, ok := i.refused[key]; ok && now.Before(until) {
		i.mu.Unlock()
		return nil, ErrTokenInactive
	}
	f := i.flights[key]
	if f == nil {
		f = &introspection{done: make(chan struct{})}
		i.flights[key] = f
		i.mu.Unlock()
		i.start(ctx, key, token, f)
	} else {
		i.mu.Unlock()
	}
	select {
	case <-f.done:
		return f.info, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// start sends the request of f once a slot is free (waiting at most
// introspectionQueueWait), on its own clock: the callers waiting may give
// up, the answer is cached for the next ones.
func (i *Introspector) start(ctx context.Context, key [sha256.Size]byte, token string, f *introspection) {
	wait := time.NewTimer(i.queueWait)
	defer wait.Stop()
	select {
	case i.slots <- struct{}{}:
	case <-wait.C:
		i.finish(key, f, nil, fmt.Errorf("introspection: %d requests already in flight at the authorization server", MaxIntrospectionsInFlight))
		return
	}
	go func() {
		defer func() { <-i.slots }()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FetchTimeout)
		defer cancel()
		info, err := i.ask(ctx, token)
		i.finish(key, f, info, err)
	}()
}

// finish caches f's answer, hands it to its callers and ends it.
func (i *Introspector) finish(key [sha256.Size]byte, f *introspection, info *TokenInfo, err error) {
	now := i.now()
	i.mu.Lock()
	delete(i.flights, key)
	switch {
	case err == nil:
		until := now.Add(IntrospectionCacheTTL)
		if !info.Expiry.IsZero() && info.Expiry.Before(until) {
			until = info.Expiry
		}
		bound(i.cache, func(c cached) bool { return !now.Before(c.until) })
		i.cache[key] = cached{info: info, until: until}
	case errors.Is(err, ErrTokenInactive):
		bound(i.refused, func(until time.Time) bool { return !now.Before(until) })
		i.refused[key] = now.Add(IntrospectionNegativeTTL)
	}
	f.info, f.err = info, err
	i.mu.Unlock()
	close(f.done)
}

// bound makes room in a cache at its bound: the expired entries go, and
// if all are live, all go (rather than grow).
func bound[V any](m map[[sha256.Size]byte]V, expired func(V) bool) {
	if len(m) < introspectionCacheMax {
		return
	}
	for k, v := range m {
		if expired(v) {
			delete(m, k)
		}
	}
	if len(m) >= introspectionCacheMax {
		clear(m)
	}
}

// ask sends one introspection request.
func (i *Introspector) ask(ctx context.Context, token string) (*TokenInfo, error) {
	now := i.now()
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	ctx, tr := withTrace(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, i.url, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, errors.New("introspection: the endpoint is not a URL")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if i.clientID != "" {
		req.SetBasicAuth(url.QueryEscape(i.clientID), url.QueryEscape(i.clientSecret))
	}
	resp, err := i.hc.Do(req)
	if err != nil {
		return nil, tr.fail("token introspection", i.url, err)
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
	var raw json.RawMessage
	dec := json.NewDecoder(io.LimitReader(resp.Body, MaxFetchBody))
	err = dec.Decode(&raw)
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil {
		if tr.wasRefused() {
			return nil, tr.fail("token introspection", i.url, err)
		}
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
	_ = json.Unmarshal(raw, &info.Claims) // an object: body decoded from it
	if exp, err := body.Exp.Int64(); err == nil && exp > 0 {
		info.Expiry = time.Unix(exp, 0)
		if !now.Before(info.Expiry) {
			return nil, ErrTokenInactive
		}
	}
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
