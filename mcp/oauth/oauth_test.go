package oauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpotc/mcpotc/mcp/oauth/vault"
)

func TestPRMURLs(t *testing.T) {
	t.Parallel()
	got := prmURLs("https://mcp.example.com/meta", "https://mcp.example.com/v1/mcp?x=1")
	want := []prmURL{
		{"https://mcp.example.com/meta", "https://mcp.example.com/v1/mcp?x=1"},
		{"https://mcp.example.com/.well-known/oauth-protected-resource/v1/mcp", "https://mcp.example.com/v1/mcp?x=1"},
		{"https://mcp.example.com/.well-known/oauth-protected-resource", "https://mcp.example.com"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("prmURLs =\n%v\nwant\n%v", got, want)
	}
	if got := prmURLs("", "http://127.0.0.1:9/"); len(got) != 1 || got[0].url != "http://127.0.0.1:9/.well-known/oauth-protected-resource" {
		t.Errorf("root server: %v", got)
	}
}

func TestScopeSelection(t *testing.T) {
	t.Parallel()
	srv := &server{scopesSupported: []string{"a", "b"}}
	for _, tc := range []struct {
		name       string
		challenge  []string
		configured []string
		want       []string
	}{
		{"challenge first", []string{"x"}, []string{"c"}, []string{"x"}},
		{"then configured", nil, []string{"c"}, []string{"c"}},
		{"then scopes_supported", nil, nil, []string{"a", "b"}},
	} {
		c := &Client{cfg: Config{Scopes: tc.configured}}
		if got := c.scopes(challengeParams{scopes: tc.challenge}, srv); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := c0().scopes(challengeParams{}, &server{}); got != nil {
		t.Errorf("nothing anywhere: %v, want no scope", got)
	}
	if got := union([]string{"a", "b"}, []string{"b", "c"}); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("union = %v", got)
	}
}

func c0() *Client { return &Client{} }

func TestParseChallenge(t *testing.T) {
	t.Parallel()
	resp := &http.Response{Header: http.Header{"Www-Authenticate": {
		`Basic realm="x", Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://r.example/.well-known/oauth-protected-resource"`,
	}}}
	got := parseChallenge(resp)
	if got.err != "insufficient_scope" || !slices.Equal(got.scopes, []string{"files:read", "files:write"}) ||
		got.resourceMetadata != "https://r.example/.well-known/oauth-protected-resource" {
		t.Errorf("parseChallenge = %+v", got)
	}
}

func TestSecretMethod(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		supported []string
		want      string
	}{
		{nil, "client_secret_basic"},
		{[]string{"client_secret_post"}, "client_secret_post"},
		{[]string{"client_secret_post", "client_secret_basic"}, "client_secret_basic"},
		{[]string{"none"}, "client_secret_basic"},
	} {
		if got := secretMethod(tc.supported); got != tc.want {
			t.Errorf("secretMethod(%v) = %s, want %s", tc.supported, got, tc.want)
		}
	}
}

// The client assertion of private_key_jwt verifies with the public key,
// names the client as iss and sub and the authorization server as aud,
// and expires.
func TestClientAssertion(t *testing.T) {
	t.Parallel()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Now()
	for name, k := range map[string]any{"ES256": ec, "RS256": rs, "EdDSA": ed} {
		s := k.(crypto.Signer)
		tok, err := clientAssertion(s, "client-1", "https://as.example", now)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		parsed, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return s.Public(), nil },
			jwt.WithValidMethods([]string{name}), jwt.WithAudience("https://as.example"), jwt.WithIssuer("client-1"), jwt.WithSubject("client-1"), jwt.WithExpirationRequired())
		if err != nil || !parsed.Valid {
			t.Errorf("%s: the assertion does not verify: %v", name, err)
		}
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if _, err := clientAssertion(p384, "c", "a", now); err == nil {
		t.Error("a P-384 key was accepted for ES256")
	}
}

func TestParsePrivateKey(t *testing.T) {
	t.Parallel()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(ec)
	good := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if _, err := ParsePrivateKey(good); err != nil {
		t.Fatalf("PKCS #8 EC key: %v", err)
	}
	secretish := "sk_live_DO_NOT_ECHO"
	for _, bad := range []string{secretish, "-----BEGIN PRIVATE KEY-----\n" + secretish + "\n-----END PRIVATE KEY-----\n"} {
		_, err := ParsePrivateKey([]byte(bad))
		if err == nil {
			t.Fatalf("%q was accepted", bad)
		}
		if strings.Contains(err.Error(), "DO_NOT_ECHO") {
			t.Errorf("the error quotes the input: %v", err)
		}
	}
}

// newTestManager is a Manager whose pending authorization for user "u"
// of upstream "up" is ready for its callback, with an authorization
// server that must never be reached (the tests stop before the exchange).
func newTestManager(t *testing.T, asm *oauthex.AuthServerMeta) (*Manager, *Client, *AuthorizationRequired) {
	t.Helper()
	m, err := NewManager(&Options{PublicURL: "http://bridge.test"})
	if err != nil {
		t.Fatal(err)
	}
	// VerifyNone: these tests are about the flow itself (challenge,
	// browser binding, callback, bounds); who completes it is
	// userverify_test.go's.
	c, err := m.Client(Config{Upstream: "up", ServerURL: "http://mcp.test/mcp", PerUser: true, UserVerification: VerifyNone})
	if err != nil {
		t.Fatal(err)
	}
	srv := &server{resource: "http://mcp.test/mcp", asm: asm, client: registration{ID: "cid", Method: "none"}}
	err = m.challenge(t.Context(), c, "app", "u", srv, []string{"read"})
	r, ok := err.(*AuthorizationRequired)
	if !ok {
		t.Fatalf("challenge: %v", err)
	}
	return m, c, r
}

func get(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	return (&browser{}).get(t, h, target)
}

// browser keeps the cookies the handler sets, and sends them back, as a
// browser does (all of them: the tests use one host).
type browser struct{ cookies map[string]*http.Cookie }

func (b *browser) get(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, target, nil)
	for _, c := range b.cookies {
		r.AddCookie(c)
	}
	h.ServeHTTP(w, r)
	for _, c := range w.Result().Cookies() {
		if b.cookies == nil {
			b.cookies = map[string]*http.Cookie{}
		}
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	return w
}

func checkStatus(t *testing.T, m *Manager, checkURL string) string {
	t.Helper()
	w := get(t, m, checkURL)
	var c struct{ Status, Error string }
	if err := json.Unmarshal(w.Body.Bytes(), &c); err != nil {
		t.Fatalf("check_url: %v: %s", err, w.Body)
	}
	return c.Status
}

// The challenge: an opaque URL of the bridge that redirects to the
// authorization server with PKCE S256, the resource and the state; a
// second challenge for the same user and scopes is the same one.
func TestChallengeAndAuthorizeRedirect(t *testing.T) {
	t.Parallel()
	asm := &oauthex.AuthServerMeta{Issuer: "http://as.test", AuthorizationEndpoint: "http://as.test/authorize", TokenEndpoint: "http://as.test/token"}
	m, c, r := newTestManager(t, asm)
	if !strings.HasPrefix(r.URL, "http://bridge.test/oauth/authorize/") || !strings.HasPrefix(r.CheckURL, "http://bridge.test/oauth/check/") {
		t.Fatalf("challenge URLs: %+v", r)
	}
	state := strings.TrimPrefix(r.URL, "http://bridge.test/oauth/authorize/")
	if len(state) < 40 {
		t.Errorf("state %q is too short to be unguessable", state)
	}
	again := m.challenge(t.Context(), c, "app", "u", m.pending[state].srv, []string{"read"}).(*AuthorizationRequired)
	if again.URL != r.URL {
		t.Errorf("a second challenge for the same user made a new authorization: %s", again.URL)
	}
	other := m.challenge(t.Context(), c, "app", "v", m.pending[state].srv, []string{"read"}).(*AuthorizationRequired)
	if other.URL == r.URL {
		t.Error("two users share one authorization")
	}
	// Another caller naming the same user gets a flow of its own, never
	// the first caller's live URL.
	if stranger := m.challenge(t.Context(), c, "other-app", "u", m.pending[state].srv, []string{"read"}).(*AuthorizationRequired); stranger.URL == r.URL {
		t.Error("a second caller naming user u was handed u's pending authorization")
	}
	w := get(t, m, strings.TrimPrefix(r.URL, "http://bridge.test"))
	if w.Code != http.StatusFound {
		t.Fatalf("authorize: %d %s", w.Code, w.Body)
	}
	loc, _ := url.Parse(w.Header().Get("Location"))
	q := loc.Query()
	if loc.Host != "as.test" || q.Get("state") != state || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
		q.Get("resource") != "http://mcp.test/mcp" || q.Get("client_id") != "cid" || q.Get("redirect_uri") != "http://bridge.test/oauth/callback" ||
		q.Get("scope") != "read" {
		t.Errorf("redirect: %s", loc)
	}
	if strings.Contains(loc.String(), m.pending[state].verifier) {
		t.Error("the PKCE verifier is in the authorization URL")
	}
	if got := checkStatus(t, m, strings.TrimPrefix(r.CheckURL, "http://bridge.test")); got != "pending" {
		t.Errorf("check_url: %s, want pending", got)
	}
	if got := checkStatus(t, m, "/oauth/check/nope"); got != "failed" {
		t.Errorf("unknown state: %s, want failed", got)
	}
}

// The callback refuses an unknown state, an iss that names another server
// (RFC 9207), and a missing iss its server promised; the state is single
// use.
func TestCallbackChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		supported bool
		query     string
		want      string
	}{
		{"wrong iss", false, "&iss=http://evil.test&code=c", "another issuer"},
		{"missing iss", true, "&code=c", "lacks the iss"},
		{"error", false, "&error=access_denied", "access_denied"},
		// Only an RFC 6749 error code is repeated, never the server's words.
		{"error text", false, "&error=%3Cb%3EYour+bank+says%3C%2Fb%3E&error_description=call+us", "answered an error."},
		{"no code", false, "", "no code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asm := &oauthex.AuthServerMeta{Issuer: "http://as.test", AuthorizationEndpoint: "http://as.test/authorize", TokenEndpoint: "http://127.0.0.1:1/token",
				AuthorizationResponseIssParameterSupported: tc.supported}
			m, _, r := newTestManager(t, asm)
			state := strings.TrimPrefix(r.URL, "http://bridge.test/oauth/authorize/")
			// A stranger's browser, which did not open the URL, changes
			// nothing: neither a code nor an error from it counts.
			if w := get(t, m, "/oauth/callback?state="+state+tc.query); w.Code != http.StatusForbidden ||
				!strings.Contains(w.Body.String(), "started in another browser") {
				t.Errorf("callback from another browser: %d %s, want 403", w.Code, w.Body)
			}
			if got := checkStatus(t, m, "/oauth/check/"+state); got != "pending" {
				t.Errorf("check_url after a stranger's callback: %s, want pending", got)
			}
			var b browser
			if w := b.get(t, m, "/oauth/authorize/"+state); w.Code != http.StatusFound {
				t.Fatalf("authorize: %d %s", w.Code, w.Body)
			}
			w := b.get(t, m, "/oauth/callback?state="+state+tc.query)
			if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), tc.want) {
				t.Errorf("callback: %d %s, want 400 saying %q", w.Code, w.Body, tc.want)
			}
			if got := checkStatus(t, m, "/oauth/check/"+state); got != "failed" {
				t.Errorf("check_url after a refused callback: %s", got)
			}
			w = b.get(t, m, "/oauth/callback?state="+state+"&code=c")
			if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "Unknown or expired") {
				t.Errorf("second callback: %d %s", w.Code, w.Body)
			}
			if w := get(t, m, "/oauth/authorize/"+state); w.Code != http.StatusGone {
				t.Errorf("authorize after the end: %d", w.Code)
			}
		})
	}
	m, _ := NewManager(&Options{PublicURL: "http://bridge.test"})
	if w := get(t, m, "/oauth/callback?state=nope&code=c"); w.Code != http.StatusBadRequest {
		t.Errorf("unknown state: %d", w.Code)
	}
}

// Pending authorizations expire, and their number is bounded in a way no
// caller can spend for the others (issue: one caller filled 10,000 slots
// and new users were refused for ten minutes): past the bound the oldest
// is dropped, never a newcomer; one principal (caller and user) holds at
// most MaxPendingPerPrincipal, its oldest dropped first.
func TestPendingBounds(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	m, err := NewManager(&Options{PublicURL: "http://bridge.test", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	m.maxPending = 100
	c, _ := m.Client(Config{Upstream: "up", ServerURL: "http://mcp.test/mcp", PerUser: true, UserVerification: VerifyNone}) // the bounds, not who completes
	srv := &server{asm: &oauthex.AuthServerMeta{Issuer: "http://as.test", AuthorizationEndpoint: "http://as.test/a", TokenEndpoint: "http://as.test/t"}}
	first := m.challenge(t.Context(), c, "app", "u0", srv, nil).(*AuthorizationRequired)
	now = now.Add(time.Second)
	honest := m.challenge(t.Context(), c, "app", "honest", srv, nil).(*AuthorizationRequired)
	// The attacker: many users, many times the bound.
	for i := range 3 * m.maxPending {
		now = now.Add(time.Millisecond)
		if _, ok := m.challenge(t.Context(), c, "attacker", fmt.Sprint("user-", i), srv, nil).(*AuthorizationRequired); !ok {
			t.Fatal("no challenge")
		}
	}
	if n := len(m.pending); n > m.maxPending {
		t.Errorf("%d authorizations kept, bound %d", n, m.maxPending)
	}
	newcomer, ok := m.challenge(t.Context(), c, "app", "newcomer", srv, nil).(*AuthorizationRequired)
	if !ok {
		t.Fatal("a new user was refused once the bound was reached")
	}
	if w := get(t, m, strings.TrimPrefix(newcomer.URL, "http://bridge.test")); w.Code != http.StatusFound {
		t.Errorf("the newcomer's URL: %d, want the redirect", w.Code)
	}
	if w := get(t, m, strings.TrimPrefix(honest.URL, "http://bridge.test")); w.Code != http.StatusNotFound {
		t.Errorf("the oldest authorization, dropped for the newer ones: %d, want 404", w.Code)
	}

	// One principal: its oldest goes once it holds MaxPendingPerPrincipal
	// (each with other scopes, so that none is the live one again).
	var urls []string
	for i := range MaxPendingPerPrincipal + 2 {
		r := m.challenge(t.Context(), c, "app", "greedy", srv, []string{fmt.Sprint("scope", i)}).(*AuthorizationRequired)
		urls = append(urls, r.URL)
	}
	kept := 0
	for i, u := range urls {
		code := get(t, m, strings.TrimPrefix(u, "http://bridge.test")).Code
		if code == http.StatusFound {
			kept++
		} else if i >= 2 {
			t.Errorf("authorization %d of the principal (one of the newest) answered %d", i, code)
		}
	}
	if kept != MaxPendingPerPrincipal {
		t.Errorf("%d authorizations of one principal kept, want %d", kept, MaxPendingPerPrincipal)
	}

	now = now.Add(PendingTTL)
	if w := get(t, m, strings.TrimPrefix(first.URL, "http://bridge.test")); w.Code != http.StatusNotFound && w.Code != http.StatusGone {
		t.Errorf("an expired authorization URL answered %d", w.Code)
	}
	if err, ok := m.challenge(t.Context(), c, "app", "after-expiry", srv, nil).(*AuthorizationRequired); !ok {
		t.Errorf("after expiry: %v", err)
	}
}

// The client ID metadata document names the bridge's callback.
func TestClientMetadataDocument(t *testing.T) {
	t.Parallel()
	m, _ := NewManager(&Options{PublicURL: "https://bridge.example/"})
	w := get(t, m, "/oauth/client-metadata.json")
	var doc map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["client_id"] != "https://bridge.example/oauth/client-metadata.json" || doc["token_endpoint_auth_method"] != "none" ||
		doc["redirect_uris"].([]any)[0] != "https://bridge.example/oauth/callback" {
		t.Errorf("document: %v", doc)
	}
}

// Per user: a token the caller holds goes as it is; a user without a token
// is challenged before any request goes (once discovery is done), with a
// challenge of their own; a shared-mode client ignores both.
func TestPerUserAuthorization(t *testing.T) {
	t.Parallel()
	asm := &oauthex.AuthServerMeta{Issuer: "http://as.test", AuthorizationEndpoint: "http://as.test/authorize", TokenEndpoint: "http://as.test/token"}
	m, c, _ := newTestManager(t, asm)
	ctx := t.Context()
	if h, err := c.Authorization(WithToken(WithUser(ctx, "carol"), "held-token")); h != "Bearer held-token" || err != nil {
		t.Errorf("held token: %q %v", h, err)
	}
	if h, err := c.Authorization(WithUser(ctx, "alice")); h != "" || err != nil {
		t.Errorf("before discovery: %q %v, want no header (the 401 discovers)", h, err)
	}
	c.srv = m.pending[m.live[liveKey{"up", principal{"app", "u"}}]].srv
	_, err := c.Authorization(WithUser(ctx, "alice"))
	a, ok := err.(*AuthorizationRequired)
	if !ok {
		t.Fatalf("alice without a token: %v, want her challenge", err)
	}
	_, err = c.Authorization(WithUser(ctx, "bob"))
	if b, ok := err.(*AuthorizationRequired); !ok || b.URL == a.URL {
		t.Errorf("bob: %v, want a challenge of his own", err)
	}
	if h, err := c.Authorization(ctx); h != "" || err != nil {
		t.Errorf("no user (the operator) without a token: %q %v, want the request to go without", h, err)
	}
	shared, _ := m.Client(Config{Upstream: "s", ServerURL: "http://mcp.test/mcp"})
	shared.srv = c.srv
	if h, err := shared.Authorization(WithToken(WithUser(ctx, "alice"), "held-token")); h != "" || err != nil {
		t.Errorf("shared mode with a user and a held token: %q %v, want both ignored", h, err)
	}
}

// A token about to expire is refreshed before the request, once for all
// the requests that need it at the same time (a refresh token may be good
// for one use), and the new token is kept; a refresh the authorization
// server refuses drops the record (the next request is challenged).
func TestRefreshBeforeExpiry(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var forms []url.Values
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		forms = append(forms, r.PostForm)
		n := len(forms)
		mu.Unlock()
		time.Sleep(50 * time.Millisecond) // the other callers arrive meanwhile
		w.Header().Set("Content-Type", "application/json")
		if r.PostForm.Get("refresh_token") == "spent" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		_, _ = fmt.Fprintf(w, `{"access_token":"new-%d","token_type":"Bearer","expires_in":3600,"refresh_token":"r2"}`, n)
	}))
	defer as.Close()
	m, err := NewManager(&Options{PublicURL: "http://bridge.test", HTTPClient: as.Client()})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := m.Client(Config{Upstream: "up", ServerURL: "http://mcp.test/mcp"})
	ctx := t.Context()
	soon := time.Now().Add(refreshMargin / 2)
	if err := c.save(ctx, "", &record{ServerURL: "http://mcp.test/mcp", AccessToken: "old", RefreshToken: "r1", Expiry: soon, TokenURL: as.URL + "/token",
		Client: registration{ID: "cid", Method: "none"}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([]string, 20)
	for i := range got {
		wg.Go(func() { got[i], _ = c.Authorization(ctx) })
	}
	wg.Wait()
	for i, h := range got {
		if h != "Bearer new-1" {
			t.Errorf("caller %d: %q, want the refreshed token", i, h)
		}
	}
	if len(forms) != 1 {
		t.Fatalf("%d refresh requests, want 1", len(forms))
	}
	if f := forms[0]; f.Get("grant_type") != "refresh_token" || f.Get("refresh_token") != "r1" || f.Get("client_id") != "cid" {
		t.Errorf("refresh request: %v", f)
	}
	rec, _ := c.load(ctx, "")
	if rec == nil || rec.AccessToken != "new-1" || rec.RefreshToken != "r2" || rec.TokenURL != as.URL+"/token" {
		t.Errorf("kept: %+v", rec)
	}

	if err := c.save(ctx, "", &record{ServerURL: "http://mcp.test/mcp", AccessToken: "old", RefreshToken: "spent", Expiry: soon, TokenURL: as.URL + "/token",
		Client: registration{ID: "cid", Method: "none"}}); err != nil {
		t.Fatal(err)
	}
	if h, err := c.Authorization(ctx); h != "" || err != nil {
		t.Errorf("refused refresh: %q %v, want no header and no error", h, err)
	}
	if rec, _ := c.load(ctx, ""); rec != nil {
		t.Error("the record of a refused refresh was kept")
	}
}

// A 401 to a request that carried the bridge's token drops the token and
// the discovery (the next 401 discovers and registers again).
func TestUnauthorizedDropsToken(t *testing.T) {
	t.Parallel()
	asm := &oauthex.AuthServerMeta{Issuer: "http://as.test", AuthorizationEndpoint: "http://as.test/authorize", TokenEndpoint: "http://as.test/token"}
	m, _, _ := newTestManager(t, asm)
	c, _ := m.Client(Config{Upstream: "s", ServerURL: "http://127.0.0.1:1/mcp"})
	ctx := t.Context()
	c.srv = &server{asm: asm, resource: "http://127.0.0.1:1/mcp"}
	_ = c.save(ctx, "", &record{ServerURL: "http://127.0.0.1:1/mcp", Issuer: asm.Issuer, Resource: "http://127.0.0.1:1/mcp", AccessToken: "good", TokenURL: asm.TokenEndpoint})
	// A 401 to a request with another token (a refresh replaced it) keeps it.
	resp := &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}}
	if _, err := c.Unauthorized(ctx, "Bearer stale", resp); err == nil {
		t.Fatal("no error after a 401")
	}
	if rec, _ := c.load(ctx, ""); rec == nil {
		t.Error("a 401 to an older token dropped the current one")
	}
	_, err := c.Unauthorized(ctx, "Bearer good", resp)
	if rec, _ := c.load(ctx, ""); rec != nil {
		t.Error("the refused token was kept")
	}
	if c.server() != nil {
		t.Error("the discovery was kept")
	}
	if err == nil || !strings.Contains(err.Error(), "OAuth discovery") {
		t.Errorf("after the drop: %v, want a new discovery (which fails here: nothing listens)", err)
	}
}

// A token is bound to what it was issued for (the server URL, the issuer
// and the resource): repointing an upstream's URL at another server, or a
// server that now names another authorization server or resource, does
// not get the tokens issued for the old one (the operator's included).
func TestTokenBoundToServer(t *testing.T) {
	t.Parallel()
	asm := &oauthex.AuthServerMeta{Issuer: "http://as.test", AuthorizationEndpoint: "http://as.test/authorize", TokenEndpoint: "http://as.test/token"}
	v, _ := vault.New(vault.Memory(nil), nil)
	ctx := t.Context()
	for _, tc := range []struct {
		name     string
		url      string // the upstream's configured URL now
		srv      *server
		rec      record
		accepted bool
	}{
		{"same server", "http://mcp.test/mcp", nil, record{ServerURL: "http://mcp.test/mcp"}, true},
		{"repointed URL", "http://evil.test/mcp", nil, record{ServerURL: "http://mcp.test/mcp"}, false},
		{"legacy record, its resource", "http://mcp.test/mcp", nil, record{Resource: "http://mcp.test/mcp"}, true},
		{"legacy record, another resource", "http://evil.test/mcp", nil, record{Resource: "http://mcp.test/mcp"}, false},
		{"same discovery", "http://mcp.test/mcp", &server{asm: asm, resource: "http://mcp.test/mcp"},
			record{ServerURL: "http://mcp.test/mcp", Issuer: "http://as.test", Resource: "http://mcp.test/mcp"}, true},
		{"another issuer now", "http://mcp.test/mcp", &server{asm: &oauthex.AuthServerMeta{Issuer: "http://other-as.test"}, resource: "http://mcp.test/mcp"},
			record{ServerURL: "http://mcp.test/mcp", Issuer: "http://as.test", Resource: "http://mcp.test/mcp"}, false},
		{"another resource now", "http://mcp.test/mcp", &server{asm: asm, resource: "http://mcp.test/other"},
			record{ServerURL: "http://mcp.test/mcp", Issuer: "http://as.test", Resource: "http://mcp.test/mcp"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := NewManager(&Options{PublicURL: "http://bridge.test", Vault: v})
			c, _ := m.Client(Config{Upstream: "up-" + tc.name, ServerURL: tc.url})
			c.srv = tc.srv
			rec := tc.rec
			rec.AccessToken = "the-token"
			if err := c.save(ctx, "", &rec); err != nil {
				t.Fatal(err)
			}
			h, err := c.Authorization(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := h == "Bearer the-token"; got != tc.accepted {
				t.Errorf("header %q, want the token sent: %t", h, tc.accepted)
			}
			if kept, _ := c.load(ctx, ""); (kept != nil) != tc.accepted {
				t.Errorf("record kept: %t, want %t", kept != nil, tc.accepted)
			}
		})
	}
}

// Per user with the client credentials grant: the bridge's own identity
// (no user: the catalog) gets its token from the grant; a user gets the
// authorization code challenge.
func TestPerUserWithClientCredentials(t *testing.T) {
	t.Parallel()
	var grants []string
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		grants = append(grants, r.PostForm.Get("grant_type"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"machine","token_type":"Bearer","expires_in":3600}`))
	}))
	defer as.Close()
	m, _ := NewManager(&Options{PublicURL: "http://bridge.test", HTTPClient: as.Client()})
	c, err := m.Client(Config{Upstream: "up", ServerURL: "http://mcp.test/mcp", PerUser: true, UserVerification: VerifyNone /* the grants, not who completes */, Grant: GrantClientCredentials, ClientID: "cid", ClientSecret: "s"})
	if err != nil {
		t.Fatal(err)
	}
	c.srv = &server{resource: "http://mcp.test/mcp", client: registration{ID: "cid", Secret: "s", Method: "client_secret_basic"},
		asm: &oauthex.AuthServerMeta{Issuer: as.URL, AuthorizationEndpoint: as.URL + "/authorize", TokenEndpoint: as.URL + "/token"}}
	ctx := t.Context()
	if h, err := c.Authorization(ctx); h != "Bearer machine" || err != nil || len(grants) != 1 || grants[0] != "client_credentials" {
		t.Errorf("the bridge's identity: %q %v (grants %v), want the client credentials token", h, err, grants)
	}
	if _, err := c.Authorization(WithUser(ctx, "alice")); !isRequired(err) {
		t.Errorf("alice: %v, want her authorization code challenge", err)
	}
}

func isRequired(err error) bool {
	_, ok := err.(*AuthorizationRequired)
	return ok
}
