//go:build e2e

package e2e

// The operator controls (issue 29: tool overrides, access policy, rate
// limits) through the built binary, with real processes: zitadel/oidc's
// example OpenID Provider issuing the MCP front's tokens (with a groups
// claim), HS256 JWTs at the OTC front, and three serve-otc replicas
// sharing a redis-server for a limit that holds across them. The README's
// examples of "Operator controls" are the configurations these tests run
// (testdata/config/serve-mcp-controls.json and serve-otc-controls.json).

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
)

// groupsStorage is the example OP's storage whose access tokens carry a
// groups claim, per client (the subject of a client-credentials token).
type groupsStorage struct {
	*jwtStorage
	groups map[string][]string
}

func (s *groupsStorage) GetPrivateClaimsFromScopes(_ context.Context, _, clientID string, _ []string) (map[string]any, error) {
	if g, ok := s.groups[clientID]; ok {
		return map[string]any{"groups": g}, nil
	}
	return nil, nil
}

// startGroupsOP is startZitadelOP whose tokens carry groups.
func startGroupsOP(t *testing.T, groups map[string][]string) *zitadelOP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String() + "/"
	s := &jwtStorage{Storage: storage.NewStorage(storage.NewUserStore(issuer)), audience: map[string]string{}}
	srv := &http.Server{Handler: exampleop.SetupServer(issuer, &groupsStorage{jwtStorage: s, groups: groups}, slog.New(slog.DiscardHandler), false),
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &zitadelOP{issuer: issuer, store: s}
}

// controlsConfig writes the README's config file with the replacements
// old → new (each must be in it: the README changed otherwise).
func controlsConfig(t *testing.T, name string, pairs ...string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "testdata", "config", name))
	if err != nil {
		t.Fatal(err)
	}
	text := replaceAll(t, name, string(b), pairs...)
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mcpJSONRPC posts one JSON-RPC request to a stateless serve-mcp with
// token, and returns its answer frame.
func mcpJSONRPC(t *testing.T, url, token, method, params string) map[string]any {
	t.Helper()
	h := http.Header{"Mcp-Protocol-Version": {"2025-11-25"}}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	status, _, body := httpDo(t, http.MethodPost, url, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params), h)
	var frame map[string]any
	if status != http.StatusOK || json.Unmarshal([]byte(body), &frame) != nil {
		t.Fatalf("%s: %d %s", method, status, truncate(body, 500))
	}
	return frame
}

// TestControlsMCPFrontOIDC runs the README's serve-mcp controls
// (testdata/config/serve-mcp-controls.json) against the sample OTC
// toolkit, with two zitadel/oidc OPs as --oauth-issuer (the README's
// issuer is OP A). Principals are the OPs' client-credentials tokens:
// alice-app (groups admins), bob-app (groups staff), carol-app (no
// groups) at A, and carol-app at B.
//
//   - Overrides: Calculator_Add is listed as add with its title and
//     description, and called as Calculator.Add; Doorbell_Ring is not
//     listed; both old names are unknown.
//   - Access (attacks): bob guessing System_GetTimestamp, Gmail_GetEmails
//     or the hidden Doorbell_Ring gets, byte for byte, the unknown tool's
//     answer; carol of OP B is not carol of OP A (the same subject); a
//     token bob signs himself with groups admins is 401. Honest: each
//     lists and calls what the rules grant it.
//   - Limits: bob's fourth call of add within a minute is an isError
//     result naming the limit and the wait, counted in
//     mcpotc_rate_limited_total; alice's calls are her own bucket's.
func TestControlsMCPFrontOIDC(t *testing.T) {
	groups := map[string][]string{"alice-app": {"admins"}, "bob-app": {"staff"}}
	opA, opB := startGroupsOP(t, groups), startGroupsOP(t, nil)
	bin := buildMcpotc(t)
	samplePort := freePort(t)
	sample := startProcess(t, context.Background(), bin, []string{"sample-otc", "--listen", "127.0.0.1:" + strconv.Itoa(samplePort)}, nil)
	sampleURL := "http://127.0.0.1:" + strconv.Itoa(samplePort)
	sample.waitHTTP(t, sampleURL+"/health", 30*time.Second)
	cfg := controlsConfig(t, "serve-mcp-controls.json", "http://127.0.0.1:8081", sampleURL, "https://login.example.com/", opA.issuer)
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := startBridge(t, ctx, "http", []string{"--stateless", "--config", cfg, "--oauth-issuer", opA.issuer, "--oauth-issuer", opB.issuer,
		"--oauth-allow-untyped-jwt", "--metrics-listen", metricsAddr, "--log-format", "json"}, nil)
	for _, c := range []string{"alice-app", "bob-app", "carol-app"} {
		opA.store.client(c, b.url)
	}
	opB.store.client("carol-app", b.url)
	alice, bob, carol, carolB := opA.token(t, "alice-app"), opA.token(t, "bob-app"), opA.token(t, "carol-app"), opB.token(t, "carol-app")

	listed := func(token string) (names []string, tools []map[string]any) {
		t.Helper()
		frame := mcpJSONRPC(t, b.url, token, "tools/list", `{}`)
		result, _ := frame["result"].(map[string]any)
		list, _ := result["tools"].([]any)
		for _, it := range list {
			tool := it.(map[string]any)
			names = append(names, tool["name"].(string))
			tools = append(tools, tool)
		}
		slices.Sort(names)
		return names, tools
	}
	// The catalog is listed at start; wait for it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if names, _ := listed(alice); len(names) > 0 || time.Now().After(deadline) {
			break
		}
	}
	for who, tc := range map[string]struct {
		token string
		want  []string
	}{
		"alice-app (admins)": {alice, []string{"Gmail_GetEmails", "SMS_Send", "System_GetTimestamp", "add"}},
		"bob-app (staff)":    {bob, []string{"add"}},
		"carol-app of OP A":  {carol, []string{"System_GetTimestamp", "add"}},
		"carol-app of OP B":  {carolB, []string{"add"}},
	} {
		if got, _ := listed(tc.token); !slices.Equal(got, tc.want) {
			t.Errorf("%s lists %v, want %v", who, got, tc.want)
		}
	}
	_, tools := listed(alice)
	for _, tool := range tools {
		if tool["name"] == "add" && (tool["title"] != "Add two numbers" || tool["description"] != `Adds a and b; answers {"sum": a + b}.`) {
			t.Errorf("add is listed as %v", tool)
		}
	}

	// Guessing: every refused name answers as a name nobody serves. The
	// message may suggest names the caller lists (Calculator_Add is add's
	// old name: "did you mean 'add'?"), never one it does not: the
	// suggestions are checked against the caller's list, then left out.
	suggestion := regexp.MustCompile(`; did you mean ([^"]*)\?`)
	call := func(token, name, args string) string {
		t.Helper()
		frame := mcpJSONRPC(t, b.url, token, "tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, name, args))
		raw, _ := json.Marshal(frame)
		got := string(raw)
		if m := suggestion.FindStringSubmatch(got); m != nil {
			visible, _ := listed(token)
			for _, q := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(m[1], -1) {
				if !slices.Contains(visible, q[1]) {
					t.Errorf("calling %s suggests %q, which the caller does not list (%v)", name, q[1], visible)
				}
			}
			got = suggestion.ReplaceAllString(got, "")
		}
		return strings.ReplaceAll(got, name, "NAME")
	}
	unknown := call(bob, "No_Such_Tool", `{}`)
	for _, name := range []string{"System_GetTimestamp", "Gmail_GetEmails", "Doorbell_Ring", "Calculator_Add"} {
		if got := call(bob, name, `{}`); got != unknown {
			t.Errorf("bob calling %s: %s\nwant the unknown tool's %s", name, got, unknown)
		}
	}
	if got := call(carolB, "System_GetTimestamp", `{}`); got != unknown {
		t.Errorf("carol of OP B calling System_GetTimestamp: %s", got)
	}
	if got := call(carol, "System_GetTimestamp", `{}`); !strings.Contains(got, `"result"`) || strings.Contains(got, `"isError":true`) {
		t.Errorf("carol of OP A calling System_GetTimestamp: %s", got)
	}
	// bob's own token, with groups admins, signed by a key OP A does not
	// publish.
	stranger, _ := rsa.GenerateKey(rand.Reader, 2048)
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: stranger}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "key1"))
	payload, _ := json.Marshal(map[string]any{"iss": opA.issuer, "sub": "bob-app", "aud": []string{b.url}, "groups": []string{"admins"},
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()})
	jws, _ := signer.Sign(payload)
	forged, _ := jws.CompactSerialize()
	if status, _, body := httpDo(t, http.MethodPost, b.url, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
		http.Header{"Authorization": {"Bearer " + forged}, "Mcp-Protocol-Version": {"2025-11-25"}}); status != http.StatusUnauthorized {
		t.Errorf("bob's self-signed admins token: %d %s", status, truncate(body, 300))
	}

	// Limits: add, 3 a minute per caller.
	for i := 0; i < 3; i++ {
		if got := call(bob, "add", `{"a":2,"b":3}`); !strings.Contains(got, `"sum":5`) {
			t.Fatalf("bob's call %d of add: %s", i+1, got)
		}
	}
	refused := mcpJSONRPC(t, b.url, bob, "tools/call", `{"name":"add","arguments":{"a":2,"b":3}}`)
	res, _ := refused["result"].(map[string]any)
	content, _ := res["content"].([]any)
	text := ""
	if len(content) == 1 {
		text, _ = content[0].(map[string]any)["text"].(string)
	}
	meta, _ := res["_meta"].(map[string]any)
	limit, _ := meta["mcpotc/rate-limit"].(map[string]any)
	if res["isError"] != true || !regexp.MustCompile(`^Rate limit reached: this caller may call add 3 calls per minute\. Try again in (1?[0-9]|20) seconds\.$`).MatchString(text) ||
		limit["limit"] != "tool" || limit["retry_after_ms"].(float64) <= 0 {
		t.Errorf("bob's fourth call of add: %v", refused)
	}
	if got := call(alice, "add", `{"a":1,"b":1}`); !strings.Contains(got, `"sum":2`) {
		t.Errorf("alice's call of add after bob's refusal: %s", got)
	}
	_, _, scrape := httpDo(t, http.MethodGet, "http://"+metricsAddr+"/metrics", "", nil)
	if !strings.Contains(scrape, `mcpotc_rate_limited_total{front="mcp",limit="tool",tool="add",upstream="tools"} 1`+"\n") {
		t.Errorf("/metrics lacks the refusal:\n%s", truncate(scrape, 3000))
	}
	logs := b.p.Stderr()
	for _, tok := range []string{alice, bob, carol, carolB, forged} {
		if strings.Contains(logs, strings.Split(tok, ".")[2]) {
			t.Fatal("a token is in serve-mcp's log")
		}
	}
	t.Logf("serve-mcp with the README's controls, tokens of two zitadel/oidc OPs: alice (admins) lists 4 tools, bob 1, carol of A 2, carol of B 1; " +
		"bob's calls of 4 refused names answered as an unknown tool's, byte for byte; a self-signed admins token 401; bob's 4th add an isError result with the wait; alice unaffected")
}

// hs256 signs claims (exp added) with secret.
func hs256(t *testing.T, secret string, claims jwt.MapClaims) string {
	t.Helper()
	claims["exp"] = time.Now().Add(time.Hour).Unix()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestControlsOTCFrontJWT runs the README's serve-otc controls
// (testdata/config/serve-otc-controls.json: the built-in sample MCP
// server as a stdio child, its echo listed as Sample.say, fail hidden)
// with HS256 JWT callers. Attacks: a staff caller guessing the ops tools,
// the hidden one or echo's old name gets the unknown tool's 400, byte for
// byte; naming an ops user in context.user_id changes nothing; a 429
// storm (50 calls past the limit) is answered 429 with Retry-After every
// time without running the tool. Honest: the ops caller lists and calls
// everything; after the wait the staff caller calls again.
func TestControlsOTCFrontJWT(t *testing.T) {
	const secret = "controls-e2e-jwt-secret"
	bin := buildMcpotc(t)
	cfg := controlsConfig(t, "serve-otc-controls.json")
	b := otcfStart(t, []string{"--config", cfg, "--jwt-secret-env", "OTC_JWT_SECRET"},
		[]string{"OTC_JWT_SECRET=" + secret, "PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")})
	ops := "Bearer " + hs256(t, secret, jwt.MapClaims{"sub": "ops-app", "groups": []string{"ops"}})
	staff := "Bearer " + hs256(t, secret, jwt.MapClaims{"sub": "staff-app", "groups": []string{"staff"}})
	do := func(auth, method, path, body string) *otcfResp {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		hdr := map[string]string{"OXP-Version": "1.0", "Authorization": auth}
		if body != "" {
			hdr["Content-Type"] = "application/json"
		}
		r, err := otcfDo(ctx, method, b.base+path, hdr, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ids := func(auth string) []string {
		r := do(auth, http.MethodGet, "/tools", "")
		m, _ := r.Body.(map[string]any)
		items, _ := m["items"].([]any)
		var out []string
		for _, it := range items {
			out = append(out, it.(map[string]any)["id"].(string))
		}
		return out
	}
	for deadline := time.Now().Add(60 * time.Second); len(ids(ops)) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
	}
	if got := ids(ops); !slices.Equal(got, []string{"Sample.add@1.0.0", "Sample.say@1.0.0", "Sample.slow@1.0.0"}) {
		t.Errorf("the ops caller lists %v", got)
	}
	if got := ids(staff); !slices.Equal(got, []string{"Sample.say@1.0.0"}) {
		t.Errorf("the staff caller lists %v", got)
	}
	if r := do("", http.MethodGet, "/tools", ""); r.Status != http.StatusUnauthorized {
		t.Errorf("GET /tools without a token: %d", r.Status)
	}
	call := func(auth, tool, input, callContext string) *otcfResp {
		body := `{"tool_id":"` + tool + `","input":` + input
		if callContext != "" {
			body += `,"context":` + callContext
		}
		return do(auth, http.MethodPost, "/tools/call", body+"}")
	}
	norm := func(r *otcfResp, tool string) string {
		raw, _ := json.Marshal(r.Body)
		return strconv.Itoa(r.Status) + " " + strings.ReplaceAll(string(raw), tool, "T")
	}
	unknown := norm(call(staff, "Sample.nothing", `{}`, ""), "Sample.nothing")
	for _, tool := range []string{"Sample.add", "Sample.slow", "Sample.fail", "Sample.echo"} {
		if got := norm(call(staff, tool, `{"a":1,"b":2}`, `{"user_id":"ops-app"}`), tool); got != unknown {
			t.Errorf("the staff caller calling %s (naming the ops user): %s\nwant %s", tool, got, unknown)
		}
	}
	if r := call(ops, "Sample.add", `{"a":1,"b":2}`, ""); r.Status != 200 {
		t.Errorf("the ops caller calling Sample.add: %d %v", r.Status, r.Body)
	}
	for i := 0; i < 2; i++ {
		if r := call(staff, "Sample.say", `{"message":"hi"}`, ""); r.Status != 200 || r.Body.(map[string]any)["value"] != "hi" {
			t.Fatalf("the staff caller's call %d of Sample.say: %d %v", i+1, r.Status, r.Body)
		}
	}
	var retry int
	for i := 0; i < 50; i++ {
		r := call(staff, "Sample.say", `{"message":"storm"}`, "")
		m, _ := r.Body.(map[string]any)
		msg, _ := m["message"].(string)
		after, _ := strconv.Atoi(r.Header.Get("Retry-After"))
		if r.Status != http.StatusTooManyRequests || after < 1 || after > 60 || r.Header.Get("x-should-retry") != "true" ||
			!strings.HasPrefix(msg, "Rate limit reached: this caller may call Sample.say 2 calls per minute. Try again in ") {
			t.Fatalf("storm call %d: %d %v %v", i+1, r.Status, r.Header, r.Body)
		}
		retry = after
	}
	// The ops caller has buckets of its own.
	if r := call(ops, "Sample.say", `{"message":"ops"}`, ""); r.Status != 200 {
		t.Errorf("the ops caller's call during the staff caller's storm: %d %v", r.Status, r.Body)
	}
	// No call of the storm ran the tool: none is in the log as a call. A
	// call's line is written after its answer, so wait for the third.
	if n := len(b.waitLogs(3, func(m map[string]any) bool {
		return m["message"] == "call" && m["tool_id"] == "Sample.say" && m["status"] == float64(200)
	})); n != 3 {
		t.Errorf("%d calls of Sample.say answered 200 in the log, want 3", n)
	}
	t.Logf("serve-otc with the README's controls and HS256 JWTs: ops lists 3 tools, staff 1; 4 refused ids answered as an unknown one's; 50 calls past the limit all 429 (Retry-After %d s), none run", retry)
	b.checkLogs(t, secret, strings.TrimPrefix(ops, "Bearer "), strings.TrimPrefix(staff, "Bearer "))
}

// TestControlsLimitAcrossReplicas: three serve-otc replicas sharing a
// redis-server (--state) and a limit of 10 calls an hour per caller of
// the upstream's tool "work" (which counts its runs). 60 calls of alice,
// 16 at a time, spread over the three replicas: exactly 10 run, 50 are
// 429 with Retry-After — not 30 run (10 per replica). bob, another JWT
// subject, then has his own 10. A storm of 300 more of alice's calls is
// answered without Redis running the script again more than once per
// replica (the refusal is remembered for its wait). Redis then stops:
// calls go on, each replica counting in its own buckets (a new caller's
// 45 calls: 10 run per replica), which each replica logs once.
func TestControlsLimitAcrossReplicas(t *testing.T) {
	const secret = "replicas-e2e-jwt-secret"
	redisURL, redisProc := startRedis(t)
	upURL, count := scaleUpstream(t)
	bin := buildMcpotc(t)
	cfgPath := filepath.Join(t.TempDir(), "serve-otc.json")
	cfg := `{"mcpServers": {"scale": {"url": "` + upURL + `", "toolkit": "Scale"}},
		"rate_limits": {"per_principal": {"requests": 1000, "per": "1h"}, "per_tool": [{"tools": ["Scale.work"], "requests": 10, "per": "1h"}]}}`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var bases []string
	var procs []*proc
	for range 3 {
		port := strconv.Itoa(freePort(t))
		p := startProcess(t, context.Background(), bin, []string{"serve-otc", "--listen", "127.0.0.1:" + port, "--state", redisURL,
			"--config", cfgPath, "--jwt-secret-env", "OTC_JWT_SECRET"}, []string{"OTC_JWT_SECRET=" + secret})
		base := "http://127.0.0.1:" + port
		p.waitHTTP(t, base+"/ready", 60*time.Second)
		bases = append(bases, base)
		procs = append(procs, p)
	}
	rc := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0")})
	defer rc.Close()
	scripts := func() int {
		info, err := rc.Info(context.Background(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, cmd := range []string{"evalsha", "eval"} {
			if m := regexp.MustCompile(`cmdstat_` + cmd + `:calls=(\d+)`).FindStringSubmatch(info); m != nil {
				v, _ := strconv.Atoi(m[1])
				n += v
			}
		}
		return n
	}
	type tally struct {
		mu     sync.Mutex
		status map[int]int
		retry  []string
	}
	burst := func(auth string, n int, key string) *tally {
		tl := &tally{status: map[int]int{}}
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		var next atomic.Int32
		for i := 0; i < n; i++ {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				base := bases[int(next.Add(1))%len(bases)]
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				r, err := otcfDo(ctx, http.MethodPost, base+"/tools/call",
					map[string]string{"Content-Type": "application/json", "OXP-Version": "1.0", "Authorization": "Bearer " + auth},
					[]byte(`{"tool_id":"Scale.work","input":{"key":"`+key+`","ms":1}}`))
				tl.mu.Lock()
				defer tl.mu.Unlock()
				if err != nil {
					tl.status[0]++
					return
				}
				tl.status[r.Status]++
				if r.Status == http.StatusTooManyRequests {
					tl.retry = append(tl.retry, r.Header.Get("Retry-After"))
				}
			}()
		}
		wg.Wait()
		return tl
	}
	alice := hs256(t, secret, jwt.MapClaims{"sub": "alice"})
	bob := hs256(t, secret, jwt.MapClaims{"sub": "bob"})
	first := burst(alice, 60, "alice")
	if first.status[200] != 10 || first.status[429] != 50 || len(first.status) != 2 {
		t.Fatalf("alice's 60 calls over three replicas: %v, want 10 × 200 and 50 × 429", first.status)
	}
	if started, _ := count.get("alice"); started != 10 {
		t.Errorf("the tool ran %d times for alice, want 10", started)
	}
	for _, ra := range first.retry {
		if s, err := strconv.Atoi(ra); err != nil || s < 1 || s > 360 {
			t.Errorf("a 429's Retry-After is %q, want 1 to 360 s (one token in 6 min)", ra)
			break
		}
	}
	if tl := burst(bob, 12, "bob"); tl.status[200] != 10 || tl.status[429] != 2 {
		t.Errorf("bob's 12 calls after alice's: %v, want his own 10 × 200", tl.status)
	}
	before := scripts()
	storm := burst(alice, 300, "alice")
	after := scripts()
	if storm.status[429] != 300 {
		t.Errorf("alice's storm of 300: %v, want 300 × 429", storm.status)
	}
	if after-before > 3 {
		t.Errorf("alice's storm of 300 ran the limit script %d times in Redis, want at most 3 (once per replica)", after-before)
	}
	if started, _ := count.get("alice"); started != 10 {
		t.Errorf("after the storm the tool has run %d times for alice, want 10", started)
	}
	keys, _ := rc.Keys(context.Background(), "mcpotc:rl:*").Result()
	for _, k := range keys {
		if strings.Contains(k, "alice") || strings.Contains(k, "Scale") || strings.Contains(k, "work") {
			t.Errorf("a Redis key names the caller or the tool: %s", k)
		}
		if ttl, _ := rc.PTTL(context.Background(), k).Result(); ttl <= 0 {
			t.Errorf("the Redis key %s does not expire (%v)", k, ttl)
		}
	}
	if err := redisProc.Stop(); err != nil {
		t.Logf("stopping redis-server: %v", err)
	}
	carol := hs256(t, secret, jwt.MapClaims{"sub": "carol"})
	down := burst(carol, 45, "carol")
	if down.status[200] != 30 || down.status[429] != 15 {
		t.Errorf("carol's 45 calls with Redis down: %v, want 30 × 200 (10 per replica) and 15 × 429", down.status)
	}
	const downLine = "rate limits: the --state store cannot be reached; each replica counts calls in its own buckets until it answers"
	for i, p := range procs {
		if n := strings.Count(p.Stderr(), downLine); n != 1 {
			t.Errorf("replica %d logged the store down %d times, want once", i+1, n)
		}
	}
	t.Logf("3 replicas, one Redis: alice's 60 concurrent calls → %d run, %d × 429; bob then %d of 12; a storm of 300 more → %d × 429 with %d script runs in Redis; %d bucket keys, all expiring, none naming a caller or tool; Redis down: carol's 45 → %d run (10 per replica), logged once per replica",
		first.status[200], first.status[429], 10, storm.status[429], after-before, len(keys), down.status[200])
}

// TestControlsMCPLimitAcrossReplicas: two serve-mcp replicas sharing a
// redis-server (serve-mcp --state), a limit of 5 calls an hour of add per
// caller; callers that did not authenticate are their address, here the
// same one: 20 calls alternating between the replicas run 5 times, the
// other 15 are isError results naming the wait.
func TestControlsMCPLimitAcrossReplicas(t *testing.T) {
	redisURL, _ := startRedis(t)
	bin := buildMcpotc(t)
	samplePort := strconv.Itoa(freePort(t))
	sample := startProcess(t, context.Background(), bin, []string{"sample-otc", "--listen", "127.0.0.1:" + samplePort}, nil)
	sample.waitHTTP(t, "http://127.0.0.1:"+samplePort+"/health", 30*time.Second)
	cfgPath := filepath.Join(t.TempDir(), "serve-mcp.json")
	cfg := `{"upstreams": [{"name": "tools", "url": "http://127.0.0.1:` + samplePort + `", "tools": {"Calculator_Add": {"name": "add"}}}],
		"rate_limits": {"per_tool": [{"tools": ["add"], "requests": 5, "per": "1h"}]}}`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var urls []string
	for range 2 {
		port := strconv.Itoa(freePort(t))
		p := startProcess(t, context.Background(), bin, []string{"serve-mcp", "--transport", "http", "--stateless", "--listen", "127.0.0.1:" + port,
			"--state", redisURL, "--config", cfgPath}, nil)
		p.waitHTTP(t, "http://127.0.0.1:"+port+"/health", 60*time.Second)
		urls = append(urls, "http://127.0.0.1:"+port+"/mcp")
	}
	ran, refused := 0, 0
	for i := 0; i < 20; i++ {
		frame := mcpJSONRPC(t, urls[i%2], "", "tools/call", `{"name":"add","arguments":{"a":1,"b":2}}`)
		res, _ := frame["result"].(map[string]any)
		raw, _ := json.Marshal(frame)
		switch {
		case res["isError"] == true && strings.Contains(string(raw), "Rate limit reached: this caller may call add 5 calls per hour."):
			refused++
		case strings.Contains(string(raw), `"sum":3`):
			ran++
		default:
			t.Fatalf("call %d: %s", i+1, raw)
		}
	}
	if ran != 5 || refused != 15 {
		t.Errorf("20 calls over two serve-mcp replicas: %d ran, %d refused; want 5 and 15", ran, refused)
	}
	t.Logf("2 serve-mcp replicas, one Redis: 20 calls of add (5 an hour) → %d ran, %d refused", ran, refused)
}
