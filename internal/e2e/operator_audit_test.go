//go:build e2e

package e2e

// The audit log (issue 29) through the built binary, read back line by
// line: who called what and how it ended, on both fronts; refused
// credentials; never a token, a secret from the call's context, a
// configured secret or an argument value; rotation at the bound.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// auditLines reads an audit log file: every line must be one JSON object.
func auditLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m == nil {
			t.Fatalf("%s: a line that is not a JSON object: %q", path, sc.Text())
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitAuditLines waits until the file holds n lines.
func waitAuditLines(t *testing.T, path string, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			if lines := auditLines(t, path); len(lines) >= n {
				return lines
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: fewer than %d lines within 10s", path, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// noneIn fails when any file of paths holds any of secrets.
func noneIn(t *testing.T, secrets []string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Errorf("%s holds %q", p, s)
			}
		}
	}
}

// checkLine compares an audit line with want: time must be RFC 3339 and
// duration_ms a number for calls; the rest as data.
func checkLine(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	g := map[string]any{}
	for k, v := range got {
		g[k] = v
	}
	if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(g["time"])); err != nil {
		t.Errorf("%s: time %v", what, g["time"])
	}
	delete(g, "time")
	if g["audit"] == "call" {
		if _, ok := g["duration_ms"].(float64); !ok {
			t.Errorf("%s: duration_ms %v", what, g["duration_ms"])
		}
		delete(g, "duration_ms")
	}
	if !jsonSame(g, want) {
		t.Errorf("%s:\n got %v\nwant %v", what, g, want)
	}
}

func jsonSame(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var x, y any
	_ = json.Unmarshal(ja, &x)
	_ = json.Unmarshal(jb, &y)
	return fmt.Sprint(x) == fmt.Sprint(y)
}

const auditTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// TestE2EAuditLogOTCFront: serve-otc with JWT callers and
// --audit-log FILE --audit-log-max-bytes 16384 --audit-log-keep 2
// --audit-log-arg-names. A call whose context carries a secret and a token
// and whose input carries a value gets one line naming the caller
// (its issuer, none, and subject app-1), its user, the upstream, the tool, the outcome, the status,
// the call_id, the trace id and the argument name; a bad JWT gets a
// refusal line with the front's reason. 300 more calls rotate the file:
// no file passes 16384 bytes, two rotated files are kept, the newest line
// is the last call, and no file holds the secret, the token, the value,
// the JWT or its signing key.
func TestE2EAuditLogOTCFront(t *testing.T) {
	bin := buildMcpotc(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "serve-otc.json")
	writeConfig(t, cfg, fmt.Sprintf(`{"mcpServers":{"one":{"command":%q,"args":["sample-mcp"],"toolkit":"One"}}}`, bin))
	logPath := filepath.Join(dir, "audit.log")
	const (
		signingKey  = "AUDIT-SIGNING-KEY-0123456789abcdef"
		secretValue = "AUDIT-CONTEXT-SECRET-VALUE"
		tokenValue  = "AUDIT-CONTEXT-TOKEN-VALUE"
		argValue    = "AUDIT-ARGUMENT-VALUE"
		badToken    = "AUDIT-BAD-BEARER-TOKEN"
	)
	br := otcfStart(t, []string{"--config", cfg, "--log-format", "json", "--jwt-secret-env", "AUDIT_JWT_KEY",
		"--audit-log", logPath, "--audit-log-max-bytes", "16384", "--audit-log-keep", "2", "--audit-log-arg-names"},
		[]string{"AUDIT_JWT_KEY=" + signingKey})
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "app-1", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(signingKey))
	if err != nil {
		t.Fatal(err)
	}
	c := loadClient()
	auth := map[string]string{"Authorization": "Bearer " + token}
	waitHTTP(t, br.base+"/health", 30*time.Second)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, _, _ := postJSON(c, br.base+"/tools/call", `{"tool_id":"One.add","call_id":"warm-up","input":{"a":1,"b":2}}`, auth)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("One.add never answered: %d", code)
		}
	}

	body := fmt.Sprintf(`{"tool_id":"One.echo","call_id":"audit-call-1","input":{"message":%q},"context":{"user_id":"alice","secrets":[{"id":"k","value":%q}],"authorization":[{"id":"p","token":%q}]}}`,
		argValue, secretValue, tokenValue)
	hdr := map[string]string{"Authorization": "Bearer " + token, "traceparent": "00-" + auditTraceID + "-00f067aa0ba902b7-01"}
	if code, got, err := postJSON(c, br.base+"/tools/call", body, hdr); code != http.StatusOK || !strings.Contains(got, `"success":true`) {
		t.Fatalf("the call: %d %s %v", code, got, err)
	}
	if code, _, _ := postJSON(c, br.base+"/tools/call", body, map[string]string{"Authorization": "Bearer " + badToken}); code != http.StatusUnauthorized {
		t.Fatalf("a bad JWT: %d, want 401", code)
	}
	// After the warm-up's lines: the call's, then the refusal's.
	var lines []map[string]any
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		all := waitAuditLines(t, logPath, 1)
		for i, l := range all {
			if l["call_id"] == "audit-call-1" {
				lines = all[i-1:]
			}
		}
		if len(lines) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call's and the refusal's lines are not in the log: %v", all)
		}
	}
	checkLine(t, "the call's line", lines[1], map[string]any{"audit": "call", "front": "otc", "principal": "iss:0:|sub:app-1", "user_id": "alice",
		"upstream": "one", "tool": "One.echo@1.0.0", "outcome": "ok", "status": 200, "call_id": "audit-call-1", "trace_id": auditTraceID,
		"args": []string{"message"}})
	checkLine(t, "the refusal's line", lines[2], map[string]any{"audit": "authorization", "front": "otc", "principal": "addr:127.0.0.1",
		"outcome": "refused", "status": 401, "detail": "POST /tools/call: Unauthorized: the bearer token is not valid: malformed"})

	const bulk = 300
	for i := 1; i <= bulk; i++ {
		b := fmt.Sprintf(`{"tool_id":"One.echo","call_id":"bulk-%03d","input":{"message":%q},"context":{"secrets":[{"id":"k","value":%q}]}}`, i, argValue, secretValue)
		if code, got, err := postJSON(c, br.base+"/tools/call", b, auth); code != http.StatusOK {
			t.Fatalf("bulk call %d: %d %s %v", i, code, got, err)
		}
	}
	if err := br.p.Stop(); err != nil { // SIGTERM: the log is written out
		t.Logf("stop: %v", err)
	}
	files := []string{logPath + ".2", logPath + ".1", logPath}
	var all []map[string]any
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 16384 || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %d bytes (bound 16384), mode %v", f, st.Size(), st.Mode().Perm())
		}
		all = append(all, auditLines(t, f)...)
	}
	if _, err := os.Stat(logPath + ".3"); !os.IsNotExist(err) {
		t.Errorf("%s.3 exists with --audit-log-keep 2", logPath)
	}
	noneIn(t, []string{signingKey, token, secretValue, tokenValue, argValue, badToken}, files...)
	// The newest lines, in order, end with the last call.
	last := bulk
	for i := len(all) - 1; i >= 0 && last > 0; i-- {
		if want := fmt.Sprintf("bulk-%03d", last); all[i]["call_id"] != want {
			t.Fatalf("line %d from the end: call_id %v, want %s (lines lost or out of order)", len(all)-i, all[i]["call_id"], want)
		}
		last--
	}
	if all[0]["call_id"] == "warm-up" || all[0]["call_id"] == "audit-call-1" {
		t.Errorf("the oldest lines are still there: %d lines in 3 files, the first %v (keep 2: the oldest file goes)", len(all), all[0])
	}
	if t.Failed() {
		return
	}
	t.Logf("audit log: the last %d of %d+ lines kept in 3 files of at most 16384 bytes (the oldest is %v); none holds a secret, token, key or argument value",
		len(all), bulk+2, all[0]["call_id"])
}

// TestE2EAuditLogMCPFront: serve-mcp as an OAuth protected resource
// (a zitadel/oidc OP) with --audit-log FILE --audit-log-arg-names. A call
// by client u1 gets a line naming its principal (issuer and subject), its
// user (user_id_from_token), the upstream, the tool, the outcome, the
// call_id sent upstream, the trace id and the argument name; a request
// without a token and one with a token the OP never issued get refusal
// lines with the front's reasons. No line holds the access token, the
// made-up token, a configured secret or the argument's value.
func TestE2EAuditLogMCPFront(t *testing.T) {
	op := startZitadelOP(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rec := startOTCRecorder(t)
	const (
		secretValue = "AUDIT-CONFIGURED-SECRET"
		argValue    = "AUDIT-MCP-ARGUMENT-VALUE"
		madeUp      = "AUDIT-MADE-UP-OPAQUE-TOKEN"
	)
	cfg := serveMCPConfig(t, map[string]any{"name": "rec", "url": rec.srv.URL, "user_id_from_token": true, "secrets": map[string]string{"S": "AUDIT_SECRET"}})
	logPath := filepath.Join(t.TempDir(), "audit.log")
	br := startBridge(t, ctx, "http", []string{"--config", cfg, "--oauth-issuer", op.issuer, "--oauth-allow-untyped-jwt",
		"--audit-log", logPath, "--audit-log-arg-names", "--log-format", "json"}, []string{"AUDIT_SECRET=" + secretValue})
	op.store.client("u1", br.url)
	tok := op.token(t, "u1")

	status, sess, body := mcpPost(t, br.url, tok, "", initializeBody)
	if status != http.StatusOK || sess == "" {
		t.Fatalf("initialize: %d %s", status, truncate(body, 300))
	}
	h := http.Header{"Authorization": {"Bearer " + tok}, "Mcp-Session-Id": {sess}, "Mcp-Protocol-Version": {"2025-11-25"},
		"Traceparent": {"00-" + auditTraceID + "-00f067aa0ba902b7-01"}}
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Me_Who","arguments":{"note":%q}}}`, argValue)
	if status, _, body := httpDo(t, http.MethodPost, br.url, call, h); status != http.StatusOK || !strings.Contains(body, `"u1"`) {
		t.Fatalf("the call: %d %s", status, truncate(body, 300))
	}
	if status, _, _ := mcpPost(t, br.url, "", "", initializeBody); status != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", status)
	}
	if status, _, _ := mcpPost(t, br.url, madeUp, "", initializeBody); status != http.StatusUnauthorized {
		t.Fatalf("a made-up token: %d, want 401", status)
	}
	lines := waitAuditLines(t, logPath, 3)
	principal := "iss:" + strconv.Itoa(len(op.issuer)) + ":" + op.issuer + "|sub:u1"
	checkLine(t, "the call's line", lines[0], map[string]any{"audit": "call", "front": "mcp", "principal": principal, "user_id": "u1",
		"upstream": "rec", "tool": "Me_Who", "outcome": "ok", "call_id": rec.last(t)["call_id"], "trace_id": auditTraceID, "args": []string{"note"}})
	checkLine(t, "no token", lines[1], map[string]any{"audit": "authorization", "front": "mcp", "principal": "addr:127.0.0.1",
		"outcome": "refused", "status": 401, "detail": "POST /mcp: unauthorized: a bearer token is required"})
	checkLine(t, "a made-up token", lines[2], map[string]any{"audit": "authorization", "front": "mcp", "principal": "addr:127.0.0.1",
		"outcome": "refused", "status": 401, "detail": "POST /mcp: unauthorized: the token is not valid"})
	noneIn(t, []string{tok, madeUp, secretValue, argValue}, logPath)
	if t.Failed() {
		return
	}
	t.Logf("audit log of serve-mcp: a call by %s and two refusals, no token, secret or argument value", principal)
}

// TestE2EAuditLogOAuthFlows: serve-otc as an OAuth client of the
// TypeScript SDK's example server, per user, with --audit-log FILE. The
// operator's authorization, then alice's (challenged by the API key's
// holder, completed in her browser), are each a challenge line and an
// authorized line naming who caused it and for whom; alice's call names
// her. No line holds an access token (the server prints each it
// receives), the authorization URL's state, or the API key.
func TestE2EAuditLogOAuthFlows(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	pu := oauthPerUser(t, dir, base)
	logPath := filepath.Join(dir, "audit.log")
	b := oauthBridge(t, port, pu.config, pu.env, append([]string{"--audit-log", logPath}, pu.args...)...)
	operatorURL := oauthWaitChallenge(t, b)
	oauthAuthorize(t, operatorURL)
	b.waitHealthy(t, 30*time.Second)
	operator := oauthLastToken(t, pu.server)

	alice := oauthUserSub("alice")
	call := func() *otcfResp {
		ctx, cancel := context.WithTimeout(context.Background(), otcfCallTimeout)
		defer cancel()
		return b.call(t, ctx, otcfDialects[2], map[string]any{"tool_id": "Demo.greet", "input": map[string]any{"name": "user"},
			"context": map[string]any{"user_id": alice}}, pu.apiKey)
	}
	r := call()
	body, _ := r.Body.(map[string]any)
	mr, _ := body["missing_requirements"].(map[string]any)
	as, _ := mr["authorization"].([]any)
	if r.Status != http.StatusBadRequest || len(as) != 1 {
		t.Fatalf("alice without a token: %d %s", r.Status, otcfTrunc(r.Raw))
	}
	aliceURL := as[0].(map[string]any)["url"].(string)
	newOAuthBrowser(t, "alice").authorize(aliceURL)
	if r := call(); r.Status != http.StatusOK {
		t.Fatalf("alice after her authorization: %d %s", r.Status, otcfTrunc(r.Raw))
	}
	aliceTok := oauthLastToken(t, pu.server)
	b.stop(t)

	var flows []string
	var calls []map[string]any
	for _, l := range auditLines(t, logPath) {
		switch l["audit"] {
		case "authorization":
			flows = append(flows, fmt.Sprintf("%v %v principal=%v user=%v", l["upstream"], l["outcome"], l["principal"], l["user_id"]))
		case "call":
			calls = append(calls, l)
		}
	}
	want := []string{
		"demo challenge principal=<nil> user=<nil>", // the operator's: the bridge's own identity
		"demo authorized principal=<nil> user=<nil>",
		"demo challenge principal=api-key user=" + alice,
		"demo authorized principal=api-key user=" + alice,
	}
	if strings.Join(flows, "\n") != strings.Join(want, "\n") {
		t.Errorf("flow lines:\n%s\nwant:\n%s", strings.Join(flows, "\n"), strings.Join(want, "\n"))
	}
	if n := len(calls); n != 2 || calls[0]["outcome"] != "auth_required" || calls[1]["outcome"] != "ok" ||
		calls[1]["principal"] != "api-key" || calls[1]["user_id"] != alice || calls[1]["upstream"] != "demo" {
		t.Errorf("call lines: %v", calls)
	}
	state := func(u string) string { return u[strings.LastIndex(u, "/")+1:] }
	noneIn(t, []string{operator, aliceTok, state(operatorURL), state(aliceURL), "e2e-app-key"}, logPath)
	if t.Failed() {
		return
	}
	t.Logf("audit: %d flow lines (the operator's and alice's challenge and authorization), %d call lines; no token, state or key", len(flows), len(calls))
}
