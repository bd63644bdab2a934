//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
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
