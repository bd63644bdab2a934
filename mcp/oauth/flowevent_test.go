package oauth

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// OnFlowEvent hears each step with who it concerns — the challenge, a
// failed authorization with its fixed reason, a refresh and a refused one
// — and never the state, a code or a token.
func TestFlowEvents(t *testing.T) {
	t.Parallel()
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if r.PostForm.Get("refresh_token") == "spent" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		_, _ = fmt.Fprint(w, `{"access_token":"NEW-ACCESS-TOKEN","token_type":"Bearer","expires_in":3600,"refresh_token":"NEW-REFRESH"}`)
	}))
	defer as.Close()
	var mu sync.Mutex
	var events []FlowEvent
	m, err := NewManager(&Options{PublicURL: "http://bridge.test", HTTPClient: as.Client(), OnFlowEvent: func(e FlowEvent) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Client(Config{Upstream: "up", ServerURL: "http://mcp.test/mcp", PerUser: true, UserVerification: VerifyNone})
	if err != nil {
		t.Fatal(err)
	}
	asm := &oauthex.AuthServerMeta{Issuer: "http://as.test", AuthorizationEndpoint: "http://as.test/authorize", TokenEndpoint: as.URL + "/token"}
	srv := &server{resource: "http://mcp.test/mcp", asm: asm, client: registration{ID: "cid", Method: "none"}}
	r, ok := m.challenge(t.Context(), c, "jwt:app", "alice", srv, []string{"read"}).(*AuthorizationRequired)
	if !ok {
		t.Fatal("no challenge")
	}
	state := strings.TrimPrefix(r.URL, "http://bridge.test/oauth/authorize/")
	var b browser
	b.get(t, m, "/oauth/authorize/"+state)
	b.get(t, m, "/oauth/callback?state="+state+"&error=access_denied")

	ctx := WithUser(t.Context(), "alice")
	soon := time.Now().Add(refreshMargin / 2)
	for _, refresh := range []string{"OLD-REFRESH", "spent"} {
		if err := c.save(ctx, "alice", &record{ServerURL: "http://mcp.test/mcp", AccessToken: "OLD-ACCESS", RefreshToken: refresh, Expiry: soon,
			TokenURL: as.URL + "/token", Client: registration{ID: "cid", Method: "none"}}); err != nil {
			t.Fatal(err)
		}
		_, _ = c.Authorization(ctx)
	}

	mu.Lock()
	defer mu.Unlock()
	want := []FlowEvent{
		{Upstream: "up", Event: "challenge", Caller: "jwt:app", User: "alice"},
		{Upstream: "up", Event: "authorization_failed", Caller: "jwt:app", User: "alice"},
		{Upstream: "up", Event: "refresh", User: "alice"},
		{Upstream: "up", Event: "refresh_failed", User: "alice"},
	}
	if len(events) != len(want) {
		t.Fatalf("events %+v, want %d", events, len(want))
	}
	for i, e := range events {
		reason := e.Reason
		e.Reason = ""
		if e != want[i] {
			t.Errorf("event %d: %+v, want %+v", i, e, want[i])
		}
		if (e.Event == "authorization_failed") != (reason != "") {
			t.Errorf("event %d: reason %q", i, reason)
		}
		for _, secret := range []string{state, "NEW-ACCESS-TOKEN", "NEW-REFRESH", "OLD-ACCESS", "OLD-REFRESH", "spent"} {
			if strings.Contains(fmt.Sprintf("%+v", events[i]), secret) {
				t.Errorf("event %d holds %q: %+v", i, secret, events[i])
			}
		}
	}
}
