//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestScaleOutOAuth: three serve-otc replicas share one Redis (--state)
// in per-user mode in front of the TypeScript SDK's OAuth-protected
// example server, with one public URL (replica 2's, standing for a load
// balancer's). The operator authorizes once; replicas started after
// serve at once. Alice is challenged by replica 0, completes the
// authorization through replica 2 (which did not issue it: it rebuilds it
// from the vault; she signs in at the users' OpenID provider first,
// user_verification oidc), replica 1's check_url says completed, and her calls
// through each replica go with her own token, without a new challenge.
func TestScaleOutOAuth(t *testing.T) {
	redisURL, _ := startRedis(t)
	ports := []int{freePort(t), freePort(t), freePort(t)}
	public := "http://127.0.0.1:" + strconv.Itoa(ports[2])
	pu := oauthPerUser(t, t.TempDir(), public)
	server, config, env := pu.server, pu.config, pu.env
	args := append([]string{"--state", redisURL, "--token-key-env", "MCPOTC_TOKEN_KEY", "--public-url", public}, pu.args...)
	reps := make([]*otcfBridge, 3)

	// The operator authorizes the catalog through replica 2.
	reps[2] = oauthBridge(t, ports[2], config, env, args...)
	oauthAuthorize(t, oauthWaitChallenge(t, reps[2]))
	reps[2].waitHealthy(t, 30*time.Second)
	operator := oauthLastToken(t, server)
	// Replicas started now find the operator's token in Redis.
	for _, i := range []int{0, 1} {
		reps[i] = oauthBridge(t, ports[i], config, env, args...)
		reps[i].waitHealthy(t, 30*time.Second)
	}

	d := otcfDialects[2]
	call := func(i int, user string) *otcfResp {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), otcfCallTimeout)
		defer cancel()
		return reps[i].call(t, ctx, d, map[string]any{"tool_id": "Demo.greet", "input": map[string]any{"name": "user"},
			"context": map[string]any{"user_id": user}}, pu.apiKey)
	}
	challenge := func(i int, user string) (url, check string) {
		t.Helper()
		r := call(i, user)
		body, _ := r.Body.(map[string]any)
		mr, _ := body["missing_requirements"].(map[string]any)
		as, _ := mr["authorization"].([]any)
		if r.Status != http.StatusBadRequest || len(as) != 1 {
			t.Fatalf("%s on replica %d without a token: %d %s, want the 400 challenge", user, i, r.Status, otcfTrunc(r.Raw))
		}
		a := as[0].(map[string]any)
		url, _ = a["url"].(string)
		check, _ = a["check_url"].(string)
		if !strings.HasPrefix(url, public+"/oauth/authorize/") {
			t.Fatalf("%s's challenge on replica %d: %s, want the public URL", user, i, otcfShow(a))
		}
		return url, check
	}

	aliceURL, aliceCheck := challenge(0, oauthUserSub("alice"))
	// Served by replica 2, issued by replica 0: the sign-in at the users'
	// provider, the upstream's authorization and the callback.
	newOAuthBrowser(t, "alice").authorize(aliceURL)
	checkOn1 := strings.Replace(aliceCheck, public, reps[1].base, 1)
	if r := reps[1].get(t, strings.TrimPrefix(checkOn1, reps[1].base), nil, nil); otcfShow(r.Body) != `{"status":"completed"}` {
		t.Errorf("alice's check_url on replica 1: %d %s", r.Status, otcfTrunc(r.Raw))
	}
	var alice string
	for i := range reps {
		r := call(i, oauthUserSub("alice"))
		if r.Status != http.StatusOK || !strings.Contains(string(r.Raw), `"Hello, user!"`) {
			t.Fatalf("alice through replica %d: %d %s, want her call to succeed without a new challenge", i, r.Status, otcfTrunc(r.Raw))
		}
		tok := oauthLastToken(t, server)
		if alice == "" {
			alice = tok
		}
		if tok != alice || tok == operator {
			t.Errorf("alice through replica %d went with another token (the operator's: %t)", i, tok == operator)
		}
	}
	// Bob is not alice: challenged, on any replica.
	if bobURL, _ := challenge(1, oauthUserSub("bob")); bobURL == aliceURL {
		t.Error("bob got alice's authorization")
	}
	for _, r := range reps {
		if strings.Contains(r.p.Stderr(), alice) || strings.Contains(r.p.Stderr(), operator) {
			t.Error("a token is in a replica's log")
		}
	}
	t.Logf("scale-out: OAuth per user over 3 replicas sharing Redis: the operator authorized once (replicas started later served at once); alice challenged by replica 0, authorized through replica 2 (which rebuilt the authorization from the vault), check_url on replica 1: completed; her calls through replicas 0, 1 and 2: 3 answered with her own token (not the operator's), 0 new challenges; bob still challenged")
}
