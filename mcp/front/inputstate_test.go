package front

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// The multi round-trip of a tools/call (inputstate.go), at the wire: the
// input_required result, the sealed requestState, and every way a retry
// can try to continue a call that is not its own.

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}`

// mrtrFront serves "connect", which asks for one URL (with a State of its
// own) and, on the retry, answers what the front gave it; and "nag",
// which asks every time.
func mrtrFront(t *testing.T, opts *Options) *Server {
	t.Helper()
	f := New("front-test", "1.0.0", opts)
	ask := &InputRequired{
		Elicitations: []mcpgo.ElicitationParams{{Mode: mcpgo.ElicitationModeURL, ElicitationID: "google",
			URL: "https://auth.example/google?state=s1", Message: "Authorize Google."}},
		State: []byte(`{"challenge":"s1"}`),
	}
	f.SetTools(
		Tool{Tool: mcpgo.NewTool("connect"), Handler: func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			r, ok := Resumed(ctx)
			if !ok {
				if req.Params.RequestState != "" || req.Params.InputResponses != nil {
					return nil, fmt.Errorf("the handler sees an unchecked requestState")
				}
				return nil, fmt.Errorf("asking: %w", ask)
			}
			b, _ := json.Marshal(map[string]any{"round": r.Round, "state": string(r.State), "responses": r.Responses})
			return mcpgo.NewToolResultText(string(b)), nil
		}},
		Tool{Tool: mcpgo.NewTool("nag"), Handler: func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return nil, ask
		}},
		Tool{Tool: mcpgo.NewTool("other"), Handler: func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText("other ran"), nil
		}},
	)
	return f
}

// as is ctx with principal as the caller (as a transport sets it).
func as(principal string) context.Context {
	return context.WithValue(context.Background(), callerKey{}, &caller{principal: principal})
}

// modernCall is a 2026-07-28 tools/call of name with args and the extra
// params members extra ("" for none).
func modernCall(id int, name, args, extra string) []byte {
	params := fmt.Sprintf(`{"name":%q,"arguments":%s,%s`, name, args, modernMeta)
	if extra != "" {
		params += "," + extra
	}
	return request(id, "tools/call", params+"}")
}

// answer is the params members of a retry: the responses and the state.
func answer(responses, state string) string {
	return fmt.Sprintf(`"inputResponses":%s,"requestState":%q`, responses, state)
}

const accepted = `{"google":{"action":"accept"}}`

var statePattern = regexp.MustCompile(`^mrs1\.[A-Za-z0-9_-]+$`)

// askFor calls name and returns the requestState of its input_required
// result, checking the rest of the frame as data.
func askFor(t *testing.T, f *Server, ctx context.Context, name, args string) string {
	t.Helper()
	got := f.HandleMessage(ctx, modernCall(1, name, args, ""))
	var frame struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(got, &frame); err != nil || frame.Result == nil {
		t.Fatalf("%s: %s, want a result", name, got)
	}
	var state string
	if json.Unmarshal(frame.Result["requestState"], &state) != nil || !statePattern.MatchString(state) {
		t.Fatalf("%s: requestState %s, want mrs1.<base64url>", name, frame.Result["requestState"])
	}
	delete(frame.Result, "requestState")
	b, _ := json.Marshal(frame.Result)
	sameJSON(t, b, `{
		"content":[{"type":"text","text":"Authorize Google. https://auth.example/google?state=s1"}],
		"inputRequests":{"google":{"method":"elicitation/create","params":{"mode":"url","message":"Authorize Google.","url":"https://auth.example/google?state=s1"}}},
		"resultType":"input_required",
		"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"front-test","version":"1.0.0"}}}`)
	return state
}

// resumedText is what "connect" answers on a retry the front accepted.
func resumedText(round int, responses string) string {
	b, _ := json.Marshal(fmt.Sprintf(`{"responses":%s,"round":%d,"state":"{\"challenge\":\"s1\"}"}`, responses, round))
	return `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":` + string(b) + `}],"resultType":"complete",` +
		`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"front-test","version":"1.0.0"}}}}`
}

// A handler's InputRequired: to a 2026-07-28 client an input_required
// result — a text content, URL params without the 2025-era elicitationId,
// a sealed requestState — whose retry gives the handler the user's answer
// and its State; to a 2025-11-25 client -32042 as before.
func TestFrontInputRequired(t *testing.T) {
	t.Parallel()
	f := mrtrFront(t, nil)
	alice := as("alice")
	state := askFor(t, f, alice, "connect", `{"q":"x","n":1}`)
	// The arguments again, in another order and spacing: the same call.
	got := f.HandleMessage(alice, modernCall(2, "connect", `{ "n": 1, "q": "x" }`, answer(accepted, state)))
	sameJSON(t, got, resumedText(1, `{"google":{"action":"accept"}}`))
	// Each state answers its result once: another round, another state.
	state = askFor(t, f, alice, "connect", `{"q":"x","n":1}`)
	got = f.HandleMessage(alice, modernCall(2, "connect", `{"q":"x","n":1}`, answer(`{"google":{"action":"decline"},"extra":{"action":"accept"}}`, state)))
	sameJSON(t, got, resumedText(1, `{"google":{"action":"decline"}}`))

	legacy := request(3, "tools/call", `{"name":"connect","arguments":{}}`)
	sameJSON(t, f.HandleMessage(alice, legacy), `{"jsonrpc":"2.0","id":3,"error":{"code":-32042,`+
		`"message":"URL elicitation required: 1 elicitation(s) needed",`+
		`"data":{"elicitations":[{"mode":"url","message":"Authorize Google.","elicitationId":"google","url":"https://auth.example/google?state=s1"}]}}}`)
	// A 2025-11-25 request carrying a requestState: that era has no multi
	// round-trip, so the call is a first one (-32042 again, not resumed).
	legacyRetry := request(4, "tools/call", `{"name":"connect","arguments":{},`+answer(accepted, state)+`}`)
	if got := f.HandleMessage(alice, legacyRetry); !strings.Contains(string(got), `"code":-32042`) {
		t.Errorf("a 2025-11-25 retry: %s, want -32042 (not resumed)", got)
	}
}

// The attacks on a requestState, each refused with -32602 and a message
// that says why, before the handler runs; after each, the honest retry
// (alice's own state, her tool and arguments) still goes on.
func TestFrontResumeRefused(t *testing.T) {
	t.Parallel()
	f := mrtrFront(t, &Options{StateKeys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")}, InputStateTTL: time.Minute})
	clock := time.Now()
	f.sealer.now = func() time.Time { return clock }
	alice, bob := as("alice"), as("bob")
	const args = `{"q":"x"}`
	state := askFor(t, f, alice, "connect", args)
	stranger := New("front-test", "1.0.0", &Options{StateKeys: [][]byte{[]byte("another key, another deployment!")}})
	stranger.SetTools(f.cat.Load().byName["connect"].clone())
	foreign := askFor(t, stranger, alice, "connect", args)

	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(state, requestStatePrefix))
	raw[len(raw)/2] ^= 1
	flipped := requestStatePrefix + base64.RawURLEncoding.EncodeToString(raw)

	const refused = `{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"invalid tools/call params: `
	notOurs := refused + `requestState refused: it was not issued by this server, or was altered; call the tool again without inputResponses and requestState"}}`
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		call  []byte
		want  string
		clock time.Duration
	}{
		{"replay by another caller", bob, modernCall(2, "connect", args, answer(accepted, state)),
			refused + `requestState refused: it was issued to another caller"}}`, 0},
		{"another tool", alice, modernCall(2, "other", args, answer(accepted, state)),
			refused + `requestState refused: it was issued for another tool than \"other\""}}`, 0},
		{"swapped arguments", alice, modernCall(2, "connect", `{"q":"y"}`, answer(accepted, state)),
			refused + `requestState refused: it was issued for other arguments; retry with the arguments of the call that received it"}}`, 0},
		{"no arguments", alice, modernCall(2, "connect", `{}`, answer(accepted, state)),
			refused + `requestState refused: it was issued for other arguments; retry with the arguments of the call that received it"}}`, 0},
		{"a bit flipped", alice, modernCall(2, "connect", args, answer(accepted, flipped)), notOurs, 0},
		{"cut short", alice, modernCall(2, "connect", args, answer(accepted, state[:len(state)-8])), notOurs, 0},
		{"forged", alice, modernCall(2, "connect", args, answer(accepted, requestStatePrefix+base64.RawURLEncoding.EncodeToString([]byte(`{"p":"","t":"connect","r":1,"k":["google"]}`)))), notOurs, 0},
		{"not base64", alice, modernCall(2, "connect", args, answer(accepted, requestStatePrefix+"!!!")), notOurs, 0},
		{"no prefix", alice, modernCall(2, "connect", args, answer(accepted, strings.TrimPrefix(state, requestStatePrefix))), notOurs, 0},
		{"huge", alice, modernCall(2, "connect", args, answer(accepted, requestStatePrefix+strings.Repeat("A", maxRequestState))), notOurs, 0},
		{"sealed by another deployment", alice, modernCall(2, "connect", args, answer(accepted, foreign)), notOurs, 0},
		{"expired", alice, modernCall(2, "connect", args, answer(accepted, state)),
			refused + `requestState refused: it expired (an answer is awaited at most 1m0s); call the tool again without inputResponses and requestState"}}`, time.Minute + time.Second},
		{"no answer for the key", alice, modernCall(2, "connect", args, answer(`{"github":{"action":"accept"}}`, state)),
			refused + `inputResponses has no answer for \"google\": answer every key of the result's inputRequests"}}`, 0},
		{"an action that is none", alice, modernCall(2, "connect", args, answer(`{"google":{"action":"approve"}}`, state)),
			refused + `inputResponses[\"google\"].action is \"approve\": it must be accept, decline or cancel"}}`, 0},
		{"an answer that is not an object", alice, modernCall(2, "connect", args, answer(`{"google":"accept"}`, state)),
			refused + `inputResponses[\"google\"] must be an elicitation result: {\"action\": \"accept\" | \"decline\" | \"cancel\"}"}}`, 0},
		{"responses without a state", alice, modernCall(2, "connect", args, `"inputResponses":`+accepted),
			refused + `inputResponses came without a requestState: answer an input_required result of this server with its requestState, or call the tool without inputResponses"}}`, 0},
		{"a state without responses", alice, modernCall(2, "connect", args, fmt.Sprintf(`"requestState":%q`, state)),
			refused + `a requestState came without inputResponses: answer each of the result's inputRequests, or call the tool without a requestState"}}`, 0},
		{"a state that is not a string", alice, modernCall(2, "connect", args, `"inputResponses":`+accepted+`,"requestState":{"p":"alice"}`),
			refused + `params.requestState must be a string, not an object"}}`, 0},
		{"responses that are not an object", alice, modernCall(2, "connect", args, `"inputResponses":["accept"],"requestState":"x"`),
			refused + `params.inputResponses must be an object, not an array"}}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock = clock.Add(tc.clock)
			defer func() { clock = clock.Add(-tc.clock) }()
			sameJSON(t, f.HandleMessage(tc.ctx, tc.call), tc.want)
		})
		// The honest retry (of a call of its own: a state answers its
		// result once) still goes on.
		fresh := askFor(t, f, alice, "connect", args)
		sameJSON(t, f.HandleMessage(alice, modernCall(2, "connect", args, answer(accepted, fresh))), resumedText(1, accepted))
	}
	// The state no attack used: answered once, then refused.
	sameJSON(t, f.HandleMessage(alice, modernCall(2, "connect", args, answer(accepted, state))), resumedText(1, accepted))
	sameJSON(t, f.HandleMessage(alice, modernCall(2, "connect", args, answer(accepted, state))), refused+
		`requestState refused: it was used already (each one answers its input_required result once); answer the latest input_required result, or call the tool again without inputResponses and requestState"}}`)
	// Bob's own call is his own: asked, and resumed.
	bobs := askFor(t, f, bob, "connect", args)
	sameJSON(t, f.HandleMessage(bob, modernCall(2, "connect", args, answer(accepted, bobs))), resumedText(1, accepted))
}

// Keys rotate: a state sealed with the old key opens where the new key
// seals and the old one is still listed, not where it was dropped.
func TestFrontResumeKeyRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := []byte("the old key, 32 bytes or more...."), []byte("the new key, 32 bytes or more....")
	alice := as("alice")
	state := askFor(t, mrtrFront(t, &Options{StateKeys: [][]byte{oldKey}}), alice, "connect", `{}`)
	rotating := mrtrFront(t, &Options{StateKeys: [][]byte{newKey, oldKey}})
	sameJSON(t, rotating.HandleMessage(alice, modernCall(2, "connect", `{}`, answer(accepted, state))), resumedText(1, accepted))
	// The replica that seals with the new key: its states open on a replica that only has it.
	newState := askFor(t, rotating, alice, "connect", `{}`)
	rotated := mrtrFront(t, &Options{StateKeys: [][]byte{newKey}})
	sameJSON(t, rotated.HandleMessage(alice, modernCall(2, "connect", `{}`, answer(accepted, newState))), resumedText(1, accepted))
	got := rotated.HandleMessage(alice, modernCall(2, "connect", `{}`, answer(accepted, state)))
	if !strings.Contains(string(got), "it was not issued by this server, or was altered") {
		t.Errorf("a state of the dropped key: %s, want it refused", got)
	}
}

// A handler that asks on every retry gets the next round sealed, and
// after maxInputRounds an isError result: the user is not asked forever.
func TestFrontInputRounds(t *testing.T) {
	t.Parallel()
	f := mrtrFront(t, nil)
	alice := as("alice")
	state := askFor(t, f, alice, "nag", `{}`)
	for round := 2; round <= maxInputRounds; round++ {
		got := f.HandleMessage(alice, modernCall(2, "nag", `{}`, answer(accepted, state)))
		var frame struct {
			Result struct {
				RequestState string `json:"requestState"`
			} `json:"result"`
		}
		if json.Unmarshal(got, &frame) != nil || frame.Result.RequestState == "" {
			t.Fatalf("round %d: %s, want input_required", round, got)
		}
		env, err := f.sealer.open(frame.Result.RequestState)
		if err != nil || env.Round != round {
			t.Fatalf("round %d: the state says round %v (%v)", round, env, err)
		}
		state = frame.Result.RequestState
	}
	got := f.HandleMessage(alice, modernCall(2, "nag", `{}`, answer(accepted, state)))
	sameJSON(t, got, `{"jsonrpc":"2.0","id":2,"result":{"isError":true,"resultType":"complete",
		"content":[{"type":"text","text":"The tool nag asked the user for input 10 times without completing: it was not asked again, and did not run. Authorize Google. https://auth.example/google?state=s1"}],
		"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"front-test","version":"1.0.0"}}}}`)
}

// A State over the bound is not sent: an isError result, and a log line.
func TestFrontInputStateBound(t *testing.T) {
	t.Parallel()
	f := New("front-test", "1.0.0", nil)
	f.SetTools(Tool{Tool: mcpgo.NewTool("big"), Handler: func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return nil, &InputRequired{Elicitations: []mcpgo.ElicitationParams{{ElicitationID: "k", URL: "https://a.example/"}},
			State: make([]byte, MaxInputState+1)}
	}})
	got := f.HandleMessage(as("alice"), modernCall(1, "big", `{}`, ""))
	sameJSON(t, got, `{"jsonrpc":"2.0","id":1,"result":{"isError":true,"resultType":"complete",
		"content":[{"type":"text","text":"The tool big needs the user to open https://a.example/, but its request could not be sent: it did not run."}],
		"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"front-test","version":"1.0.0"}}}}`)
}

// tools/list (2026-07-28) says how long it may be cached (Options.ListTTL;
// 0 while nothing is listed) and for whom (Options.PrivateList).
func TestFrontListCaching(t *testing.T) {
	t.Parallel()
	list := request(1, "tools/list", `{`+modernMeta+`}`)
	for _, tc := range []struct {
		opts  *Options
		tools bool
		want  string
	}{
		{nil, true, `"ttlMs":0,"cacheScope":"public"`},
		{&Options{ListTTL: 30 * time.Second}, true, `"ttlMs":30000,"cacheScope":"public"`},
		{&Options{ListTTL: 30 * time.Second, PrivateList: true}, true, `"ttlMs":30000,"cacheScope":"private"`},
		{&Options{ListTTL: 30 * time.Second, PrivateList: true}, false, `"ttlMs":0,"cacheScope":"private"`},
		{&Options{ListTTL: 30 * time.Second}, false, `"ttlMs":0,"cacheScope":"public"`},
	} {
		f := New("front-test", "1.0.0", tc.opts)
		tools := `[]`
		if tc.tools {
			f.SetTools(Tool{Tool: mcpgo.NewTool("t")})
			tools = `[{"name":"t","inputSchema":{"type":"object","properties":{},"required":[]},"annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":true}}]`
		}
		sameJSON(t, f.HandleMessage(context.Background(), list), `{"jsonrpc":"2.0","id":1,"result":{"tools":`+tools+`,`+tc.want+
			`,"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"front-test","version":"1.0.0"}}}}`)
	}
}

// clone is a copy of the tool t.
func (t *Tool) clone() Tool { return *t }

// Over streamable HTTP with OAuth, the caller a requestState is bound to
// is the token's issuer and subject: u1 of issuer B replaying the state
// of u1 of issuer A gets HTTP 400 and -32602; A's own retry goes on.
func TestFrontResumeHTTPPrincipal(t *testing.T) {
	t.Parallel()
	srv, _ := startFrontHTTP(t, mrtrFront(t, nil), &HTTPOptions{Resource: twoIssuerAuth(issuerA, issuerB)})
	post := func(token string, msg []byte) reply {
		t.Helper()
		var m struct {
			Params json.RawMessage `json:"params"`
		}
		_ = json.Unmarshal(msg, &m)
		header := http.Header{"Mcp-Protocol-Version": {mcpgo.ProtocolVersion20260728}}
		for k, v := range mcpgo.StandardHeaders(mcpgo.ProtocolVersion20260728, mcpgo.MethodToolsCall, m.Params) {
			header.Set(k, v)
		}
		c := &httpTestClient{url: srv.URL + StreamablePath, token: token}
		r, err := c.post(t, context.Background(), msg, header)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := post("A:u1", modernCall(1, "connect", `{}`, ""))
	var first struct {
		Result struct {
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	if json.Unmarshal(r.frame(t, 1), &first) != nil || first.Result.RequestState == "" {
		t.Fatalf("A's call: %d %s", r.status, r.body)
	}
	retry := modernCall(2, "connect", `{}`, answer(accepted, first.Result.RequestState))
	if r := post("B:u1", retry); r.status != http.StatusBadRequest {
		t.Errorf("B replays A's state: HTTP %d, want 400", r.status)
	} else {
		sameJSON(t, r.frame(t, 2), `{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"invalid tools/call params: requestState refused: it was issued to another caller"}}`)
	}
	if r := post("A:u1", retry); r.status != http.StatusOK {
		t.Errorf("A's own retry: HTTP %d %s", r.status, r.body)
	} else {
		sameJSON(t, r.frame(t, 2), resumedText(1, accepted))
	}
}

// No text opens as a requestState unless it was sealed with the key, and
// none makes open panic.
func FuzzRequestStateOpen(f *testing.F) {
	s := newInputSealer([][]byte{[]byte("a fixed key: the workers share it")}, time.Hour)
	good, _ := s.seal(&inputEnvelope{Tool: "t", Keys: []string{"k"}})
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(requestStatePrefix)
	f.Add(requestStatePrefix + "AAAA")
	f.Fuzz(func(t *testing.T, state string) {
		// Only what s sealed opens (the nonce differs per process: the
		// seed of another worker is another sealing of the same envelope).
		env, err := s.open(state)
		if err == nil && (env.Tool != "t" || len(env.Keys) != 1 || env.Keys[0] != "k") {
			t.Fatalf("%q opened: %+v", state, env)
		}
	})
}
