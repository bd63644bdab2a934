package oauth

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpotc/mcpotc/mcp/oauth/vault"
)

// Two replicas over one vault store: an authorization issued by A is
// served by B (authorize redirect, callback with its code exchange, the
// token kept for the user) and A's check_url then says completed; the
// record names neither the verifier nor the client secret in clear, and
// replayed callbacks are refused on both replicas.
func TestAuthorizationAcrossReplicas(t *testing.T) {
	t.Parallel()
	var exchanges atomic.Int32
	var verifier atomic.Value
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		n := exchanges.Add(1)
		verifier.Store(r.PostForm.Get("code_verifier"))
		w.Header().Set("Content-Type", "application/json")
		if n > 1 {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`)) // a code is good once
			return
		}
		_, _ = fmt.Fprintf(w, `{"access_token":"at-%s","token_type":"Bearer","expires_in":3600,"refresh_token":"rt"}`, r.PostForm.Get("code"))
	}))
	defer as.Close()
	store := &recordingStore{Store: vault.Memory(nil)}
	key := bytes.Repeat([]byte{7}, vault.KeySize)
	replica := func(upstream string) (*Manager, *Client) {
		v, err := vault.New(store, key)
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewManager(&Options{PublicURL: "http://bridge.test", Vault: v, Replicated: true, HTTPClient: as.Client()})
		if err != nil {
			t.Fatal(err)
		}
		// VerifyNone: the replicas' sharing, not who completes.
		c, err := m.Client(Config{Upstream: upstream, ServerURL: "http://mcp.test/mcp", PerUser: true, UserVerification: VerifyNone})
		if err != nil {
			t.Fatal(err)
		}
		return m, c
	}
	a, ca := replica("up")
	b, cb := replica("up")
	srv := &server{resource: "http://mcp.test/mcp", client: registration{ID: "cid", Secret: "client-secret-xyz", Method: "client_secret_post"},
		asm: &oauthex.AuthServerMeta{Issuer: "http://as.test", AuthorizationEndpoint: "http://as.test/authorize", TokenEndpoint: as.URL + "/token"}}
	r, ok := a.challenge(t.Context(), ca, "app", "alice", srv, []string{"read"}).(*AuthorizationRequired)
	if !ok {
		t.Fatal("no challenge")
	}
	state := strings.TrimPrefix(r.URL, "http://bridge.test/oauth/authorize/")
	for _, sealed := range store.puts() {
		if bytes.Contains(sealed, []byte(a.pending[state].verifier)) || bytes.Contains(sealed, []byte("client-secret-xyz")) || bytes.Contains(sealed, []byte("alice")) {
			t.Error("the shared record holds the verifier, the client secret or the user in clear")
		}
	}

	if got := checkStatus(t, b, "/oauth/check/"+state); got != "pending" {
		t.Errorf("check on B before the callback: %s, want pending", got)
	}
	// The browser opens the URL on A; the authorization server's redirect
	// brings it back to B, which knows it for the same browser (the
	// binding cookie is keyed by the vault key both share).
	var browser browser
	w := browser.get(t, a, "/oauth/authorize/"+state)
	loc, _ := url.Parse(w.Header().Get("Location"))
	if w.Code != http.StatusFound || loc.Query().Get("state") != state || loc.Query().Get("client_id") != "cid" {
		t.Fatalf("authorize on A: %d %s", w.Code, loc)
	}
	if w := get(t, b, "/oauth/callback?state="+state+"&code=c0&iss=http://as.test"); w.Code != http.StatusForbidden {
		t.Errorf("callback on B from another browser: %d, want 403", w.Code)
	}
	w = browser.get(t, b, "/oauth/callback?state="+state+"&code=c1&iss=http://as.test")
	if w.Code != http.StatusOK {
		t.Fatalf("callback on B: %d %s", w.Code, w.Body)
	}
	if v, _ := verifier.Load().(string); v != a.pending[state].verifier {
		t.Errorf("B exchanged the code with verifier %q, want A's", v)
	}
	for name, m := range map[string]*Manager{"A": a, "B": b} {
		if got := checkStatus(t, m, "/oauth/check/"+state); got != "completed" {
			t.Errorf("check on %s after the callback: %s, want completed", name, got)
		}
	}
	// The token is alice's, on both replicas.
	for name, c := range map[string]*Client{"A": ca, "B": cb} {
		if h, err := c.Authorization(WithUser(t.Context(), "alice")); h != "Bearer at-c1" || err != nil {
			t.Errorf("alice's header on %s: %q %v", name, h, err)
		}
	}
	// The state was used: a replayed callback is refused on either.
	for name, m := range map[string]*Manager{"A": a, "B": b} {
		if w := get(t, m, "/oauth/callback?state="+state+"&code=c1&iss=http://as.test"); w.Code != http.StatusBadRequest {
			t.Errorf("replayed callback on %s: %d", name, w.Code)
		}
	}
	if n := exchanges.Load(); n != 1 {
		t.Errorf("%d code exchanges, want 1", n)
	}
	// A replica without that upstream does not know the authorization.
	other, _ := replica("elsewhere")
	if w := get(t, other, "/oauth/authorize/"+state); w.Code != http.StatusNotFound {
		t.Errorf("authorize on a replica without the upstream: %d", w.Code)
	}
}

// recordingStore keeps what is written to it.
type recordingStore struct {
	vault.Store
	mu      sync.Mutex
	written [][]byte
}

func (s *recordingStore) Put(ctx context.Context, id string, val []byte, expires time.Time) error {
	s.mu.Lock()
	s.written = append(s.written, bytes.Clone(val))
	s.mu.Unlock()
	return s.Store.Put(ctx, id, val, expires)
}

func (s *recordingStore) puts() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written
}

// Without Options.Replicated (one process: memory or a file store) nothing
// of a challenge is written to the store: a file store is not rewritten
// and synced for each unauthenticated call that gets a challenge (issue:
// 2,000 challenges wrote 3.1 GB). A completed authorization writes its
// token, once.
func TestChallengesDoNotWriteTheStore(t *testing.T) {
	t.Parallel()
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"at","token_type":"Bearer","expires_in":3600}`))
	}))
	defer as.Close()
	store := &recordingStore{Store: vault.Memory(nil)}
	v, err := vault.New(store, bytes.Repeat([]byte{7}, vault.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(&Options{PublicURL: "http://bridge.test", Vault: v, HTTPClient: as.Client()})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := m.Client(Config{Upstream: "up", ServerURL: "http://mcp.test/mcp", PerUser: true, UserVerification: VerifyNone}) // the store's writes, not who completes
	srv := &server{resource: "http://mcp.test/mcp", client: registration{ID: "cid", Method: "none"},
		asm: &oauthex.AuthServerMeta{Issuer: "http://as.test", AuthorizationEndpoint: "http://as.test/authorize", TokenEndpoint: as.URL + "/token"}}
	var last *AuthorizationRequired
	for i := range 2000 {
		last = m.challenge(t.Context(), c, "app", fmt.Sprint("user-", i), srv, nil).(*AuthorizationRequired)
	}
	if n := len(store.puts()); n != 0 {
		t.Fatalf("%d store writes for 2,000 challenges, want 0", n)
	}
	var b browser
	state := strings.TrimPrefix(last.URL, "http://bridge.test/oauth/authorize/")
	b.get(t, m, "/oauth/authorize/"+state)
	if w := b.get(t, m, "/oauth/callback?state="+state+"&code=c&iss=http://as.test"); w.Code != http.StatusOK {
		t.Fatalf("callback: %d %s", w.Code, w.Body)
	}
	if n := len(store.puts()); n != 1 {
		t.Errorf("%d store writes for one completed authorization, want 1 (its token)", n)
	}
}
