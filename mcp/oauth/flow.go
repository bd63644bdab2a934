package oauth

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"html"
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
	// maxPending bounds the authorizations pending or recently ended.
	maxPending = 10000
)

// Options configure a Manager. A nil *Options is the zero value.
type Options struct {
	// PublicURL is the bridge's base URL as a browser reaches it; the
	// routes are under PublicURL + "/oauth/". Required for the
	// authorization code grant.
	PublicURL string
	// Vault keeps the tokens. Nil: an in-memory vault with a random key.
	Vault *vault.Vault
	// HTTPClient replaces, for tests, the hardened client (NewHTTPClient)
	// of each upstream's discovery, registration and token requests. Nil:
	// NewHTTPClient for the upstream's host and Config.AllowNetworks.
	HTTPClient *http.Client
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
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

// Manager holds the Clients of a bridge's upstreams, their pending
// authorizations, and serves the /oauth/ routes. Safe for concurrent use.
type Manager struct {
	publicURL    string
	vault        *vault.Vault
	httpClient   *http.Client
	log          *slog.Logger
	clientName   string
	onAuthorized func(upstream, user string)
	onEvent      func(upstream, event string)
	now          func() time.Time

	maxPending int // maxPending; tests lower it

	mu      sync.Mutex
	pending map[string]*pending  // by state
	live    map[vault.Key]string // the pending state of each (upstream, user)
	clients map[string]*Client   // by upstream: what a shared authorization names
}

// pending is one authorization: started by a challenge, ended by the
// callback.
type pending struct {
	state    string
	c        *Client
	user     string
	verifier string
	authURL  string
	cfg      oauth2.Config
	srv      *server
	scopes   []string
	created  time.Time
	status   string // "pending", "completed", "failed"
	why      string // failed: what the user is told
	ended    time.Time
}

// AuthorizationRequired is the error of a request that needs a user to
// authorize the bridge at the upstream's authorization server: the OTC
// challenge's url (URL, to open in a browser) and check_url (CheckURL,
// to poll). Both carry only an opaque state.
type AuthorizationRequired struct {
	Upstream string
	URL      string
	CheckURL string
}

func (e *AuthorizationRequired) Error() string {
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
		httpClient:   o.HTTPClient,
		log:          o.Logger,
		clientName:   o.ClientName,
		onAuthorized: o.OnAuthorized,
		onEvent:      o.OnEvent,
		now:          o.Now,
		maxPending:   maxPending,
		pending:      map[string]*pending{},
		live:         map[vault.Key]string{},
		clients:      map[string]*Client{},
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
	}
	c := &Client{m: m, cfg: cfg, hc: m.fetchClient(cfg)}
	m.mu.Lock()
	m.clients[cfg.Upstream] = c
	m.mu.Unlock()
	return c, nil
}

func (m *Manager) callbackURL() string { return m.publicURL + "/oauth/callback" }

// challenge returns the *AuthorizationRequired of (c, user): the live
// pending authorization when there is one for the same scopes, else a new
// one, which is also kept in the vault for the other replicas (see
// shared.go).
func (m *Manager) challenge(ctx context.Context, c *Client, user string, srv *server, scopes []string) error {
	key := c.key(user)
	now := m.now()
	m.mu.Lock()
	if st, ok := m.live[key]; ok {
		if p := m.pending[st]; p != nil && p.status == "pending" && now.Sub(p.created) < PendingTTL &&
			p.srv == srv && slices.Equal(p.scopes, scopes) {
			defer m.mu.Unlock()
			return m.required(p)
		}
	}
	m.sweepLocked(now)
	if len(m.pending) >= m.maxPending {
		m.mu.Unlock()
		return fmt.Errorf("upstream %q: too many authorizations pending (%d); try again later", c.cfg.Upstream, m.maxPending)
	}
	p := &pending{
		state:    rand.Text() + rand.Text(), // 2 × 128 bits
		c:        c,
		user:     user,
		verifier: oauth2.GenerateVerifier(),
		srv:      srv,
		scopes:   scopes,
		created:  now,
		status:   "pending",
		cfg:      m.authConfig(srv, scopes),
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(p.verifier)}
	if srv.resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", srv.resource))
	}
	p.authURL = p.cfg.AuthCodeURL(p.state, opts...)
	m.pending[p.state] = p
	m.live[key] = p.state
	r := m.required(p)
	shared := *p
	m.mu.Unlock()
	m.share(ctx, &shared)
	m.onEvent(c.cfg.Upstream, "challenge")
	if user == "" {
		// The bridge's own identity: the operator authorizes; tell them
		// where.
		m.log.Warn("upstream needs an authorization: open this URL in a browser", "upstream", c.cfg.Upstream, "url", r.URL)
	} else {
		m.log.Info("authorization challenge issued", "upstream", c.cfg.Upstream)
	}
	return r
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
	}
}

// Pending returns the authorization URL of the live pending authorization
// of (upstream, user), "" when there is none.
func (m *Manager) Pending(upstream, user string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pending[m.live[vault.Key{Upstream: upstream, User: user}]]
	if p == nil || p.status != "pending" || m.now().Sub(p.created) >= PendingTTL {
		return ""
	}
	return m.required(p).URL
}

// sweepLocked forgets expired authorizations.
func (m *Manager) sweepLocked(now time.Time) {
	if len(m.pending) < m.maxPending/10 {
		return
	}
	for st, p := range m.pending {
		if (p.status == "pending" && now.Sub(p.created) >= PendingTTL) || (p.status != "pending" && now.Sub(p.ended) >= ResultTTL) {
			delete(m.pending, st)
			if k := p.c.key(p.user); m.live[k] == st {
				delete(m.live, k)
			}
		}
	}
}

// ServeHTTP serves the routes under /oauth/:
//
//	GET /oauth/authorize/{state}        302 to the authorization server
//	GET /oauth/callback                  the redirect_uri: exchanges the code
//	GET /oauth/check/{state}             {"status":"pending"|"completed"|"failed"}
//	GET /oauth/client-metadata.json      the client ID metadata document
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
	case p == "/oauth/callback":
		m.serveCallback(w, r)
	case strings.HasPrefix(p, "/oauth/check/"):
		m.serveCheck(w, r, strings.TrimPrefix(p, "/oauth/check/"))
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
	if p != nil && cp.status != "pending" {
		return cp, true
	}
	sp := m.fetchShared(ctx, state)
	switch {
	case sp == nil:
		return cp, p != nil
	case p == nil:
		m.expireLocked(sp) // sp is this call's own copy
		return *sp, true
	case sp.status != "pending":
		cp.status, cp.why, cp.ended = sp.status, sp.why, sp.ended
	}
	return cp, true
}

// expireLocked marks a pending authorization past PendingTTL failed.
func (m *Manager) expireLocked(p *pending) {
	if p.status == "pending" && m.now().Sub(p.created) >= PendingTTL {
		p.status, p.why, p.ended = "failed", "the authorization URL expired", m.now()
	}
}

func (m *Manager) serveAuthorize(w http.ResponseWriter, r *http.Request, state string) {
	p, ok := m.lookup(r.Context(), state)
	switch {
	case !ok:
		page(w, http.StatusNotFound, "Unknown or expired authorization", "Call the tool again to get a new authorization URL.")
	case p.status != "pending":
		page(w, http.StatusGone, "This authorization has ended", "Status: "+p.status+". Call the tool again if it is still needed.")
	default:
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
	if status == "exchanging" {
		status = "pending"
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

// serveCallback ends an authorization: the state must be pending (it is
// single-use), the iss parameter must name the authorization server
// (RFC 9207), and the code is exchanged with the PKCE verifier.
func (m *Manager) serveCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	m.mu.Lock()
	p := m.pending[state]
	m.mu.Unlock()
	// Issued by another replica, or taken by one since.
	sp := m.fetchShared(r.Context(), state)
	if p == nil && sp != nil {
		m.mu.Lock()
		if m.pending[state] == nil && len(m.pending) < m.maxPending {
			m.pending[state] = sp
		}
		p = m.pending[state]
		m.mu.Unlock()
	}
	m.mu.Lock()
	if p == nil || p.status != "pending" || (sp != nil && sp.status != "pending") || m.now().Sub(p.created) >= PendingTTL {
		m.mu.Unlock()
		page(w, http.StatusBadRequest, "Unknown or expired authorization", "Call the tool again to get a new authorization URL.")
		return
	}
	p.status = "exchanging" // single use: a second callback finds it taken
	taken := *p
	m.mu.Unlock()
	m.share(r.Context(), &taken) // on the other replicas too

	why := m.complete(r.Context(), p, q)
	m.mu.Lock()
	p.ended = m.now()
	if why == "" {
		p.status = "completed"
	} else {
		p.status, p.why = "failed", why
	}
	if k := p.c.key(p.user); m.live[k] == p.state {
		delete(m.live, k)
	}
	ended := *p
	m.mu.Unlock()
	m.share(r.Context(), &ended)
	if why != "" {
		m.onEvent(p.c.cfg.Upstream, "authorization_failed")
		m.log.Warn("authorization failed", "upstream", p.c.cfg.Upstream, "reason", why)
		page(w, http.StatusBadRequest, "Authorization failed", why)
		return
	}
	m.onEvent(p.c.cfg.Upstream, "authorized")
	m.log.Info("authorization completed", "upstream", p.c.cfg.Upstream, "per_user", p.c.cfg.PerUser)
	if m.onAuthorized != nil {
		m.onAuthorized(p.c.cfg.Upstream, p.user)
	}
	page(w, http.StatusOK, "Authorized", "The bridge can now reach "+p.c.cfg.Upstream+". You can close this window.")
}

// complete checks the authorization response and exchanges its code; it
// returns "" or what went wrong, fit to show the user.
func (m *Manager) complete(ctx context.Context, p *pending, q url.Values) string {
	if e := q.Get("error"); e != "" {
		return "the authorization server answered " + e
	}
	asm := p.srv.asm
	iss := q.Get("iss")
	switch {
	case iss != "" && strings.TrimSuffix(iss, "/") != strings.TrimSuffix(asm.Issuer, "/"):
		return "the authorization response names another issuer (RFC 9207)"
	case iss == "" && asm.AuthorizationResponseIssParameterSupported:
		return "the authorization response lacks the iss parameter its server promises (RFC 9207)"
	case q.Get("code") == "":
		return "the authorization response has no code"
	}
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(p.verifier)}
	if p.srv.resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", p.srv.resource))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tokenTimeout)
	defer cancel()
	tok, err := p.cfg.Exchange(p.c.clientContext(ctx), q.Get("code"), opts...)
	if err != nil {
		return "the code exchange failed: " + tokenErr(err).Error()
	}
	if err := p.c.save(ctx, p.user, p.c.newRecord(p.srv, tok, p.scopes)); err != nil {
		m.log.Error("cannot keep the token", "upstream", p.c.cfg.Upstream, "error", err)
		return "the bridge could not keep the token"
	}
	return ""
}

// page writes a minimal HTML page for a browser.
func page(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, "<!doctype html><title>%s</title><h1>%s</h1><p>%s</p>\n",
		html.EscapeString(title), html.EscapeString(title), html.EscapeString(text))
}
