package oauth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/zitadel/oidc/v3/pkg/client/rp"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"golang.org/x/oauth2"
)

// User verification (Config.UserVerification)
//
// VerifyOIDC: /oauth/authorize/{state} sends a browser that is not yet
// bound to the flow to the OpenID provider (authorization code with PKCE
// and a nonce; what the login needs travels in a cookie sealed under the
// vault key, so any replica takes the provider's answer). /oauth/login
// exchanges the code, verifies the ID token (signature from the provider's
// JWKS, iss, aud, exp, nonce — zitadel/oidc's relying party does it), and
// compares its subject (or UserOIDC.Claim) with the flow's user: equal, the
// browser is bound to the flow and goes on to the upstream's authorization
// server; different, a page says so and nothing changes (the flow stays
// for its own user).
//
// VerifyVerifier: the callback keeps the token (sealed, in the vault when
// replicated) and sends the browser to the application's verifier URL
// with flow_id; the application, which knows who is signed in, calls
// Confirm (POST /oauth/confirm on the OTC front, with the OTC caller's
// credentials). The token is stored only when the confirmed user is the
// flow's user and the confirming caller is the one the challenge was
// issued to; any other confirmation fails the flow and drops the token.

// loginTTL bounds a sign-in at the OpenID provider.
const loginTTL = PendingTTL

// userOIDC is the relying party of VerifyOIDC, made at the first sign-in
// (the provider may start after the bridge) and kept once made.
type userOIDC struct {
	m     *Manager
	cfg   UserOIDC
	hc    *http.Client // hardened (NewHTTPClient): the provider's host is its own
	mu    sync.Mutex
	party rp.RelyingParty
	tried time.Time // the last failed discovery: the next waits a while
}

func newUserOIDC(m *Manager, cfg UserOIDC) (*userOIDC, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" {
		return nil, errors.New("oauth: the users' OpenID provider needs an issuer and a client id")
	}
	if cfg.Claim == "" {
		cfg.Claim = "sub"
	}
	hc := m.httpClient
	if hc == nil {
		hc = NewHTTPClient(&FetchOptions{Hosts: []string{cfg.Issuer}})
	}
	return &userOIDC{m: m, cfg: cfg, hc: hc}, nil
}

// discoveryRetry is how long a failed discovery of the provider is
// remembered: sign-ins meanwhile fail at once instead of each asking it.
const discoveryRetry = 5 * time.Second

func (o *userOIDC) relyingParty(ctx context.Context) (rp.RelyingParty, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.party != nil {
		return o.party, nil
	}
	if !o.tried.IsZero() && o.m.now().Sub(o.tried) < discoveryRetry {
		return nil, errors.New("the users' OpenID provider could not be reached a moment ago")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	scopes := append([]string{oidc.ScopeOpenID}, o.cfg.Scopes...)
	party, err := rp.NewRelyingPartyOIDC(ctx, o.cfg.Issuer, o.cfg.ClientID, o.cfg.ClientSecret, o.m.publicURL+"/oauth/login", scopes,
		rp.WithHTTPClient(o.hc),
		rp.WithVerifierOpts(rp.WithNonce(func(ctx context.Context) string { s, _ := ctx.Value(nonceKey{}).(string); return s })),
	)
	if err != nil {
		o.tried = o.m.now()
		return nil, fmt.Errorf("the users' OpenID provider %s: %w", o.cfg.Issuer, redactErr(err))
	}
	o.party = party
	return party, nil
}

type nonceKey struct{}

// login is what a sign-in at the provider needs back: sealed in a cookie.
type login struct {
	State    string    `json:"s"` // the flow's state
	Nonce    string    `json:"n"`
	Verifier string    `json:"v"` // PKCE
	Created  time.Time `json:"c"`
}

const loginCookiePrefix = "mcpotc_login_"

func (m *Manager) loginCookieName(oidcState string) string {
	return loginCookiePrefix + hex.EncodeToString(m.vault.Sum("login-cookie-name", []byte(oidcState))[:8])
}

// startLogin sends the browser to the OpenID provider to sign in, for p.
func (m *Manager) startLogin(w http.ResponseWriter, r *http.Request, p *pending) {
	party, err := m.oidc.relyingParty(r.Context())
	if err != nil {
		m.log.Warn("users' OpenID provider unavailable", "error", err)
		m.page(w, http.StatusServiceUnavailable, pageProviderDown, p)
		return
	}
	l := login{State: p.state, Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier(), Created: m.now()}
	oidcState := rand.Text() + rand.Text()
	plain, _ := json.Marshal(l)
	m.setCookie(w, m.loginCookieName(oidcState), base64.RawURLEncoding.EncodeToString(m.vault.Seal("login", plain)), int(loginTTL.Seconds()))
	http.Redirect(w, r, rp.AuthURL(oidcState, party, rp.WithCodeChallenge(oauth2.S256ChallengeFromVerifier(l.Verifier)),
		rp.AuthURLOpt(func() []oauth2.AuthCodeOption {
			return []oauth2.AuthCodeOption{oauth2.SetAuthURLParam("nonce", l.Nonce)}
		})),
		http.StatusFound)
}

// serveLogin takes the OpenID provider's answer: the browser signed in as
// the flow's user goes on to the upstream's authorization server, bound to
// the flow; any other is refused, and the flow stays as it was.
func (m *Manager) serveLogin(w http.ResponseWriter, r *http.Request) {
	if m.oidc == nil {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	oidcState := q.Get("state")
	name := m.loginCookieName(oidcState)
	var l login
	c, err := r.Cookie(name)
	if err == nil {
		var sealed, plain []byte
		if sealed, err = base64.RawURLEncoding.DecodeString(c.Value); err == nil {
			if plain, err = m.vault.Open("login", sealed); err == nil {
				err = json.Unmarshal(plain, &l)
			}
		}
	}
	if oidcState == "" || err != nil || m.now().Sub(l.Created) >= loginTTL {
		m.page(w, http.StatusBadRequest, pageLoginLost, nil)
		return
	}
	m.setCookie(w, name, "", -1) // single use
	p, ok := m.lookup(r.Context(), l.State)
	switch {
	case !ok:
		m.page(w, http.StatusNotFound, pageUnknown, nil)
		return
	case p.status != statusPending:
		m.page(w, http.StatusGone, pageEnded, &p)
		return
	case q.Get("error") != "":
		m.page(w, http.StatusForbidden, pageSignInFailed, &p, "the sign-in provider answered "+oauthErrorCode(q.Get("error")))
		return
	}
	who, err := m.oidc.signedIn(r.Context(), q.Get("code"), l)
	if err != nil {
		m.log.Warn("sign-in for a user authorization failed", "upstream", p.c.cfg.Upstream, "error", err)
		m.page(w, http.StatusForbidden, pageSignInFailed, &p, "the sign-in could not be verified")
		return
	}
	if who != p.user {
		m.log.Warn("user authorization opened by another user than the one it was issued to; refused",
			"upstream", p.c.cfg.Upstream)
		m.page(w, http.StatusForbidden, pageOtherUser, &p, who)
		return
	}
	m.bind(w, p.state)
	http.Redirect(w, r, p.authURL, http.StatusFound)
}

// signedIn exchanges the provider's code and returns the verified ID
// token's subject (or the configured claim).
func (o *userOIDC) signedIn(ctx context.Context, code string, l login) (string, error) {
	if code == "" {
		return "", errors.New("no code")
	}
	party, err := o.relyingParty(ctx)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, nonceKey{}, l.Nonce), tokenTimeout)
	defer cancel()
	tokens, err := rp.CodeExchange[*oidc.IDTokenClaims](ctx, code, party, rp.WithCodeVerifier(l.Verifier))
	if err != nil {
		return "", tokenErr(err)
	}
	claims := tokens.IDTokenClaims
	if o.cfg.Claim == "sub" {
		if claims.Subject == "" {
			return "", errors.New("the ID token has no sub")
		}
		return claims.Subject, nil
	}
	v, ok := claims.Claims[o.cfg.Claim].(string)
	if !ok || v == "" {
		return "", fmt.Errorf("the ID token has no string claim %q", o.cfg.Claim)
	}
	return v, nil
}

// ErrConfirm is the error of a confirmation Confirm refuses; its message
// says why without naming a token.
var ErrConfirm = errors.New("oauth: confirmation refused")

// Confirm is the OTC application's confirmation of a VerifyVerifier flow:
// caller is who the confirming request's transport authentication
// established (the same form as WithCaller), user the user the
// application saw signed in. It stores the token and returns the URL to
// send the browser to next when the flow waits for a confirmation, was
// issued to caller and user; otherwise the flow fails (its token is
// dropped) and the error wraps ErrConfirm. An unknown flow id is an error
// that changes nothing.
func (m *Manager) Confirm(ctx context.Context, caller, flowID, user string) (next string, err error) {
	state := m.flowState(ctx, flowID)
	p := m.take(ctx, state)
	if state == "" || p == nil {
		return "", fmt.Errorf("%w: unknown or expired flow", ErrConfirm)
	}
	m.mu.Lock()
	m.expireLocked(p)
	status, held := p.status, p.held
	m.mu.Unlock()
	if status != statusVerifying || held == nil {
		return "", fmt.Errorf("%w: the flow does not wait for a confirmation (%s)", ErrConfirm, publicStatus(status))
	}
	if caller != p.caller || user != p.user {
		m.log.Warn("user authorization confirmed for another user or by another caller than it was issued to; the flow fails",
			"upstream", p.c.cfg.Upstream)
		m.end(ctx, p, statusFailed, "the application confirmed another user than the one the authorization was issued to", nil)
		return "", fmt.Errorf("%w: the flow was issued to another user", ErrConfirm)
	}
	if err := p.c.save(ctx, p.user, held); err != nil {
		m.log.Error("cannot keep the token", "upstream", p.c.cfg.Upstream, "error", err)
		m.end(ctx, p, statusFailed, "the bridge could not keep the token", nil)
		return "", err
	}
	m.end(ctx, p, statusCompleted, "", nil)
	return m.publicURL + "/oauth/flow/" + flowID, nil
}

// flowState is the state of flow id flowID: this replica's, else the
// shared record's.
func (m *Manager) flowState(ctx context.Context, flowID string) string {
	if flowID == "" || len(flowID) > 256 {
		return ""
	}
	m.mu.Lock()
	st := m.byFlow[flowID]
	m.mu.Unlock()
	if st != "" || !m.replicated {
		return st
	}
	return m.fetchFlow(ctx, flowID)
}

// serveFlow is the page the application sends the browser to after
// Confirm: how the flow ended.
func (m *Manager) serveFlow(w http.ResponseWriter, r *http.Request, flowID string) {
	state := m.flowState(r.Context(), flowID)
	p, ok := m.lookup(r.Context(), state)
	switch {
	case state == "" || !ok:
		m.page(w, http.StatusNotFound, pageUnknown, nil)
	case p.status == statusCompleted:
		m.page(w, http.StatusOK, pageAuthorized, &p)
	case p.status == statusFailed:
		m.page(w, http.StatusOK, pageFailed, &p)
	default:
		m.page(w, http.StatusOK, pageWaiting, &p)
	}
}

// publicStatus is a status as check_url names it.
func publicStatus(s string) string {
	switch s {
	case statusExchanging, statusVerifying:
		return statusPending
	}
	return s
}
