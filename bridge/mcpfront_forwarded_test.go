package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/wiretest"
	"github.com/mcpotc/mcpotc/mcp/front"
)

// seenCall is what the OTC upstream received of one call, as data.
type seenCall struct {
	CallID string
	UserID string
	Token  string // context.authorization's "google" token
}

// keyingOTC is an OTC upstream with one tool that needs a user id and a
// "google" token, and that keys its answers by call_id alone, as an OTC
// server does for one caller (the MCP front is its only caller): a
// call_id it saw gets the first answer again. Each run answers its own
// number and the user it ran for.
type keyingOTC struct {
	mu      sync.Mutex
	seen    []seenCall
	answers map[string]string
}

func (k *keyingOTC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/tools" {
		_, _ = io.WriteString(w, `{"$schema":"urn:oxp:1.0","items":[{"id":"Me.Who@1.0.0","name":"Me_Who","description":"d","version":"1.0.0",`+
			`"input_schema":{"type":"object"},"requirements":{"user_id":true,"authorization":[{"id":"google"}]}}]}`)
		return
	}
	var req struct {
		Request struct {
			CallID  string `json:"call_id"`
			Context struct {
				UserID        string `json:"user_id"`
				Authorization []struct {
					ID    string `json:"id"`
					Token string `json:"token"`
				} `json:"authorization"`
			} `json:"context"`
		} `json:"request"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	c := seenCall{CallID: req.Request.CallID, UserID: req.Request.Context.UserID}
	for _, a := range req.Request.Context.Authorization {
		if a.ID == "google" {
			c.Token = a.Token
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seen = append(k.seen, c)
	answer, ok := k.answers[c.CallID]
	if !ok {
		answer = fmt.Sprintf("run %d for %s", len(k.answers)+1, c.UserID)
		k.answers[c.CallID] = answer
	}
	fmt.Fprintf(w, `{"$schema":"urn:oxp:1.0","result":{"call_id":%q,"success":true,"value":%q}}`, c.CallID, answer)
}

func (k *keyingOTC) last(t *testing.T) seenCall {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.seen) == 0 {
		t.Fatal("the OTC upstream received no call")
	}
	return k.seen[len(k.seen)-1]
}

func (k *keyingOTC) calls() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.seen)
}

// carrierCall is a tools/call of Me_Who with an mcpotc/otc-request carrier:
// call_id, and a context naming user and token (user "" for none).
func carrierCall(callID, user, token string) string {
	ctx := map[string]any{"authorization": []any{map[string]any{"id": "google", "token": token}}}
	if user != "" {
		ctx["user_id"] = user
	}
	meta, _ := json.Marshal(map[string]any{"mcpotc/otc-request": map[string]any{"call_id": callID, "context": ctx}})
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Me_Who","arguments":{},"_meta":` + string(meta) + `}}`
}

// callText posts body as token's bearer to url and returns the text of
// the result (prefixed "error: " for an isError result).
func callText(t *testing.T, url, token, body string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{"Mcp-Protocol-Version": {"2025-11-25"}}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	status, _, got := wiretest.MCPHTTP(t, ctx, http.MethodPost, url, body, h)
	var frame struct {
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(got), &frame) != nil || len(frame.Result.Content) != 1 {
		t.Fatalf("call: %d %s", status, got)
	}
	if frame.Result.IsError {
		return "error: " + frame.Result.Content[0].Text
	}
	return frame.Result.Content[0].Text
}

// forwardedFront serves an MCP front over one upstream (upstream applied
// to its settings) with opts, and returns its /mcp URL.
func forwardedFront(t *testing.T, k *keyingOTC, upstream func(*OTCServer), opts *front.HTTPOptions) string {
	t.Helper()
	up := otcUpstreamOn(t, "me", "", k)
	up.UserID, up.AcceptContext, up.Tokens = "static", true, map[string]string{"google": "operator-token"}
	upstream(&up)
	f, err := NewMCPFront(context.Background(), []OTCServer{up}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts.Stateless, opts.DisableLocalhostProtection = true, true
	srv := httptest.NewServer(f.Server().StreamableHTTPHandler(opts))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// oauthCallers authenticates "tok-<subject>" as that subject, and trusts
// the subject "otc-front" (a chained serve-otc) to forward context.
func oauthCallers() *front.HTTPOptions {
	const resource = "http://mcp.test/mcp"
	return &front.HTTPOptions{
		Resource: &front.ResourceAuth{Resource: resource, AuthorizationServers: []string{"https://as.test"},
			Verify: func(_ context.Context, token string) (*front.Identity, error) {
				sub, ok := strings.CutPrefix(token, "tok-")
				if !ok {
					return nil, front.ErrInvalidToken
				}
				return &front.Identity{Subject: sub, Audience: []string{resource}}, nil
			}},
		Forwarders: []front.Identity{{Subject: "otc-front"}},
	}
}

func expectSeen(t *testing.T, what string, got, want seenCall) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: the OTC upstream received %+v, want %+v", what, got, want)
	}
}

// Forwarded carriers (issue 25, item 9): an MCP caller that is not the
// chain peer cannot change the OTC call's user or tokens with a forged
// mcpotc/otc-request carrier — the OTC upstream receives exactly what it
// receives without one — and its carrier call_id is scoped to it, so two
// callers sending the same call_id get their own answers; the chain peer
// (here the OAuth forwarder otc-front) still forwards user, token and
// call_id as they are.
func TestMCPFrontForwardedContextFromChainPeerOnly(t *testing.T) {
	k := &keyingOTC{answers: map[string]string{}}
	url := forwardedFront(t, k, func(*OTCServer) {}, oauthCallers())

	if got := callText(t, url, "tok-alice", carrierCall("same-key", "victim", "forged-token")); got != "run 1 for static" {
		t.Errorf("alice with a forged carrier: %q", got)
	}
	aliceForged := k.last(t)
	callText(t, url, "tok-alice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Me_Who","arguments":{}}}`)
	plain := k.last(t)
	expectSeen(t, "alice with a forged carrier, as without one", seenCall{UserID: aliceForged.UserID, Token: aliceForged.Token},
		seenCall{UserID: plain.UserID, Token: plain.Token})
	expectSeen(t, "alice with a forged carrier", seenCall{UserID: aliceForged.UserID, Token: aliceForged.Token},
		seenCall{UserID: "static", Token: "operator-token"})
	if aliceForged.CallID == "same-key" || !strings.HasSuffix(aliceForged.CallID, "-same-key") {
		t.Errorf("alice's carrier call_id reached the upstream as %q: want it scoped to her", aliceForged.CallID)
	}

	// Bob, with the same carrier call_id: his own call, his own answer.
	if got := callText(t, url, "tok-bob", carrierCall("same-key", "", "x")); got != "run 3 for static" {
		t.Errorf("bob with alice's call_id: %q, want his own run (not alice's answer)", got)
	}
	if bob := k.last(t); bob.CallID == aliceForged.CallID {
		t.Errorf("bob's and alice's call_ids meet upstream: %q", bob.CallID)
	}
	// Alice again with her call_id: her first answer (idempotency holds).
	if got := callText(t, url, "tok-alice", carrierCall("same-key", "", "x")); got != "run 1 for static" {
		t.Errorf("alice repeating her call_id: %q, want her first answer", got)
	}

	// The chain peer forwards its caller's user, token and call_id.
	if got := callText(t, url, "tok-otc-front", carrierCall("chain-key", "user-chain", "chain-token")); got != "run 4 for user-chain" {
		t.Errorf("the chain peer: %q", got)
	}
	expectSeen(t, "the chain peer's carrier", k.last(t), seenCall{CallID: "chain-key", UserID: "user-chain", Token: "chain-token"})
}

// With user_id_from_token, no carrier overrides the user the caller's own
// token names: a forged one is ignored, and the chain peer's carrier naming
// another user than its token is refused with a result the model reads
// (the upstream is not called); without a user_id it runs as the token's.
func TestMCPFrontForwardedUserNeverOverridesToken(t *testing.T) {
	k := &keyingOTC{answers: map[string]string{}}
	url := forwardedFront(t, k, func(u *OTCServer) { u.UserIDFromToken = true }, oauthCallers())

	callText(t, url, "tok-alice", carrierCall("k1", "victim", "forged-token"))
	forged := k.last(t)
	expectSeen(t, "alice with a forged user", seenCall{UserID: forged.UserID, Token: forged.Token}, seenCall{UserID: "alice", Token: "operator-token"})

	before := k.calls()
	got := callText(t, url, "tok-otc-front", carrierCall("k2", "someone-else", "chain-token"))
	if !strings.HasPrefix(got, "error: The call was refused: the forwarded OTC context names a user_id that differs from the user of the MCP caller's own token") {
		t.Errorf("the chain peer naming another user than its token: %q", got)
	}
	if k.calls() != before {
		t.Error("the refused call reached the upstream")
	}
	callText(t, url, "tok-otc-front", carrierCall("k3", "", "chain-token"))
	expectSeen(t, "the chain peer's carrier without a user", k.last(t), seenCall{CallID: "k3", UserID: "otc-front", Token: "chain-token"})
	callText(t, url, "tok-otc-front", carrierCall("k4", "otc-front", "chain-token"))
	expectSeen(t, "the chain peer's carrier naming its token's user", k.last(t), seenCall{CallID: "k4", UserID: "otc-front", Token: "chain-token"})
}

// Without authentication the chain peer is a loopback client: a caller
// from another address is not (its carrier context is ignored and its
// call_id scoped), one from 127.0.0.1 is.
func TestMCPFrontForwardedContextWithoutAuth(t *testing.T) {
	k := &keyingOTC{answers: map[string]string{}}
	up := otcUpstreamOn(t, "me", "", k)
	up.UserID, up.AcceptContext, up.Tokens = "static", true, map[string]string{"google": "operator-token"}
	f, err := NewMCPFront(context.Background(), []OTCServer{up}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := f.Server().StreamableHTTPHandler(&front.HTTPOptions{Stateless: true, DisableLocalhostProtection: true})
	for _, tc := range []struct {
		remote string
		want   seenCall
	}{
		{"192.0.2.7:5555", seenCall{UserID: "static", Token: "operator-token"}},
		{"127.0.0.1:5555", seenCall{CallID: "k-127.0.0.1:5555", UserID: "user-chain", Token: "chain-token"}},
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(carrierCall("k-"+tc.remote, "user-chain", "chain-token")))
		r.RemoteAddr = tc.remote
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			t.Fatalf("from %s: %d %s", tc.remote, rec.Code, rec.Body)
		}
		got := k.last(t)
		if tc.want.CallID == "" {
			if !strings.HasSuffix(got.CallID, "-k-"+tc.remote) {
				t.Errorf("from %s: call_id %q, want it scoped", tc.remote, got.CallID)
			}
			got.CallID = ""
		}
		expectSeen(t, "from "+tc.remote, got, tc.want)
	}
}

// The sole chain peer's call_ids go on as they are, but never as another
// caller's scoped one (issue 34, item 9): alice's carrier call_id reaches
// the OTC upstream scoped to her; the chain peer sending exactly that
// scoped id gets its own run, not alice's answer, and the upstream sees
// another id. The chain peer's own call_ids still go as they are.
func TestMCPFrontChainPeerCannotSendScopedCallID(t *testing.T) {
	k := &keyingOTC{answers: map[string]string{}}
	url := forwardedFront(t, k, func(*OTCServer) {}, oauthCallers())

	if got := callText(t, url, "tok-alice", carrierCall("alice-key", "", "x")); got != "run 1 for static" {
		t.Fatalf("alice: %q", got)
	}
	alice := k.last(t).CallID
	if got := callText(t, url, "tok-otc-front", carrierCall(alice, "user-chain", "chain-token")); got != "run 2 for user-chain" {
		t.Errorf("the chain peer sending alice's scoped call_id %q: %q, want its own run (not alice's answer)", alice, got)
	}
	if forged := k.last(t).CallID; forged == alice {
		t.Errorf("the chain peer's call_id reached the upstream as alice's scoped one %q", forged)
	}
	if got := callText(t, url, "tok-otc-front", carrierCall("chain-key", "user-chain", "chain-token")); got != "run 3 for user-chain" {
		t.Errorf("the chain peer's own call: %q", got)
	}
	expectSeen(t, "the chain peer's own call_id", k.last(t), seenCall{CallID: "chain-key", UserID: "user-chain", Token: "chain-token"})
}

// Behind a trusted proxy, chain-peer trust comes from the connection's
// own peer, never from X-Forwarded-For (issue 34, item 3): a remote client
// that writes "X-Forwarded-For: 127.0.0.1" through the proxy (here 10.0.0.5,
// or a proxy on loopback, 127.0.0.1) is not the chain peer — its carrier's
// user and token are ignored and its call_id is scoped — and nothing a
// trusted proxy relays is one; a real loopback chain peer that is not a
// proxy (127.0.0.2) still is.
func TestMCPFrontChainPeerNotFromForwardedFor(t *testing.T) {
	k := &keyingOTC{answers: map[string]string{}}
	up := otcUpstreamOn(t, "me", "", k)
	up.UserID, up.AcceptContext, up.Tokens = "static", true, map[string]string{"google": "operator-token"}
	f, err := NewMCPFront(context.Background(), []OTCServer{up}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := f.Server().StreamableHTTPHandler(&front.HTTPOptions{Stateless: true, DisableLocalhostProtection: true,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}})
	ignored := seenCall{UserID: "static", Token: "operator-token"}
	for i, tc := range []struct {
		remote, xff string
		want        seenCall
	}{
		{"10.0.0.5:5555", "127.0.0.1", ignored},
		{"10.0.0.5:5555", "::1", ignored},
		{"10.0.0.5:5555", "127.0.0.1, 127.0.0.1", ignored},
		{"127.0.0.1:5555", "127.0.0.1", ignored},
		{"127.0.0.1:5555", "", ignored},
		{"127.0.0.2:5555", "", seenCall{CallID: "k-5", UserID: "user-chain", Token: "chain-token"}},
		{"127.0.0.2:5555", "192.0.2.9", seenCall{CallID: "k-6", UserID: "user-chain", Token: "chain-token"}},
	} {
		callID := "k-" + strconv.Itoa(i)
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(carrierCall(callID, "user-chain", "chain-token")))
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			t.Fatalf("from %s (X-Forwarded-For %q): %d %s", tc.remote, tc.xff, rec.Code, rec.Body)
		}
		got := k.last(t)
		if tc.want.CallID == "" {
			if got.CallID == callID || !strings.HasSuffix(got.CallID, "-"+callID) {
				t.Errorf("from %s (X-Forwarded-For %q): call_id %q, want it scoped", tc.remote, tc.xff, got.CallID)
			}
			got.CallID = ""
		}
		expectSeen(t, "from "+tc.remote+" (X-Forwarded-For "+strconv.Quote(tc.xff)+")", got, tc.want)
	}
}
