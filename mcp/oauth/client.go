package oauth

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpotc/mcpotc/mcp/oauth/vault"
	"golang.org/x/oauth2"
)

// The grants of Config.Grant.
const (
	// GrantAuthorizationCode: a user authorizes the bridge in a browser
	// (the default).
	GrantAuthorizationCode = "authorization_code"
	// GrantClientCredentials: the bridge authenticates as itself, with no
	// user (machine identity).
	GrantClientCredentials = "client_credentials"
)

// Config is one upstream's OAuth configuration (its "oauth" entry).
type Config struct {
	// Upstream is the upstream's name: the vault's key and the id of its
	// OTC authorization challenges. Required.
	Upstream string
	// ServerURL is the upstream's MCP endpoint, the protected resource.
	// Required.
	ServerURL string
	// ClientID is a client registered in advance with the authorization
	// server. Zero: a client ID metadata document or dynamic registration.
	ClientID string
	// ClientSecret is ClientID's secret. Zero: a public client (or
	// PrivateKey).
	ClientSecret string
	// PrivateKey authenticates ClientID at the token endpoint with
	// private_key_jwt (RFC 7523): RSA (RS256), ECDSA P-256 (ES256) or
	// Ed25519 (EdDSA). Zero: ClientSecret, or none.
	PrivateKey crypto.Signer
	// Scopes are requested when the upstream's challenge names none.
	// Zero: the resource's scopes_supported, or no scope parameter.
	Scopes []string
	// Grant is GrantAuthorizationCode (zero) or GrantClientCredentials.
	// With PerUser, the client credentials grant is the bridge's own
	// identity (user "": the catalog) and each user authorizes with the
	// authorization code grant.
	Grant string
	// PerUser keeps one token per OTC user (context.user_id) instead of
	// one for the bridge. Zero: shared mode.
	PerUser bool
	// UserVerification is how a per-user authorization proves that whoever
	// completes it is its user: VerifyOIDC, VerifyVerifier or VerifyNone.
	// Required with PerUser (there is no safe default); ignored without.
	UserVerification string
	// ClientMetadataURL is the https URL of the bridge's client ID metadata
	// document, used as client_id where the authorization server supports
	// them. Zero: not used.
	ClientMetadataURL string
	// AllowNetworks are networks the OAuth fetches of this upstream may
	// reach besides public addresses and those of ServerURL's host (see
	// NewHTTPClient). Zero: none.
	AllowNetworks []netip.Prefix
}

// Client authorizes the HTTP requests of one upstream. It implements the
// upstream package's Authorizer. Safe for concurrent use.
type Client struct {
	m   *Manager
	cfg Config
	hc  *http.Client // its OAuth fetches (fetch.go)

	mu      sync.Mutex
	srv     *server                // the latest discovery; nil before the first 401
	flights map[string]*flight     // token refreshes and fetches in flight, by user
	stepUps map[string]stepUpCount // insufficient_scope answers, by user
}

// flight is a token refresh or fetch shared by the requests that wait for
// it: a refresh token may be good for one use only (OAuth 2.1 §4.3.1).
type flight struct {
	done chan struct{}
	rec  *record
	err  error
}

type stepUpCount struct {
	n    int
	last time.Time
}

// MaxStepUps bounds how many times in a row a user is asked to authorize
// again because the upstream answers 403 insufficient_scope (so at most
// MaxStepUps+1 authorizations in all); after that calls fail until
// StepUpWindow has passed without one.
const (
	MaxStepUps   = 2
	StepUpWindow = 10 * time.Minute
)

// refreshMargin is how long before its expiry a token is refreshed.
const refreshMargin = time.Minute

// tokenTimeout bounds one token endpoint request started on behalf of
// several callers (it does not end with the first caller's context).
const tokenTimeout = 30 * time.Second

// record is what the vault keeps for one (upstream, user): the token and
// what refreshing it needs, and what it was issued for (ServerURL, Issuer,
// Resource): a record that no longer matches the configuration is not
// used (see usable).
type record struct {
	ServerURL    string       `json:"server_url,omitempty"`
	AccessToken  string       `json:"access_token"`
	RefreshToken string       `json:"refresh_token,omitempty"`
	Expiry       time.Time    `json:"expiry,omitzero"`
	Scopes       []string     `json:"scopes,omitempty"`
	Issuer       string       `json:"issuer"`
	TokenURL     string       `json:"token_url"`
	Resource     string       `json:"resource,omitempty"`
	Client       registration `json:"client"`
}

// expiring reports whether the token should be refreshed or fetched again.
func (r *record) expiring(now time.Time) bool {
	return !r.Expiry.IsZero() && !now.Add(refreshMargin).Before(r.Expiry)
}

type userKey struct{}

type heldKey struct{}

type callerKey struct{}

// WithCaller returns a context whose authorization challenges belong to
// caller: who the OTC call's transport authentication established (an API
// key, a JWT's issuer and subject, or the client's address when there is
// none). A pending authorization is never handed to another caller.
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

func callerOf(ctx context.Context) string {
	c, _ := ctx.Value(callerKey{}).(string)
	return c
}

// verifies is how the person who completes user's authorization proves
// to be that user: none for the operator's (user "", shared mode or the
// catalog of a per-user upstream: its URL is the operator's, in the log,
// and its flow is bound to the browser that opens it).
func (c *Client) verifies(user string) string {
	if !c.cfg.PerUser || user == "" {
		return VerifyNone
	}
	return c.cfg.UserVerification
}

// WithUser returns a context whose requests a per-user Client authorizes
// as user (an OTC context.user_id). Shared-mode clients ignore it.
func WithUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

// WithToken returns a context whose requests a per-user Client sends with
// token as it is: a token the caller holds (an OTC
// context.authorization entry for the upstream). The vault is not used.
func WithToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, heldKey{}, token)
}

func (c *Client) held(ctx context.Context) string {
	if !c.cfg.PerUser {
		return ""
	}
	t, _ := ctx.Value(heldKey{}).(string)
	return t
}

func (c *Client) user(ctx context.Context) string {
	if !c.cfg.PerUser {
		return ""
	}
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

func (c *Client) key(user string) vault.Key {
	return vault.Key{Upstream: c.cfg.Upstream, User: user}
}

// Authorization returns the Authorization header for a request made with
// ctx: "" when the bridge holds no token for its user yet (the request
// goes without, and its 401 starts the authorization). A token about to
// expire is refreshed first; one that cannot be refreshed is dropped.
func (c *Client) Authorization(ctx context.Context) (string, error) {
	if t := c.held(ctx); t != "" {
		return "Bearer " + t, nil
	}
	user := c.user(ctx)
	rec, err := c.load(ctx, user)
	if err != nil {
		return "", err
	}
	if rec == nil && user != "" {
		// A user of a per-user upstream without a token: challenge now,
		// rather than send the request without one, once the operator's
		// connection has discovered the authorization server.
		if srv := c.server(); srv != nil {
			return "", c.m.challenge(ctx, c, callerOf(ctx), user, srv, c.scopes(challengeParams{}, srv))
		}
	}
	if rec == nil && c.machine(user) {
		if srv := c.server(); srv != nil {
			rec, err = c.fetch(ctx, user, func(ctx context.Context) (*record, error) {
				return c.clientCredentials(ctx, srv, c.cfg.Scopes)
			})
			if err != nil {
				return "", err
			}
		}
	}
	if rec == nil {
		return "", nil
	}
	if rec.expiring(c.m.now()) {
		rec, err = c.fetch(ctx, user, func(ctx context.Context) (*record, error) { return c.renew(ctx, user, rec) })
		if err != nil || rec == nil {
			return "", err
		}
	}
	return "Bearer " + rec.AccessToken, nil
}

// Unauthorized handles an upstream's 401 or 403 answer to a request that
// carried sent as its Authorization ("" for none). retry: the bridge now
// holds a token for the request's user (client credentials), send it
// again. Otherwise err is an *AuthorizationRequired (a user must open a
// URL), a discovery or token error, or nil for a 403 that is not about
// scope (the answer stands).
func (c *Client) Unauthorized(ctx context.Context, sent string, resp *http.Response) (retry bool, err error) {
	ch := parseChallenge(resp)
	stepUp := resp.StatusCode == http.StatusForbidden
	if stepUp && ch.err != "insufficient_scope" {
		return false, nil
	}
	if t := c.held(ctx); t != "" && sent == "Bearer "+t {
		return false, nil // the caller's own token: the answer stands
	}
	user := c.user(ctx)
	var granted []string
	if rec, _ := c.load(ctx, user); rec != nil && sent == "Bearer "+rec.AccessToken {
		granted = rec.Scopes
		if !stepUp {
			// The token is no longer good: the next request asks again,
			// after a new discovery (the authorization server may have
			// forgotten the bridge's registration too).
			c.drop(ctx, user, rec.AccessToken)
			c.forget()
		}
	}
	if stepUp {
		if n := c.countStepUp(user); n > MaxStepUps {
			return false, fmt.Errorf("upstream %q still answers 403 insufficient_scope after %d authorizations; giving up for %s",
				c.cfg.Upstream, MaxStepUps, StepUpWindow)
		}
	}
	srv, err := c.serverFor(ctx, ch)
	if err != nil {
		return false, fmt.Errorf("upstream %q: OAuth discovery: %w", c.cfg.Upstream, err)
	}
	scopes := c.scopes(ch, srv)
	if stepUp {
		scopes = union(granted, scopes)
	}
	if c.machine(user) {
		if _, err := c.fetch(ctx, user, func(ctx context.Context) (*record, error) {
			return c.clientCredentials(ctx, srv, scopes)
		}); err != nil {
			return false, err
		}
		return true, nil
	}
	caller := callerOf(ctx)
	if user == "" {
		caller = "" // the operator's: whoever's request ran into it
	}
	return false, c.m.challenge(ctx, c, caller, user, srv, scopes)
}

// scopes chooses what to ask for (MCP authorization 2025-11-25, "Scope
// Selection Strategy"): the challenge's scope, else the configured scopes,
// else the resource's scopes_supported, else none.
func (c *Client) scopes(ch challengeParams, srv *server) []string {
	switch {
	case len(ch.scopes) > 0:
		return ch.scopes
	case len(c.cfg.Scopes) > 0:
		return c.cfg.Scopes
	default:
		return srv.scopesSupported
	}
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (c *Client) countStepUp(user string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.m.now()
	s := c.stepUps[user]
	if now.Sub(s.last) > StepUpWindow {
		s.n = 0
	}
	s.n++
	s.last = now
	if c.stepUps == nil {
		c.stepUps = map[string]stepUpCount{}
	}
	c.stepUps[user] = s
	if len(c.stepUps) > maxPending {
		for u, v := range c.stepUps {
			if now.Sub(v.last) > StepUpWindow {
				delete(c.stepUps, u)
			}
		}
	}
	return s.n
}

// machine reports whether user's token comes from the client credentials
// grant: the bridge's own identity, when that is the grant.
func (c *Client) machine(user string) bool {
	return c.cfg.Grant == GrantClientCredentials && user == ""
}

// forget drops the cached discovery: the next 401 discovers and
// registers again.
func (c *Client) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.srv = nil
}

func (c *Client) server() *server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.srv
}

// serverFor returns the discovery for a challenge: the cached one unless
// the challenge points at other metadata.
func (c *Client) serverFor(ctx context.Context, ch challengeParams) (*server, error) {
	if srv := c.server(); srv != nil && (ch.resourceMetadata == "" || ch.resourceMetadata == srv.metadataURL) {
		return srv, nil
	}
	srv, err := c.discover(ctx, ch)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.srv = srv
	c.mu.Unlock()
	return srv, nil
}

// load reads the user's record; nil when there is none (a record that no
// longer decrypts, or was issued for another server, is dropped).
func (c *Client) load(ctx context.Context, user string) (*record, error) {
	var rec record
	err := c.m.vault.Get(ctx, c.key(user), &rec)
	switch {
	case err == nil:
		if why := c.usable(&rec); why != "" {
			c.m.log.Warn("dropping a token issued for another server: "+why, "upstream", c.cfg.Upstream)
			_ = c.m.vault.Delete(ctx, c.key(user))
			return nil, nil
		}
		return &rec, nil
	case errors.Is(err, vault.ErrNotFound):
		return nil, nil
	case errors.Is(err, vault.ErrCorrupt):
		c.m.log.Warn("dropping a token record that does not decrypt", "upstream", c.cfg.Upstream)
		_ = c.m.vault.Delete(ctx, c.key(user))
		return nil, nil
	default:
		return nil, fmt.Errorf("upstream %q: token vault: %w", c.cfg.Upstream, err)
	}
}

// usable says why rec may not be sent to this upstream ("" when it may): a
// token is bound to the server URL it was issued for, and to the issuer
// and resource of the current discovery once there is one. (A record from
// before records named their server URL is taken when its resource is the
// server URL.)
func (c *Client) usable(rec *record) string {
	same := func(a, b string) bool { return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/") }
	switch {
	case rec.ServerURL != "" && !same(rec.ServerURL, c.cfg.ServerURL):
		return "its server URL is not the configured one"
	case rec.ServerURL == "" && !same(rec.Resource, c.cfg.ServerURL):
		return "it names no server URL and its resource is not the configured server URL"
	}
	if srv := c.server(); srv != nil {
		switch {
		case !sameIssuer(rec.Issuer, srv.asm.Issuer):
			return "its issuer is not the server's authorization server"
		case !same(rec.Resource, srv.resource):
			return "its resource is not the server's"
		}
	}
	return ""
}

func (c *Client) save(ctx context.Context, user string, rec *record) error {
	var expires time.Time
	if rec.RefreshToken == "" {
		expires = rec.Expiry
	}
	if err := c.m.vault.Put(ctx, c.key(user), rec, expires); err != nil {
		return fmt.Errorf("upstream %q: token vault: %w", c.cfg.Upstream, err)
	}
	return nil
}

// drop deletes the user's record if it still holds access (a refresh may
// have replaced it since).
func (c *Client) drop(ctx context.Context, user, access string) {
	if rec, _ := c.load(ctx, user); rec != nil && rec.AccessToken == access {
		_ = c.m.vault.Delete(ctx, c.key(user))
		c.m.log.Info("upstream refused the token; dropped it", "upstream", c.cfg.Upstream, "per_user", c.cfg.PerUser)
	}
}

// fetch runs get once for all the requests of user that need it at the
// same time, saves what it returns, and returns it.
func (c *Client) fetch(ctx context.Context, user string, get func(context.Context) (*record, error)) (*record, error) {
	c.mu.Lock()
	f := c.flights[user]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		if c.flights == nil {
			c.flights = map[string]*flight{}
		}
		c.flights[user] = f
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tokenTimeout)
		go func() {
			defer cancel()
			f.rec, f.err = get(fctx)
			if f.err == nil && f.rec != nil {
				f.err = c.save(fctx, user, f.rec)
			}
			c.mu.Lock()
			delete(c.flights, user)
			c.mu.Unlock()
			close(f.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.rec, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// renew refreshes rec, or fetches a new client credentials token. A
// refusal by the authorization server drops the record: nil, nil (the
// request goes without a token and is challenged).
func (c *Client) renew(ctx context.Context, user string, rec *record) (*record, error) {
	if rec.RefreshToken == "" {
		_ = c.m.vault.Delete(ctx, c.key(user))
		if srv := c.server(); srv != nil && c.machine(user) {
			return c.clientCredentials(ctx, srv, rec.Scopes)
		}
		return nil, nil
	}
	cfg := oauth2.Config{
		ClientID:     rec.Client.ID,
		ClientSecret: rec.Client.Secret,
		Endpoint:     oauth2.Endpoint{TokenURL: rec.TokenURL, AuthStyle: rec.Client.authStyle()},
	}
	old := &oauth2.Token{RefreshToken: rec.RefreshToken, Expiry: time.Unix(1, 0)}
	tok, err := cfg.TokenSource(c.clientContext(ctx), old).Token()
	if err != nil {
		c.m.event(FlowEvent{Upstream: c.cfg.Upstream, Event: "refresh_failed", User: user})
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			_ = c.m.vault.Delete(ctx, c.key(user))
			c.m.log.Info("token refresh refused; the next call asks for an authorization again",
				"upstream", c.cfg.Upstream, "oauth_error", re.ErrorCode)
			return nil, nil
		}
		return nil, fmt.Errorf("upstream %q: token refresh: %w", c.cfg.Upstream, tokenErr(err))
	}
	c.m.event(FlowEvent{Upstream: c.cfg.Upstream, Event: "refresh", User: user})
	n := *rec
	n.AccessToken, n.Expiry = tok.AccessToken, tok.Expiry
	if tok.RefreshToken != "" {
		n.RefreshToken = tok.RefreshToken
	}
	if s := scopesOf(tok); s != nil {
		n.Scopes = s
	}
	return &n, nil
}

// scopesOf is the scope a token response granted (RFC 6749 §5.1), nil
// when it did not say.
func scopesOf(tok *oauth2.Token) []string {
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		return strings.Fields(s)
	}
	return nil
}

// tokenErr is a token endpoint error without the response body (which may
// echo what was sent).
func tokenErr(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			return fmt.Errorf("the authorization server answered %s", tokenErrorCode(re.ErrorCode))
		}
		if re.Response != nil {
			return fmt.Errorf("the authorization server answered HTTP %d", re.Response.StatusCode)
		}
	}
	return redactErr(err)
}
