//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mcpotc/mcpotc/mcp/oauth"
)

// Browser tests: the authorization pages in headless Chromium (Debian's
// chromium, installed by .ci/run), driven through the Chrome DevTools
// Protocol by github.com/chromedp/chromedp. A real browser differs from an
// HTTP client where this flow is fragile: SameSite cookie rules across
// cross-site redirects and form posts, the Content-Security-Policy of the
// pages, and what a person actually reads. Each page visited is
// screenshotted into a temporary folder (never committed) and its text
// printed in the test log. Every test asserts that no page it showed wrote
// an error to the browser's console (a violation of the pages'
// Content-Security-Policy is one): checkConsoles, which a test that starts
// Chromium cannot leave out.

// chromiumPath is Debian's Chromium.
const chromiumPath = "/usr/bin/chromium"

// chrome is one headless Chromium for a test; each person is a browser
// context of their own (cookies, storage), as two people on two machines.
type chrome struct {
	t     *testing.T
	root  context.Context // the browser's first tab
	shots string          // where the screenshots go
	n     int             // screenshots taken
	mu    sync.Mutex

	people  []*person // every person of the test (checkConsoles)
	checked bool      // checkConsoles ran
}

func startChrome(t *testing.T) *chrome {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if required() {
			t.Fatalf("%s: %v (.ci/run installs Debian's chromium)", chromiumPath, err)
		}
		t.Skipf("%s is not installed (apt-get install chromium)", chromiumPath)
	}
	// The flags of a browser on a closed network, run as root in a
	// sandbox: no background networking (its connections are refused
	// here), a fresh profile.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1000, 700),
	)
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	// The browser starts with a first tab; people get contexts of their own.
	root, cancelRoot := chromedp.NewContext(alloc)
	t.Cleanup(cancelRoot)
	if err := chromedp.Do(root); err != nil {
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	shots, err := os.MkdirTemp("", "mcpotc-browser-"+strings.ReplaceAll(t.Name(), "/", "-")+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)
	c := &chrome{t: t, root: root, shots: shots}
	t.Cleanup(func() {
		c.mu.Lock()
		checked := c.checked
		c.mu.Unlock()
		if !checked && !t.Failed() {
			t.Error("the test never checked its browsers' consoles (chrome.checkConsoles)")
		}
	})
	return c
}

// checkConsoles asserts that no page any person of the test saw wrote an
// error to the console: no violation of a Content-Security-Policy, no
// script error.
func (c *chrome) checkConsoles() {
	c.t.Helper()
	c.mu.Lock()
	c.checked = true
	people := slices.Clone(c.people)
	c.mu.Unlock()
	clean := 0
	for _, p := range people {
		if errs := p.consoleErrors(); len(errs) > 0 {
			c.t.Errorf("%s's browser console: %v", p.name, errs)
		} else {
			clean++
		}
	}
	c.t.Logf("no console errors in the browsers of %d of %d people", clean, len(people))
}

// person is one person's browser: a tab in a browser context of their own,
// the console messages of every page it showed, and who they are at the
// users' OpenID provider ("alice", "bob", or "" for nobody).
type person struct {
	c    *chrome
	name string
	user string
	ctx  context.Context

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

func (c *chrome) person(name, user string) *person {
	c.t.Helper()
	ctx, cancel := chromedp.NewContext(c.root, chromedp.WithNewBrowserContext())
	c.t.Cleanup(cancel)
	p := &person{c: c, name: name, user: user, ctx: ctx}
	c.mu.Lock()
	c.people = append(c.people, p)
	c.mu.Unlock()
	if err := chromedp.Do(ctx); err != nil { // starts the browser (or the context)
		c.t.Fatalf("chromium: %v", err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			p.mu.Lock()
			p.console = append(p.console, m)
			p.mu.Unlock()
		}
	}()
	return p
}

// browserPage is what a person sees.
type browserPage struct {
	URL    string
	Status int // the HTTP status of the page's document (0: not known)
	Title  string
	Text   string
}

// open navigates to u, signs in at the users' provider when its login
// form comes, and returns the page the browser ends on.
func (p *person) open(u string) browserPage {
	p.c.t.Helper()
	pg := p.visit(u)
	if strings.Contains(pg.URL, "/login/username") {
		ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
		defer cancel()
		pg = p.signIn(ctx)
	}
	return pg
}

// visit navigates to u and returns the page the browser ends on, with the
// HTTP status of its document (after the redirects); a sign-in form is
// left as it is.
func (p *person) visit(u string) browserPage {
	p.c.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(u))
	if err != nil {
		p.c.t.Fatalf("%s opening %s: %v", p.name, u, err)
	}
	status := 0
	if resp != nil {
		status = int(resp.Status)
	}
	return p.page(ctx, status)
}

// signIn fills in zitadel/oidc's example login form as the person's user.
func (p *person) signIn(ctx context.Context) browserPage {
	p.c.t.Helper()
	login, ok := map[string]string{"bob": "test-user2"}[p.user]
	if p.user == "alice" {
		host, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hostname`))
		if err != nil {
			p.c.t.Fatal(err)
		}
		login, ok = "test-user@"+host, true
	}
	if !ok {
		p.c.t.Fatalf("%s is asked to sign in and has no account", p.name)
	}
	p.shot("sign-in")
	resp, err := chromedp.RunResponse(ctx,
		chromedp.SendKeys(chromedp.CSS(`#username`), login),
		chromedp.SendKeys(chromedp.CSS(`#password`), "verysecure"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
	)
	if err == nil {
		err = chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`h1`)))
	}
	if err != nil {
		p.c.t.Fatalf("%s signing in as %s: %v", p.name, login, err)
	}
	status := 0
	if resp != nil {
		status = int(resp.Status)
	}
	return p.page(ctx, status)
}

// page reads the current page, whose document came with HTTP status (0:
// not known), screenshots it, and logs its text.
func (p *person) page(ctx context.Context, status int) browserPage {
	p.c.t.Helper()
	if err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS(`body`))); err != nil {
		p.c.t.Fatalf("%s: the page did not load: %v", p.name, err)
	}
	pg := browserPage{Status: status}
	var err error
	if pg.URL, err = chromedp.Run(ctx, chromedp.Location()); err == nil {
		if pg.Title, err = chromedp.Run(ctx, chromedp.Title()); err == nil {
			pg.Text, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		}
	}
	if err != nil {
		p.c.t.Fatalf("%s: reading the page: %v", p.name, err)
	}
	file := p.shot(pg.Title)
	code := ""
	if pg.Status != 0 {
		code = fmt.Sprintf(" (HTTP %d)", pg.Status)
	}
	p.c.t.Logf("%s sees %s%s\n      [%s] %s\n      %s", p.name, shortURL(pg.URL), code, pg.Title, strings.ReplaceAll(strings.TrimSpace(pg.Text), "\n", "\n      "), file)
	return pg
}

// shot writes a screenshot of the person's page into the test's folder.
func (p *person) shot(what string) string {
	p.c.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG (less: JPEG)
	if err != nil {
		p.c.t.Fatalf("%s: screenshot: %v", p.name, err)
	}
	p.c.mu.Lock()
	p.c.n++
	n := p.c.n
	p.c.mu.Unlock()
	name := fmt.Sprintf("%02d-%s-%s.png", n, p.name, strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, what))
	file := filepath.Join(p.c.shots, name)
	if err := os.WriteFile(file, png, 0o600); err != nil {
		p.c.t.Fatal(err)
	}
	return file
}

// consoleErrors are the error messages and exceptions of the pages the
// person saw (a violation of the Content-Security-Policy is one), after a
// moment for the last ones to arrive. The browser's "network" entries are
// not: they report each answer of status 400 or more, which several pages
// are on purpose (a refused link is a 403), and the favicon nobody serves.
func (p *person) consoleErrors() []string {
	time.Sleep(200 * time.Millisecond)
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.console {
		if (m.Type == chromedp.ConsoleError || m.IsException()) && m.Source != "network" {
			out = append(out, m.String()+" ("+m.URL+")")
		}
	}
	return out
}

func shortURL(u string) string {
	if i := strings.Index(u, "?"); i > 0 {
		return u[:i] + "?…"
	}
	return u
}

// The console check can fail: a page whose inline script its own
// Content-Security-Policy forbids is reported as an error.
func TestBrowserConsoleSeesCSPViolations(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", pageCSPForControl)
		_, _ = w.Write([]byte(`<!doctype html><title>control</title><h1>control</h1><script>document.title = "ran"</script>`))
	}))
	defer srv.Close()
	c := startChrome(t)
	p := c.person("control", "")
	pg := p.open(srv.URL)
	if pg.Title != "control" {
		t.Errorf("the inline script ran (title %q): the policy was not enforced", pg.Title)
	}
	errs := p.consoleErrors()
	t.Logf("console errors: %v", errs)
	if len(errs) == 0 || !strings.Contains(strings.Join(errs, " "), "Content Security Policy") {
		t.Errorf("console errors %v, want the CSP violation", errs)
	}
	c.mu.Lock()
	c.checked = true // this console is meant to hold an error
	c.mu.Unlock()
}

// pageCSPForControl is the bridge's pages' policy without a style hash.
const pageCSPForControl = "default-src 'none'"

// TestBrowserAuthorizationPages: serve-otc per user with user_verification
// oidc in front of the TypeScript SDK's OAuth-protected example server,
// zitadel/oidc's example OpenID Provider for the users' sign-in, and
// people in Chromium: the operator authorizes the catalog; bob opens
// alice's link and, signed in as himself, is refused with a page that
// says so; alice signs in and authorizes; her callback replayed, and a
// link whose state is unknown (expired and forgotten), get the page that
// says the link is not good (TestBrowserExpiredLink: links that expired
// while the bridge still knew them). Then the MCP host → serve-mcp →
// serve-otc chain: the host's -32042 URL opened by bob's browser, signed
// in, and the host's call answered. Every page holds its Content-Security-Policy: no
// console error anywhere.
func TestBrowserAuthorizationPages(t *testing.T) {
	c := startChrome(t)
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	pu := oauthPerUser(t, t.TempDir(), base)
	b := oauthBridge(t, port, pu.config, pu.env, pu.args...)
	people := map[string]*person{
		"operator": c.person("operator", ""),
		"alice":    c.person("alice", "alice"),
		"bob":      c.person("bob", "bob"),
		"stranger": c.person("stranger", ""),
	}
	expect := func(pg browserPage, status int, title string, texts ...string) {
		t.Helper()
		expectBridgePage(t, pg, status, title, texts...)
	}

	// The operator: the URL from the log.
	expect(people["operator"].open(oauthWaitChallenge(t, b)), http.StatusOK, "Authorized", "The bridge can now reach the tool server “demo”.")
	b.waitHealthy(t, 30*time.Second)

	d := otcfDialects[2]
	challenge := func(user string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), otcfCallTimeout)
		defer cancel()
		r := b.call(t, ctx, d, map[string]any{"tool_id": "Demo.greet", "input": map[string]any{"name": "you"},
			"context": map[string]any{"user_id": user}}, pu.apiKey)
		body, _ := r.Body.(map[string]any)
		mr, _ := body["missing_requirements"].(map[string]any)
		as, _ := mr["authorization"].([]any)
		if r.Status != 400 || len(as) != 1 {
			t.Fatalf("%s's call: %d %s, want the challenge", user, r.Status, otcfTrunc(r.Raw))
		}
		return as[0].(map[string]any)["url"].(string)
	}
	alice := challenge(oauthUserSub("alice"))

	// Bob, sent alice's link.
	expect(people["bob"].open(alice), http.StatusForbidden, "This authorization link is for another user",
		"You are signed in as “id2”", "Nothing was authorized", "If someone sent you this link, do not use it.")
	// Alice.
	done := people["alice"].open(alice)
	expect(done, http.StatusOK, "Authorized", "The bridge can now reach the tool server “demo” for the user “id1”.", "You can close this window")
	// Her callback again (the browser's history, a reload).
	expect(people["alice"].open(done.URL), http.StatusBadRequest, "Unknown or expired authorization link", "use the tool again")
	// A link that expired and was forgotten (or never was).
	expect(people["stranger"].open(base+"/oauth/authorize/NOSUCHSTATE7Q2Z"), http.StatusNotFound, "Unknown or expired authorization link",
		"Links are good for 10 minutes and for one use")
	// The used link, opened again.
	expect(people["alice"].open(alice), http.StatusGone, "This authorization link was already used")

	// The chain: an MCP host through serve-mcp (its user id2, bob).
	mcpConfig := filepath.Join(t.TempDir(), "serve-mcp.json")
	if err := os.WriteFile(mcpConfig, []byte(fmt.Sprintf(`{"upstreams": [{"name": "bridge", "url": %q, "user_id": %q, "api_key_env": "MCPOTC_API_KEY"}]}`,
		base, oauthUserSub("bob"))), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	front := startBridge(t, ctx, "http", []string{"--config", mcpConfig}, []string{"MCPOTC_API_KEY=e2e-app-key"})
	cs := front.connect(t, ctx, clientOpts{protocol: proto20251125, urlElicitation: true})
	var name string
	for _, tool := range listTools(t, ctx, cs) {
		if strings.HasSuffix(tool.Name, "greet") && !strings.Contains(tool.Name, "multi") {
			name = tool.Name
		}
	}
	args := map[string]any{"name": "host"}
	we := wantRPCError(t, ctx, cs, name, args, -32042)
	var data struct {
		Elicitations []struct{ URL string } `json:"elicitations"`
	}
	if err := json.Unmarshal(we.Data, &data); err != nil || len(data.Elicitations) != 1 {
		t.Fatalf("-32042 data %s (%v)", we.Data, err)
	}
	expect(people["bob"].open(data.Elicitations[0].URL), http.StatusOK, "Authorized", "for the user “id2”")
	if res := mustCall(t, ctx, cs, name, args); res.IsError || !strings.Contains(jsonString(res), "Hello, host!") {
		t.Errorf("the host's call after bob authorized: %s", jsonString(res))
	}

	c.checkConsoles()
}

// startUsersOP starts testdata/users_op.mjs (oidc-provider) on a port of
// its own for the bridge at bridge; it returns its issuer.
func startUsersOP(t *testing.T, bridge string) string {
	t.Helper()
	port := freePort(t)
	script, err := filepath.Abs(filepath.Join("testdata", "users_op.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, context.Background(), nodeBin(t), []string{script},
		append(peerEnv(t), "MCPOTC_PEERS="+peersDir(t), fmt.Sprintf("OP_PORT=%d", port), "OP_REDIRECT="+bridge+"/oauth/login"))
	issuer := fmt.Sprintf("http://127.0.0.1:%d", port)
	p.waitHTTP(t, issuer+"/.well-known/openid-configuration", 30*time.Second)
	return issuer
}

// act runs steps in the person's tab and returns the page it ends on.
func (p *person) act(what string, steps ...chromedp.Action[chromedp.Void]) browserPage {
	p.c.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.c.t.Fatalf("%s: %s: %v", p.name, what, err)
	}
	return p.page(ctx, 0)
}

// TestBrowserDeclineAndVerifier: the other ways a flow goes.
//
// Declined at the provider: with oidc-provider (panva/node-oidc-provider,
// its own sign-in pages) as the users' OpenID provider, alice follows her
// link and presses "[ Cancel ]": the provider answers access_denied and
// the bridge's page says the sign-in failed and nothing was authorized;
// her flow stays open, and she then signs in and authorizes it.
//
// user_verification verifier: the application (a small server that knows
// its signed-in user by its own cookie and holds the API key) confirms
// each flow for its user through POST /oauth/confirm. Alice's browser,
// signed in at the application, ends on the bridge's "Authorized" page;
// bob's browser, signed in as bob, completing alice's link ends on the
// application's refusal, and alice's flow fails.
func TestBrowserDeclineAndVerifier(t *testing.T) {
	c := startChrome(t)
	d := otcfDialects[2]
	challengeOn := func(b *otcfBridge, user string) (string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), otcfCallTimeout)
		defer cancel()
		r := b.call(t, ctx, d, map[string]any{"tool_id": "Demo.greet", "input": map[string]any{"name": "you"},
			"context": map[string]any{"user_id": user}}, map[string]string{"OXP-API-Key": "e2e-app-key"})
		_, url, check := otcfChallenge(t, r, user+"'s call")
		return url, check
	}
	checkOn := func(b *otcfBridge, u string) string {
		return otcfShow(b.get(t, strings.TrimPrefix(u, b.base), nil, nil).Body)
	}
	expectPage := func(pg browserPage, title string, texts ...string) {
		t.Helper()
		if !strings.HasPrefix(pg.Title, title) {
			t.Errorf("page %q at %s, want %q", pg.Title, shortURL(pg.URL), title)
		}
		for _, s := range texts {
			if !strings.Contains(pg.Text, s) {
				t.Errorf("page %q does not say %q:\n%s", pg.Title, s, pg.Text)
			}
		}
	}
	config := func(verification string) string {
		mcpPort := freePort(t)
		oauthTSServerOn(t, mcpPort, freePort(t), "--oauth-strict")
		file := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(file, []byte(fmt.Sprintf(`{"mcpServers": {"demo": {"url": "http://localhost:%d/mcp", "toolkit": "Demo", "oauth": {"per_user": true, "user_verification": %q}}}}`,
			mcpPort, verification)), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	env := []string{"MCPOTC_API_KEY=e2e-app-key", "MCPOTC_OP_SECRET=op-secret"}

	// Declined at the provider.
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	issuer := startUsersOP(t, base)
	b := oauthBridge(t, port, config("oidc"), env, "--api-key-env", "MCPOTC_API_KEY",
		"--user-oidc-issuer", issuer, "--user-oidc-client-id", "mcpotc", "--user-oidc-client-secret-env", "MCPOTC_OP_SECRET")
	c.person("operator", "").open(oauthWaitChallenge(t, b))
	b.waitHealthy(t, 30*time.Second)
	link, check := challengeOn(b, "alice")
	alice := c.person("alice", "alice")
	pg := alice.open(link)
	expectPage(pg, "Sign-in", "[ Cancel ]")
	// Each step waits for the page it leaves to go (its h1 would do for the
	// next page's while the browser still navigates).
	pg = alice.act("pressing Cancel at the provider", chromedp.Click(chromedp.CSS(`a[href$="/abort"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`a[href$="/abort"]`)), chromedp.WaitVisible(chromedp.CSS(`h1`)))
	expectPage(pg, "Sign-in failed", "the sign-in provider answered access_denied", "Nothing was authorized")
	if got := checkOn(b, check); got != `{"status":"pending"}` {
		t.Errorf("check_url after the decline: %s, want pending (alice may still authorize)", got)
	}
	alice.open(link)
	alice.act("signing in at the provider",
		chromedp.SendKeys(chromedp.CSS(`input[name=login]`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "any"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`input[name=login]`)),
		chromedp.WaitVisible(chromedp.CSS(`h1`)))
	pg = alice.act("consenting at the provider", chromedp.Click(chromedp.CSS(`button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`h1.ok`)))
	expectPage(pg, "Authorized", "for the user “alice”")
	if got := checkOn(b, check); got != `{"status":"completed"}` {
		t.Errorf("check_url after alice authorized: %s", got)
	}

	// user_verification verifier.
	port = freePort(t)
	base = fmt.Sprintf("http://127.0.0.1:%d", port)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/signin":
			http.SetCookie(w, &http.Cookie{Name: "app_user", Value: r.URL.Query().Get("user"), Path: "/"})
			fmt.Fprintf(w, "<!doctype html><title>Signed in</title><h1>Signed in to the application as %s</h1>", r.URL.Query().Get("user"))
		case "/verify":
			who, err := r.Cookie("app_user")
			if err != nil {
				http.Error(w, "sign in first", http.StatusUnauthorized)
				return
			}
			body := fmt.Sprintf(`{"flow_id":%q,"user_id":%q}`, r.URL.Query().Get("flow_id"), who.Value)
			st, _, answer := httpDo(t, http.MethodPost, base+"/oauth/confirm", body, http.Header{"Content-Type": {"application/json"}, "OXP-API-Key": {"e2e-app-key"}})
			var a struct{ NextURI, Error string }
			_ = json.Unmarshal([]byte(strings.ReplaceAll(answer, "next_uri", "NextURI")), &a)
			if st != http.StatusOK {
				w.WriteHeader(http.StatusForbidden)
				fmt.Fprintf(w, "<!doctype html><title>Not confirmed</title><h1>The application did not confirm this authorization</h1><p>%s</p>", a.Error)
				return
			}
			http.Redirect(w, r, a.NextURI, http.StatusFound)
		}
	}))
	defer app.Close()
	b = oauthBridge(t, port, config("verifier"), env, "--api-key-env", "MCPOTC_API_KEY", "--user-verifier-url", app.URL+"/verify")
	c.person("operator2", "").open(oauthWaitChallenge(t, b))
	b.waitHealthy(t, 30*time.Second)
	link, check = challengeOn(b, "alice")
	bob := c.person("bob", "")
	bob.open(app.URL + "/signin?user=bob")
	expectPage(bob.open(link), "Not confirmed", "the flow was issued to another user")
	if got := checkOn(b, check); !strings.Contains(got, `"status":"failed"`) {
		t.Errorf("check_url after bob: %s, want failed", got)
	}
	link, check = challengeOn(b, "alice")
	alice = c.person("alice-app", "")
	alice.open(app.URL + "/signin?user=alice")
	expectPage(alice.open(link), "Authorized", "for the user “alice”")
	if got := checkOn(b, check); got != `{"status":"completed"}` {
		t.Errorf("check_url after alice: %s", got)
	}
	c.checkConsoles() // the operators' too
}

// expectBridgePage checks a page of the bridge: its title, the HTTP status
// of its document (0: not checked) and texts; and that it repeats nothing
// its URL carried (a state, a flow id, an authorization server's code or
// iss): the pages speak in the bridge's own words only.
func expectBridgePage(t *testing.T, pg browserPage, status int, title string, texts ...string) {
	t.Helper()
	if !strings.HasPrefix(pg.Title, title) {
		t.Errorf("page %q at %s, want %q", pg.Title, shortURL(pg.URL), title)
	}
	if status != 0 && pg.Status != status {
		t.Errorf("page %q at %s: HTTP %d, want %d", pg.Title, shortURL(pg.URL), pg.Status, status)
	}
	for _, s := range texts {
		if !strings.Contains(pg.Text, s) {
			t.Errorf("page %q does not say %q:\n%s", pg.Title, s, pg.Text)
		}
	}
	u, err := url.Parse(pg.URL)
	if err != nil {
		t.Fatalf("page URL %q: %v", pg.URL, err)
	}
	carried := strings.Split(u.Path, "/")
	for _, vs := range u.Query() {
		carried = append(carried, vs...)
	}
	for _, v := range carried {
		// 16: a state, flow id or code; not a route's own name.
		if len(v) >= 16 && strings.Contains(pg.Text, v) {
			t.Errorf("page %q repeats %q from its URL:\n%s", pg.Title, v, pg.Text)
		}
	}
}

// offsetClock is the wall clock plus jumps: time passes as usual, and a
// test moves it on by the minutes a person would have taken.
type offsetClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *offsetClock) advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// TestBrowserExpiredLink: authorization links that really expired — the
// bridge's clock says more than oauth.PendingTTL (10 minutes) passed since
// the challenge — in each place a person can be when it happens, and then
// the honest flow completing.
//
// How the time passes: the bridge's /oauth/ routes are its oauth.Manager,
// run here in the test's process with the clock of oauth.Options.Now
// (the package's own documented clock), moved on by the minutes a person
// would take. The link's lifetime is not a setting of serve-otc: it bounds
// how long a forwarded or phished link stays good (the trust model), and
// no operator needs it longer or shorter, so the binary gets no flag, and
// no environment variable, for a test. Everything else is real: the
// TypeScript SDK's OAuth-protected example server and its authorization
// server, zitadel/oidc's example OpenID Provider for the sign-in
// (user_verification oidc), Chromium.
//
//   - The link opened after it expired: 410, "This authorization link has
//     expired", nothing asked of the person; check_url says failed, "the
//     authorization URL expired".
//   - Opened in time, expired while the person was at the sign-in: the
//     provider's answer reaches the bridge after the 10 minutes: 410, the
//     same page; nothing bound.
//   - Expired while the person was at the authorization server: the
//     callback comes after the 10 minutes: 410, the same page; its code is
//     not exchanged (no token: the next request is challenged again).
//   - Then a new link, opened and finished in time: "Authorized", and the
//     upstream takes the token.
//
// No page repeats what its URL carried; no console error anywhere.
func TestBrowserExpiredLink(t *testing.T) {
	c := startChrome(t)
	mcpPort := freePort(t)
	oauthTSServerOn(t, mcpPort, freePort(t), "--oauth-strict")
	upstreamURL := fmt.Sprintf("http://localhost:%d/mcp", mcpPort)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	issuer := usersOP(t, base)
	clock := &offsetClock{}
	m, err := oauth.NewManager(&oauth.Options{
		PublicURL: base,
		Now:       clock.Now,
		Logger:    slog.New(slog.NewTextHandler(t.Output(), nil)),
		UserOIDC:  &oauth.UserOIDC{Issuer: issuer, ClientID: "mcpotc", ClientSecret: "op-secret"},
	})
	if err != nil {
		t.Fatal(err)
	}
	client, err := m.Client(oauth.Config{Upstream: "demo", ServerURL: upstreamURL, PerUser: true, UserVerification: oauth.VerifyOIDC})
	if err != nil {
		t.Fatal(err)
	}
	// lateCallback makes the next callback come after the link's
	// lifetime, as when the person lingered at the authorization server.
	var lateCallback atomic.Bool
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/callback" && lateCallback.CompareAndSwap(true, false) {
			clock.advance(oauth.PendingTTL)
		}
		m.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	// alice's requests to the upstream, as serve-otc makes them for her
	// (sub id1 at the users' provider).
	ctx := oauth.WithUser(oauth.WithCaller(context.Background(), "app"), oauthUserSub("alice"))
	request := func() (int, error) {
		t.Helper()
		auth, err := client.Authorization(ctx)
		if err != nil {
			return 0, err
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, http.MethodPost, upstreamURL, strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("the upstream: %v", err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			_, err = client.Unauthorized(ctx, auth, resp)
		}
		return resp.StatusCode, err
	}
	challenge := func() (string, string) {
		t.Helper()
		_, err := request()
		var ar *oauth.AuthorizationRequired
		if !errors.As(err, &ar) || ar.Operator {
			t.Fatalf("alice's request without a token: %v, want her challenge", err)
		}
		return ar.URL, ar.CheckURL
	}
	check := func(u string) string {
		t.Helper()
		st, _, body := httpDo(t, http.MethodGet, u, "", nil)
		return fmt.Sprintf("%d %s", st, strings.TrimSpace(body))
	}
	const checkExpired = `200 {"error":"the authorization URL expired","status":"failed"}`
	expired := func(pg browserPage) {
		t.Helper()
		expectBridgePage(t, pg, http.StatusGone, "This authorization link has expired",
			"The authorization for the tool server “demo” was not completed within 10 minutes of the link being given out",
			"Nothing was authorized.", "Go back to the application and use the tool again: it gives you a new link.")
	}
	alice := c.person("alice", "alice")

	// 1. The link opened after it expired.
	link, checkURL := challenge()
	clock.advance(oauth.PendingTTL)
	expired(alice.visit(link))
	if got := check(checkURL); got != checkExpired {
		t.Errorf("check_url of the expired link: %s, want %s", got, checkExpired)
	}

	// 2. Opened in time; the sign-in at the provider ends after the link
	// expired.
	link, checkURL = challenge()
	clock.advance(oauth.PendingTTL - time.Minute)
	expectBridgePage(t, alice.visit(link), http.StatusOK, "Login")
	clock.advance(2 * time.Minute)
	signInCtx, cancel := context.WithTimeout(alice.ctx, 30*time.Second)
	expired(alice.signIn(signInCtx))
	cancel()
	if got := check(checkURL); got != checkExpired {
		t.Errorf("check_url of the link that expired during the sign-in: %s, want %s", got, checkExpired)
	}

	// 3. Signed in, sent to the authorization server, back after the link
	// expired: the code is not exchanged.
	link, checkURL = challenge()
	lateCallback.Store(true)
	pg := alice.open(link)
	if !strings.Contains(pg.URL, "/oauth/callback?") {
		t.Errorf("alice's late answer ended at %s, want the bridge's callback", shortURL(pg.URL))
	}
	expired(pg)
	if got := check(checkURL); got != checkExpired {
		t.Errorf("check_url of the link that expired at the authorization server: %s, want %s", got, checkExpired)
	}
	if st, err := request(); !errors.As(err, new(*oauth.AuthorizationRequired)) {
		t.Errorf("alice's request after the late callback: %d %v, want a new challenge (no token kept)", st, err)
	}

	// 4. The honest flow: a new link, finished in time.
	link, checkURL = challenge()
	expectBridgePage(t, alice.open(link), http.StatusOK, "Authorized",
		"The bridge can now reach the tool server “demo” for the user “id1”.", "You can close this window")
	if got := check(checkURL); got != `200 {"status":"completed"}` {
		t.Errorf("check_url after alice authorized: %s", got)
	}
	if st, err := request(); st != http.StatusOK || err != nil {
		t.Errorf("alice's request with her token: %d %v, want 200", st, err)
	}
	c.checkConsoles()
}

// TestBrowserUserVerificationNone: serve-otc per user with
// user_verification none, in the deployment it is meant for: a trusted
// single-operator one, where one person runs the application and serve-otc
// for themselves (the user ids are their own profiles), so that a link
// never reaches anyone else and there is nobody to tell apart. serve-otc
// says at start that this is safe for one user only. The person who opens
// a link goes straight to the authorization server (no sign-in first), and
// the bridge's page says what it did not check: that they are the user the
// link is for, named, and that the account they used now serves that
// user's calls. The flow completes and the call is answered. A user id
// with markup (the application names its users; a name can come from
// anywhere) is shown as text: no element is made of it, nothing loads, no
// console error.
func TestBrowserUserVerificationNone(t *testing.T) {
	c := startChrome(t)
	mcpPort := freePort(t)
	oauthTSServerOn(t, mcpPort, freePort(t), "--oauth-strict")
	config := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`{"mcpServers": {"demo": {"url": "http://localhost:%d/mcp", "toolkit": "Demo", "oauth": {"per_user": true, "user_verification": "none"}}}}`,
		mcpPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	b := oauthBridge(t, port, config, []string{"MCPOTC_API_KEY=e2e-app-key"}, "--api-key-env", "MCPOTC_API_KEY")
	if ls := b.logs(func(m map[string]any) bool {
		return m["level"] == "warn" && m["upstream"] == "demo" && strings.HasPrefix(fmt.Sprint(m["message"]), "user_verification none: ")
	}); len(ls) != 1 {
		t.Errorf("serve-otc's start-up warning about user_verification none: %d lines, want 1", len(ls))
	}
	operator := c.person("operator", "")
	pg := operator.open(oauthWaitChallenge(t, b))
	expectBridgePage(t, pg, http.StatusOK, "Authorized", "The bridge can now reach the tool server “demo”.")
	if strings.Contains(pg.Text, "did not check") {
		t.Errorf("the operator's page speaks of user verification:\n%s", pg.Text)
	}
	b.waitHealthy(t, 30*time.Second)

	d := otcfDialects[2]
	call := func(user string) *otcfResp {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), otcfCallTimeout)
		defer cancel()
		return b.call(t, ctx, d, map[string]any{"tool_id": "Demo.greet", "input": map[string]any{"name": "you"},
			"context": map[string]any{"user_id": user}}, map[string]string{"OXP-API-Key": "e2e-app-key"})
	}
	challenge := func(user string) (string, string) {
		t.Helper()
		r := call(user)
		_, url, check := otcfChallenge(t, r, user+"'s call")
		return url, check
	}
	check := func(u string) string {
		return otcfShow(b.get(t, strings.TrimPrefix(u, b.base), nil, nil).Body)
	}
	unverified := func(user string) []string {
		return []string{
			"The bridge can now reach the tool server “demo” for the user “" + user + "”.",
			"The bridge did not check that you are the user “" + user + "”: this tool server is set up without user verification, so whoever opens the link connects their account.",
			"The account you just used now serves that user's calls. If you are not “" + user + "”, tell the application's operator.",
			"You can close this window",
		}
	}

	// The person the link is for.
	link, checkURL := challenge("alice")
	alice := c.person("alice", "")
	expectBridgePage(t, alice.open(link), http.StatusOK, "Authorized", unverified("alice")...)
	if got := check(checkURL); got != `{"status":"completed"}` {
		t.Errorf("check_url after alice authorized: %s", got)
	}
	if r := call("alice"); r.Status != http.StatusOK || !strings.Contains(string(r.Raw), "Hello, you!") {
		t.Errorf("alice's call after she authorized: %d %s", r.Status, otcfTrunc(r.Raw))
	}

	// A user id with markup, named by the application.
	const marked = `eve<img src="/x" onerror="document.title='ran'">`
	link, _ = challenge(marked)
	eve := c.person("eve", "")
	pg = eve.open(link)
	expectBridgePage(t, pg, http.StatusOK, "Authorized", unverified(marked)...)
	ctx, cancel := context.WithTimeout(eve.ctx, 10*time.Second)
	images, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.images.length`))
	cancel()
	if err != nil || images != 0 {
		t.Errorf("eve's page has %d images (%v): the user id became markup", images, err)
	}
	if r := call(marked); r.Status != http.StatusOK {
		t.Errorf("eve's call after she authorized: %d %s", r.Status, otcfTrunc(r.Raw))
	}
	c.checkConsoles()
}
