package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/audit"
	"github.com/mcpotc/mcpotc/internal/principal"
	"github.com/mcpotc/mcpotc/internal/wiretest"
	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
)

// principalFront is an OTC front over one 2025-11-25 MCP server whose tool
// "consent" asks the user to open a URL (the call is held for its retry)
// and whose tool "count" answers how many times it ran.
type principalFront struct {
	t     *testing.T
	url   string
	front *OTCFront
	runs  atomic.Int64
	audit *audit.Log
	lines *syncBuffer
}

func startPrincipalFront(t *testing.T, opts otc.Options) *principalFront {
	t.Helper()
	pf := &principalFront{t: t, lines: &syncBuffer{}}
	s := mcpserver.NewMCPServer("held", "1.0.0", mcpserver.WithToolCapabilities(true), mcpserver.WithElicitation())
	s.AddTool(mcpgo.NewTool("consent", mcpgo.WithString("n")), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		res, err := s.RequestURLElicitation(ctx, mcpserver.ClientSessionFromContext(ctx), "e1", "https://example.com/consent", "Consent")
		if err != nil {
			return mcpgo.NewToolResultError(err.Error()), nil
		}
		return mcpgo.NewToolResultText("done: " + string(res.Action)), nil
	})
	s.AddTool(mcpgo.NewTool("count"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText(fmt.Sprint("run ", pf.runs.Add(1))), nil
	})
	up := httptest.NewServer(mcpserver.NewStreamableHTTPServer(s, mcpserver.WithStateful(true),
		mcpserver.WithStreamableHTTPProtocolVersions(mcpgo.LegacyProtocolVersions()...)))
	t.Cleanup(up.Close)
	pf.audit = audit.New(pf.lines, nil)
	// A long call timeout: no held call is let go while the test runs.
	f, err := NewOTCFront(context.Background(), []MCPServer{{Toolkit: "Held", Version: "1.0.0",
		Config: upstream.Config{Name: "held", URL: up.URL + "/mcp", CallTimeout: time.Minute, PingInterval: -1}}},
		&OTCFrontOptions{Server: opts, Logger: zerolog.Nop(), Audit: pf.audit})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(f.Handler())
	t.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = f.Close(ctx)
	})
	pf.url, pf.front = ts.URL, f
	return pf
}

// call posts an OTC call with the headers given; the status and the
// decoded body.
func (pf *principalFront) call(headers map[string]string, tool, callID string, input map[string]any) (int, map[string]any) {
	pf.t.Helper()
	b, _ := json.Marshal(map[string]any{"tool_id": tool, "call_id": callID, "input": input})
	status, body := pf.do(http.MethodPost, pf.url+"/tools/call", headers, b)
	v, err := wiretest.Decode(body)
	m, _ := v.(map[string]any)
	if err != nil || m == nil {
		pf.t.Fatalf("call %s: HTTP %d, body %s", tool, status, body)
	}
	return status, m
}

func (pf *principalFront) do(method, url string, headers map[string]string, body []byte) (int, []byte) {
	pf.t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("OXP-Version", "1.0")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		pf.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// ready waits (bounded) until GET /tools answers 200 with both tools.
func (pf *principalFront) ready(headers map[string]string) {
	pf.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		status, body := pf.do(http.MethodGet, pf.url+"/tools", headers, nil)
		if status == 200 && bytes.Contains(body, []byte("Held.consent")) && bytes.Contains(body, []byte("Held.count")) {
			return
		}
		if time.Now().After(deadline) {
			pf.t.Fatalf("no tools within 10s: %d %s", status, body)
		}
	}
}

// checkStatus reads a check_url's status.
func (pf *principalFront) checkStatus(check string, headers map[string]string) string {
	pf.t.Helper()
	_, b := pf.do(http.MethodGet, check, headers, nil)
	var m struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(b, &m)
	return m.Status
}

// auditPrincipals are the principals of the audit log's call lines, in
// order (the log closed first, so that every line is written).
func (pf *principalFront) auditPrincipals() []string {
	pf.t.Helper()
	if err := pf.audit.Close(context.Background()); err != nil {
		pf.t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(pf.lines.String()), "\n") {
		var rec struct{ Audit, Principal string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			pf.t.Fatalf("audit line %q: %v", l, err)
		}
		if rec.Audit == audit.KindCall {
			out = append(out, rec.Principal)
		}
	}
	return out
}

// An unauthenticated caller is its client address, an IPv6 address by its
// /64, for its held calls as for its rate limits: 64 addresses of one /64
// share one caller's bound of held calls (they evict their own), and a
// caller of another /64 keeps its held call — its check_url stays pending
// and its retry resumes it.
func TestOTCFrontIPv6CallerIsItsSlash64(t *testing.T) {
	pf := startPrincipalFront(t, otc.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	victim := map[string]string{"X-Forwarded-For": "2001:db8:1:1::1"}
	pf.ready(victim)
	st, body := pf.call(victim, "Held.consent", "v", map[string]any{"n": "victim"})
	_, _, check := challenge(t, st, body)

	var attackerChecks []string
	for i := range 64 {
		from := map[string]string{"X-Forwarded-For": fmt.Sprintf("2001:db8:2:2::%x", i+1)}
		st, body := pf.call(from, "Held.consent", "a", map[string]any{"n": fmt.Sprint(i)})
		_, _, c := challenge(t, st, body)
		attackerChecks = append(attackerChecks, c)
	}
	if n := pf.front.resumes.held(); n != 1+parksPerCaller {
		t.Errorf("%d calls held, want %d: the victim's and %d of the /64's", n, 1+parksPerCaller, parksPerCaller)
	}
	// The /64's oldest were let go (answered cancel upstream, their
	// check_url failed) by its own newest.
	if s := pf.checkStatus(attackerChecks[0], victim); s != "failed" {
		t.Errorf("the /64's oldest held call: check_url %q, want failed", s)
	}
	if s := pf.checkStatus(attackerChecks[63], victim); s != "pending" {
		t.Errorf("the /64's newest held call: check_url %q, want pending", s)
	}
	if s := pf.checkStatus(check, victim); s != "pending" {
		t.Errorf("the victim's held call: check_url %q, want pending", s)
	}
	// The victim's retry resumes its own call.
	if st, body := pf.call(victim, "Held.consent", "v", map[string]any{"n": "victim"}); st != 200 || body["value"] != "done: accept" {
		t.Errorf("the victim's retry: HTTP %d %v", st, body)
	}
	// Another address of the attacker's /64 is the same caller: its
	// retry of the newest held call resumes it.
	from := map[string]string{"X-Forwarded-For": "2001:db8:2:2:ffff::1"}
	if st, body := pf.call(from, "Held.consent", "a", map[string]any{"n": "63"}); st != 200 || body["value"] != "done: accept" {
		t.Errorf("a retry from another address of the /64: HTTP %d %v", st, body)
	}
	got := pf.auditPrincipals()
	if got[0] != "addr:2001:db8:1:1::/64" || got[1] != "addr:2001:db8:2:2::/64" || got[len(got)-1] != "addr:2001:db8:2:2::/64" {
		t.Errorf("audit principals %q", got)
	}
}

// jwtFor signs an HS256 JWT for issuer iss and subject sub.
func jwtFor(t *testing.T, secret []byte, iss, sub string) map[string]string {
	t.Helper()
	claims := jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}
	if iss != "" {
		claims["iss"] = iss
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"Authorization": "Bearer " + tok}
}

// A JWT caller is its token's issuer and subject: subject u1 of issuer A
// and u1 of issuer B are two callers for call_id answers (B's repeat of A's
// call_id is refused, never answered A's answer), held calls (B's
// identical call is challenged on its own; A's stays held) and the audit
// log (two principals); the same issuer and subject is one caller (its
// repeat is answered from the first call, its retry resumes its call).
func TestOTCFrontJWTCallerIsIssuerAndSubject(t *testing.T) {
	secret := []byte("principal-test-secret-0123456789abcdef")
	pf := startPrincipalFront(t, otc.Options{JWTSecret: secret, IdempotencyTTL: time.Minute})
	const issA, issB = "https://as-a.example.com", "https://as-b.example.com"
	a, b := jwtFor(t, secret, issA, "u1"), jwtFor(t, secret, issB, "u1")
	pf.ready(a)

	// call_id answers.
	if st, body := pf.call(a, "Held.count", "c-1", map[string]any{}); st != 200 || body["value"] != "run 1" {
		t.Fatalf("A's call: HTTP %d %v", st, body)
	}
	if st, body := pf.call(b, "Held.count", "c-1", map[string]any{}); st != 400 || !strings.Contains(fmt.Sprint(body["message"]), "already used") {
		t.Errorf("B's call with A's call_id: HTTP %d %v, want 400 (another caller's call_id), never A's answer", st, body)
	}
	if st, body := pf.call(a, "Held.count", "c-1", map[string]any{}); st != 200 || body["value"] != "run 1" {
		t.Errorf("A's repeat: HTTP %d %v, want A's first answer", st, body)
	}
	if n := pf.runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}

	// Held calls.
	st, body := pf.call(a, "Held.consent", "k", map[string]any{"n": "1"})
	_, _, checkA := challenge(t, st, body)
	st, body = pf.call(b, "Held.consent", "k", map[string]any{"n": "1"})
	_, _, checkB := challenge(t, st, body)
	if checkA == checkB || pf.front.resumes.held() != 2 {
		t.Errorf("B's identical call: check_url %s (A's %s), %d calls held; want a call of its own", checkB, checkA, pf.front.resumes.held())
	}
	if s := pf.checkStatus(checkA, a); s != "pending" {
		t.Errorf("A's held call after B's call: %q, want pending", s)
	}
	if st, body := pf.call(a, "Held.consent", "k", map[string]any{"n": "1"}); st != 200 || body["value"] != "done: accept" {
		t.Errorf("A's retry: HTTP %d %v", st, body)
	}

	tokA, tokB := principal.Token(issA, "u1"), principal.Token(issB, "u1")
	want := []string{tokA, tokB, tokA, tokA, tokB, tokA}
	if got := pf.auditPrincipals(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("audit principals\n got %q\nwant %q", got, want)
	}
}
