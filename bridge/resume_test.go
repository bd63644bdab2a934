package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/internal/wiretest"
	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
)

// The store keeps each owner's newest perOwner records and the newest
// total ones in all (the oldest go first), forgets expired ones, and hands
// a record to one Take only.
func TestMemoryResumeStoreBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewMemoryResumeStore(func() time.Time { return now })
	ctx := context.Background()
	keep := func(owner, id string) {
		t.Helper()
		if err := s.Keep(ctx, owner, id, []byte(id), time.Minute, 3, 5); err != nil {
			t.Fatal(err)
		}
	}
	has := func(id string) bool {
		v, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return v != nil
	}
	for i := range 4 {
		keep("a", fmt.Sprintf("a%d", i))
	}
	if has("a0") || !has("a1") || !has("a3") {
		t.Errorf("owner a over its bound of 3: a0 kept %v, a1 %v, a3 %v; want only the oldest gone", has("a0"), has("a1"), has("a3"))
	}
	keep("b", "b0")
	keep("b", "b1")
	keep("c", "c0") // 6 records wanted, 5 allowed: the oldest of all (a1) goes
	if has("a1") || !has("a2") || !has("c0") || s.Len() != 5 {
		t.Errorf("over the total bound of 5: a1 kept %v, a2 %v, c0 %v, %d records", has("a1"), has("a2"), has("c0"), s.Len())
	}
	// Take: once.
	if v, _ := s.Take(ctx, "b0"); string(v) != "b0" {
		t.Errorf("Take(b0) = %q", v)
	}
	if v, _ := s.Take(ctx, "b0"); v != nil {
		t.Errorf("second Take(b0) = %q, want nothing", v)
	}
	// Update keeps the expiry.
	if ok, _ := s.Update(ctx, "b1", []byte("new")); !ok {
		t.Error("Update(b1) found nothing")
	}
	if ok, _ := s.Update(ctx, "nope", []byte("x")); ok {
		t.Error("Update of a missing id reported success")
	}
	now = now.Add(time.Minute)
	if has("b1") || has("c0") {
		t.Error("records outlived their ttl")
	}
	if v, _ := s.Take(ctx, "a3"); v != nil {
		t.Error("an expired record was taken")
	}
	keep("d", "d0") // sweeps the expired ones
	if s.Len() != 1 {
		t.Errorf("%d records after a sweep, want 1", s.Len())
	}
}

// The key of a call binds every part of it: any other caller, user,
// upstream, tool, call_id or input makes another key; the same input
// written otherwise (spacing, key order, numbers as written) does not.
func TestCallKeyBindsTheCall(t *testing.T) {
	base := callKey("jwt:alice", "u1", "gh", "GH.repos@1.0.0", "c1", json.RawMessage(`{"a":1,"b":[1,2]}`))
	same := callKey("jwt:alice", "u1", "gh", "GH.repos@1.0.0", "c1", json.RawMessage(` { "b" : [1, 2], "a": 1 } `))
	if base != same {
		t.Error("the same input written otherwise makes another key")
	}
	for name, k := range map[string]string{
		"caller":   callKey("jwt:mallory", "u1", "gh", "GH.repos@1.0.0", "c1", json.RawMessage(`{"a":1,"b":[1,2]}`)),
		"user":     callKey("jwt:alice", "u2", "gh", "GH.repos@1.0.0", "c1", json.RawMessage(`{"a":1,"b":[1,2]}`)),
		"upstream": callKey("jwt:alice", "u1", "gl", "GH.repos@1.0.0", "c1", json.RawMessage(`{"a":1,"b":[1,2]}`)),
		"tool":     callKey("jwt:alice", "u1", "gh", "GH.issues@1.0.0", "c1", json.RawMessage(`{"a":1,"b":[1,2]}`)),
		"call_id":  callKey("jwt:alice", "u1", "gh", "GH.repos@1.0.0", "", json.RawMessage(`{"a":1,"b":[1,2]}`)),
		"input":    callKey("jwt:alice", "u1", "gh", "GH.repos@1.0.0", "c1", json.RawMessage(`{"a":1.0,"b":[1,2]}`)),
		"joined":   callKey("jwt:alice\x00u1", "", "gh", "GH.repos@1.0.0", "c1", json.RawMessage(`{"a":1,"b":[1,2]}`)),
	} {
		if k == base {
			t.Errorf("another %s makes the same key", name)
		}
	}
}

// mrtrServer is a 2026-07-28 MCP server (mcp-go, streamable HTTP) whose
// tool "connect" asks for a URL with input_required, a requestState of its
// own per round, and finishes when a retry brings that state and an
// "accept"; "ask_form" asks for a form. It records every call it gets.
type mrtrServer struct {
	mu    sync.Mutex
	n     int
	calls []mrtrCall
}

type mrtrCall struct {
	Repo, State, Answer string
}

func (m *mrtrServer) start(t *testing.T) string {
	t.Helper()
	s := mcpserver.NewMCPServer("mrtr", "1.0.0", mcpserver.WithToolCapabilities(true))
	s.AddTool(mcpgo.NewTool("connect", mcpgo.WithString("repo", mcpgo.Required(), mcpgo.Description("Repository"))),
		func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			repo := req.GetString("repo", "")
			answer := ""
			if a := mcpserver.ElicitationResponse(req.Params.InputResponses, "github"); a != nil {
				answer = string(a.Action)
			}
			m.mu.Lock()
			m.calls = append(m.calls, mrtrCall{Repo: repo, State: req.Params.RequestState, Answer: answer})
			if answer == "accept" && strings.HasPrefix(req.Params.RequestState, "st-") {
				m.mu.Unlock()
				return mcpgo.NewToolResultText("connected " + repo + " with " + req.Params.RequestState), nil
			}
			m.n++
			state := fmt.Sprintf("st-%d", m.n)
			m.mu.Unlock()
			return mcpserver.NewInputRequestBuilder(state).Elicit("github", mcpgo.ElicitationParams{
				Mode: mcpgo.ElicitationModeURL, Message: "Connect GitHub", URL: "https://auth.example/github?for=" + state}).ToolResult(), nil
		})
	s.AddTool(mcpgo.NewTool("ask_form"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpserver.NewInputRequestBuilder("f").Elicit("name", mcpgo.ElicitationParams{
			Mode: mcpgo.ElicitationModeForm, Message: "Your name?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}).ToolResult(), nil
	})
	ts := httptest.NewServer(mcpserver.NewStreamableHTTPServer(s))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

func (m *mrtrServer) log() []mrtrCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]mrtrCall(nil), m.calls...)
}

// resumeFront is an OTC front with JWT callers over one MCP server.
type resumeFront struct {
	t      *testing.T
	url    string
	secret []byte
	front  *OTCFront
}

func startResumeFront(t *testing.T, cfg upstream.Config, toolkit string, store ResumeStore) *resumeFront {
	t.Helper()
	secret := []byte("resume-test-secret-0123456789abcdef")
	cfg.Name = "up"
	cfg.PingInterval = -1
	ctx, cancel := context.WithCancel(context.Background())
	f, err := NewOTCFront(ctx, []MCPServer{{Config: cfg, Toolkit: toolkit, Version: "1.0.0"}}, &OTCFrontOptions{
		Server:      otc.Options{JWTSecret: secret},
		Logger:      zerolog.New(io.Discard),
		ResumeStore: store,
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(f.Handler())
	t.Cleanup(func() {
		ts.Close()
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = f.Close(cctx)
		ccancel()
		cancel()
	})
	rf := &resumeFront{t: t, url: ts.URL, secret: secret, front: f}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body := rf.do("alice", http.MethodGet, "/tools", nil)
		if status == 200 && bytes.Contains(body, []byte(toolkit+".")) {
			return rf
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tools within 10s: %d %s", status, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (rf *resumeFront) do(sub, method, path string, body any) (int, []byte) {
	rf.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, rf.url+path, rd)
	if strings.HasPrefix(path, "http") {
		req, _ = http.NewRequest(method, path, rd)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("OXP-Version", "1.0")
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(rf.secret)
	if err != nil {
		rf.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rf.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// call makes an OTC call and returns the status and the decoded body.
func (rf *resumeFront) call(sub, tool, callID string, input map[string]any) (int, map[string]any) {
	rf.t.Helper()
	req := map[string]any{"tool_id": tool, "input": input}
	if callID != "" {
		req["call_id"] = callID
	}
	status, b := rf.do(sub, http.MethodPost, "/tools/call", req)
	v, err := wiretest.Decode(b)
	m, _ := v.(map[string]any)
	if err != nil || m == nil {
		rf.t.Fatalf("call %s: HTTP %d, body %s", tool, status, b)
	}
	return status, m
}

// challenge reads the one challenge of a 400.
func challenge(t *testing.T, status int, body map[string]any) (id, url, check string) {
	t.Helper()
	mr, _ := body["missing_requirements"].(map[string]any)
	list, _ := mr["authorization"].([]any)
	if status != 400 || len(list) != 1 {
		t.Fatalf("HTTP %d %v, want a 400 with one challenge", status, body)
	}
	c, _ := list[0].(map[string]any)
	id, _ = c["id"].(string)
	url, _ = c["url"].(string)
	check, _ = c["check_url"].(string)
	return id, url, check
}

// challenged makes a call that must be challenged and reads its challenge.
func (rf *resumeFront) challenged(sub, tool, callID string, input map[string]any) (id, url, check string) {
	rf.t.Helper()
	st, body := rf.call(sub, tool, callID, input)
	return challenge(rf.t, st, body)
}

func (rf *resumeFront) checkStatus(checkURL string) (int, string) {
	rf.t.Helper()
	status, b := rf.do("nobody", http.MethodGet, checkURL, nil)
	var m struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(b, &m)
	return status, m.Status
}

// A 2026-07-28 server's URL request becomes the OTC challenge with a
// check_url; the same caller's retry (same tool, input, call_id) resumes
// the call with the server's requestState and "accept", once. Attacks:
// another caller's identical call, the same caller with another input,
// a second retry, and a guessed check id never reach the kept state.
func TestOTCFrontResumesModernURLRequest(t *testing.T) {
	srv := &mrtrServer{}
	rf := startResumeFront(t, upstream.Config{URL: srv.start(t)}, "Hub", nil)
	in := map[string]any{"repo": "mcpotc"}

	st, body := rf.call("alice", "Hub.connect", "c-1", in)
	id, url, check := challenge(t, st, body)
	if id != "github" || url != "https://auth.example/github?for=st-1" || !strings.HasPrefix(check, rf.url+"/elicitation/check/") {
		t.Fatalf("challenge {%s, %s, %s}", id, url, check)
	}
	if s, status := rf.checkStatus(check); s != 200 || status != "pending" {
		t.Errorf("check_url before the retry: %d %q, want 200 pending", s, status)
	}

	// Mallory repeats Alice's call exactly: a challenge of her own, and
	// the server never sees Alice's state.
	st, body = rf.call("mallory", "Hub.connect", "c-1", in)
	if _, url2, check2 := challenge(t, st, body); url2 != "https://auth.example/github?for=st-2" || check2 == check {
		t.Errorf("another caller's call: {%s, %s}, want a challenge of its own", url2, check2)
	}
	// Alice with another input: a new call, not a resume.
	st, body = rf.call("alice", "Hub.connect", "c-1", map[string]any{"repo": "other"})
	challenge(t, st, body)
	// A guessed check id.
	if s, status := rf.checkStatus(rf.url + "/elicitation/check/AAAAAAAAAAAAAAAAAAAAAA"); s != 404 || status != "failed" {
		t.Errorf("unknown check id: %d %q, want 404 failed", s, status)
	}

	// Alice's retry resumes: the server gets its state and "accept".
	st, body = rf.call("alice", "Hub.connect", "c-1", in)
	if st != 200 || body["success"] != true || body["value"] != "connected mcpotc with st-1" {
		t.Fatalf("the retry: HTTP %d %v", st, body)
	}
	if s, status := rf.checkStatus(check); s != 200 || status != "completed" {
		t.Errorf("check_url after the retry: %d %q, want completed", s, status)
	}
	// The state was used once: another retry is a new call.
	st, body = rf.call("alice", "Hub.connect", "c-1", in)
	challenge(t, st, body)

	want := []mrtrCall{
		{Repo: "mcpotc"}, // Alice
		{Repo: "mcpotc"}, // Mallory: no state
		{Repo: "other"},  // Alice, other input
		{Repo: "mcpotc", State: "st-1", Answer: "accept"}, // Alice's retry
		{Repo: "mcpotc"}, // a second retry: afresh
	}
	if got := srv.log(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the server got\n %+v\nwant\n %+v", got, want)
	}
}

// Without a call_id a retry resumes too (the generated ones differ); a
// call_id on one side only does not match.
func TestOTCFrontResumeCallIDOptional(t *testing.T) {
	srv := &mrtrServer{}
	rf := startResumeFront(t, upstream.Config{URL: srv.start(t)}, "Hub", nil)
	in := map[string]any{"repo": "r"}
	rf.challenged("alice", "Hub.connect", "", in) // st-1, kept without a call_id
	if st, body := rf.call("alice", "Hub.connect", "late-id", in); st != 400 {
		t.Errorf("a retry with a call_id the first call did not have: HTTP %d %v, want a new challenge", st, body)
	} // st-2, kept with call_id late-id
	if st, body := rf.call("alice", "Hub.connect", "", in); st != 200 || body["value"] != "connected r with st-1" {
		t.Errorf("a retry without call_id: HTTP %d %v, want st-1 resumed", st, body)
	}
	if st, body := rf.call("alice", "Hub.connect", "late-id", in); st != 200 || body["value"] != "connected r with st-2" {
		t.Errorf("a retry with call_id late-id: HTTP %d %v, want st-2 resumed", st, body)
	}
}

// Each caller keeps at most DefaultResumePerCaller records (a state and
// its status per challenge): a caller that piles up challenges loses its
// oldest, never another caller's.
func TestOTCFrontResumeBoundedPerCaller(t *testing.T) {
	srv := &mrtrServer{}
	rf := startResumeFront(t, upstream.Config{URL: srv.start(t)}, "Hub", nil)
	rf.challenged("bob", "Hub.connect", "b", map[string]any{"repo": "bob's"})
	per := DefaultResumePerCaller / 2
	for i := range per + 1 {
		rf.challenged("alice", "Hub.connect", "a", map[string]any{"repo": fmt.Sprint(i)})
	}
	// Alice's first state was dropped; her newest and Bob's are kept.
	if st, _ := rf.call("alice", "Hub.connect", "a", map[string]any{"repo": "0"}); st != 400 {
		t.Errorf("Alice's oldest state was kept beyond her bound (HTTP %d)", st)
	}
	if st, body := rf.call("alice", "Hub.connect", "a", map[string]any{"repo": fmt.Sprint(per)}); st != 200 {
		t.Errorf("Alice's newest state: HTTP %d %v", st, body)
	}
	if st, body := rf.call("bob", "Hub.connect", "b", map[string]any{"repo": "bob's"}); st != 200 {
		t.Errorf("Bob's state was dropped by Alice's challenges: HTTP %d %v", st, body)
	}
}

// A form (or anything but URLs) cannot travel over OTC: 200 success:false
// naming what was asked.
func TestOTCFrontModernFormNamed(t *testing.T) {
	srv := &mrtrServer{}
	rf := startResumeFront(t, upstream.Config{URL: srv.start(t)}, "Hub", nil)
	st, body := rf.call("alice", "Hub.ask_form", "", map[string]any{})
	e, _ := body["error"].(map[string]any)
	if st != 200 || body["success"] != false || e["message"] != `The tool asked for input that cannot be given over OTC: name: a form ("Your name?")` {
		t.Errorf("HTTP %d %v", st, body)
	}
}

// A 2025-11-25 server's -32042 has nothing to resume, but the server says
// when the user is done: notifications/elicitation/complete makes the
// challenge's check_url "completed".
func TestOTCFrontLegacyCompletionNotice(t *testing.T) {
	s := mcpserver.NewMCPServer("legacy", "1.0.0", mcpserver.WithToolCapabilities(true))
	sessions := make(chan mcpserver.ClientSession, 4)
	s.AddTool(mcpgo.NewTool("needs_auth"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		sessions <- mcpserver.ClientSessionFromContext(ctx)
		return nil, mcpgo.URLElicitationRequiredError{Elicitations: []mcpgo.ElicitationParams{
			{Mode: mcpgo.ElicitationModeURL, ElicitationID: "a1", URL: "https://auth.example/a1", Message: "Authorize"},
		}}
	})
	ts := httptest.NewServer(mcpserver.NewStreamableHTTPServer(s, mcpserver.WithStateful(true),
		mcpserver.WithStreamableHTTPProtocolVersions(mcpgo.LegacyProtocolVersions()...)))
	t.Cleanup(ts.Close)
	rf := startResumeFront(t, upstream.Config{URL: ts.URL + "/mcp"}, "Legacy", nil)
	id, _, check := rf.challenged("alice", "Legacy.needs_auth", "", map[string]any{})
	if id != "a1" || check == "" {
		t.Fatalf("challenge id %q, check_url %q", id, check)
	}
	if _, status := rf.checkStatus(check); status != "pending" {
		t.Errorf("check_url before the notice: %q", status)
	}
	session := <-sessions
	// Another id first: it completes nothing.
	if err := s.SendElicitationComplete(context.Background(), session, "other"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, status := rf.checkStatus(check); status != "pending" {
		t.Errorf("check_url after another id's notice: %q, want pending", status)
	}
	if err := s.SendElicitationComplete(context.Background(), session, "a1"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, status := rf.checkStatus(check); status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("check_url never said completed after notifications/elicitation/complete")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A call held for its retry (2025-11-25 elicitation/create) is let go when
// the upstream can wait no longer: answered "cancel", its check_url
// "failed", and the retry makes a new call. Another caller's retry never
// takes it.
func TestOTCFrontHeldCallLetGo(t *testing.T) {
	s := mcpserver.NewMCPServer("legacy", "1.0.0", mcpserver.WithToolCapabilities(true), mcpserver.WithElicitation())
	answers := make(chan string, 8)
	s.AddTool(mcpgo.NewTool("consent"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		res, err := s.RequestURLElicitation(ctx, mcpserver.ClientSessionFromContext(ctx), "e1", "https://example.com/consent", "Consent")
		if err != nil {
			answers <- "error: " + err.Error()
			return mcpgo.NewToolResultError(err.Error()), nil
		}
		answers <- string(res.Action)
		return mcpgo.NewToolResultText("done: " + string(res.Action)), nil
	})
	ts := httptest.NewServer(mcpserver.NewStreamableHTTPServer(s, mcpserver.WithStateful(true),
		mcpserver.WithStreamableHTTPProtocolVersions(mcpgo.LegacyProtocolVersions()...)))
	t.Cleanup(ts.Close)
	// A call timeout of 3s: the held call waits about 2s (less parkMargin).
	rf := startResumeFront(t, upstream.Config{URL: ts.URL + "/mcp", CallTimeout: 3 * time.Second}, "Legacy", nil)

	_, _, check := rf.challenged("alice", "Legacy.consent", "k", map[string]any{})
	if rf.front.resumes.held() != 1 {
		t.Fatalf("%d calls held, want 1", rf.front.resumes.held())
	}
	// Mallory's identical call: a call (and challenge) of her own; Alice's
	// stays held.
	rf.challenged("mallory", "Legacy.consent", "k", map[string]any{})
	if rf.front.resumes.held() != 2 {
		t.Errorf("%d calls held, want 2", rf.front.resumes.held())
	}
	// Nobody retries: both are let go, answered cancel.
	for range 2 {
		select {
		case a := <-answers:
			if a != "cancel" {
				t.Errorf("a held call was answered %q, want cancel", a)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a held call was never let go")
		}
	}
	// The server has its answer before the bridge records the outcome:
	// wait for it (bounded).
	status := ""
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, status = rf.checkStatus(check); status == "failed" && rf.front.resumes.held() == 0 || time.Now().After(deadline) {
			break
		}
	}
	if status != "failed" {
		t.Errorf("check_url of a call let go: %q, want failed", status)
	}
	if n := rf.front.resumes.held(); n != 0 {
		t.Errorf("%d calls still held", n)
	}
	// Alice's late retry: a new call, and a new challenge.
	rf.challenged("alice", "Legacy.consent", "k", map[string]any{})
	// In time this time: accepted, and the call's own outcome.
	st, body := rf.call("alice", "Legacy.consent", "k", map[string]any{})
	if st != 200 || body["value"] != "done: accept" {
		t.Errorf("the retry in time: HTTP %d %v", st, body)
	}
	if a := <-answers; a != "accept" {
		t.Errorf("the server got %q, want accept", a)
	}
}

// Closing the front lets the calls it holds for a retry go at once
// (answered "cancel"), rather than at the end of the drain.
func TestOTCFrontCloseReleasesHeldCalls(t *testing.T) {
	s := mcpserver.NewMCPServer("legacy", "1.0.0", mcpserver.WithToolCapabilities(true), mcpserver.WithElicitation())
	answers := make(chan string, 2)
	s.AddTool(mcpgo.NewTool("consent"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		res, err := s.RequestURLElicitation(ctx, mcpserver.ClientSessionFromContext(ctx), "e1", "https://example.com/consent", "Consent")
		if err != nil {
			answers <- "error"
			return mcpgo.NewToolResultError(err.Error()), nil
		}
		answers <- string(res.Action)
		return mcpgo.NewToolResultText("done"), nil
	})
	ts := httptest.NewServer(mcpserver.NewStreamableHTTPServer(s, mcpserver.WithStateful(true),
		mcpserver.WithStreamableHTTPProtocolVersions(mcpgo.LegacyProtocolVersions()...)))
	t.Cleanup(ts.Close)
	rf := startResumeFront(t, upstream.Config{URL: ts.URL + "/mcp", DrainTimeout: 10 * time.Second}, "Legacy", nil)
	rf.challenged("alice", "Legacy.consent", "k", map[string]any{})
	start := time.Now()
	if err := rf.front.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %v with a held call (drain bound 10s): it was not let go", d)
	}
	select {
	case a := <-answers:
		if a != "cancel" {
			t.Errorf("the held call was answered %q, want cancel", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held call was never answered")
	}
}
