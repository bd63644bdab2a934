package oauth

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Attack (SEP-2468, the conformance runner's auth/iss-normalized): the
// authorization response names the issuer with a trailing "/" the
// metadata's issuer does not have; the bridge trimmed it and exchanged the
// code. Now: refused, before any exchange. Honest: the exact issuer passes
// the check (and reaches the exchange, here a closed port).
func TestCallbackIssuerExact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, iss string
		refused   bool
	}{
		{"trailing slash", "http://as.test/", true},
		{"case folded host", "http://AS.test", true},
		{"default port", "http://as.test:80", true},
		{"exact", "http://as.test", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asm := &oauthex.AuthServerMeta{Issuer: "http://as.test", AuthorizationEndpoint: "http://as.test/authorize", TokenEndpoint: "http://127.0.0.1:1/token",
				AuthorizationResponseIssParameterSupported: true}
			m, _, r := newTestManager(t, asm)
			state := strings.TrimPrefix(r.URL, "http://bridge.test/oauth/authorize/")
			var b browser
			if w := b.get(t, m, "/oauth/authorize/"+state); w.Code != http.StatusFound {
				t.Fatalf("authorize: %d %s", w.Code, w.Body)
			}
			w := b.get(t, m, "/oauth/callback?state="+state+"&code=c&iss="+tc.iss)
			another := strings.Contains(w.Body.String(), "another issuer")
			if another != tc.refused {
				t.Errorf("iss %s for issuer http://as.test: %d %s (refused as another issuer: %t, want %t)", tc.iss, w.Code, w.Body, another, tc.refused)
			}
		})
	}
}

// Attack (SEP-2468, auth/metadata-issuer-mismatch's trailing-slash
// variant): the protected resource metadata names the issuer
// http://127.0.0.1:N and the metadata at its well-known URL calls itself
// http://127.0.0.1:N/; the library the bridge uses forgives the "/". Now:
// discovery stops there, before registering. Honest: the same issuer in
// both registers.
func TestMetadataIssuerExact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		suffix  string
		refused bool
	}{
		{"trailing slash", "/", true},
		{"exact", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeUpstream(t)
			registered := false
			var mu sync.Mutex
			f.meta = func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, http.StatusOK, f.metadata(map[string]any{"issuer": f.srv.URL + tc.suffix}))
			}
			next := f.register
			f.register = func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				registered = true
				mu.Unlock()
				next(w, r)
			}
			_, c := f.client(t, Config{})
			err := unauthorized(t, c, "")
			mu.Lock()
			defer mu.Unlock()
			var ar *AuthorizationRequired
			if tc.refused {
				if err == nil || errors.As(err, &ar) || !strings.Contains(err.Error(), "another issuer") || registered {
					t.Errorf("metadata issuer %s/ for %s: %v (registered: %t), want refused before registering", f.srv.URL, f.srv.URL, err, registered)
				}
				return
			}
			if !errors.As(err, &ar) || !registered {
				t.Errorf("the exact issuer: %v (registered: %t), want an authorization to open", err, registered)
			}
		})
	}
}

// SEP-837 (the conformance runner's sep-837-application-type-present at
// 2026-07-28): dynamic registration names the application_type, "native"
// for a loopback http callback, "web" for any other. Before, it sent none
// (an authorization server then assumes "web", which forbids loopback
// redirect URIs).
func TestRegistrationApplicationType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ uri, want string }{
		{"http://127.0.0.1:8080/oauth/callback", "native"},
		{"http://[::1]:8080/oauth/callback", "native"},
		{"http://localhost:8080/oauth/callback", "native"},
		{"https://bridge.example.com/oauth/callback", "web"},
		{"http://bridge.internal/oauth/callback", "web"},
		{"https://localhost/oauth/callback", "web"},
	} {
		if got := applicationType(tc.uri); got != tc.want {
			t.Errorf("applicationType(%s) = %s, want %s", tc.uri, got, tc.want)
		}
	}
	// At the wire: the registration request carries it.
	f := newFakeUpstream(t)
	var mu sync.Mutex
	var body map[string]any
	next := f.register
	f.register = func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Unlock()
		next(w, r)
	}
	_, c := f.client(t, Config{})
	var ar *AuthorizationRequired
	if err := unauthorized(t, c, ""); !errors.As(err, &ar) {
		t.Fatalf("discovery: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	// The test Manager's public URL is http://bridge.test: a web client.
	if body["application_type"] != "web" || body["token_endpoint_auth_method"] != "none" {
		t.Errorf("registration request: %v, want application_type web", body)
	}
}
