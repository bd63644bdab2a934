//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
)

// oauthBrowser is a person's browser for the authorization pages: cookies
// of its own (the bridge binds a flow to the browser that opened its
// link), redirects followed, and zitadel/oidc's example login form filled
// in as its user when the users' OpenID provider asks.
type oauthBrowser struct {
	t    *testing.T
	c    *http.Client
	user string // "alice" (sub id1) or "bob" (sub id2) at the users' provider; "" signs in nowhere
}

func newOAuthBrowser(t *testing.T, user string) *oauthBrowser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &oauthBrowser{t: t, user: user, c: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// oauthPage is where a browser ended: the last answer's status, URL and
// page.
type oauthPage struct {
	Status int
	URL    *url.URL
	Body   string
}

// open follows u to its last page, signing in at the users' provider when
// its login form comes; stop, when set, ends the walk before a URL.
func (b *oauthBrowser) open(u string, stop func(*url.URL) bool) oauthPage {
	b.t.Helper()
	b.c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > 20 {
			return fmt.Errorf("more than 20 redirects")
		}
		if stop != nil && stop(req.URL) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("opening %s: %v", u, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && resp.Request.URL.Path == "/login/username" {
		if b.user == "" {
			b.t.Fatalf("%s asks to sign in, and this browser has no user", resp.Request.URL.Host)
		}
		login := "test-user2"
		if b.user == "alice" {
			login = "test-user@" + resp.Request.URL.Hostname()
		}
		form := url.Values{"id": {resp.Request.URL.Query().Get("authRequestID")}, "username": {login}, "password": {"verysecure"}}
		post := *resp.Request.URL
		post.RawQuery = ""
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, post.String(), strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if resp, err = b.c.Do(req); err != nil {
			b.t.Fatalf("signing in as %s: %v", b.user, err)
		}
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
	}
	p := oauthPage{Status: resp.StatusCode, URL: resp.Request.URL, Body: string(body)}
	if loc := resp.Header.Get("Location"); loc != "" && resp.StatusCode/100 == 3 {
		p.URL, _ = resp.Request.URL.Parse(loc)
	}
	return p
}

// authorize opens u and expects the bridge's "Authorized" page.
func (b *oauthBrowser) authorize(u string) {
	b.t.Helper()
	p := b.open(u, nil)
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "<h1 class=\"ok\">Authorized</h1>") {
		b.t.Fatalf("the authorization (as %q) ended at %s with HTTP %d: %s", b.user, p.URL, p.Status, truncate(p.Body, 600))
	}
}

// toolsWith is GET /tools's items, with hdr (credentials).
func (b *otcfBridge) toolsWith(t *testing.T, hdr map[string]string) []any {
	t.Helper()
	r := b.get(t, "/tools", hdr, nil)
	body, _ := r.Body.(map[string]any)
	items, _ := body["items"].([]any)
	if r.Status != http.StatusOK || len(items) == 0 {
		t.Fatalf("GET /tools: %d %s", r.Status, otcfTrunc(r.Raw))
	}
	return items
}

// callerJWT is an HS256 bearer JWT for serve-otc's --jwt-secret-env
// secret, naming sub.
func callerJWT(t *testing.T, secret, sub string) map[string]string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(5 * time.Minute).Unix()}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"Authorization": "Bearer " + tok}
}

// oauthUserSub is the sub the example provider gives its user.
func oauthUserSub(user string) string {
	if user == "alice" {
		return "id1"
	}
	return "id2"
}

// usersOP serves zitadel/oidc's example OpenID Provider in this process,
// with a web client "mcpotc" (secret "op-secret") whose redirect URIs are
// the bridges' /oauth/login: the provider users sign in at for
// user_verification oidc. Its users: alice (sub id1), bob (sub id2).
func usersOP(t *testing.T, bridges ...string) string {
	t.Helper()
	return usersOPAt(t, "127.0.0.1:0", bridges...)
}

// usersOPAt is usersOP on addr.
func usersOPAt(t *testing.T, addr string, bridges ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String() + "/"
	var redirects []string
	for _, b := range bridges {
		redirects = append(redirects, b+"/oauth/login")
	}
	// A client map of its own: storage.RegisterClients writes a global one.
	s := storage.NewStorageWithClients(storage.NewUserStore(issuer), map[string]*storage.Client{"mcpotc": storage.WebClient("mcpotc", "op-secret", redirects...)})
	srv := &http.Server{Handler: exampleop.SetupServer(issuer, s, slog.New(slog.DiscardHandler), false), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return issuer
}

// usersOPArgs are serve-otc's flags for the users' provider at issuer.
func usersOPArgs(issuer string) ([]string, []string) {
	return []string{"--user-oidc-issuer", issuer, "--user-oidc-client-id", "mcpotc", "--user-oidc-client-secret-env", "MCPOTC_OP_SECRET"},
		[]string{"MCPOTC_OP_SECRET=op-secret"}
}

// oauthOperatorURL is the operator's authorization URL of upstream, read
// where the operator finds it: the bridge's log (never /health).
func oauthOperatorURL(t *testing.T, b *otcfBridge, upstream string) string {
	t.Helper()
	pred := func(m map[string]any) bool {
		return m["message"] == "upstream needs an authorization: open this URL in a browser" && m["upstream"] == upstream
	}
	otcfWaitLog(t, b.p, 30*time.Second, "the operator's authorization URL in the log", pred)
	ls := b.logs(pred) // the latest: an expired one is followed by a new one
	u, _ := ls[len(ls)-1]["url"].(string)
	if !strings.HasPrefix(u, b.base+"/oauth/authorize/") {
		t.Fatalf("the operator's URL in the log: %q", u)
	}
	return u
}

// TestOAuthUserVerifier: user_verification verifier through serve-otc's
// POST /oauth/confirm. The OTC application (a small server here: it knows
// its signed-in user from its own cookie, and holds the API key) receives
// the browser at --user-verifier-url after the upstream's authorization
// and confirms the flow for its signed-in user. Alice's link completed in
// bob's browser (bob signed in at the application) makes the application
// confirm bob: the flow fails and no token is kept. A confirmation without
// the application's credentials is a 401, one by a JWT caller naming
// another user a 403. Alice's own flow completes and her call succeeds.
func TestOAuthUserVerifier(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	mcpPort := freePort(t)
	server := oauthTSServerOn(t, mcpPort, freePort(t), "--oauth-strict")
	config := filepath.Join(dir, "config.json")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`{"mcpServers": {"demo": {"url": "http://localhost:%d/mcp", "toolkit": "Demo", "oauth": {"per_user": true, "user_verification": "verifier"}}}}`, mcpPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	var confirms []string // what serve-otc answered the application
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/signin":
			http.SetCookie(w, &http.Cookie{Name: "app_user", Value: r.URL.Query().Get("user"), Path: "/"})
		case "/verify":
			who, err := r.Cookie("app_user")
			if err != nil {
				http.Error(w, "sign in first", http.StatusUnauthorized)
				return
			}
			body, _ := json.Marshal(map[string]string{"flow_id": r.URL.Query().Get("flow_id"), "user_id": who.Value})
			st, _, answer := httpDo(t, http.MethodPost, base+"/oauth/confirm", string(body), http.Header{"Content-Type": {"application/json"}, "OXP-API-Key": {"e2e-app-key"}})
			confirms = append(confirms, fmt.Sprintf("%d %s", st, strings.TrimSpace(answer)))
			var a struct {
				NextURI string `json:"next_uri"`
				Error   string `json:"error"`
			}
			_ = json.Unmarshal([]byte(answer), &a)
			if st != http.StatusOK {
				http.Error(w, "the bridge refused the confirmation: "+a.Error, http.StatusForbidden)
				return
			}
			http.Redirect(w, r, a.NextURI, http.StatusFound)
		}
	}))
	defer app.Close()
	b := oauthBridge(t, port, config, []string{"MCPOTC_API_KEY=e2e-app-key", "MCPOTC_JWT_SECRET=" + oauthJWTSecret},
		"--api-key-env", "MCPOTC_API_KEY", "--jwt-secret-env", "MCPOTC_JWT_SECRET", "--user-verifier-url", app.URL+"/verify")
	oauthAuthorize(t, oauthWaitChallenge(t, b))
	b.waitHealthy(t, 30*time.Second)

	d := otcfDialects[2]
	call := func(user string) *otcfResp {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), otcfCallTimeout)
		defer cancel()
		return b.call(t, ctx, d, map[string]any{"tool_id": "Demo.greet", "input": map[string]any{"name": "user"},
			"context": map[string]any{"user_id": user}}, map[string]string{"OXP-API-Key": "e2e-app-key"})
	}
	challenge := func(user string) (string, string) {
		t.Helper()
		r := call(user)
		_, url, check := otcfChallenge(t, r, user+" without a token")
		return url, check
	}
	signedIn := func(user string) *oauthBrowser {
		br := newOAuthBrowser(t, "")
		br.open(app.URL+"/signin?user="+user, nil)
		return br
	}
	check := func(url string) string {
		t.Helper()
		return otcfShow(b.get(t, strings.TrimPrefix(url, base), nil, nil).Body)
	}

	// Bob's browser completes alice's link: the application confirms bob.
	aliceURL, aliceCheck := challenge("alice")
	if p := signedIn("bob").open(aliceURL, nil); p.Status != http.StatusForbidden || !strings.Contains(p.Body, "refused the confirmation") {
		t.Errorf("bob completing alice's link: %d at %s: %s", p.Status, p.URL, truncate(p.Body, 300))
	}
	if got := check(aliceCheck); !strings.Contains(got, `"status":"failed"`) {
		t.Errorf("alice's check_url after bob: %s, want failed", got)
	}
	if r := call("alice"); r.Status != http.StatusBadRequest {
		t.Errorf("alice after bob's confirmation: %d %s, want a new challenge (no token kept)", r.Status, otcfTrunc(r.Raw))
	}
	if r := call("bob"); r.Status != http.StatusBadRequest {
		t.Errorf("bob after his confirmation of alice's flow: %d %s, want a challenge (no token kept)", r.Status, otcfTrunc(r.Raw))
	}
	t.Logf("attack: alice's link completed in bob's browser; the application confirmed bob: %s; alice's flow failed, no token kept", confirms[len(confirms)-1])

	// The confirmation route needs the application's credentials.
	aliceURL, aliceCheck = challenge("alice")
	br := signedIn("alice")
	p := br.open(aliceURL, func(u *url.URL) bool { return strings.HasPrefix(u.String(), app.URL+"/verify") })
	if p.Status != http.StatusFound || !strings.HasPrefix(p.URL.String(), app.URL+"/verify") {
		t.Fatalf("alice's flow to the application: %d at %s", p.Status, p.URL)
	}
	flow := p.URL.Query().Get("flow_id")
	body := fmt.Sprintf(`{"flow_id":%q,"user_id":"alice"}`, flow)
	if st, _, answer := httpDo(t, http.MethodPost, base+"/oauth/confirm", body, http.Header{"Content-Type": {"application/json"}}); st != http.StatusUnauthorized {
		t.Errorf("a confirmation without credentials: %d %s, want 401", st, answer)
	}
	jwtHdr := http.Header{"Content-Type": {"application/json"}}
	for k, v := range callerJWT(t, oauthJWTSecret, "mallory") {
		jwtHdr.Set(k, v)
	}
	if st, _, answer := httpDo(t, http.MethodPost, base+"/oauth/confirm", body, jwtHdr); st != http.StatusForbidden {
		t.Errorf("a confirmation by mallory's JWT for alice: %d %s, want 403", st, answer)
	}
	if got := check(aliceCheck); got != `{"status":"pending"}` {
		t.Errorf("alice's check_url after the refused confirmations: %s, want pending", got)
	}
	// Her browser goes on to the application, which confirms her.
	if p := br.open(p.URL.String(), nil); p.Status != http.StatusOK || !strings.Contains(p.Body, "Authorized") || !strings.Contains(p.Body, "“alice”") {
		t.Fatalf("alice's confirmation: %d at %s: %s", p.Status, p.URL, truncate(p.Body, 400))
	}
	if got := check(aliceCheck); got != `{"status":"completed"}` {
		t.Errorf("alice's check_url: %s", got)
	}
	if r := call("alice"); r.Status != http.StatusOK || !strings.Contains(string(r.Raw), "Hello, user!") {
		t.Errorf("alice's call: %d %s", r.Status, otcfTrunc(r.Raw))
	}
	_ = oauthLastToken(t, server)
	oauthNoSecrets(t, b)
	t.Log("verifier: without credentials 401, mallory's JWT 403, the application's confirmation for alice completed her flow; her call answered")
}

// otcfChallenge is the one authorization challenge (id, url, check_url)
// of a 400 OTC answer; the test fails when r is not one. what names the
// call in the failure.
func otcfChallenge(t *testing.T, r *otcfResp, what string) (id, url, check string) {
	t.Helper()
	var body struct {
		MissingRequirements struct {
			Authorization []struct {
				ID       string `json:"id"`
				URL      string `json:"url"`
				CheckURL string `json:"check_url"`
			} `json:"authorization"`
		} `json:"missing_requirements"`
	}
	if r.Status != http.StatusBadRequest || json.Unmarshal(r.Raw, &body) != nil || len(body.MissingRequirements.Authorization) != 1 {
		t.Fatalf("%s: HTTP %d %s, want the 400 challenge", what, r.Status, otcfTrunc(r.Raw))
	}
	a := body.MissingRequirements.Authorization[0]
	return a.ID, a.URL, a.CheckURL
}
