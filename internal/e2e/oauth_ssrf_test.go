//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Markers of the answers the bridge must never repeat.
const (
	ssrfInternalMarker = "INTERNAL-ONLY-DATA-0b7e"
	ssrfHostileMarker  = "HOSTILE-BODY-c41d"
	ssrfHeaderMarker   = "HOSTILE-HEADER-e95a"
	ssrfInternalPath   = "iam/security-credentials" // how the internal page starts
)

// ssrfInternal is a service of the internal network, on 127.0.0.2 (not
// the upstreams' 127.0.0.1): it counts requests and answers a GET with a
// page of secrets, as a cloud metadata service would (the bridge used to
// repeat 300 bytes of it on /health, in the error of a registration whose
// 302 it had followed), and a POST with JSON that a token or registration
// request takes (the bridge used to take its "token").
type ssrfInternal struct {
	base string
	hits atomic.Int32
}

func startSSRFInternal(t *testing.T) *ssrfInternal {
	t.Helper()
	it := &ssrfInternal{}
	body := fmt.Sprintf(`{"issuer":%q,"resource":%q,"authorization_servers":[%q],"client_id":%q,"access_token":%q,"code_challenge_methods_supported":["S256"],"note":%q}`,
		ssrfInternalMarker, ssrfInternalMarker, ssrfInternalMarker, ssrfInternalMarker, ssrfInternalMarker, strings.Repeat(ssrfInternalMarker+" ", 40))
	page := strings.Repeat(ssrfInternalPath+"/role: "+ssrfInternalMarker+"\n", 20)
	it.base = ssrfServe(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		it.hits.Add(1)
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, page)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	return it
}

// ssrfServe serves h on ip (a loopback address) and returns its base URL.
func ssrfServe(t *testing.T, ip string, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listening on %s (the test needs the loopback network 127.0.0.0/8): %v", ip, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// ssrfUpstream is a hostile OAuth-protected MCP server on 127.0.0.1 with
// its own authorization server, each attack one mode:
//   - "register-302": its registration endpoint redirects (302) to the
//     internal service;
//   - "token-307": it registers the bridge and sends the user back with a
//     code, and its token endpoint redirects (307) to the internal service;
//   - "cross-origin-metadata": its WWW-Authenticate names resource_metadata
//     on the internal service;
//   - "metadata-302": its protected resource metadata redirects (302) to
//     the internal service;
//   - "internal-endpoint": its metadata names a registration endpoint on
//     the internal service.
type ssrfUpstream struct {
	mode, base string
	hits       atomic.Int32
}

func startSSRFUpstream(t *testing.T, mode string, internal *ssrfInternal) *ssrfUpstream {
	t.Helper()
	u := &ssrfUpstream{mode: mode}
	redirect := func(w http.ResponseWriter, status int) {
		w.Header().Set("Location", internal.base+"/"+ssrfHeaderMarker)
		w.Header().Set("X-Debug", ssrfHeaderMarker)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, ssrfHostileMarker)
	}
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	u.base = ssrfServe(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		switch r.URL.Path {
		case "/mcp":
			rm := u.base + "/.well-known/oauth-protected-resource/mcp"
			if mode == "cross-origin-metadata" {
				rm = internal.base + "/.well-known/oauth-protected-resource/mcp"
			}
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+rm+`"`)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, ssrfHostileMarker)
		case "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource":
			if mode == "metadata-302" {
				redirect(w, http.StatusFound)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"resource": u.base + "/mcp", "authorization_servers": []string{u.base}})
		case "/.well-known/oauth-authorization-server":
			reg := u.base + "/register"
			if mode == "internal-endpoint" {
				reg = internal.base + "/register"
			}
			writeJSON(w, http.StatusOK, map[string]any{"issuer": u.base, "authorization_endpoint": u.base + "/authorize",
				"token_endpoint": u.base + "/token", "registration_endpoint": reg, "response_types_supported": []string{"code"},
				"code_challenge_methods_supported": []string{"S256"}})
		case "/register":
			if mode == "register-302" {
				redirect(w, http.StatusFound)
				return
			}
			writeJSON(w, http.StatusCreated, map[string]any{"client_id": "hostile-client", "token_endpoint_auth_method": "none"})
		case "/authorize":
			back, err := url.Parse(r.URL.Query().Get("redirect_uri"))
			if err != nil {
				http.Error(w, "bad redirect_uri", http.StatusBadRequest)
				return
			}
			q := back.Query()
			q.Set("code", "the-code")
			q.Set("state", r.URL.Query().Get("state"))
			back.RawQuery = q.Encode()
			http.Redirect(w, r, back.String(), http.StatusFound)
		case "/token":
			redirect(w, http.StatusTemporaryRedirect)
		default:
			http.NotFound(w, r)
		}
	}))
	return u
}

// ssrfAuthorizationURL waits for the operator's authorization URL of
// upstream: on /health (its "authorization" object) or in the log line
// that tells the operator to open it.
func ssrfAuthorizationURL(t *testing.T, b *otcfBridge, upstream string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := b.get(t, "/health", nil, nil)
		if body, ok := r.Body.(map[string]any); ok {
			if authz, ok := body["authorization"].(map[string]any); ok {
				if u, _ := authz[upstream].(string); u != "" {
					return u
				}
			}
		}
		for _, l := range b.logs(func(m map[string]any) bool {
			return m["upstream"] == upstream && strings.Contains(fmt.Sprint(m["message"]), "open this URL")
		}) {
			if u, _ := l["url"].(string); u != "" {
				return u
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no authorization URL for %s within 30 s; /health: %s", upstream, otcfTrunc(r.Raw))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOAuthSSRF: the real serve-otc, with OAuth upstreams that attack it
// as seen on a running bridge (see ssrfUpstream) and the TypeScript SDK's
// demo server beside them. The internal service on 127.0.0.2 never gets a
// request: redirects of the registration and token endpoints are not
// followed, metadata elsewhere is not fetched, an endpoint on an internal
// address is refused by the dial guard. /health, the callback page and
// the logs carry no byte of any answer (internal or hostile) and no
// redirect target; each upstream's status says what was refused. The
// honest flow beside them still authorizes and calls.
func TestOAuthSSRF(t *testing.T) {
	internal := startSSRFInternal(t)
	modes := []string{"register-302", "token-307", "cross-origin-metadata", "metadata-302", "internal-endpoint"}
	ups := map[string]*ssrfUpstream{}
	servers := map[string]any{}
	for _, m := range modes {
		ups[m] = startSSRFUpstream(t, m, internal)
		servers[m] = map[string]any{"url": ups[m].base + "/mcp", "oauth": map[string]any{}}
	}
	demoPort := freePort(t)
	oauthTSServerOn(t, demoPort, freePort(t), "--oauth-strict")
	servers["demo"] = map[string]any{"url": fmt.Sprintf("http://localhost:%d/mcp", demoPort), "toolkit": "Demo", "oauth": map[string]any{}}
	cfg, _ := json.Marshal(map[string]any{"mcpServers": servers})
	config := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	b := oauthBridge(t, port, config, nil)

	// Each attack ends in a refusal that says what and why.
	want := map[string]string{
		"register-302": "dynamic client registration at " + ups["register-302"].base +
			"/register: HTTP 302, a redirect, which the bridge never follows for a POST",
		"cross-origin-metadata": "the resource_metadata of the MCP server's challenge is not on the MCP server's origin (" +
			ups["cross-origin-metadata"].base + "): refused without fetching it",
		"metadata-302": "protected resource metadata at " + ups["metadata-302"].base +
			"/.well-known/oauth-protected-resource/mcp: HTTP 302, a redirect to another origin, which the bridge does not follow",
		"internal-endpoint": "dynamic client registration at " + internal.base +
			"/register: refused to connect to 127.0.0.2, a loopback address: not an address of the configured server's host, nor in an allowed network",
	}
	var health string
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := b.get(t, "/health", nil, nil)
		health = string(r.Raw)
		body, _ := r.Body.(map[string]any)
		st, _ := body["upstreams"].(map[string]any)
		missing := 0
		for m, w := range want {
			if s, _ := st[m].(string); !strings.Contains(s, w) {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			for m, w := range want {
				if s, _ := st[m].(string); !strings.Contains(s, w) {
					t.Errorf("/health: upstream %s: %q, want it to say %q", m, s, w)
				}
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The token endpoint's 307: the operator opens the authorization URL;
	// the code comes back; the exchange is refused.
	authURL := ssrfAuthorizationURL(t, b, "token-307")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	jar, _ := cookiejar.New(nil) // a browser: the bridge binds the flow to it
	resp, err := (&http.Client{Jar: jar}).Do(req)
	if err != nil {
		t.Fatalf("opening the authorization URL: %v", err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantPage := "the code exchange failed: POST " + ups["token-307"].base + "/token: HTTP 307, a redirect, which the bridge never follows for a POST"
	if resp.StatusCode != http.StatusBadRequest || resp.Request.URL.Path != "/oauth/callback" || !strings.Contains(string(page), wantPage) {
		t.Errorf("the callback after a token endpoint's 307: %s HTTP %d %s, want 400 saying %q", resp.Request.URL.Path, resp.StatusCode, truncate(string(page), 600), wantPage)
	}
	check := strings.Replace(authURL, "/oauth/authorize/", "/oauth/check/", 1)
	if r := b.get(t, strings.TrimPrefix(check, b.base), nil, nil); !strings.Contains(string(r.Raw), `"status":"failed"`) {
		t.Errorf("check_url after the refused exchange: %s", otcfTrunc(r.Raw))
	}

	// The honest flow beside them.
	oauthAuthorize(t, ssrfAuthorizationURL(t, b, "demo"))
	deadline = time.Now().Add(30 * time.Second)
	for {
		r := b.get(t, "/health", nil, nil)
		body, _ := r.Body.(map[string]any)
		st, _ := body["upstreams"].(map[string]any)
		if st["demo"] == "ready" {
			health += string(r.Raw)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo server is not ready after its authorization: %s", otcfTrunc(r.Raw))
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.expect(t, otcfDialects[0], map[string]any{"tool_id": "Demo.greet", "input": map[string]any{"name": "OAuth"}}, nil, http.StatusOK, otcfOK("Hello, OAuth!"))

	// Let the bridge retry the failing upstreams a while: still nothing
	// reaches the internal service.
	time.Sleep(2 * time.Second)
	r := b.get(t, "/health", nil, nil)
	health += string(r.Raw)
	if n := internal.hits.Load(); n != 0 {
		t.Errorf("the internal service on 127.0.0.2 got %d requests, want none", n)
	}
	for what, s := range map[string]string{"/health": health, "the callback page": string(page), "the logs": b.p.Stderr() + b.p.Stdout()} {
		for _, m := range []string{ssrfInternalMarker, ssrfInternalPath, ssrfHostileMarker, ssrfHeaderMarker} {
			if strings.Contains(s, m) {
				t.Errorf("%s carries %q: %s", what, m, truncate(s[max(0, strings.Index(s, m)-300):], 700))
			}
		}
	}
	// A redirect's target is never named (only a URL asked for is).
	for _, m := range []string{"register-302", "metadata-302", "cross-origin-metadata"} {
		if st := ssrfStatus(r.Raw, m); strings.Contains(st, "127.0.0.2") {
			t.Errorf("/health: upstream %s names the internal address: %s", m, st)
		}
	}
	for _, m := range modes {
		if ups[m].hits.Load() == 0 {
			t.Errorf("the hostile upstream %s got no request: the test did not run its attack", m)
		}
	}
	b.checkLogs(t)
	oauthNoSecrets(t, b)
	if t.Failed() {
		return
	}
	t.Logf("internal service on 127.0.0.2: %d requests; refused: registration 302, token 307, cross-origin resource_metadata, metadata 302 elsewhere, an endpoint on 127.0.0.2; the demo server authorized and Demo.greet answered", internal.hits.Load())
}

// ssrfStatus is upstream's status in a /health body.
func ssrfStatus(raw []byte, upstream string) string {
	var body struct {
		Upstreams map[string]string `json:"upstreams"`
	}
	_ = json.Unmarshal(raw, &body)
	return body.Upstreams[upstream]
}
