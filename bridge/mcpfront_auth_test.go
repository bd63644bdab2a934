package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/otc"
)

// An OTC tool server's authorization challenge asked of a 2026-07-28 MCP
// client (mcpfront_auth.go), at the wire: the frames a host receives for
// each thing its user does, how often the user is asked, and what the OTC
// server sees (calls, check_url asks).

// grantServer is an OTC tool server with one tool, Mail_Get, that needs
// authorization "google": a call before the grant is challenged with a
// fresh url and check_url (on this server); opening the url grants it
// (unless forget is set: the grant is lost again at once, as a server
// that fails to keep it).
type grantServer struct {
	srv *httptest.Server

	mu      sync.Mutex
	granted bool
	forget  bool
	next    int
	opened  map[string]bool // challenge state → its url was opened
	calls   int             // POST /tools/call
	checks  int             // GET /check
}

func newGrantServer(t *testing.T) *grantServer {
	g := &grantServer{opened: map[string]bool{}}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *grantServer) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/tools":
		fmt.Fprint(w, `{"$schema":"urn:oxp:1.0","items":[{"id":"Mail.Get@1.0.0","name":"Mail_Get","description":"d","version":"1.0.0",`+
			`"input_schema":{"type":"object"},"output_schema":{},"requirements":{"authorization":[{"id":"google"}],"user_id":true}}]}`)
	case "/tools/call":
		g.calls++
		var req struct {
			Request otc.CallToolRequest `json:"request"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if g.granted {
			fmt.Fprintf(w, `{"$schema":"urn:oxp:1.0","result":{"call_id":%q,"duration":1,"success":true,"value":{"emails":2}}}`, req.Request.CallID)
			return
		}
		g.next++
		state := fmt.Sprint(g.next)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"$schema":"urn:oxp:1.0","message":"Authorization required","missing_requirements":{"authorization":[`+
			`{"id":"google","url":"%s/authorize?state=%s","check_url":"%s/check?state=%s"}]}}`, g.srv.URL, state, g.srv.URL, state)
	case "/authorize":
		g.opened[r.URL.Query().Get("state")] = true
		g.granted = !g.forget
	case "/check":
		g.checks++
		status := otc.ChallengePending
		if g.opened[r.URL.Query().Get("state")] {
			status = otc.ChallengeCompleted
		}
		fmt.Fprintf(w, `{"status":%q}`, status)
	default:
		http.NotFound(w, r)
	}
}

// open is the user finishing the authorization at url.
func (g *grantServer) open(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func (g *grantServer) counts() (calls, checks int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls, g.checks
}

// authFront is serve-mcp's front before g, with the given wait for a
// check_url.
func authFront(t *testing.T, g *grantServer, wait time.Duration) *MCPFront {
	t.Helper()
	c, err := otc.NewClient(g.srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewMCPFront(context.Background(), []OTCServer{{Name: "mail", Client: c, UserID: "u1"}}, &MCPFrontOptions{AuthorizationWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const modernCallMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}`

// prompt is one input_required a host received: the URL asked, its
// message, the text content and the requestState.
type prompt struct {
	URL, Message, Text, State string
}

// mailCall sends a 2026-07-28 Mail_Get call, answering state with action
// ("" for a first call), and returns the prompt it got, or the frame.
func mailCall(t *testing.T, f *MCPFront, id int, action, state string) (*prompt, string) {
	t.Helper()
	return mailCallMeta(t, f, id, action, state, modernCallMeta)
}

// relayedMeta is the _meta of a call an OTC front relays.
const relayedMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}},` +
	`"mcpotc/otc-request":{"tool_id":"Mail.Get@1.0.0"}}`

// mailCallMeta is mailCall with the request's _meta member meta.
func mailCallMeta(t *testing.T, f *MCPFront, id int, action, state, meta string) (*prompt, string) {
	t.Helper()
	extra := ""
	if action != "" {
		extra = fmt.Sprintf(`,"inputResponses":{"google":{"action":%q}},"requestState":%q`, action, state)
	}
	msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"Mail_Get","arguments":{},%s%s}}`, id, meta, extra)
	frame := f.Server().HandleMessage(context.Background(), []byte(msg))
	var got struct {
		Result struct {
			ResultType    string `json:"resultType"`
			RequestState  string `json:"requestState"`
			InputRequests map[string]struct {
				Method string         `json:"method"`
				Params map[string]any `json:"params"`
			} `json:"inputRequests"`
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(frame, &got); err != nil {
		t.Fatalf("%s: %v", frame, err)
	}
	if got.Result.ResultType != "input_required" {
		return nil, string(frame)
	}
	ir, ok := got.Result.InputRequests["google"]
	if len(got.Result.InputRequests) != 1 || !ok || ir.Method != "elicitation/create" || len(got.Result.Content) != 1 {
		t.Fatalf("input_required %s, want one URL request keyed google and a text content", frame)
	}
	if _, has := ir.Params["elicitationId"]; has || ir.Params["mode"] != "url" {
		t.Errorf("input request params %v: want mode url and no elicitationId (2026-07-28)", ir.Params)
	}
	p := &prompt{Message: fmt.Sprint(ir.Params["message"]), URL: fmt.Sprint(ir.Params["url"]), Text: got.Result.Content[0].Text, State: got.Result.RequestState}
	if !strings.Contains(p.Text, p.URL) {
		t.Errorf("content %q does not name the URL %s", p.Text, p.URL)
	}
	return p, ""
}

func resultText(id int, isError bool, text string) string {
	b, _ := json.Marshal(text)
	e := ""
	if isError {
		e = `"isError":true,`
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{%s"content":[{"type":"text","text":%s}],"resultType":"complete",`+
		`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpotc","version":"dev"}}}}`, id, e, b)
}

// sameFrame compares two frames as data, leaving out the OTC call's
// _meta (its call_id and duration differ each time).
func sameFrame(t *testing.T, got, want string) {
	t.Helper()
	var g, w map[string]any
	if json.Unmarshal([]byte(got), &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		t.Fatalf("not JSON: %s", got)
	}
	if res, ok := g["result"].(map[string]any); ok {
		if meta, ok := res["_meta"].(map[string]any); ok {
			delete(meta, "mcpotc/otc-call")
		}
		delete(res, "structuredContent")
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("frame differs\n got: %s\nwant: %s", gb, wb)
	}
}

const emails = `{"emails":2}`

// Each thing a user does, once per prompt: the frames, the prompts, what
// the OTC server saw.
func TestMCPFrontAuthorizationRounds(t *testing.T) {
	t.Parallel()
	const waitShort = 300 * time.Millisecond
	t.Run("accept after the user finished", func(t *testing.T) {
		t.Parallel()
		g := newGrantServer(t)
		f := authFront(t, g, 0)
		p, _ := mailCall(t, f, 1, "", "")
		if p == nil {
			t.Fatal("no prompt")
		}
		if want := "Open this URL to authorize google for the tool Mail_Get, and finish there before you continue."; p.Message != want {
			t.Errorf("message %q, want %q", p.Message, want)
		}
		g.open(t, p.URL)
		p2, frame := mailCall(t, f, 2, "accept", p.State)
		if p2 != nil {
			t.Fatalf("asked again after the user finished: %+v", p2)
		}
		sameFrame(t, frame, resultText(2, false, emails))
		if calls, checks := g.counts(); calls != 2 || checks != 1 {
			t.Errorf("the OTC server saw %d calls and %d checks, want 2 and 1", calls, checks)
		}
	})
	t.Run("accept at once, the user finishes during the wait", func(t *testing.T) {
		t.Parallel()
		g := newGrantServer(t)
		f := authFront(t, g, 5*time.Second)
		p, _ := mailCall(t, f, 1, "", "")
		time.AfterFunc(400*time.Millisecond, func() { g.open(t, p.URL) })
		p2, frame := mailCall(t, f, 2, "accept", p.State)
		if p2 != nil {
			t.Fatalf("asked again though the user finished during the wait: %+v", p2)
		}
		sameFrame(t, frame, resultText(2, false, emails))
		if calls, checks := g.counts(); calls != 2 || checks < 2 {
			t.Errorf("the OTC server saw %d calls and %d checks, want 2 and at least 2", calls, checks)
		}
	})
	t.Run("accept at once, the user finishes later", func(t *testing.T) {
		t.Parallel()
		g := newGrantServer(t)
		f := authFront(t, g, waitShort)
		p, _ := mailCall(t, f, 1, "", "")
		again, _ := mailCall(t, f, 2, "accept", p.State)
		if again == nil || again.URL != p.URL {
			t.Fatalf("after an accept without finishing: %+v, want the same URL asked again", again)
		}
		if want := "Finish authorizing google for the tool Mail_Get at this URL, then continue."; again.Message != want {
			t.Errorf("message %q, want %q", again.Message, want)
		}
		if calls, _ := g.counts(); calls != 1 {
			t.Errorf("the OTC tool was called %d times while the check said pending, want 1", calls)
		}
		g.open(t, again.URL)
		p3, frame := mailCall(t, f, 3, "accept", again.State)
		if p3 != nil {
			t.Fatalf("asked a third time: %+v", p3)
		}
		sameFrame(t, frame, resultText(3, false, emails))
	})
	t.Run("accept twice without finishing", func(t *testing.T) {
		t.Parallel()
		g := newGrantServer(t)
		f := authFront(t, g, waitShort)
		p, _ := mailCall(t, f, 1, "", "")
		again, _ := mailCall(t, f, 2, "accept", p.State)
		if again == nil {
			t.Fatal("not asked again")
		}
		p3, frame := mailCall(t, f, 3, "accept", again.State)
		if p3 != nil {
			t.Fatalf("asked a third time: %+v", p3)
		}
		sameFrame(t, frame, resultText(3, true, "The authorization of google at "+p.URL+" is not complete: the user was asked 2 times and accepted without finishing it. "+
			"The tool Mail_Get did not run; finish the authorization in the browser, then call the tool again."))
		if calls, _ := g.counts(); calls != 1 {
			t.Errorf("the OTC tool was called %d times, want 1", calls)
		}
	})
	for _, action := range []string{"decline", "cancel"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			g := newGrantServer(t)
			f := authFront(t, g, 0)
			p, _ := mailCall(t, f, 1, "", "")
			p2, frame := mailCall(t, f, 2, action, p.State)
			if p2 != nil {
				t.Fatalf("asked again after %s: %+v", action, p2)
			}
			what := "The user declined to authorize google at " + p.URL + "."
			if action == "cancel" {
				what = "The user dismissed (cancelled) the authorization of google at " + p.URL + "."
			}
			sameFrame(t, frame, resultText(2, true, what+" The tool Mail_Get did not run; call it again to be asked again."))
			if calls, checks := g.counts(); calls != 1 || checks != 0 {
				t.Errorf("the OTC server saw %d calls and %d checks, want 1 and 0", calls, checks)
			}
		})
	}
	t.Run("the OTC server challenges again after completed", func(t *testing.T) {
		t.Parallel()
		g := newGrantServer(t)
		g.forget = true
		f := authFront(t, g, 0)
		p, _ := mailCall(t, f, 1, "", "")
		g.open(t, p.URL)
		again, _ := mailCall(t, f, 2, "accept", p.State)
		if again == nil || again.URL == p.URL {
			t.Fatalf("the OTC server's new challenge: %+v, want its new URL asked", again)
		}
		g.open(t, again.URL)
		p3, frame := mailCall(t, f, 3, "accept", again.State)
		if p3 != nil {
			t.Fatalf("asked a third time: %+v", p3)
		}
		third := strings.Replace(again.URL, "state=2", "state=3", 1) // the server's newest challenge
		sameFrame(t, frame, resultText(3, true, "The authorization of google at "+third+" is not complete: the user was asked 2 times, and the tool server still asks for it. "+
			"The tool Mail_Get did not run; finish the authorization in the browser, then call the tool again."))
		if calls, _ := g.counts(); calls != 3 {
			t.Errorf("the OTC tool was called %d times, want 3", calls)
		}
	})
}

// A retry an OTC front relays (serve-otc: its OTC client called again) is
// answered as the OTC server answers it: the tool called again at once, no
// check_url watched, a challenge again passed on as one each time (the
// OTC client has the challenge's own check_url, in the OTC answer the
// input request's _meta carries); decline still ends the call.
func TestMCPFrontAuthorizationRelayed(t *testing.T) {
	t.Parallel()
	g := newGrantServer(t)
	f := authFront(t, g, 5*time.Second)
	p, _ := mailCallMeta(t, f, 1, "", "", relayedMeta)
	state := p.State
	for round := 2; round <= 4; round++ {
		start := time.Now()
		again, frame := mailCallMeta(t, f, round, "accept", state, relayedMeta)
		if again == nil || time.Since(start) > 2*time.Second {
			t.Fatalf("relayed retry %d: %s after %v, want the OTC server's new challenge at once", round, frame, time.Since(start))
		}
		state = again.State
	}
	if calls, checks := g.counts(); calls != 4 || checks != 0 {
		t.Errorf("the OTC server saw %d calls and %d checks, want 4 and 0", calls, checks)
	}
	_, frame := mailCallMeta(t, f, 5, "decline", state, relayedMeta)
	if !strings.Contains(frame, `"isError":true`) || !strings.Contains(frame, "The user declined to authorize google") {
		t.Errorf("a relayed decline: %s, want the isError result", frame)
	}
	g.open(t, g.srv.URL+"/authorize?state=4")
	// The declined state answered its result: sent again it is refused
	// (a requestState is used once) and the OTC server is not called; the
	// call made again runs.
	if again, frame := mailCallMeta(t, f, 6, "accept", state, relayedMeta); again != nil || !strings.Contains(frame, "requestState refused: it was used already") {
		t.Errorf("the declined state sent again: %+v %s, want it refused", again, frame)
	}
	if calls, _ := g.counts(); calls != 4 {
		t.Errorf("the OTC server saw %d calls, want 4 (none for the refused state)", calls)
	}
	if again, frame := mailCallMeta(t, f, 7, "", "", relayedMeta); again != nil || !strings.Contains(frame, `"structuredContent":{"emails":2}`) {
		t.Errorf("the call made again after the user finished: %+v %s, want the emails", again, frame)
	}
}

// One caller's waits are bounded: with authWaitsPerCaller retries of its
// calls watching a pending check_url, its next retry asks check_url once
// and is answered at once (asked again), while the others still wait.
func TestMCPFrontAuthorizationWaitsBounded(t *testing.T) {
	t.Parallel()
	g := newGrantServer(t)
	f := authFront(t, g, 3*time.Second)
	var prompts []*prompt
	for i := 0; i <= authWaitsPerCaller; i++ {
		p, _ := mailCall(t, f, i+1, "", "")
		prompts = append(prompts, p)
	}
	done := make(chan time.Duration, authWaitsPerCaller)
	start := time.Now()
	for i := 0; i < authWaitsPerCaller; i++ {
		go func() {
			mailCall(t, f, 10+i, "accept", prompts[i].State)
			done <- time.Since(start)
		}()
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		f.checks.mu.Lock()
		n := f.checks.caller[idemPrincipal(context.Background())]
		f.checks.mu.Unlock()
		if n == authWaitsPerCaller {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waits under way, want %d", n, authWaitsPerCaller)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t0 := time.Now()
	again, _ := mailCall(t, f, 20, "accept", prompts[authWaitsPerCaller].State)
	if took := time.Since(t0); again == nil || took > time.Second {
		t.Errorf("the retry beyond the bound: %+v after %v, want asked again at once", again, took)
	}
	for i := 0; i < authWaitsPerCaller; i++ {
		if d := <-done; d < 2*time.Second {
			t.Errorf("a bounded wait ended after %v, want the configured 3s", d)
		}
	}
}
