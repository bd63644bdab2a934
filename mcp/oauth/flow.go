package oauth

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpotc/mcpotc/mcp/oauth/vault"
	"golang.org/x/oauth2"
)

// Bounds of the pending authorizations.
const (
	// PendingTTL is how long an authorization URL stays good.
	PendingTTL = 10 * time.Minute
	// ResultTTL is how long check_url reports an ended authorization.
	ResultTTL = 10 * time.Minute
	// maxPending bounds the authorizations pending or recently ended; a
	// new one beyond it takes the place of the oldest, so that no caller
	// can fill the bound and keep others out.
	maxPending = 10000
	// MaxPendingPerPrincipal bounds the authorizations pending for one
	// principal (the caller and the user it names): a new one beyond it
	// takes the place of that principal's oldest.
	MaxPendingPerPrincipal = 4
)

// The ways a per-user authorization proves that the person who completes
// it is the user it was issued to (Config.UserVerification). MCP
// authorization's URL-mode elicitation rules (2025-11-25, security
// considerations) require the check: a challenge URL can be forwarded,
// phished or guessed at.
const (
	// VerifyOIDC: at /oauth/authorize/{state} the browser first signs in
	// at the OpenID provider of Options.UserOIDC; the bridge goes on to the
	// upstream's authorization server only when the signed-in subject (or
	// claim) is the challenged user.
	VerifyOIDC = "oidc"
	// VerifyVerifier: after the upstream's callback the browser is sent to
	// Options.VerifierURL with a flow id; the OTC application, which knows
	// who is signed in, confirms (flow id, user) with Manager.Confirm, and
	// only then is the token stored.
	VerifyVerifier = "verifier"
	// VerifyNone: whoever completes the authorization binds their account
	// to the user. Safe for one user only; logged at start.
	VerifyNone = "none"
)

// Options configure a Manager. A nil *Options is the zero value.
type Options struct {
	// PublicURL is the bridge's base URL as a browser reaches it; the
	// routes are under PublicURL + "/oauth/". Required for the
	// authorization code grant.
	PublicURL string
	// Vault keeps the tokens. Nil: an in-memory vault with a random key.
	Vault *vault.Vault
	// Replicated says the Vault's store is shared by replicas: the
	// pending authorizations are kept there too, so that any replica
	// serves their routes. Zero: they stay in this process (a file store
	// is not written for each challenge).
	Replicated bool
	// HTTPClient replaces, for tests, the hardened client (NewHTTPClient)
	// of each upstream's discovery, registration and token requests. Nil:
	// NewHTTPClient for the upstream's host and Config.AllowNetworks.
	HTTPClient *http.Client
	// UserOIDC is the OpenID provider at which users sign in for
	// VerifyOIDC. Nil: no upstream may use VerifyOIDC.
	UserOIDC *UserOIDC
	// VerifierURL is the OTC application's page that VerifyVerifier sends
	// the browser to, with the query parameter flow_id. Zero: no upstream
	// may use VerifyVerifier.
	VerifierURL string
	// Logger receives the manager's log lines (never a token, code or
	// secret). Nil: nothing is logged.
	Logger *slog.Logger
	// ClientName is the client_name of dynamic registrations and of the
	// client ID metadata document. Zero: "mcpotc".
	ClientName string
	// OnAuthorized is told when a user completed an authorization (user
	// "" in shared mode), after the token is in the vault. Must not block.
	OnAuthorized func(upstream, user string)
	// OnEvent is told of each event, for metrics: "challenge" (a new
	// authorization URL), "authorized", "authorization_failed",
	// "refresh" and "refresh_failed" (a token refresh). Must not block.
	OnEvent func(upstream, event string)
	// OnFlowEvent is told of the same events with who they concern, for
	// an audit log. Must not block. Nil: nobody.
	OnFlowEvent func(FlowEvent)
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

// UserOIDC is the OpenID provider of VerifyOIDC: the bridge is one of its
// clients (authorization code with PKCE, redirect URI
// PublicURL/oauth/login).
type UserOIDC struct {
	// Issuer is the provider's issuer URL (its discovery document is at
	// Issuer/.well-known/openid-configuration). Required.
	Issuer string
	// ClientID and ClientSecret are the bridge's client at the provider.
	// ClientID is required; ClientSecret zero: a public client.
	ClientID, ClientSecret string
	// Claim is the ID token claim that must equal the challenged user id.
	// Zero: "sub".
	Claim string
	// Scopes are asked for besides "openid" (for a Claim such as "email").
	Scopes []string
}

// Manager holds the Clients of a bridge's upstreams, their pending
// authorizations, and serves the /oauth/ routes. Safe for concurrent use.
type Manager struct {
	publicURL    string
	secure       bool   // publicURL is https: cookies are Secure
	cookiePath   string // publicURL's path + "/oauth/"
	vault        *vault.Vault
	replicated   bool
	httpClient   *http.Client
	log          *slog.Logger
	clientName   string
	onAuthorized func(upstream, user string)
	onEvent      func(upstream, event string)
	onFlowEvent  func(FlowEvent)
	now          func() time.Time
	verifierURL  string
	oidc         *userOIDC // nil without Options.UserOIDC

	maxPending int // maxPending; tests lower it

	mu        sync.Mutex
	pending   map[string]*pending // by state
	order     *list.List          // of *pending, oldest first
	live      map[liveKey]string  // the pending state of each (upstream, caller, user)
	perPrinc  map[principal][]string
	byFlow    map[string]string  // flow id → state (VerifyVerifier)
	clients   map[string]*Client // by upstream: what a shared authorization names
	lastSweep time.Time
}

// principal is who caused an authorization: the OTC caller (what its
// transport authentication established, see WithCaller) and the user it
// named. A pending authorization is never handed to another principal.
type principal struct{ caller, user string }

type liveKey struct {
	upstream string
	principal
}

// pending is one authorization: started by a challenge, ended by the
// callback (and, with VerifyVerifier, the application's confirmation).
type pending struct {
	state    string
	flowID   string // VerifyVerifier: the id the application confirms
	c        *Client
	caller   string
	user     string
	verifier string
	authURL  string
	cfg      oauth2.Config
	srv      *server
	scopes   []string
	created  time.Time
	status   string  // statusPending, statusExchanging, statusVerifying, statusCompleted, statusFailed
	why      string  // failed: what the user is told (fixed texts, never an upstream's words)
	held     *record // statusVerifying: the token, until the application confirms the user
	ended    time.Time
	elem     *list.Element // in Manager.order; nil once forgotten
}

// The statuses of a pending authorization.
const (
	statusPending    = "pending"
	statusExchanging = "exchanging" // the callback took it (single use)
	statusVerifying  = "verifying"  // VerifyVerifier: the token waits for the application's confirmation
	statusCompleted  = "completed"
	statusFailed     = "failed"
)

// AuthorizationRequired is the error of a request that needs someone to
// authorize the bridge at the upstream's authorization server: the OTC
// challenge's url (URL, to open in a browser) and check_url (CheckURL,
// to poll). Both carry only an opaque state.
type AuthorizationRequired struct {
	Upstream string
	URL      string
	CheckURL string
	// Operator is set when the authorization is the bridge's own identity
	// (shared mode, or the catalog of a per-user upstream): its URL is the
	// operator's, found in the bridge's log, never handed to a caller.
	Operator bool
}

// Authorization is the challenge: the upstream, the URL to open, where to
// check on it, and whether it is the operator's.
func (e *AuthorizationRequired) Authorization() (upstream, url, checkURL string, operator bool) {
	return e.Upstream, e.URL, e.CheckURL, e.Operator
}

func (e *AuthorizationRequired) Error() string {
	if e.Operator {
		return fmt.Sprintf("upstream %q needs the operator to authorize the bridge (the URL to open is in the bridge's log)", e.Upstream)
	}
	return fmt.Sprintf("upstream %q needs an authorization: a user must open the authorization URL", e.Upstream)
}

// AuthorizationURL is the URL to open.
func (e *AuthorizationRequired) AuthorizationURL() string { return e.URL }

// NewManager returns a Manager.
func NewManager(o *Options) (*Manager, error) {
	if o == nil {
		o = &Options{}
	}
	m := &Manager{
		publicURL:    strings.TrimSuffix(o.PublicURL, "/"),
		vault:        o.Vault,
		replicated:   o.Replicated,
		httpClient:   o.HTTPClient,
		log:          o.Logger,
		clientName:   o.ClientName,
		onAuthorized: o.OnAuthorized,
		onEvent:      o.OnEvent,
		onFlowEvent:  o.OnFlowEvent,
		now:          o.Now,
		verifierURL:  o.VerifierURL,
		maxPending:   maxPending,
		pending:      map[string]*pending{},
		order:        list.New(),
		live:         map[liveKey]string{},
		perPrinc:     map[principal][]string{},
		byFlow:       map[string]string{},
		clients:      map[string]*Client{},
	}
	m.secure = strings.HasPrefix(strings.ToLower(m.publicURL), "https://")
	m.cookiePath = "/oauth/"
	if u, err := url.Parse(m.publicURL); err == nil {
		m.cookiePath = strings.TrimSuffix(u.Path, "/") + "/oauth/"
	}
	if m.vault == nil {
		v, err := vault.New(vault.Memory(nil), nil)
		if err != nil {
			return nil, err
		}
		m.vault = v
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.clientName == "" {
		m.clientName = "mcpotc"
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.onEvent == nil {
		m.onEvent = func(string, string) {}
	}
	if o.VerifierURL != "" {
		if u, err := url.Parse(o.VerifierURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, errors.New("oauth: the verifier URL must be an absolute http(s) URL")
		}
	}
	if o.UserOIDC != nil {
		oc, err := newUserOIDC(m, *o.UserOIDC)
		if err != nil {
			return nil, err
		}
		m.oidc = oc
	}
	return m, nil
}

// Client returns the Client of one upstream.
func (m *Manager) Client(cfg Config) (*Client, error) {
	switch {
	case cfg.Upstream == "":
		return nil, errors.New("oauth: Config.Upstream is required")
	case cfg.ServerURL == "":
		return nil, errors.New("oauth: Config.ServerURL is required")
	case cfg.Grant != "" && cfg.Grant != GrantAuthorizationCode && cfg.Grant != GrantClientCredentials:
		return nil, fmt.Errorf("oauth: grant %q: must be %q or %q", cfg.Grant, GrantAuthorizationCode, GrantClientCredentials)
	case cfg.Grant == GrantClientCredentials && cfg.ClientID == "":
		return nil, errors.New("oauth: the client_credentials grant needs client_id")
	case (cfg.Grant != GrantClientCredentials || cfg.PerUser) && m.publicURL == "":
		return nil, errors.New("oauth: the authorization code grant needs the bridge's public URL")
	case cfg.PerUser && cfg.UserVerification == "":
		return nil, fmt.Errorf("oauth: per_user needs user_verification: %q, %q or %q (who completes a user's authorization must be that user)",
			VerifyOIDC, VerifyVerifier, VerifyNone)
	case cfg.UserVerification != "" && cfg.UserVerification != VerifyOIDC && cfg.UserVerification != VerifyVerifier && cfg.UserVerification != VerifyNone:
		return nil, fmt.Errorf("oauth: user_verification %q: must be %q, %q or %q", cfg.UserVerification, VerifyOIDC, VerifyVerifier, VerifyNone)
	case cfg.UserVerification == VerifyOIDC && m.oidc == nil:
		return nil, errors.New("oauth: user_verification oidc needs the OpenID provider users sign in at (serve-otc --user-oidc-issuer)")
	case cfg.UserVerification == VerifyVerifier && m.verifierURL == "":
		return nil, errors.New("oauth: user_verification verifier needs the application's verifier URL (serve-otc --user-verifier-url)")
	}
	c := &Client{m: m, cfg: cfg, hc: m.fetchClient(cfg)}
	m.mu.Lock()
	m.clients[cfg.Upstream] = c
	m.mu.Unlock()
	return c, nil
}

// FlowEvent is one step of an authorization, for Options.OnFlowEvent. It
// never holds a token, code, verifier or state.
type FlowEvent struct {
	Upstream string
	// Event is one of Options.OnEvent's: challenge, authorized,
	// authorization_failed, refresh, refresh_failed.
	Event string
	// Caller is the OTC caller that caused the authorization (WithCaller),
	// User the user it is for ("" for the bridge's own identity). A
	// refresh names no caller.
	Caller, User string
	// Reason is why an authorization failed, in the fixed words the user
	// is shown (never an authorization server's).
	Reason string
}

// event tells OnEvent and OnFlowEvent of e.
func (m *Manager) event(e FlowEvent) {
	m.onEvent(e.Upstream, e.Event)
	if m.onFlowEvent != nil {
		m.onFlowEvent(e)
	}
}

func (m *Manager) callbackURL() string { return m.publicURL + "/oauth/callback" }

// challenge returns the *AuthorizationRequired of (c, caller, user): the
// principal's live pending authorization when there is one for the same
// scopes, else a new one. A pending authorization is never handed to
// another principal: a second caller naming the same user gets one of its
// own.
func (m *Manager) challenge(ctx context.Context, c *Client, caller, user string, srv *server, scopes []string) error {
	key := liveKey{upstream: c.cfg.Upstream, principal: principal{caller: caller, user: user}}
	now := m.now()
	m.mu.Lock()
	if st, ok := m.live[key]; ok {
		if p := m.pending[st]; p != nil && p.status == statusPending && now.Sub(p.created) < PendingTTL &&
			p.srv == srv && slices.Equal(p.scopes, scopes) {
			defer m.mu.Unlock()
			return m.required(p)
		}
	}
	m.sweepLocked(now)
	var evicted []*pending
	for sts := m.perPrinc[key.principal]; len(sts) >= MaxPendingPerPrincipal; sts = m.perPrinc[key.principal] {
		evicted = append(evicted, m.forgetLocked(m.pending[sts[0]]))
	}
	for len(m.pending) >= m.maxPending {
		oldest := m.order.Front().Value.(*pending)
		evicted = append(evicted, m.forgetLocked(oldest))
	}
	p := &pending{
		state:    rand.Text() + rand.Text(), // 2 × 128 bits
		c:        c,
		caller:   caller,
		user:     user,
		verifier: oauth2.GenerateVerifier(),
		srv:      srv,
		scopes:   scopes,
		created:  now,
		status:   statusPending,
		cfg:      m.authConfig(srv, scopes),
	}
	if c.verifies(user) == VerifyVerifier {
		p.flowID = rand.Text() + rand.Text()
		m.byFlow[p.flowID] = p.state
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(p.verifier)}
	if srv.resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", srv.resource))
	}
	p.authURL = p.cfg.AuthCodeURL(p.state, opts...)
	m.pending[p.state] = p
	p.elem = m.order.PushBack(p)
	m.live[key] = p.state
	m.perPrinc[key.principal] = append(m.perPrinc[key.principal], p.state)
	r := m.required(p)
	shared := *p
	m.mu.Unlock()
	for _, e := range evicted {
		m.unshare(ctx, e.state)
	}
	m.share(ctx, &shared)
	m.event(FlowEvent{Upstream: c.cfg.Upstream, Event: "challenge", Caller: caller, User: user})
	if r.Operator {
		// The bridge's own identity: the operator authorizes; tell them
		// where (and only them: the URL is on no endpoint).
		m.log.Warn("upstream needs an authorization: open this URL in a browser", "upstream", c.cfg.Upstream, "url", r.URL)
	} else {
		m.log.Info("authorization challenge issued", "upstream", c.cfg.Upstream)
	}
	return r
}

// forgetLocked drops p from the maps (it has been evicted or expired) and
// returns it.
func (m *Manager) forgetLocked(p *pending) *pending {
	delete(m.pending, p.state)
	if p.elem != nil {
		m.order.Remove(p.elem)
		p.elem = nil
	}
	k := liveKey{upstream: p.c.cfg.Upstream, principal: principal{caller: p.caller, user: p.user}}
	if m.live[k] == p.state {
		delete(m.live, k)
	}
	if sts := slices.DeleteFunc(m.perPrinc[k.principal], func(s string) bool { return s == p.state }); len(sts) > 0 {
		m.perPrinc[k.principal] = sts
	} else {
		delete(m.perPrinc, k.principal)
	}
	if p.flowID != "" {
		delete(m.byFlow, p.flowID)
	}
	return p
}

// authConfig is the OAuth client configuration of an authorization at srv
// for scopes.
func (m *Manager) authConfig(srv *server, scopes []string) oauth2.Config {
	return oauth2.Config{
		ClientID:     srv.client.ID,
		ClientSecret: srv.client.Secret,
		Endpoint: oauth2.Endpoint{
			AuthURL:   srv.asm.AuthorizationEndpoint,
			TokenURL:  srv.asm.TokenEndpoint,
			AuthStyle: srv.client.authStyle(),
		},
		RedirectURL: m.callbackURL(),
		Scopes:      scopes,
	}
}

func (m *Manager) required(p *pending) *AuthorizationRequired {
	return &AuthorizationRequired{
		Upstream: p.c.cfg.Upstream,
		URL:      m.publicURL + "/oauth/authorize/" + p.state,
		CheckURL: m.publicURL + "/oauth/check/" + p.state,
		Operator: p.user == "",
	}
}

// sweepLocked forgets expired authorizations, at most once a second (and
// when the bound is reached).
func (m *Manager) sweepLocked(now time.Time) {
	if now.Sub(m.lastSweep) < time.Second && len(m.pending) < m.maxPending {
		return
	}
	m.lastSweep = now
	for _, p := range m.pending {
		if (p.status == statusPending && now.Sub(p.created) >= PendingTTL) || (p.status != statusPending && !p.ended.IsZero() && now.Sub(p.ended) >= ResultTTL) {
			m.forgetLocked(p)
		}
	}
}

// ServeHTTP serves the routes under /oauth/:
//
//	GET /oauth/authorize/{state}        to the OpenID provider (VerifyOIDC), else the authorization server
//	GET /oauth/login                     the OpenID provider's redirect (VerifyOIDC)
//	GET /oauth/callback                  the redirect_uri: exchanges the code
//	GET /oauth/check/{state}             {"status":"pending"|"completed"|"failed"}
//	GET /oauth/flow/{flow_id}            the page the application sends the browser to once it confirmed (VerifyVerifier)
//	GET /oauth/client-metadata.json      the client ID metadata document
//
// The application's confirmation (VerifyVerifier) needs the OTC caller's
// credentials: the OTC front serves it (see Confirm).
func (m *Manager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	switch p := r.URL.Path; {
	case strings.HasPrefix(p, "/oauth/authorize/"):
		m.serveAuthorize(w, r, strings.TrimPrefix(p, "/oauth/authorize/"))
	case p == "/oauth/login":
		m.serveLogin(w, r)
	case p == "/oauth/callback":
		m.serveCallback(w, r)
	case strings.HasPrefix(p, "/oauth/check/"):
		m.serveCheck(w, r, strings.TrimPrefix(p, "/oauth/check/"))
	case strings.HasPrefix(p, "/oauth/flow/"):
		m.serveFlow(w, r, strings.TrimPrefix(p, "/oauth/flow/"))
	case p == "/oauth/client-metadata.json":
		m.serveClientMetadata(w)
	default:
		http.NotFound(w, r)
	}
}

// lookup returns a copy of the authorization of state: this replica's,
// with the state another replica may have brought it to since, or the one
// another replica issued.
func (m *Manager) lookup(ctx context.Context, state string) (pending, bool) {
	m.mu.Lock()
	p := m.pending[state]
	var cp pending
	if p != nil {
		m.expireLocked(p)
		cp = *p
	}
	m.mu.Unlock()
	if (p != nil && (cp.status == statusCompleted || cp.status == statusFailed)) || !m.replicated {
		return cp, p != nil
	}
	sp := m.fetchShared(ctx, state)
	switch {
	case sp == nil:
		return cp, p != nil
	case p == nil:
		m.expireLocked(sp) // sp is this call's own copy
		return *sp, true
	case sp.status != statusPending:
		cp.status, cp.why, cp.ended, cp.held = sp.status, sp.why, sp.ended, sp.held
	}
	return cp, true
}

// whyExpired is the why of an authorization that expired: check_url's
// error, and what makes its page say that the link expired.
const whyExpired = "the authorization URL expired"

// expireLocked marks a pending authorization past PendingTTL failed.
func (m *Manager) expireLocked(p *pending) {
	if (p.status == statusPending || p.status == statusVerifying) && m.now().Sub(p.created) >= PendingTTL {
		p.status, p.why, p.ended, p.held = statusFailed, whyExpired, m.now(), nil
	}
}

func (m *Manager) serveAuthorize(w http.ResponseWriter, r *http.Request, state string) {
	p, ok := m.lookup(r.Context(), state)
	switch {
	case !ok:
		m.page(w, http.StatusNotFound, pageUnknown, nil)
	case p.status != statusPending:
		m.page(w, http.StatusGone, pageEnded, &p)
	case p.c.verifies(p.user) == VerifyOIDC && !m.bound(r, state):
		// The browser signs in first; /oauth/login binds it to the flow
		// when the signed-in user is the challenged one.
		m.startLogin(w, r, &p)
	default:
		m.bind(w, state)
		http.Redirect(w, r, p.authURL, http.StatusFound)
	}
}

func (m *Manager) serveCheck(w http.ResponseWriter, r *http.Request, state string) {
	p, ok := m.lookup(r.Context(), state)
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"status":"failed","error":"unknown or expired authorization"}` + "\n"))
		return
	}
	status := p.status
	if status == statusExchanging || status == statusVerifying {
		status = statusPending
	}
	body := map[string]string{"status": status}
	if p.why != "" {
		body["error"] = p.why
	}
	_ = json.NewEncoder(w).Encode(body)
}

func (m *Manager) serveClientMetadata(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"client_id":                  m.publicURL + "/oauth/client-metadata.json",
		"client_name":                m.clientName,
		"redirect_uris":              []string{m.callbackURL()},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	})
}

// take returns this replica's authorization of state for a callback:
// this replica's, or the one another replica issued (adopted here).
func (m *Manager) take(ctx context.Context, state string) *pending {
	m.mu.Lock()
	p := m.pending[state]
	m.mu.Unlock()
	if !m.replicated {
		return p
	}
	// Issued by another replica, or taken by one since.
	sp := m.fetchShared(ctx, state)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case p == nil && sp != nil && len(m.pending) < m.maxPending:
		sp.elem = m.order.PushBack(sp)
		m.pending[state] = sp
		if sp.flowID != "" {
			m.byFlow[sp.flowID] = state
		}
		p = sp
	case p != nil && sp != nil && sp.status != statusPending && p.status == statusPending:
		p.status, p.why, p.ended, p.held = sp.status, sp.why, sp.ended, sp.held
	}
	return p
}

// serveCallback takes the authorization server's answer: the state must be
// pending (it is single-use) and bound to this browser (the one that opened
// the authorization URL, and with VerifyOIDC signed in as its user), the
// iss parameter must name the authorization server (RFC 9207), and the
// code is exchanged with the PKCE verifier. A browser that is not the
// flow's changes nothing: it can neither complete nor fail it. A callback
// past the state's PendingTTL is not exchanged: its page says the link
// expired.
func (m *Manager) serveCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	p := m.take(r.Context(), state)
	m.mu.Lock()
	if p != nil && p.status == statusPending && m.now().Sub(p.created) >= PendingTTL {
		// The person took longer than the link is good for (at the
		// authorization server, or signing in): the code is not exchanged,
		// and the page says that the link expired.
		m.expireLocked(p)
		expired := *p
		m.mu.Unlock()
		m.page(w, http.StatusGone, pageEnded, &expired)
		return
	}
	if p == nil || p.status != statusPending {
		m.mu.Unlock()
		m.page(w, http.StatusBadRequest, pageUnknown, nil)
		return
	}
	if !m.bound(r, state) {
		m.mu.Unlock()
		m.log.Warn("authorization callback from a browser that did not open the authorization URL; ignored", "upstream", p.c.cfg.Upstream)
		m.page(w, http.StatusForbidden, pageOtherBrowser, nil)
		return
	}
	p.status = statusExchanging // single use: a second callback finds it taken
	taken := *p
	m.mu.Unlock()
	m.share(r.Context(), &taken) // on the other replicas too

	rec, why := m.exchange(r.Context(), p, q)
	if why == "" && p.flowID != "" {
		// VerifyVerifier: the token waits for the application to confirm
		// that the browser's user is the flow's.
		m.end(r.Context(), p, statusVerifying, "", rec)
		m.unbind(w, state)
		u, _ := url.Parse(m.verifierURL)
		qq := u.Query()
		qq.Set("flow_id", p.flowID)
		u.RawQuery = qq.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
		return
	}
	if why == "" {
		if err := p.c.save(r.Context(), p.user, rec); err != nil {
			m.log.Error("cannot keep the token", "upstream", p.c.cfg.Upstream, "error", err)
			why = "the bridge could not keep the token"
		}
	}
	m.unbind(w, state)
	if why != "" {
		m.end(r.Context(), p, statusFailed, why, nil)
		m.page(w, http.StatusBadRequest, pageFailed, p)
		return
	}
	m.end(r.Context(), p, statusCompleted, "", nil)
	m.page(w, http.StatusOK, pageAuthorized, p)
}

// end records how p ended (or that it waits for a confirmation), shares
// it, and tells the metrics and the front.
func (m *Manager) end(ctx context.Context, p *pending, status, why string, held *record) {
	m.mu.Lock()
	p.status, p.why, p.held = status, why, held
	if status != statusVerifying {
		p.ended = m.now()
		k := liveKey{upstream: p.c.cfg.Upstream, principal: principal{caller: p.caller, user: p.user}}
		if m.live[k] == p.state {
			delete(m.live, k)
		}
	}
	ended := *p
	m.mu.Unlock()
	m.share(ctx, &ended)
	switch status {
	case statusFailed:
		m.event(FlowEvent{Upstream: p.c.cfg.Upstream, Event: "authorization_failed", Caller: p.caller, User: p.user, Reason: why})
		m.log.Warn("authorization failed", "upstream", p.c.cfg.Upstream, "reason", why)
	case statusCompleted:
		m.event(FlowEvent{Upstream: p.c.cfg.Upstream, Event: "authorized", Caller: p.caller, User: p.user})
		m.log.Info("authorization completed", "upstream", p.c.cfg.Upstream, "per_user", p.c.cfg.PerUser)
		if m.onAuthorized != nil {
			m.onAuthorized(p.c.cfg.Upstream, p.user)
		}
	}
}

// exchange checks the authorization response and exchanges its code; it
// returns the token's record, or what went wrong, fit to show the user
// (never the authorization server's own words: only an RFC 6749 error
// code is named).
func (m *Manager) exchange(ctx context.Context, p *pending, q url.Values) (*record, string) {
	if e := q.Get("error"); e != "" {
		return nil, "the authorization server answered " + oauthErrorCode(e)
	}
	asm := p.srv.asm
	iss := q.Get("iss")
	switch {
	case iss != "" && !sameIssuer(iss, asm.Issuer):
		return nil, "the authorization response names another issuer (RFC 9207)"
	case iss == "" && asm.AuthorizationResponseIssParameterSupported:
		return nil, "the authorization response lacks the iss parameter its server promises (RFC 9207)"
	case q.Get("code") == "":
		return nil, "the authorization response has no code"
	}
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(p.verifier)}
	if p.srv.resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", p.srv.resource))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tokenTimeout)
	defer cancel()
	tok, err := p.cfg.Exchange(p.c.clientContext(ctx), q.Get("code"), opts...)
	if err != nil {
		return nil, "the code exchange failed: " + tokenErr(err).Error()
	}
	return p.c.newRecord(p.srv, tok, p.scopes), ""
}

// oauthErrorCodes are the error codes of an authorization response (RFC
// 6749 §4.1.2.1, OpenID Connect Core §3.1.2.6): the only words of the
// authorization server that the bridge repeats.
var oauthErrorCodes = []string{
	"access_denied", "invalid_request", "unauthorized_client", "unsupported_response_type", "invalid_scope",
	"server_error", "temporarily_unavailable", "login_required", "consent_required", "interaction_required",
	"account_selection_required", "invalid_request_uri", "invalid_request_object", "request_not_supported",
	"request_uri_not_supported", "registration_not_supported",
}

// oauthErrorCode is e when it is a known error code, else "an error".
func oauthErrorCode(e string) string {
	if slices.Contains(oauthErrorCodes, e) {
		return e
	}
	return "an error"
}
