//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// oauthScenarios are the conformance runner's client auth scenarios that
// serve-otc passes: every auth/* of 2025-11-25 and 2025-03-26, and the
// client credentials extensions.
var oauthScenarios = []string{
	"auth/metadata-default",
	"auth/metadata-var1",
	"auth/metadata-var2",
	"auth/metadata-var3",
	"auth/basic-cimd",
	"auth/scope-from-www-authenticate",
	"auth/scope-from-scopes-supported",
	"auth/scope-omitted-when-undefined",
	"auth/scope-step-up",
	"auth/scope-retry-limit",
	"auth/token-endpoint-auth-basic",
	"auth/token-endpoint-auth-post",
	"auth/token-endpoint-auth-none",
	"auth/pre-registration",
	"auth/2025-03-26-oauth-metadata-backcompat",
	"auth/2025-03-26-oauth-endpoint-fallback",
	"auth/client-credentials-basic",
	"auth/client-credentials-jwt",
}

// TestOAuthConformance runs the official conformance runner's client auth
// scenarios against serve-otc: the runner starts an MCP server protected by
// its authorization server and runs internal/e2e/authclient, which starts
// serve-otc against it, authorizes it as a user would, and calls a tool
// over OTC. The runner's own checks decide; each scenario's result is
// logged (CI prints them: step "OAuth conformance").
func TestOAuthConformance(t *testing.T) {
	bin := buildMcpotc(t)
	client, err := goBuild(t, "./authclient", "authclient")
	if err != nil {
		t.Fatalf("building authclient: %v", err)
	}
	out, stderr, err := runPeer(t, time.Minute, "conformance", "list", "--client")
	if err != nil {
		t.Fatalf("conformance list --client: %v\n%s%s", err, out, stderr)
	}
	for _, s := range oauthScenarios {
		if !strings.Contains(out, "- "+s+" ") {
			t.Errorf("the conformance runner has no scenario %s", s)
		}
	}
	// Every auth scenario of the two protocol revisions must be listed above.
	for _, m := range regexp.MustCompile(`- (auth/\S+) \[([^\]]*)\]`).FindAllStringSubmatch(out, -1) {
		if (strings.Contains(m[2], "2025-11-25") || strings.Contains(m[2], "2025-03-26")) && !slices.Contains(oauthScenarios, m[1]) {
			t.Errorf("conformance scenario %s (%s) is not run", m[1], m[2])
		}
	}
	t.Setenv("MCPOTC_BIN", bin)
	results := t.TempDir()
	for _, s := range oauthScenarios {
		dir := filepath.Join(results, strings.ReplaceAll(s, "/", "_"))
		out, stderr, err := runPeer(t, 2*time.Minute, "conformance", "client", "--command", client, "--scenario", s, "--output-dir", dir)
		failed := conformanceFailures(t, dir)
		if err != nil || len(failed) > 0 {
			t.Errorf("%s: FAIL (%v) %s\n%s%s", s, err, strings.Join(failed, "; "), truncate(out, 8000), truncate(stderr, 4000))
			continue
		}
		t.Logf("%s: PASS", s)
	}
}

// conformanceFailures reads the checks.json the runner wrote below dir and
// returns the checks that failed.
func conformanceFailures(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "auth", "*", "checks.json"))
	if len(files) != 1 {
		return []string{"no checks.json written"}
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		return []string{err.Error()}
	}
	var checks []struct {
		ID, Name, Status, Description string
	}
	if err := json.Unmarshal(data, &checks); err != nil {
		return []string{"checks.json: " + err.Error()}
	}
	var failed []string
	for _, c := range checks {
		if c.Status == "FAILURE" {
			failed = append(failed, c.ID+": "+c.Description)
		}
	}
	if len(checks) == 0 {
		failed = append(failed, "no checks")
	}
	return failed
}

// oauthTSServer starts the TypeScript SDK's example MCP server with its
// demo OAuth authorization server (--oauth-strict: tokens must name the
// server as their resource) and returns the MCP endpoint.
func oauthTSServer(t *testing.T) string {
	t.Helper()
	mcpPort := freePort(t)
	oauthTSServerOn(t, mcpPort, freePort(t), "--oauth-strict")
	return fmt.Sprintf("http://localhost:%d/mcp", mcpPort)
}

// oauthTSServerOn starts it on the given ports with mode (--oauth-strict,
// or --oauth: the authorization server issues tokens for any resource); it
// prints the token of each request it authenticates on stdout.
func oauthTSServerOn(t *testing.T, mcpPort, authPort int, mode string) *proc {
	t.Helper()
	script := filepath.Join(peersDir(t), "@modelcontextprotocol", "sdk", "dist", "esm", "examples", "server", "simpleStreamableHttp.js")
	p := startProcess(t, context.Background(), nodeBin(t), []string{script, "--oauth", mode},
		[]string{"MCP_PORT=" + strconv.Itoa(mcpPort), "MCP_AUTH_PORT=" + strconv.Itoa(authPort)})
	p.waitHTTP(t, fmt.Sprintf("http://localhost:%d/.well-known/oauth-authorization-server", authPort), 30*time.Second)
	p.waitHTTP(t, fmt.Sprintf("http://localhost:%d/.well-known/oauth-protected-resource/mcp", mcpPort), 30*time.Second)
	return p
}

// oauthBridge starts serve-otc on a port of its own (the OAuth redirect
// URL names it) with config and extra args.
func oauthBridge(t *testing.T, port int, config string, env []string, args ...string) *otcfBridge {
	t.Helper()
	bin := buildMcpotc(t)
	full := append([]string{"serve-otc", "--listen", "127.0.0.1:" + strconv.Itoa(port), "--config", config, "--log-level", "debug"}, args...)
	p := startProcess(t, context.Background(), bin, full, env)
	otcfWaitLog(t, p, otcfStartTimeout, "the bridge to listen", func(m map[string]any) bool {
		return m["message"] == "serving OTC for MCP servers"
	})
	return &otcfBridge{p: p, base: "http://127.0.0.1:" + strconv.Itoa(port), bin: bin}
}

// oauthWaitChallenge waits until /health says the operator must authorize
// the bridge, checks that the body names no URL (the operator's URL is in
// the log only: whoever opened it first would bind every caller to their
// account), and returns the URL from the log.
func oauthWaitChallenge(t *testing.T, b *otcfBridge) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := b.get(t, "/health", nil, nil)
		body, _ := r.Body.(map[string]any)
		if r.Status == http.StatusServiceUnavailable && body["status"] == "authorization_required" {
			if strings.Contains(string(r.Raw), "/oauth/") {
				t.Errorf("/health names an authorization URL: %s", otcfTrunc(r.Raw))
			}
			if r := b.get(t, "/ready", nil, nil); strings.Contains(string(r.Raw), "/oauth/") {
				t.Errorf("/ready names an authorization URL: %s", otcfTrunc(r.Raw))
			}
			return oauthOperatorURL(t, b, "demo")
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health never asked for an authorization; last: %d %s", r.Status, otcfTrunc(r.Raw))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// oauthAuthorize opens url in a new browser that signs in nowhere (the
// operator's authorization; the demo authorization server approves at
// once and redirects to the bridge's callback).
func oauthAuthorize(t *testing.T, url string) {
	t.Helper()
	newOAuthBrowser(t, "").authorize(url)
}

// TestOAuthSharedTypeScriptServer: serve-otc reaches the TypeScript SDK's
// OAuth-protected example server in shared mode. Before the operator
// authorizes, /health is 503 authorization_required with the URL and a
// call gets the OTC challenge; opening the URL completes the flow, check_url
// says completed, the catalog arrives and calls work. The token survives a
// restart (file store): no new authorization. With another key the
// record does not decrypt and the bridge asks again.
func TestOAuthSharedTypeScriptServer(t *testing.T) {
	endpoint := oauthTSServer(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "config.json")
	cfg := fmt.Sprintf(`{"mcpServers": {"demo": {"url": %q, "toolkit": "Demo", "oauth": {}}}}`, endpoint)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	store := "file:" + filepath.Join(dir, "tokens.json")
	env := []string{"MCPOTC_TOKEN_KEY=" + key}
	port := freePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	b := oauthBridge(t, port, config, env, "--token-store", store, "--token-key-env", "MCPOTC_TOKEN_KEY")

	url := oauthWaitChallenge(t, b)
	if errs := otcfMatch("", map[string]any{
		"status":    "authorization_required",
		"upstreams": map[string]any{"demo": "waiting for the operator to authorize the bridge (OAuth): the URL is in the bridge's log"},
	}, b.get(t, "/health", nil, nil).Body); len(errs) > 0 {
		t.Errorf("/health: %s", strings.Join(errs, "; "))
	}
	// /oauth/ is behind the Host check (issue 25, item 13): a page served
	// under a rebound name cannot drive the operator's flow; the real host
	// opens it (below).
	rebound, _ := http.NewRequest(http.MethodGet, url, nil)
	rebound.Host = "attacker.example"
	if resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(rebound); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("the operator's authorization URL under Host attacker.example: %d, want 403", resp.StatusCode)
		}
	}
	// An upstream waiting for its operator does not hold the tool list
	// (docs/otc-front.md, Start-up): GET /tools answers, without its tools.
	if r := b.get(t, "/tools", map[string]string{"OXP-Version": "1.0"}, nil); r.Status != http.StatusOK || otcfShow(r.Body) != `{"items":[]}` {
		t.Errorf("GET /tools while the operator has not authorized: %d %s", r.Status, otcfTrunc(r.Raw))
	}

	// A call now is told to wait for the operator: the URL is not a
	// caller's to open.
	d := otcfDialects[0]
	check := strings.Replace(url, "/oauth/authorize/", "/oauth/check/", 1)
	b.expect(t, d, map[string]any{"tool_id": "Demo.greet", "input": map[string]any{"name": "x"}}, nil, http.StatusBadRequest,
		map[string]any{
			"message":           "Tool server temporarily unavailable: the bridge waits for its operator to authorize it",
			"developer_message": "MCP server demo needs the bridge's operator to authorize the bridge (OAuth): the URL to open is in serve-otc's log",
		})
	if r := b.get(t, strings.TrimPrefix(check, base), nil, nil); r.Status != http.StatusOK || otcfShow(r.Body) != `{"status":"pending"}` {
		t.Errorf("check_url before: %d %s", r.Status, otcfTrunc(r.Raw))
	}

	oauthAuthorize(t, url)
	if r := b.get(t, strings.TrimPrefix(check, base), nil, nil); r.Status != http.StatusOK || otcfShow(r.Body) != `{"status":"completed"}` {
		t.Errorf("check_url after: %d %s", r.Status, otcfTrunc(r.Raw))
	}
	b.waitHealthy(t, 30*time.Second)
	greet := func(b *otcfBridge) {
		t.Helper()
		b.expect(t, d, map[string]any{"tool_id": "Demo.greet", "input": map[string]any{"name": "OAuth"}}, nil, http.StatusOK, otcfOK("Hello, OAuth!"))
	}
	greet(b)
	b.checkLogs(t)
	oauthNoSecrets(t, b)
	b.stop(t)

	// Restart with the same store and key: no authorization asked.
	b = oauthBridge(t, port, config, env, "--token-store", store, "--token-key-env", "MCPOTC_TOKEN_KEY")
	b.waitHealthy(t, 30*time.Second)
	greet(b)
	if ls := b.logs(func(m map[string]any) bool {
		return strings.Contains(fmt.Sprint(m["message"]), "needs an authorization")
	}); len(ls) > 0 {
		t.Errorf("after a restart with the file store the bridge asked for an authorization: %s", otcfShow(ls[0]))
	}
	t.Log("shared mode: authorized once; serve-otc restarted with the file store: /health 200 and Demo.greet answered, no new authorization")

	b.stop(t)

	// Another key: the store's records do not open under it. serve-otc
	// refuses to start and says why (before: it read as no tokens, and
	// every user had to authorize again, silently).
	other := []string{"MCPOTC_TOKEN_KEY=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{8}, 32))}
	p := startProcess(t, context.Background(), b.bin, []string{"serve-otc", "--listen", "127.0.0.1:" + strconv.Itoa(port), "--config", config,
		"--token-store", store, "--token-key-env", "MCPOTC_TOKEN_KEY"}, other)
	err := p.Wait(30 * time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(p.Stderr(), "the token store's records were sealed with another key") {
		t.Errorf("serve-otc with another --token-key-env: %v: %s", err, truncate(p.Stderr(), 800))
	}
	t.Log("with another key serve-otc exits 2: \"--token-key-env: the token store's records were sealed with another key …\"")
}

// oauthNoSecrets checks that nothing token-like reached the bridge's logs.
func oauthNoSecrets(t *testing.T, b *otcfBridge) {
	t.Helper()
	out := b.p.Stderr() + b.p.Stdout()
	for _, s := range []string{"access_token", "refresh_token", "Bearer ", "code_verifier", "code=", "client_secret"} {
		if strings.Contains(out, s) {
			t.Errorf("the bridge's output contains %q", s)
		}
	}
}

// oauthLastToken is the token of the latest request the TypeScript example
// server authenticated (it prints each one on stdout).
func oauthLastToken(t *testing.T, server *proc) string {
	t.Helper()
	m := regexp.MustCompile(`token: '([^']+)'`).FindAllStringSubmatch(server.Stdout(), -1)
	if len(m) == 0 {
		t.Fatal("the example server printed no authenticated request")
	}
	return m[len(m)-1][1]
}

// oauthPerUser is a per-user deployment of the TypeScript SDK's example
// server (strict OAuth) as upstream demo (toolkit Demo): its process, a
// serve-otc config in dir, and what serve-otc needs besides --listen and
// --config. The OTC callers authenticate with an API key (its holder names
// users in context.user_id); a user's authorization is verified with
// user_verification oidc: the browser signs in at zitadel/oidc's example
// OpenID Provider, whose alice is sub id1 and bob sub id2, so the user ids
// are those subs. bridges are the public URLs users' browsers come back to.
type perUserSetup struct {
	server *proc
	config string
	env    []string // MCPOTC_TOKEN_KEY, MCPOTC_API_KEY, MCPOTC_OP_SECRET
	args   []string
	apiKey map[string]string // the header of an OTC call
}

// oauthJWTSecret signs the JWTs of callers that are users themselves.
const oauthJWTSecret = "e2e-jwt-secret-of-32-bytes-or-more"

func oauthPerUser(t *testing.T, dir string, bridges ...string) perUserSetup {
	t.Helper()
	mcpPort := freePort(t)
	server := oauthTSServerOn(t, mcpPort, freePort(t), "--oauth-strict")
	config := filepath.Join(dir, "config.json")
	cfg := fmt.Sprintf(`{"mcpServers": {"demo": {"url": "http://localhost:%d/mcp", "toolkit": "Demo", "oauth": {"per_user": true, "user_verification": "oidc"}}}}`, mcpPort)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	opArgs, opEnv := usersOPArgs(usersOP(t, bridges...))
	return perUserSetup{
		server: server, config: config,
		env: append(opEnv, "MCPOTC_TOKEN_KEY="+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32)), "MCPOTC_API_KEY=e2e-app-key",
			"MCPOTC_JWT_SECRET="+oauthJWTSecret),
		args:   append(opArgs, "--api-key-env", "MCPOTC_API_KEY", "--jwt-secret-env", "MCPOTC_JWT_SECRET"),
		apiKey: map[string]string{"OXP-API-Key": "e2e-app-key"},
	}
}

// TestOAuthPerUserTypeScriptServer: per-user mode against the TypeScript
// SDK's example server. The operator authorizes the catalog (its URL from
// the log); then each user gets a challenge of their own, bound to them,
// and their calls go with their own token (the server prints the token of
// each request): alice's authorization never serves bob, and a token the
// caller holds goes as it is. The attacks fail: bob, signed in as
// himself, opening alice's link is refused and binds nothing; a caller
// whose JWT names mallory cannot act for alice; alice's own JWT caller (a
// second caller naming her) gets a flow of its own, never the app's live
// URL. After a restart with the file store, both users still call without
// a new challenge.
func TestOAuthPerUserTypeScriptServer(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	pu := oauthPerUser(t, dir, base)
	server := pu.server
	args := append([]string{"--token-store", "file:" + filepath.Join(dir, "tokens.json"), "--token-key-env", "MCPOTC_TOKEN_KEY"}, pu.args...)
	b := oauthBridge(t, port, pu.config, pu.env, args...)

	// The operator's authorization: the catalog.
	oauthAuthorize(t, oauthWaitChallenge(t, b))
	b.waitHealthy(t, 30*time.Second)
	operator := oauthLastToken(t, server)
	var greet map[string]any
	for _, tool := range b.toolsWith(t, pu.apiKey) {
		if m, _ := tool.(map[string]any); m["id"] == "Demo.greet@1.0.0" || m["name"] == "greet" {
			greet = m
		}
	}
	if errs := otcfMatch("requirements", map[string]any{"user_id": true, "authorization": []any{map[string]any{"id": "demo", "oauth2": map[string]any{}}}}, greet["requirements"]); len(errs) > 0 {
		t.Errorf("Demo.greet's requirements: %s (tool %s)", strings.Join(errs, "; "), otcfShow(greet))
	}

	d := otcfDialects[2]
	callAs := func(hdr map[string]string, ctx map[string]any) *otcfResp {
		t.Helper()
		req := map[string]any{"tool_id": "Demo.greet", "input": map[string]any{"name": "user"}}
		if ctx != nil {
			req["context"] = ctx
		}
		c, cancel := context.WithTimeout(context.Background(), otcfCallTimeout)
		defer cancel()
		return b.call(t, c, d, req, hdr)
	}
	call := func(ctx map[string]any) *otcfResp { t.Helper(); return callAs(pu.apiKey, ctx) }
	challengeOf := func(user string) (url, check string) {
		t.Helper()
		r := call(map[string]any{"user_id": user})
		body, _ := r.Body.(map[string]any)
		mr, _ := body["missing_requirements"].(map[string]any)
		as, _ := mr["authorization"].([]any)
		if r.Status != http.StatusBadRequest || len(as) != 1 {
			t.Fatalf("%s without a token: %d %s, want the 400 challenge", user, r.Status, otcfTrunc(r.Raw))
		}
		// The developer_message says what is needed once, with no
		// transport's wrapping (mcp-go v1.2.1 wraps a failed POST as
		// "failed to send request: " twice).
		if dm, _ := body["developer_message"].(string); strings.Contains(dm, "failed to send request") ||
			!strings.HasSuffix(dm, `: upstream "demo" needs an authorization: a user must open the authorization URL`) {
			t.Errorf("%s's challenge: developer_message %q", user, dm)
		}
		a := as[0].(map[string]any)
		if a["id"] != "demo" || !strings.HasPrefix(a["url"].(string), base+"/oauth/authorize/") {
			t.Fatalf("%s's challenge: %s", user, otcfShow(a))
		}
		return a["url"].(string), a["check_url"].(string)
	}
	succeeds := func(ctx map[string]any) string {
		t.Helper()
		r := call(ctx)
		if r.Status != http.StatusOK || !strings.Contains(string(r.Raw), `"Hello, user!"`) {
			t.Fatalf("call with %v: %d %s", ctx, r.Status, otcfTrunc(r.Raw))
		}
		return oauthLastToken(t, server)
	}
	alice, bob := oauthUserSub("alice"), oauthUserSub("bob")

	if r := call(nil); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Raw), `"user_id":true`) {
		t.Errorf("without user_id: %d %s, want 400 missing_requirements.user_id", r.Status, otcfTrunc(r.Raw))
	}
	if r := callAs(nil, map[string]any{"user_id": alice}); r.Status != http.StatusUnauthorized {
		t.Errorf("without the API key: %d %s, want 401", r.Status, otcfTrunc(r.Raw))
	}
	aliceURL, aliceCheck := challengeOf(alice)
	bobURL, _ := challengeOf(bob)
	t.Logf("operator authorized; alice challenged (%s…), bob challenged (%s…): two authorizations", oauthShort(aliceURL), oauthShort(bobURL))
	if aliceURL == bobURL {
		t.Fatal("alice and bob got the same authorization URL")
	}
	if again, _ := challengeOf(alice); again != aliceURL {
		t.Errorf("alice's second challenge is a new authorization: %s", again)
	}
	// A caller whose token names mallory claims alice: refused.
	if r := callAs(callerJWT(t, oauthJWTSecret, "mallory"), map[string]any{"user_id": alice}); r.Status != http.StatusBadRequest ||
		!strings.Contains(string(r.Raw), "context.user_id is not the authenticated user") {
		t.Errorf("mallory's JWT claiming alice: %d %s, want 400", r.Status, otcfTrunc(r.Raw))
	}
	// Alice's own JWT: another caller naming alice gets a flow of its own.
	r := callAs(callerJWT(t, oauthJWTSecret, alice), nil)
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Raw), "/oauth/authorize/") || strings.Contains(string(r.Raw), aliceURL) {
		t.Errorf("alice's own JWT caller: %d %s, want a challenge of its own, not the app's %s", r.Status, otcfTrunc(r.Raw), oauthShort(aliceURL))
	}
	t.Log("attacks: mallory's JWT claiming alice: 400; alice's JWT caller: a challenge of its own, never the API key caller's live URL")

	// The forwarded link: bob, signed in as bob, opens alice's URL.
	p := newOAuthBrowser(t, "bob").open(aliceURL, nil)
	if p.Status != http.StatusForbidden || !strings.Contains(p.Body, "This authorization link is for another user") {
		t.Errorf("bob opening alice's link: %d at %s: %s", p.Status, p.URL, truncate(p.Body, 400))
	}
	if r := b.get(t, strings.TrimPrefix(aliceCheck, base), nil, nil); otcfShow(r.Body) != `{"status":"pending"}` {
		t.Errorf("alice's check_url after bob: %s", otcfTrunc(r.Raw))
	}
	if r := call(map[string]any{"user_id": alice}); r.Status != http.StatusBadRequest {
		t.Errorf("alice after bob opened her link: %d %s, want still her challenge (nothing bound)", r.Status, otcfTrunc(r.Raw))
	}
	t.Log("attack: bob (signed in as bob) opened alice's link: 403 \"This authorization link is for another user\"; alice's flow still pending, nothing bound")

	newOAuthBrowser(t, "alice").authorize(aliceURL)
	if r := b.get(t, strings.TrimPrefix(aliceCheck, base), nil, nil); otcfShow(r.Body) != `{"status":"completed"}` {
		t.Errorf("alice's check_url: %s", otcfTrunc(r.Raw))
	}
	aliceTok := succeeds(map[string]any{"user_id": alice})
	t.Logf("alice authorized: her call went with a token of her own (not the operator's: %t)", aliceTok != operator)
	if aliceTok == operator {
		t.Error("alice's call went with the operator's token")
	}
	if again, _ := challengeOf(bob); again != bobURL {
		t.Errorf("bob, still not authorized after alice: challenge %s, want his own %s", again, bobURL)
	}
	newOAuthBrowser(t, "bob").authorize(bobURL)
	bobTok := succeeds(map[string]any{"user_id": bob})
	t.Logf("bob authorized: his call went with a token of his own (not alice's: %t, not the operator's: %t)", bobTok != aliceTok, bobTok != operator)
	if bobTok == aliceTok || bobTok == operator {
		t.Errorf("bob's call went with another's token (alice %t, operator %t)", bobTok == aliceTok, bobTok == operator)
	}
	if got := succeeds(map[string]any{"user_id": alice}); got != aliceTok {
		t.Error("alice's second call did not go with alice's token")
	}
	// A token the caller holds goes as it is; a bad one is refused.
	if got := succeeds(map[string]any{"user_id": "carol", "authorization": []any{map[string]any{"id": "demo", "token": aliceTok}}}); got != aliceTok {
		t.Error("a caller-held token was not sent as it is")
	}
	// (The example server answers a token it cannot introspect with an
	// error; carol gets no challenge: her own token went, not the vault's.)
	if r := call(map[string]any{"user_id": "carol", "authorization": []any{map[string]any{"id": "demo", "token": "not-a-token"}}}); strings.Contains(string(r.Raw), "Hello") ||
		strings.Contains(string(r.Raw), "missing_requirements") {
		t.Errorf("a bad caller-held token: %d %s, want it sent as it is and the call to fail", r.Status, otcfTrunc(r.Raw))
	}
	oauthNoSecrets(t, b)
	for _, tok := range []string{aliceTok, bobTok, operator} {
		if strings.Contains(b.p.Stderr(), tok) {
			t.Error("a user's token is in the bridge's log")
		}
	}
	b.stop(t)

	// Restart with the file store: nobody is asked again.
	b = oauthBridge(t, port, pu.config, pu.env, args...)
	b.waitHealthy(t, 30*time.Second)
	if got := succeeds(map[string]any{"user_id": alice}); got != aliceTok {
		t.Error("after the restart alice's call did not go with alice's token")
	}
	if got := succeeds(map[string]any{"user_id": bob}); got != bobTok {
		t.Error("after the restart bob's call did not go with bob's token")
	}
	challengeOf("dave")
	t.Log("serve-otc restarted with the file store: alice and bob called with their own tokens, no new challenge; dave (new) challenged")
	b.stop(t)
}

// TestOAuthMCPHostElicitation: an MCP host (the official Go SDK client,
// declaring URL elicitation) → serve-mcp (user_id alice) → serve-otc
// (per-user OAuth) → the TypeScript SDK's OAuth-protected example server.
// Alice's first call comes back as -32042 with the authorization URL;
// opening it completes the flow, and the same call then succeeds.
func TestOAuthMCPHostElicitation(t *testing.T) {
	endpoint := oauthTSServer(t)
	dir := t.TempDir()
	port := freePort(t)
	opArgs, opEnv := usersOPArgs(usersOP(t, fmt.Sprintf("http://127.0.0.1:%d", port)))
	config := filepath.Join(dir, "config.json")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`{"mcpServers": {"demo": {"url": %q, "toolkit": "Demo", "oauth": {"per_user": true, "user_verification": "oidc"}}}}`, endpoint)), 0o600); err != nil {
		t.Fatal(err)
	}
	otcFront := oauthBridge(t, port, config, append(opEnv, "MCPOTC_API_KEY=e2e-app-key"), append(opArgs, "--api-key-env", "MCPOTC_API_KEY")...)
	oauthAuthorize(t, oauthWaitChallenge(t, otcFront)) // the operator: the catalog
	otcFront.waitHealthy(t, 30*time.Second)

	// serve-mcp is the OTC application: it holds the API key and names
	// its one user, alice (the users' provider's sub id1).
	mcpConfig := filepath.Join(dir, "serve-mcp.json")
	if err := os.WriteFile(mcpConfig, []byte(fmt.Sprintf(`{"upstreams": [{"name": "bridge", "url": "http://127.0.0.1:%d", "user_id": %q, "api_key_env": "MCPOTC_API_KEY"}]}`,
		port, oauthUserSub("alice"))), 0o600); err != nil {
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
	if name == "" {
		t.Fatal("the MCP front lists no greet tool")
	}
	args := map[string]any{"name": "host"}
	we := wantRPCError(t, ctx, cs, name, args, -32042)
	var data struct {
		Elicitations []struct {
			Mode string `json:"mode"`
			URL  string `json:"url"`
		} `json:"elicitations"`
	}
	if err := json.Unmarshal(we.Data, &data); err != nil || len(data.Elicitations) != 1 || data.Elicitations[0].Mode != "url" ||
		!strings.HasPrefix(data.Elicitations[0].URL, fmt.Sprintf("http://127.0.0.1:%d/oauth/authorize/", port)) {
		t.Fatalf("-32042 data %s (%v), want one URL elicitation of serve-otc's authorization", we.Data, err)
	}
	newOAuthBrowser(t, "alice").authorize(data.Elicitations[0].URL)
	res := mustCall(t, ctx, cs, name, args)
	if res.IsError || !strings.Contains(jsonString(res), "Hello, host!") {
		t.Errorf("the call after the authorization: %s", jsonString(res))
	}
}

// oauthShort is the start of an authorization URL's state, for a log line.
func oauthShort(url string) string {
	i := strings.LastIndex(url, "/")
	return url[:min(len(url), i+7)]
}

// TestOAuthMCPFrontProtectedResource: serve-mcp as an OAuth 2.1 protected
// resource, its tokens checked by introspection at the TypeScript SDK's
// demo authorization server. The official TypeScript SDK client with its
// OAuth client provider discovers the metadata, registers, gets a token
// (following the authorization redirect itself) and lists and calls the
// tools. Then, at the wire: no token → 401 with resource_metadata and
// scope; a refused token → 401 invalid_token; the token at a front that
// is another resource → 401; at a front that wants another scope → 403
// insufficient_scope.
func TestOAuthMCPFrontProtectedResource(t *testing.T) {
	authPort := freePort(t)
	oauthTSServerOn(t, freePort(t), authPort, "--oauth")
	issuer := fmt.Sprintf("http://localhost:%d/", authPort)
	introspect := fmt.Sprintf("http://localhost:%d/introspect", authPort)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	oauthArgs := []string{"--oauth-issuer", issuer, "--oauth-introspection-url", introspect, "--oauth-scope", "mcp:tools"}
	a := startBridge(t, ctx, "http", oauthArgs, nil)
	base := strings.TrimSuffix(a.url, "/mcp")

	script, err := filepath.Abs(filepath.Join("testdata", "oauth_client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, ctx, nodeBin(t), []string{script}, append(peerEnv(t), "MCPOTC_PEERS="+peersDir(t), "MCPOTC_MCP_URL="+a.url))
	p.Stdin.Close()
	if err := p.Wait(time.Minute); err != nil {
		t.Fatalf("the TypeScript SDK client: %v\n%s", err, truncate(p.Stdout(), 4000))
	}
	var seen struct {
		Tools          []string       `json:"tools"`
		Call           map[string]any `json:"call"`
		Authorizations int            `json:"authorizations"`
		Scope          string         `json:"scope"`
		Token          string         `json:"token"`
	}
	if err := json.Unmarshal([]byte(p.Stdout()), &seen); err != nil {
		t.Fatalf("client output: %v: %s", err, truncate(p.Stdout(), 2000))
	}
	if !slices.Contains(seen.Tools, "Calculator_Add") || otcfShow(seen.Call) != `{"sum":5}` || seen.Authorizations != 1 || seen.Token == "" {
		t.Fatalf("the TypeScript SDK client saw: tools %v, call %s, %d authorizations", seen.Tools, otcfShow(seen.Call), seen.Authorizations)
	}
	t.Logf("TypeScript SDK client: discovered, registered, authorized once (scope %q), listed %d tools, Calculator_Add → %s", seen.Scope, len(seen.Tools), otcfShow(seen.Call))

	status, hdr, body := httpDo(t, http.MethodGet, base+"/.well-known/oauth-protected-resource/mcp", "", nil)
	if status != http.StatusOK {
		t.Errorf("metadata: %d %s", status, body)
	}
	sameJSON(t, "metadata", body, fmt.Sprintf(`{"resource":%q,"authorization_servers":[%q],"scopes_supported":["mcp:tools"],"bearer_methods_supported":["header"]}`, a.url, issuer))
	md := fmt.Sprintf(`resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`, base)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"0"}}}`
	expect := func(url, token string, want int, challenge string) {
		t.Helper()
		h := http.Header{}
		if token != "" {
			h.Set("Authorization", "Bearer "+token)
		}
		status, hdr, body = httpDo(t, http.MethodPost, url, init, h)
		if status != want || hdr.Get("WWW-Authenticate") != challenge {
			t.Errorf("POST %s: %d %q, want %d %q: %s", url, status, hdr.Get("WWW-Authenticate"), want, challenge, truncate(body, 300))
		}
	}
	expect(a.url, "", http.StatusUnauthorized, "Bearer "+md)
	expect(a.url, "not-a-token", http.StatusUnauthorized, `Bearer error="invalid_token", `+md)
	expect(a.url, seen.Token, http.StatusOK, "")

	other := startBridge(t, ctx, "http", oauthArgs, nil) // another port: another resource
	otherBase := strings.TrimSuffix(other.url, "/mcp")
	expect(other.url, seen.Token, http.StatusUnauthorized,
		fmt.Sprintf(`Bearer error="invalid_token", resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`, otherBase))

	admin := startBridge(t, ctx, "http", []string{"--oauth-issuer", issuer, "--oauth-introspection-url", introspect, "--oauth-scope", "admin", "--oauth-resource", a.url}, nil)
	expect(admin.url, seen.Token, http.StatusForbidden,
		fmt.Sprintf(`Bearer error="insufficient_scope", resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="admin"`, base))
	_ = hdr
}

// TestOAuthTwoUserChain: two users, each an MCP host (the TypeScript SDK
// client with its OAuth client provider and URL elicitation), through
// serve-mcp (an OAuth protected resource; user_id_from_token with the
// token's client_id, the demo authorization server naming no users) →
// serve-otc (per-user OAuth) → the TypeScript SDK's OAuth-protected
// example server. Each user's first call comes back as -32042 with their
// own authorization URL; once opened, their call succeeds, and the
// upstream sees each user's call with a token of their own.
func TestOAuthTwoUserChain(t *testing.T) {
	mcpPort := freePort(t)
	upstream := oauthTSServerOn(t, mcpPort, freePort(t), "--oauth-strict")
	dir := t.TempDir()
	config := filepath.Join(dir, "serve-otc.json")
	// user_verification none: the demo authorization server names no
	// users (each host's user_id is its token's client_id), so no provider
	// can sign them in; this test is about per-user tokens across the
	// chain, not about who completes an authorization (see
	// TestOAuthPerUserTypeScriptServer and mcp/oauth's tests for that).
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`{"mcpServers": {"demo": {"url": "http://localhost:%d/mcp", "toolkit": "Demo", "oauth": {"per_user": true, "user_verification": "none"}}}}`, mcpPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	otcPort := freePort(t)
	otcFront := oauthBridge(t, otcPort, config, []string{"MCPOTC_API_KEY=e2e-app-key"}, "--api-key-env", "MCPOTC_API_KEY")
	oauthAuthorize(t, oauthWaitChallenge(t, otcFront))
	otcFront.waitHealthy(t, 30*time.Second)
	operator := oauthLastToken(t, upstream)

	asPort := freePort(t)
	oauthTSServerOn(t, freePort(t), asPort, "--oauth") // its authorization server is serve-mcp's
	mcpConfig := filepath.Join(dir, "serve-mcp.json")
	if err := os.WriteFile(mcpConfig, []byte(fmt.Sprintf(`{"upstreams": [{"name": "bridge", "url": "http://127.0.0.1:%d", "user_id_from_token": true, "user_id_claim": "client_id", "api_key_env": "MCPOTC_API_KEY"}]}`, otcPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	front := startBridge(t, ctx, "http", []string{"--config", mcpConfig,
		"--oauth-issuer", fmt.Sprintf("http://localhost:%d/", asPort), "--oauth-introspection-url", fmt.Sprintf("http://localhost:%d/introspect", asPort)},
		[]string{"MCPOTC_API_KEY=e2e-app-key"})
	script, err := filepath.Abs(filepath.Join("testdata", "oauth_client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		Call     any            `json:"call"`
		Elicited map[string]any `json:"elicited"`
		Client   string         `json:"client"`
		Error    string         `json:"error"`
	}
	user := func(name string) (seen, string) {
		t.Helper()
		p := startProcess(t, ctx, nodeBin(t), []string{script}, append(peerEnv(t), "MCPOTC_PEERS="+peersDir(t), "MCPOTC_MCP_URL="+front.url,
			"MCPOTC_TOOL=greet", `MCPOTC_TOOL_ARGS={"name":"`+name+`"}`))
		p.Stdin.Close()
		werr := p.Wait(time.Minute)
		var s seen
		if err := json.Unmarshal([]byte(p.Stdout()), &s); err != nil || werr != nil {
			t.Fatalf("user %s: %v %v: %s", name, werr, err, truncate(p.Stdout(), 3000))
		}
		if !strings.Contains(otcfShow(s.Call), "Hello, "+name+"!") || s.Elicited == nil || s.Elicited["path"] != "/oauth/callback" || s.Client == "" {
			t.Fatalf("user %s saw: %+v", name, s)
		}
		return s, oauthLastToken(t, upstream)
	}
	a, tokenA := user("ann")
	b, tokenB := user("ben")
	if a.Client == b.Client {
		t.Fatal("the two users are one client")
	}
	if tokenA == tokenB || tokenA == operator || tokenB == operator {
		t.Errorf("the upstream saw: ann's call with ben's token %t, with the operator's %t; ben's with the operator's %t", tokenA == tokenB, tokenA == operator, tokenB == operator)
	}
	t.Logf("two MCP hosts through serve-mcp (user_id = their token's client_id: %s…, %s…) → serve-otc per-user → the OAuth upstream: each got -32042 with its own authorization URL, opened it, and its call succeeded; the upstream saw two distinct tokens, neither the operator's", a.Client[:8], b.Client[:8])
}
