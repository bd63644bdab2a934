//go:build e2e

package e2e

// End-to-end tests of issue 9's operational points, against the built
// binary: shutdown order (in-flight calls drain before children close), the
// children's environment (no other upstream's secrets), the sample
// toolkit's authorization flow (OTC and through serve-mcp) and the shape of
// log lines (each key once, ids cut to 64 bytes, 401 logged once without
// the credential).
//
//	MCPOTC_E2E=1 go test -race -count=1 -tags e2e -run TestE2EHardeningOps ./cmd/mcpotc/

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestE2EHardeningOpsShutdownDrain: serve-otc in front of `mcpotc
// sample-mcp` as a child; SIGTERM while a 7 s call runs (longer than the
// upstream's own 5 s drain, shorter than the documented 10 s). The call gets
// its 200 answer, then the bridge exits 0 and leaves no process behind.
func TestE2EHardeningOpsShutdownDrain(t *testing.T) {
	t.Parallel()
	bin := buildMcpotc(t)
	b := otcfStart(t, []string{"--", bin, "sample-mcp"}, nil)
	b.waitHealthy(t, otcfStartTimeout)
	b.waitTools(t, []string{"mcpotc_sample.slow@1.0.0"})
	kids := otcfChildren(b.p.Pid())
	if len(kids) != 1 || !strings.HasSuffix(kids[0].Cmd, " sample-mcp") {
		t.Fatalf("the bridge's children: %v, want one `mcpotc sample-mcp`", kids)
	}
	child := kids[0]
	d := otcfDialects[2]
	req := map[string]any{"tool_id": "mcpotc_sample.slow", "call_id": "ops-drain-" + otcfRandom(t), "input": map[string]any{"seconds": 7, "steps": 7}}
	rchar, err := otcfRChar(child.Pid)
	if err != nil {
		t.Fatalf("reading the child's I/O counters: %v", err)
	}
	answer := b.callAsync(t, d, req, "the slow call")
	// SIGTERM once the child has read the call.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := otcfRChar(child.Pid)
		if err != nil {
			t.Fatalf("the child went away before the signal: %v", err)
		}
		if n > rchar {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child did not read the call within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.stop(t) // SIGTERM; exit 0 within the bound; no process of the tree left
	var r *otcfResp
	select {
	case r = <-answer:
	case <-time.After(otcfCallTimeout):
		t.Fatal("the in-flight call got no answer")
	}
	if r == nil {
		return
	}
	got := otcfCheckAnswer(t, d, req, r, http.StatusOK, map[string]any{"success": true, "value": "<any>"})
	if v, _ := got["value"].(string); !strings.Contains(v, "waited 7 seconds") {
		t.Errorf("the call in flight at SIGTERM answered %s, want the slow tool's own result", otcfTrunc(r.Raw))
	}
	if l := b.logs(func(m map[string]any) bool { return m["message"] == "in-flight calls abandoned at close" }); len(l) > 0 {
		t.Errorf("the upstream abandoned in-flight calls at the signal: %s", otcfShow(l))
	}
}

// TestE2EHardeningOpsChildEnv: two stdio servers in a config, each with an
// env entry naming its own secret variable; the bridge's own API key
// variable is set too. Each child's environment (/proc/PID/environ) holds
// its own entry and none of the other server's variables nor the key's.
func TestE2EHardeningOpsChildEnv(t *testing.T) {
	t.Parallel()
	bin := buildMcpotc(t)
	dir := t.TempDir()
	cfg := map[string]any{"mcpServers": map[string]any{
		"alpha": map[string]any{"command": bin, "args": []string{"sample-mcp"}, "toolkit": "Alpha",
			"env": map[string]string{"ALPHA_TOKEN": "${OPS_SECRET_ALPHA}"}},
		"beta": map[string]any{"command": bin, "args": []string{"sample-mcp"}, "toolkit": "Beta",
			"env": map[string]string{"BETA_TOKEN": "pre-${OPS_SECRET_BETA}"}},
	}}
	path := filepath.Join(dir, "serve-otc.json")
	raw, _ := json.Marshal(cfg)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	secretA, secretB, key := "alpha-"+otcfRandom(t), "beta-"+otcfRandom(t), "key-"+otcfRandom(t)
	b := otcfStart(t, []string{"--config", path, "--api-key-env", "OPS_BRIDGE_KEY"},
		[]string{"OPS_SECRET_ALPHA=" + secretA, "OPS_SECRET_BETA=" + secretB, "OPS_BRIDGE_KEY=" + key})
	b.auth = map[string]string{"OXP-API-Key": key}
	b.waitHealthy(t, otcfStartTimeout)

	kids := otcfChildren(b.p.Pid())
	if len(kids) != 2 {
		t.Fatalf("the bridge's children: %v, want two", kids)
	}
	envs := map[string]map[string]string{} // server → its environment
	for _, k := range kids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", k.Pid))
		if err != nil {
			t.Fatalf("reading the environment of %v: %v", k, err)
		}
		env := map[string]string{}
		for _, kv := range bytes.Split(data, []byte{0}) {
			if k, v, ok := strings.Cut(string(kv), "="); ok {
				env[k] = v
			}
		}
		switch {
		case env["ALPHA_TOKEN"] != "":
			envs["alpha"] = env
		case env["BETA_TOKEN"] != "":
			envs["beta"] = env
		}
	}
	if len(envs) != 2 {
		t.Fatalf("could not tell the two children apart by their env entries (%d told)", len(envs))
	}
	for server, want := range map[string]map[string]string{
		"alpha": {"ALPHA_TOKEN": secretA},
		"beta":  {"BETA_TOKEN": "pre-" + secretB},
	} {
		env := envs[server]
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s's child: %s is %q, want its configured value", server, k, env[k])
			}
		}
		for _, k := range []string{"OPS_BRIDGE_KEY"} {
			if _, ok := env[k]; ok {
				t.Errorf("%s's child inherited the bridge's own key variable %s", server, k)
			}
		}
		for k, v := range env {
			if strings.Contains(v, key) {
				t.Errorf("%s's child holds the bridge's key in %s", server, k)
			}
		}
	}
	for server, other := range map[string][]string{"alpha": {"OPS_SECRET_BETA", "BETA_TOKEN"}, "beta": {"OPS_SECRET_ALPHA", "ALPHA_TOKEN"}} {
		for _, k := range other {
			if _, ok := envs[server][k]; ok {
				t.Errorf("%s's child holds the other server's variable %s", server, k)
			}
		}
	}
	for k, v := range envs["alpha"] {
		if strings.Contains(v, secretB) {
			t.Errorf("alpha's child holds beta's secret in %s", k)
		}
	}
	for k, v := range envs["beta"] {
		if strings.Contains(v, secretA) {
			t.Errorf("beta's child holds alpha's secret in %s", k)
		}
	}
	b.stop(t)
	b.checkLogs(t, secretA, secretB, key)
}

// opsCheckKeysOnce parses every line of a process's stderr as a JSON
// object and fails for a key that appears twice in one line
// (encoding/json into a map would keep only the last one).
func opsCheckKeysOnce(t *testing.T, what, stderr string) {
	t.Helper()
	if strings.HasPrefix(stderr, "[… ") { // the tail dropped the head: skip the marker and the partial line
		_, stderr, _ = strings.Cut(stderr, "\n")
		_, stderr, _ = strings.Cut(stderr, "\n")
	}
	n := 0
	for _, line := range strings.Split(stderr, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		n++
		dec := json.NewDecoder(strings.NewReader(line))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Errorf("%s: log line is not a JSON object: %q", what, truncate(line, 300))
			continue
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Errorf("%s: log line %q: %v", what, truncate(line, 300), err)
				break
			}
			k, _ := tok.(string)
			if seen[k] {
				t.Errorf("%s: key %q twice in the log line %s", what, k, truncate(line, 500))
			}
			seen[k] = true
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Errorf("%s: log line %q: %v", what, truncate(line, 300), err)
				break
			}
		}
	}
	if n == 0 {
		t.Errorf("%s: no log line", what)
	}
}

// TestE2EHardeningOpsLogs: the lines serve-otc writes are checked as
// parsed JSON: every key once in each line (the upstream elicitation line
// carried two "message" keys), call_id and trace_id cut to 64 bytes, a
// client refused with 401 logged once per request without its credential,
// and an HTTP MCP upstream answering 401 on every attempt logged once.
func TestE2EHardeningOpsLogs(t *testing.T) {
	t.Parallel()
	buildMcpotc(t)

	t.Run("elicitation and ids", func(t *testing.T) {
		t.Parallel()
		node, everything := nodeBin(t), peerBin(t, "mcp-server-everything")
		key := "ops-key-" + otcfRandom(t)
		b := otcfStart(t, []string{"--api-key-env", "OPS_LOG_KEY", "--", node, everything, "stdio"}, append(peerEnv(t), "OPS_LOG_KEY="+key))
		b.auth = map[string]string{"OXP-API-Key": key}
		b.waitHealthy(t, otcfStartTimeout)
		b.waitTools(t, otcfEverythingIDs)
		d := otcfDialects[2]
		hdr := map[string]string{"OXP-API-Key": key}

		// The second call takes the server's request path: an
		// elicitation/create during the call, held for the retry (a
		// challenge), then answered accept and logged.
		elicitURL := "https://example.com/ops/authorize?n=" + otcfRandom(t)
		urlReq := map[string]any{"tool_id": otcfEv + "trigger_url_elicitation", "input": map[string]any{"url": elicitURL, "errorPath": true}}
		b.expect(t, d, urlReq, hdr, 400, map[string]any{"message": "<string>", "developer_message": "<string>", "missing_requirements": "<any>"})
		b.expect(t, d, urlReq, hdr, 400, map[string]any{"message": "<string>", "developer_message": "<string>", "missing_requirements": "<any>"})
		b.expect(t, d, urlReq, hdr, 200, map[string]any{"success": true, "value": "<any>"})
		if l := b.waitLogs(1, func(m map[string]any) bool {
			return m["level"] == "info" && m["url"] == elicitURL && m["message"] == "upstream asked the user to open a URL; answered"
		}); len(l) != 1 {
			t.Errorf("log: %d info lines of the upstream for the URL elicitation, want 1", len(l))
		}

		// Long ids (within the 256-byte bound) are logged cut to 64 bytes.
		longCall := "ops-" + strings.Repeat("c", 196)
		longTrace := strings.Repeat("t", 200)
		b.expect(t, d, map[string]any{"tool_id": otcfEv + "echo", "call_id": longCall, "trace_id": longTrace, "input": map[string]any{"message": "hi"}},
			hdr, 200, map[string]any{"call_id": longCall, "success": true, "value": "<any>"})
		if l := b.waitLogs(1, func(m map[string]any) bool { return m["message"] == "call" && m["call_id"] == longCall[:64] }); len(l) != 1 {
			t.Errorf("log: %d call lines with call_id cut to 64 bytes, want 1: %s", len(l), otcfShow(b.logs(func(m map[string]any) bool { return m["message"] == "call" })))
		} else if l[0]["trace_id"] != longTrace[:64] {
			t.Errorf("log: trace_id %v, want its first 64 bytes", l[0]["trace_id"])
		}
		if strings.Contains(b.p.Stderr(), longCall[:65]) || strings.Contains(b.p.Stderr(), longTrace[:65]) {
			t.Errorf("an id longer than 64 bytes reached the log")
		}

		// Three refused requests: three lines, none with what was sent.
		bad := []string{"wrong-" + key, "Bearer nope-" + key}
		for _, h := range []map[string]string{{}, {"OXP-API-Key": bad[0]}, {"Authorization": bad[1]}} {
			body, hh := d.request(t, map[string]any{"tool_id": otcfEv + "echo", "input": map[string]any{"message": "x"}})
			for k, v := range h {
				hh[k] = v
			}
			ctx, cancel := context.WithTimeout(context.Background(), otcfCallTimeout)
			r, err := otcfDo(ctx, http.MethodPost, b.base+"/tools/call", hh, body)
			cancel()
			if err != nil || r.Status != http.StatusUnauthorized {
				t.Fatalf("a call with credentials %v: %v %v, want 401", h, r, err)
			}
		}
		refused := b.waitLogs(3, func(m map[string]any) bool { return m["status"] == float64(401) })
		if len(refused) != 3 {
			t.Errorf("log: %d lines for 3 refused requests, want 3: %s", len(refused), otcfShow(refused))
		}
		for _, l := range refused {
			if l["level"] != "warn" || l["path"] != "/tools/call" || l["method"] != "POST" {
				t.Errorf("refusal line: %s", otcfShow(l))
			}
		}
		b.stop(t)
		b.checkLogs(t, key, "nope-"+key)
		opsCheckKeysOnce(t, "serve-otc", b.p.Stderr())
	})

	t.Run("upstream 401", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		hits := 0
		token := "ops-up-" + otcfRandom(t)
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits++
			mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Bearer realm="ops"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		}))
		defer up.Close()
		dir := t.TempDir()
		path := filepath.Join(dir, "serve-otc.json")
		raw, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
			"locked": map[string]any{"url": up.URL + "/mcp", "headers": map[string]string{"Authorization": "Bearer ${OPS_UP_TOKEN}"}},
		}})
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		b := otcfStart(t, []string{"--config", path}, []string{"OPS_UP_TOKEN=" + token})
		// Wait until the bridge has been refused on several attempts
		// (backoff from 250 ms), bounded.
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			n := hits
			mu.Unlock()
			if n >= 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the upstream saw %d requests within 20 s, want at least 4 attempts", n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		b.stop(t)
		lines := b.logs(func(m map[string]any) bool {
			return strings.Contains(fmt.Sprint(m), "401") || strings.Contains(strings.ToLower(fmt.Sprint(m)), "unauthorized")
		})
		if len(lines) != 1 {
			t.Errorf("log: %d lines about the upstream's 401 over several attempts, want 1 (once per state change): %s", len(lines), otcfShow(lines))
		}
		b.checkLogs(t, token)
		opsCheckKeysOnce(t, "serve-otc", b.p.Stderr())
	})
}

// TestE2EHardeningOpsSampleAuthorizationOTC: `mcpotc sample-otc` over
// HTTP. A call with a user id and no token → 400 with a challenge; the
// check URL says pending; the user opens the authorize URL; the check says
// completed; the retry (same user id, still no token) → 200 with the
// emails; another user id still gets a challenge.
func TestE2EHardeningOpsSampleAuthorizationOTC(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	port := freePort(t)
	p := startSampleOTC(t, ctx, port)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	d := otcfDialects[0] // otc-1.0 envelope
	call := func(user string) *otcfResp {
		req := map[string]any{"tool_id": "Gmail.GetEmails@1.2.0", "input": map[string]any{"query": "is:unread"}, "context": map[string]any{"user_id": user}}
		body, hdr := d.request(t, req)
		r, err := otcfDo(ctx, http.MethodPost, base+"/tools/call", hdr, body)
		if err != nil {
			t.Fatalf("call for %s: %v", user, err)
		}
		return r
	}
	get := func(u string) *otcfResp {
		r, err := otcfDo(ctx, http.MethodGet, u, nil, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		return r
	}
	challengeBody := map[string]any{
		"$schema":           "otc://1.0",
		"message":           "Authorization is required: open the authorization URL, then call the tool again",
		"developer_message": "Gmail.GetEmails@1.2.0 requires authorization 'google'; context lacks it",
		"missing_requirements": map[string]any{"authorization": []any{
			map[string]any{"id": "google", "url": "~^" + base + "/sample/oauth/authorize\\?state=", "check_url": "~^" + base + "/sample/oauth/check\\?state="},
		}},
	}
	r := call("ops-alice")
	if r.Status != 400 {
		t.Fatalf("first call: HTTP %d %s, want 400 with a challenge", r.Status, otcfTrunc(r.Raw))
	}
	if diffs := otcfMatch("body", challengeBody, r.Body); len(diffs) > 0 {
		t.Fatalf("first call:\n  %s\ngot %s", strings.Join(diffs, "\n  "), otcfTrunc(r.Raw))
	}
	ch := r.Body.(map[string]any)["missing_requirements"].(map[string]any)["authorization"].([]any)[0].(map[string]any)
	authURL, checkURL := ch["url"].(string), ch["check_url"].(string)
	if c := get(checkURL); c.Status != 200 || otcfShow(c.Body) != `{"status":"pending"}` {
		t.Errorf("check before opening: %d %s", c.Status, otcfTrunc(c.Raw))
	}
	// The authorize page is text/plain: not otcfDo.
	resp, err := http.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("opening the authorize URL: HTTP %d", resp.StatusCode)
	}
	if c := get(checkURL); c.Status != 200 || otcfShow(c.Body) != `{"status":"completed"}` {
		t.Errorf("check after opening: %d %s", c.Status, otcfTrunc(c.Raw))
	}
	r = call("ops-alice")
	want := map[string]any{"$schema": "otc://1.0", "result": map[string]any{"call_id": "<uuid>", "duration": "<number>", "success": true, "value": map[string]any{"emails": []any{
		map[string]any{"id": "email_1", "subject": "Welcome to Gmail", "snippet": "Hello, welcome to your inbox!"},
		map[string]any{"id": "email_2", "subject": "Your Receipt", "snippet": "Thank you for your purchase..."},
	}}}}
	if r.Status != 200 {
		t.Fatalf("retry for the user who authorized: HTTP %d %s, want 200", r.Status, otcfTrunc(r.Raw))
	}
	if diffs := otcfMatch("body", want, r.Body); len(diffs) > 0 {
		t.Errorf("retry:\n  %s\ngot %s", strings.Join(diffs, "\n  "), otcfTrunc(r.Raw))
	}
	r = call("ops-bob")
	if r.Status != 400 {
		t.Errorf("another user: HTTP %d %s, want 400 with a challenge", r.Status, otcfTrunc(r.Raw))
	} else if diffs := otcfMatch("body", challengeBody, r.Body); len(diffs) > 0 {
		t.Errorf("another user:\n  %s", strings.Join(diffs, "\n  "))
	}
	opsCheckKeysOnce(t, "sample-otc", p.Stderr())
}

// TestE2EHardeningOpsSampleAuthorizationMCP: the same flow through
// serve-mcp (streamable HTTP, Go SDK client): in front of a sample-otc
// with a configured user_id, and with the built-in sample. The first call
// gets the URL (isError naming it, or -32042 for a client that declared
// URL elicitation); the user opens it; the retried call returns the emails.
func TestE2EHardeningOpsSampleAuthorizationMCP(t *testing.T) {
	t.Parallel()
	buildMcpotc(t)
	for _, c := range []struct {
		name    string
		builtin bool
		elicit  bool
	}{{"config user_id/isError", false, false}, {"builtin/URL elicitation", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var args []string
			if !c.builtin {
				port := freePort(t)
				startSampleOTC(t, ctx, port)
				path := filepath.Join(t.TempDir(), "serve-mcp.json")
				raw, _ := json.Marshal(map[string]any{"upstreams": []any{map[string]any{
					"name": "sample", "url": fmt.Sprintf("http://127.0.0.1:%d", port), "user_id": "ops-carol"}}})
				if err := os.WriteFile(path, raw, 0o600); err != nil {
					t.Fatal(err)
				}
				args = []string{"--config", path}
			}
			b := startBridge(t, ctx, "http", args, nil)
			cs := b.connect(t, ctx, clientOpts{protocol: proto20251125, urlElicitation: c.elicit})
			var u string
			if c.elicit {
				we := wantRPCError(t, ctx, cs, "Gmail_GetEmails", map[string]any{}, -32042)
				u = authorizeURL.FindString(string(we.Data))
			} else {
				res := mustCall(t, ctx, cs, "Gmail_GetEmails", map[string]any{})
				if !res.IsError {
					t.Fatalf("first call: %s, want isError naming the URL", jsonString(res))
				}
				u = authorizeURL.FindString(textOf(res))
			}
			if u == "" {
				t.Fatalf("the first call named no authorize URL")
			}
			checkAuthorizeURL(t, ctx, u)
			res := mustCall(t, ctx, cs, "Gmail_GetEmails", map[string]any{})
			want := mustData(`{"emails":[{"id":"email_1","subject":"Welcome to Gmail","snippet":"Hello, welcome to your inbox!"},` +
				`{"id":"email_2","subject":"Your Receipt","snippet":"Thank you for your purchase..."}]}`)
			if res.IsError || !reflect.DeepEqual(asData(t, res.StructuredContent), want) {
				t.Errorf("retry after authorizing: %s, want the emails", jsonString(res))
			}
			if err := syscall.Kill(b.p.Pid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := b.p.Wait(exitBound); err != nil {
				t.Errorf("serve-mcp after SIGTERM: %v, want exit 0", err)
			}
			opsCheckKeysOnce(t, "serve-mcp", b.p.Stderr())
		})
	}
}

// TestE2EHardeningOpsShutdownDrainMCP: serve-mcp over streamable HTTP with
// a bearer token; a request without it is refused (401) and logged once,
// without the token; SIGTERM while a 7 s call runs: the call gets its
// result, then the bridge exits 0.
func TestE2EHardeningOpsShutdownDrainMCP(t *testing.T) {
	t.Parallel()
	const delay = 7 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	up := slowOTC(t, delay)
	token := "ops-bearer-" + otcfRandom(t)
	b := startBridge(t, ctx, "http", []string{"--otc", up.URL, "--bearer-token-env", "OPS_MCP_BEARER"}, []string{"OPS_MCP_BEARER=" + token})

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer wrong-"+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a request with a wrong bearer token: HTTP %d, want 401", resp.StatusCode)
	}

	cs := b.connect(t, ctx, clientOpts{protocol: proto20251125, bearer: token})
	type outcome struct {
		res *sdk.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "Slow_Wait", Arguments: map[string]any{"tag": "ops-drain"}})
		done <- outcome{r, err}
	}()
	waitTag(t, up.started, "the call reaching the upstream", 15*time.Second)
	if err := syscall.Kill(b.p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var o outcome
	select {
	case o = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the in-flight call got no answer within 20 s of SIGTERM")
	}
	if o.err != nil {
		t.Errorf("the call in flight at SIGTERM failed: %v", o.err)
	} else if got := asData(t, o.res.StructuredContent); o.res.IsError || !reflect.DeepEqual(got, mustData(`{"tag":"ops-drain","slept_ms":7000}`)) {
		t.Errorf("the call in flight at SIGTERM: %s, want its result", jsonString(o.res))
	}
	if err := b.p.Wait(exitBound); err != nil {
		t.Errorf("serve-mcp after SIGTERM: %v, want exit 0", err)
	}
	lines, _ := otcfLogLines(b.p.Stderr())
	var refused []map[string]any
	for _, l := range lines {
		if l["status"] == float64(401) {
			refused = append(refused, l)
		}
	}
	if len(refused) != 1 || refused[0]["level"] != "warn" || refused[0]["path"] != "/mcp" {
		t.Errorf("log: %s, want one warn line for the refused request", otcfShow(refused))
	}
	if strings.Contains(b.p.Stderr(), token) {
		t.Errorf("the bearer token reached the log")
	}
	opsCheckKeysOnce(t, "serve-mcp", b.p.Stderr())
}
