package oauth

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
)

// These tests run the whole browser flow against real HTTP servers on
// loopback: zitadel/oidc's example OpenID Provider (in this process: its
// discovery, login form, token endpoint, ID tokens and JWKS are the
// library's) for the users' sign-in, the bridge's /oauth/ routes, and a
// small upstream authorization server that approves at once (as the
// TypeScript SDK's demo server does). A browser is an http.Client with a
// cookie jar of its own.

// loopbackNet lets an upstream named mcp.test reach its authorization
// server on 127.0.0.1 (the dial guard's exception for a private network).
var loopbackNet = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// testOP starts the example OpenID Provider with a web client for the
// bridge at bridgeURL; it returns its issuer and the client's id.
func testOP(t *testing.T, bridgeURL string) (issuer, clientID string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer = "http://" + ln.Addr().String() + "/"
	clientID = "mcpotc-" + strings.ReplaceAll(t.Name(), "/", "-")
	// A client map of its own (storage.RegisterClients writes a global one).
	s := storage.NewStorageWithClients(storage.NewUserStore(issuer),
		map[string]*storage.Client{clientID: storage.WebClient(clientID, "op-secret", bridgeURL+"/oauth/login")})
	srv := &http.Server{Handler: exampleop.SetupServer(issuer, s, slog.New(slog.DiscardHandler), false), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return issuer, clientID
}

// The example provider's users: their login names and their sub.
func opUser(issuer, name string) (login, sub string) {
	u, _ := url.Parse(issuer)
	switch name {
	case "alice":
		return "test-user@" + u.Hostname(), "id1"
	default:
		return "test-user2", "id2"
	}
}

// testUpstreamAS is an authorization server that approves every request
// at once: /authorize redirects back with a code, /token trades any code
// for a token named after it.
func testUpstreamAS(t *testing.T) (*oauthex.AuthServerMeta, *atomic.Int32) {
	t.Helper()
	var exchanges atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/authorize":
			q := r.URL.Query()
			u, _ := url.Parse(q.Get("redirect_uri"))
			v := url.Values{"code": {"code-" + q.Get("state")[:8]}, "state": {q.Get("state")}}
			u.RawQuery = v.Encode()
			http.Redirect(w, r, u.String(), http.StatusFound)
		case "/token":
			_ = r.ParseForm()
			n := exchanges.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"access_token":"token-%d-%s","token_type":"Bearer","expires_in":3600}`, n, r.PostForm.Get("code"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return &oauthex.AuthServerMeta{Issuer: srv.URL, AuthorizationEndpoint: srv.URL + "/authorize", TokenEndpoint: srv.URL + "/token"}, &exchanges
}

// testBridge serves a Manager's /oauth/ routes (and, when app is set, an
// application's pages) on loopback.
func testBridge(t *testing.T, o Options, app http.Handler) (*Manager, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	o.PublicURL = base
	if o.UserOIDC != nil && o.UserOIDC.Issuer == "" {
		o.UserOIDC.Issuer, o.UserOIDC.ClientID = testOP(t, base)
		o.UserOIDC.ClientSecret = "op-secret"
	}
	m, err := NewManager(&o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/oauth/", m)
	if app != nil {
		mux.Handle("/app/", app)
	}
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	return m, base
}

// browserClient is a browser: its own cookies, redirects followed, and
// the provider's login form filled in as user (when set).
type browserClient struct {
	t    *testing.T
	c    *http.Client
	user string // "alice" or "bob" at the provider
}

func newBrowser(t *testing.T, user string) *browserClient {
	jar, _ := cookiejar.New(nil)
	return &browserClient{t: t, user: user, c: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// open follows url to its last page (signing in at the provider when it
// asks), stopping early at a URL for which stop says so. It returns the
// last response's status, URL and body.
func (b *browserClient) open(u string, stop func(*url.URL) bool) (int, *url.URL, string) {
	b.t.Helper()
	b.c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > 20 {
			return fmt.Errorf("too many redirects")
		}
		if stop != nil && stop(req.URL) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := b.c.Get(u)
	if err != nil {
		b.t.Fatalf("GET %s: %v", u, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Request.URL.Path, "/login/username") {
		// The provider's login form.
		login, _ := opUser(resp.Request.URL.Scheme+"://"+resp.Request.URL.Host+"/", b.user)
		form := url.Values{"id": {resp.Request.URL.Query().Get("authRequestID")}, "username": {login}, "password": {"verysecure"}}
		resp, err = b.c.PostForm(resp.Request.URL.Scheme+"://"+resp.Request.URL.Host+"/login/username", form)
		if err != nil {
			b.t.Fatalf("login: %v", err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	loc := resp.Request.URL
	if resp.StatusCode == http.StatusFound || resp.StatusCode == http.StatusSeeOther {
		loc, _ = resp.Request.URL.Parse(resp.Header.Get("Location"))
	}
	return resp.StatusCode, loc, string(body)
}

func userToken(t *testing.T, c *Client, user string) string {
	t.Helper()
	rec, err := c.load(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	if rec == nil {
		return ""
	}
	return rec.AccessToken
}

// user_verification oidc. The forwarded link: alice's URL opened by bob,
// signed in as bob, is refused with a page that says so, and binds
// nothing. The forwarded second half: alice signs in, then her browser's
// way to the authorization server is completed in bob's browser; the
// callback from bob's browser is refused. Alice's own flow then completes,
// and the token is hers.
func TestUserVerificationOIDC(t *testing.T) {
	t.Parallel()
	asm, exchanges := testUpstreamAS(t)
	m, base := testBridge(t, Options{UserOIDC: &UserOIDC{}}, nil)
	c, err := m.Client(Config{Upstream: "up", ServerURL: "http://mcp.test/mcp", PerUser: true, UserVerification: VerifyOIDC, AllowNetworks: loopbackNet})
	if err != nil {
		t.Fatal(err)
	}
	srv := &server{resource: "http://mcp.test/mcp", asm: asm, client: registration{ID: "cid", Method: "none"}}
	_, alice := opUser(m.oidc.cfg.Issuer, "alice")
	r := m.challenge(t.Context(), c, "app", alice, srv, nil).(*AuthorizationRequired)
	check := func() string { return checkStatus(t, m, strings.TrimPrefix(r.CheckURL, base)) }

	// 1. Forwarded to bob: he signs in as himself.
	bob := newBrowser(t, "bob")
	status, at, page := bob.open(r.URL, nil)
	if status != http.StatusForbidden || at.Path != "/oauth/login" || !strings.Contains(page, "for another user") || !strings.Contains(page, "“id2”") {
		t.Errorf("bob opening alice's link: %d at %s: %s", status, at, page)
	}
	if got := check(); got != "pending" || userToken(t, c, alice) != "" || userToken(t, c, "id2") != "" || exchanges.Load() != 0 {
		t.Errorf("after bob: check %s, alice's token %q, bob's %q, %d exchanges: want pending and nothing kept",
			got, userToken(t, c, alice), userToken(t, c, "id2"), exchanges.Load())
	}

	// 2. Alice signs in; her way on to the authorization server is
	// taken to bob's browser, which completes it there.
	aliceB := newBrowser(t, "alice")
	toAS := func(u *url.URL) bool { return u.Host == strings.TrimPrefix(asm.Issuer, "http://") }
	status, at, _ = aliceB.open(r.URL, toAS)
	if status != http.StatusFound || !toAS(at) {
		t.Fatalf("alice signed in: %d at %s, want the redirect to the authorization server", status, at)
	}
	status, at, page = newBrowser(t, "bob").open(at.String(), nil)
	if status != http.StatusForbidden || at.Path != "/oauth/callback" || !strings.Contains(page, "started in another browser") {
		t.Errorf("the authorization server's answer in bob's browser: %d at %s: %s", status, at, page)
	}
	if got := check(); got != "pending" || userToken(t, c, alice) != "" {
		t.Errorf("after the forwarded second half: check %s, alice's token %q", got, userToken(t, c, alice))
	}

	// 3. Alice, from the start, in her own browser.
	status, at, page = newBrowser(t, "alice").open(r.URL, nil)
	if status != http.StatusOK || at.Path != "/oauth/callback" || !strings.Contains(page, "Authorized") || !strings.Contains(page, "“id1”") {
		t.Fatalf("alice's flow: %d at %s: %s", status, at, page)
	}
	if got := check(); got != "completed" || userToken(t, c, alice) == "" {
		t.Errorf("after alice: check %s, token %q", got, userToken(t, c, alice))
	}
	// The state is spent: the link does not work again.
	if status, _, _ := newBrowser(t, "alice").open(r.URL, nil); status != http.StatusGone {
		t.Errorf("the link after use: %d, want 410", status)
	}
}

// user_verification verifier. The token waits until the application
// confirms the flow for its user; a browser whose signed-in application
// user is another (the forwarded link) makes the application confirm
// another user: the flow fails, and no token is kept for anyone. A
// confirmation by another caller fails likewise. Alice's own flow, which
// the application confirms for her, completes.
func TestUserVerificationVerifier(t *testing.T) {
	t.Parallel()
	asm, _ := testUpstreamAS(t)
	var m *Manager
	// The application: it knows its signed-in user from its own cookie,
	// and confirms the flow for that user, as the caller "app".
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/app/signin":
			http.SetCookie(w, &http.Cookie{Name: "app_user", Value: r.URL.Query().Get("user"), Path: "/app/"})
		case "/app/verify":
			who, err := r.Cookie("app_user")
			if err != nil {
				http.Error(w, "not signed in", http.StatusUnauthorized)
				return
			}
			caller := "app"
			if r.URL.Query().Get("as") != "" {
				caller = r.URL.Query().Get("as")
			}
			next, err := m.Confirm(r.Context(), caller, r.URL.Query().Get("flow_id"), who.Value)
			if err != nil {
				http.Error(w, "confirmation refused: "+err.Error(), http.StatusForbidden)
				return
			}
			http.Redirect(w, r, next, http.StatusFound)
		}
	})
	m, base := testBridge(t, Options{}, app)
	m.verifierURL = base + "/app/verify"
	c, err := m.Client(Config{Upstream: "up", ServerURL: "http://mcp.test/mcp", PerUser: true, UserVerification: VerifyVerifier, AllowNetworks: loopbackNet})
	if err != nil {
		t.Fatal(err)
	}
	srv := &server{resource: "http://mcp.test/mcp", asm: asm, client: registration{ID: "cid", Method: "none"}}
	signedIn := func(user string) *browserClient {
		b := newBrowser(t, user)
		b.open(base+"/app/signin?user="+user, nil)
		return b
	}

	// Bob's browser completes alice's link at the authorization server.
	r := m.challenge(t.Context(), c, "app", "alice", srv, nil).(*AuthorizationRequired)
	status, at, page := signedIn("bob").open(r.URL, nil)
	if status != http.StatusForbidden || at.Path != "/app/verify" || !strings.Contains(page, "another user") {
		t.Errorf("bob completing alice's link: %d at %s: %s", status, at, page)
	}
	if got := checkStatus(t, m, strings.TrimPrefix(r.CheckURL, base)); got != "failed" || userToken(t, c, "alice") != "" || userToken(t, c, "bob") != "" {
		t.Errorf("after bob: check %s, alice's token %q, bob's %q: want failed, none kept", got, userToken(t, c, "alice"), userToken(t, c, "bob"))
	}

	// Another caller cannot confirm the app's flow, even for its user.
	r = m.challenge(t.Context(), c, "app", "alice", srv, []string{"other"}).(*AuthorizationRequired)
	b := signedIn("alice")
	status, at, _ = b.open(r.URL, func(u *url.URL) bool { return u.Path == "/app/verify" })
	if status != http.StatusFound || at.Path != "/app/verify" {
		t.Fatalf("alice's flow to the verifier: %d at %s", status, at)
	}
	q := at.Query()
	q.Set("as", "another-app")
	at.RawQuery = q.Encode()
	if status, _, _ := b.open(at.String(), nil); status != http.StatusForbidden || userToken(t, c, "alice") != "" {
		t.Errorf("a confirmation by another caller: %d, token %q", status, userToken(t, c, "alice"))
	}

	// Alice's own flow.
	r = m.challenge(t.Context(), c, "app", "alice", srv, []string{"third"}).(*AuthorizationRequired)
	status, at, page = signedIn("alice").open(r.URL, nil)
	if status != http.StatusOK || !strings.HasPrefix(at.Path, "/oauth/flow/") || !strings.Contains(page, "Authorized") {
		t.Fatalf("alice's flow: %d at %s: %s", status, at, page)
	}
	if got := checkStatus(t, m, strings.TrimPrefix(r.CheckURL, base)); got != "completed" || userToken(t, c, "alice") == "" {
		t.Errorf("after alice: check %s, token %q", got, userToken(t, c, "alice"))
	}
	// A confirmation again: the flow is over.
	if _, err := m.Confirm(t.Context(), "app", strings.TrimPrefix(at.Path, "/oauth/flow/"), "alice"); err == nil {
		t.Error("a second confirmation was taken")
	}
}
