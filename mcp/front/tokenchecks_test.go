package front

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// One client sending tokens the authorization server must check, as fast
// as it can, holds at most MaxTokenChecksPerClient checks in flight; its
// requests past that get 503 at once, and another client's token is
// checked meanwhile (issue 25, item 10: one client must not spend the
// shared bounds of the token checks for all).
func TestFrontTokenChecksPerClient(t *testing.T) {
	t.Parallel()
	f, _ := testFront(t, nil)
	const resource = "https://mcp.example.com/mcp"
	release := make(chan struct{})
	var inFlight, most atomic.Int32
	auth := &ResourceAuth{
		Resource:             resource,
		AuthorizationServers: []string{"https://as.example.com"},
		Verify: func(ctx context.Context, token string) (*Identity, error) {
			if token == "made-up" {
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				defer inFlight.Add(-1)
				select { // the authorization server, slow to answer
				case <-release:
				case <-ctx.Done():
				}
				return nil, ErrInvalidToken
			}
			return &Identity{Subject: "bob", Issuer: "https://as.example.com", Audience: []string{resource}, Expiry: time.Now().Add(time.Hour)}, nil
		},
	}
	srv, _ := startFrontHTTP(t, f, &HTTPOptions{Resource: auth})
	url := srv.URL + StreamablePath
	init := string(request(1, "initialize", initParams))
	attacker, honest := fromAddr("127.0.0.1"), fromAddr("127.0.0.2")

	const n = 3 * MaxTokenChecksPerClient
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			status, _, _ := post(t, attacker, url, "made-up", "", init)
			statuses <- status
		})
	}
	// The refused ones answer at once; the others wait at the server.
	refused := 0
	for refused < n-MaxTokenChecksPerClient {
		select {
		case s := <-statuses:
			if s != http.StatusServiceUnavailable {
				t.Fatalf("a request past the bound: %d, want 503", s)
			}
			refused++
		case <-time.After(5 * time.Second):
			close(release)
			t.Fatalf("%d of %d requests refused; the others still wait", refused, n-MaxTokenChecksPerClient)
		}
	}
	if status, id, body := post(t, honest, url, "good", "", init); status != http.StatusOK || id == "" {
		t.Errorf("another client while the first holds its checks: %d %s", status, body)
	}
	close(release)
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != http.StatusUnauthorized {
			t.Errorf("a checked made-up token: %d, want 401", s)
		}
	}
	if m := most.Load(); m > MaxTokenChecksPerClient {
		t.Errorf("%d checks of one client in flight at once, bound %d", m, MaxTokenChecksPerClient)
	}
	if status, _, _ := post(t, attacker, url, "good", "", init); status != http.StatusOK {
		t.Errorf("the first client once its checks ended: %d", status)
	}
}
