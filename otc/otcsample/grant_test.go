package otcsample

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpotc/mcpotc/internal/otctest"
)

// grantServer serves a fresh sample toolkit.
func grantServer(t *testing.T) (*Toolkit, *httptest.Server) {
	t.Helper()
	tk := New(nil)
	h, err := tk.Handler(nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return tk, srv
}

// gmailCall posts Gmail.GetEmails (flat OXP dialect) with the given context
// and returns the status and the decoded body.
type gmailAnswer struct {
	status int
	body   map[string]any
}

func gmailCall(t *testing.T, base string, context map[string]any) gmailAnswer {
	t.Helper()
	req := map[string]any{"tool_id": "Gmail.GetEmails@1.2.0", "input": map[string]any{"query": "is:unread"}}
	if context != nil {
		req["context"] = context
	}
	body, _ := json.Marshal(req)
	status, out := otctest.PostCall(t, base, body)
	return gmailAnswer{status, out}
}

func grantGet(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// challengeOf is the only authorization challenge of a 400 body.
func challengeOf(t *testing.T, a gmailAnswer) (url, check string) {
	t.Helper()
	status, body := a.status, a.body
	if status != http.StatusBadRequest {
		t.Fatalf("HTTP %d %v, want 400 with a challenge", status, body)
	}
	mr, _ := body["missing_requirements"].(map[string]any)
	auth, _ := mr["authorization"].([]any)
	if len(auth) != 1 {
		t.Fatalf("want one challenge: %v", body)
	}
	ch := auth[0].(map[string]any)
	if ch["id"] != "google" {
		t.Errorf("challenge id %v, want google", ch["id"])
	}
	return ch["url"].(string), ch["check_url"].(string)
}

var sampleEmails = map[string]any{"emails": []any{
	map[string]any{"id": "email_1", "subject": "Welcome to Gmail", "snippet": "Hello, welcome to your inbox!"},
	map[string]any{"id": "email_2", "subject": "Your Receipt", "snippet": "Thank you for your purchase..."},
}}

// TestAuthorizationFlowCompletes: a user's challenge, opened, gives that
// user (by context.user_id, without a token) the emails; another user, and
// a call without a user id, still get a challenge.
func TestAuthorizationFlowCompletes(t *testing.T) {
	_, srv := grantServer(t)
	alice := map[string]any{"user_id": "alice"}
	authURL, checkURL := challengeOf(t, gmailCall(t, srv.URL, alice))
	if code, body := grantGet(t, checkURL); code != 200 || strings.TrimSpace(body) != `{"status":"pending"}` {
		t.Errorf("check before: %d %s", code, body)
	}
	if code, body := grantGet(t, authURL); code != 200 || !strings.Contains(body, "same user_id") {
		t.Errorf("authorize: %d %s", code, body)
	}
	if code, body := grantGet(t, checkURL); code != 200 || strings.TrimSpace(body) != `{"status":"completed"}` {
		t.Errorf("check after: %d %s", code, body)
	}
	a := gmailCall(t, srv.URL, alice)
	status, body := a.status, a.body
	if status != 200 || body["success"] != true || !reflect.DeepEqual(body["value"], sampleEmails) {
		t.Fatalf("retry for alice: %d %v, want 200 with the emails", status, body)
	}
	// Another user, and no user at all: the grant is alice's only.
	challengeOf(t, gmailCall(t, srv.URL, map[string]any{"user_id": "bob"}))
	challengeOf(t, gmailCall(t, srv.URL, nil))
	// A token still works for anyone.
	a = gmailCall(t, srv.URL, map[string]any{"authorization": []any{map[string]any{"id": "google", "token": "t"}}})
	status, body = a.status, a.body
	if status != 200 || body["success"] != true {
		t.Errorf("with a token: %d %v", status, body)
	}
}

// TestAuthorizationNoUserNoGrant: a challenge given to a call without a
// user id completes (check says completed) but grants nobody: the retry
// needs a token.
func TestAuthorizationNoUserNoGrant(t *testing.T) {
	tk, srv := grantServer(t)
	authURL, checkURL := challengeOf(t, gmailCall(t, srv.URL, nil))
	if code, body := grantGet(t, authURL); code != 200 || !strings.Contains(body, "any token for provider 'google'") {
		t.Errorf("authorize: %d %s", code, body)
	}
	if code, body := grantGet(t, checkURL); code != 200 || strings.TrimSpace(body) != `{"status":"completed"}` {
		t.Errorf("check: %d %s", code, body)
	}
	challengeOf(t, gmailCall(t, srv.URL, nil))
	challengeOf(t, gmailCall(t, srv.URL, map[string]any{"user_id": ""}))
	tk.mu.Lock()
	n := len(tk.grants)
	tk.mu.Unlock()
	if n != 0 {
		t.Errorf("%d grants kept for a challenge without a user, want 0", n)
	}
}

// TestAuthorizationGrantsBounded: beyond maxGrants, the oldest grant goes
// (its user is challenged again); the newest stays.
func TestAuthorizationGrantsBounded(t *testing.T) {
	tk, srv := grantServer(t)
	for i := 0; i <= maxGrants; i++ {
		tk.mu.Lock()
		tk.grantLocked(fmt.Sprintf("user-%d", i), "google")
		tk.mu.Unlock()
	}
	tk.mu.Lock()
	n, order := len(tk.grants), len(tk.grantOrder)
	tk.mu.Unlock()
	if n != maxGrants || order != maxGrants {
		t.Errorf("%d grants (%d in order), want %d", n, order, maxGrants)
	}
	challengeOf(t, gmailCall(t, srv.URL, map[string]any{"user_id": "user-0"}))
	if a := gmailCall(t, srv.URL, map[string]any{"user_id": fmt.Sprintf("user-%d", maxGrants)}); a.status != 200 || a.body["success"] != true {
		t.Errorf("the newest grant: %d %v", a.status, a.body)
	}
	// Challenges are bounded too.
	for i := 0; i < maxChallenges+10; i++ {
		tk.challenge(httptest.NewRequest(http.MethodGet, "/", nil), "u", "google")
	}
	tk.mu.Lock()
	n = len(tk.challenges)
	tk.mu.Unlock()
	if n != maxChallenges {
		t.Errorf("%d challenges kept, want %d", n, maxChallenges)
	}
}
