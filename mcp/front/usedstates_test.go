package front

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// stateOf is the requestState of an input_required frame ("" for none).
func stateOf(frame []byte) string {
	var f struct {
		Result struct {
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	_ = json.Unmarshal(frame, &f)
	return f.Result.RequestState
}

const usedAlready = `{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"invalid tools/call params: requestState refused: it was used already (each one answers its input_required result once); answer the latest input_required result, or call the tool again without inputResponses and requestState"}}`

// A requestState answers its input_required result once (issue 34, item
// 12): the caller's own state sent again — a second decline, or the
// round-1 state replayed after round 2 to start the rounds over — is
// refused with -32602 before the handler runs, and of two retries sent at
// once with one state exactly one goes on. The honest multi-round flow
// (each round's retry with that round's state) still completes.
func TestFrontRequestStateUsedOnce(t *testing.T) {
	t.Parallel()
	f := mrtrFront(t, nil)
	alice := as("alice")
	const declined = `{"google":{"action":"decline"}}`

	// Two declines of one prompt.
	state := askFor(t, f, alice, "connect", `{}`)
	sameJSON(t, f.HandleMessage(alice, modernCall(2, "connect", `{}`, answer(declined, state))), resumedText(1, declined))
	sameJSON(t, f.HandleMessage(alice, modernCall(2, "connect", `{}`, answer(declined, state))), usedAlready)
	sameJSON(t, f.HandleMessage(alice, modernCall(2, "connect", `{}`, answer(accepted, state))), usedAlready)

	// The honest rounds of "nag", and the round-1 state replayed after
	// round 2 (which would start the count again).
	round1 := askFor(t, f, alice, "nag", `{}`)
	round2 := stateOf(f.HandleMessage(alice, modernCall(2, "nag", `{}`, answer(accepted, round1))))
	if env, err := f.sealer.open(round2); err != nil || env.Round != 2 {
		t.Fatalf("round 2: %v %v", env, err)
	}
	sameJSON(t, f.HandleMessage(alice, modernCall(2, "nag", `{}`, answer(accepted, round1))), usedAlready)
	round3 := stateOf(f.HandleMessage(alice, modernCall(2, "nag", `{}`, answer(accepted, round2))))
	if env, err := f.sealer.open(round3); err != nil || env.Round != 3 {
		t.Fatalf("round 3 after the refused replay: %v %v", env, err)
	}

	// Two retries at once with one state: one goes on.
	state = askFor(t, f, alice, "connect", `{}`)
	var wg sync.WaitGroup
	frames := make([][]byte, 8)
	for i := range frames {
		wg.Add(1)
		go func() {
			defer wg.Done()
			frames[i] = f.HandleMessage(alice, modernCall(2, "connect", `{}`, answer(accepted, state)))
		}()
	}
	wg.Wait()
	resumed, refused := 0, 0
	for _, got := range frames {
		switch {
		case sameData(t, got, resumedText(1, accepted)):
			resumed++
		case sameData(t, got, usedAlready):
			refused++
		default:
			t.Errorf("a concurrent retry: %s", got)
		}
	}
	if resumed != 1 || refused != len(frames)-1 {
		t.Errorf("%d concurrent retries with one state: %d resumed, %d refused; want 1 and %d", len(frames), resumed, refused, len(frames)-1)
	}
}

// sameData reports whether the JSON texts got and want are the same data.
func sameData(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		t.Fatalf("not JSON: %s / %s", got, want)
	}
	return reflect.DeepEqual(a, b)
}

// Over streamable HTTP (the wire): the replayed state gets HTTP 400 and
// -32602; the honest retry 200 with the tool's result.
func TestFrontRequestStateReplayHTTP(t *testing.T) {
	t.Parallel()
	srv, _ := startFrontHTTP(t, mrtrFront(t, nil), &HTTPOptions{BearerToken: "holder"})
	post := func(msg []byte) reply {
		t.Helper()
		var m struct {
			Params json.RawMessage `json:"params"`
		}
		_ = json.Unmarshal(msg, &m)
		header := http.Header{"Mcp-Protocol-Version": {mcpgo.ProtocolVersion20260728}}
		for k, v := range mcpgo.StandardHeaders(mcpgo.ProtocolVersion20260728, mcpgo.MethodToolsCall, m.Params) {
			header.Set(k, v)
		}
		c := &httpTestClient{url: srv.URL + StreamablePath, token: "holder"}
		r, err := c.post(t, context.Background(), msg, header)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	state := stateOf(post(modernCall(1, "connect", `{}`, "")).body)
	if state == "" {
		t.Fatal("no requestState")
	}
	if r := post(modernCall(2, "connect", `{}`, answer(accepted, state))); r.status != http.StatusOK {
		t.Fatalf("the honest retry: %d %s", r.status, r.body)
	} else {
		sameJSON(t, r.body, resumedText(1, accepted))
	}
	r := post(modernCall(2, "connect", `{}`, answer(accepted, state)))
	if r.status != http.StatusBadRequest {
		t.Errorf("the replay: HTTP %d, want 400", r.status)
	}
	sameJSON(t, r.body, usedAlready)
}

// The in-memory marks are bounded per caller and in all, and forgotten
// when their state expires; a bound reached refuses (a state that cannot
// be marked is not used).
func TestMemoryUsedStatesBounds(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	m := newMemoryUsedStates(3, 2, func() time.Time { return now })
	use := func(p, k string) (bool, error) {
		return m.UseOnce(context.Background(), p, k, now.Add(time.Minute))
	}
	for _, tc := range []struct {
		p, k  string
		first bool
		full  bool
	}{
		{"a", "1", true, false},
		{"a", "1", false, false},
		{"a", "2", true, false},
		{"a", "3", false, true}, // a's share
		{"b", "4", true, false},
		{"c", "5", false, true}, // the whole store
	} {
		first, err := use(tc.p, tc.k)
		if first != tc.first || errors.Is(err, ErrUsedStatesFull) != tc.full {
			t.Errorf("%s marks %s: %t %v, want %t (full: %t)", tc.p, tc.k, first, err, tc.first, tc.full)
		}
	}
	now = now.Add(time.Minute)
	if first, err := use("c", "5"); !first || err != nil {
		t.Errorf("after the marks expired: %t %v", first, err)
	}
	if first, _ := use("a", "1"); !first {
		t.Error("an expired mark is still held") // its state has expired: it is refused as such before
	}
}

// Arguments with a key given twice in one object, at any depth and in
// any spelling, are refused with -32602 naming the key, before any
// handler runs or any requestState is checked — the digest would read
// the last value and a tool perhaps the first; so is a params member
// given twice. Keys that repeat in different objects are fine.
func TestFrontDuplicateArgumentKeys(t *testing.T) {
	t.Parallel()
	f := mrtrFront(t, nil)
	alice := as("alice")
	state := askFor(t, f, alice, "connect", `{"q":"x"}`)
	refusedKey := func(id int, key string) string {
		return `{"jsonrpc":"2.0","id":` + string(rune('0'+id)) + `,"error":{"code":-32602,"message":"invalid arguments: the key \"` + key +
			`\" is given more than once in one object; give each key once"}}`
	}
	for _, tc := range []struct {
		name, call, want string
	}{
		{"a retry whose digest reads the last q", string(modernCall(2, "connect", `{"q":"evil","q":"x"}`, answer(accepted, state))), refusedKey(2, "q")},
		{"nested", string(request(3, "tools/call", `{"name":"other","arguments":{"a":[{"b":1,"c":{"d":1,"d":2}}]}}`)), refusedKey(3, "d")},
		{"escaped", string(request(4, "tools/call", `{"name":"other","arguments":{"q":1,"\u0071":2}}`)), refusedKey(4, "q")},
		{"params.name twice", string(request(5, "tools/call", `{"name":"connect","name":"other","arguments":{}}`)),
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"invalid tools/call params: params has the member \"name\" more than once; give each member once"}}`},
	} {
		sameJSON(t, f.HandleMessage(alice, []byte(tc.call)), tc.want)
	}
	sameJSON(t, f.HandleMessage(alice, request(6, "tools/call", `{"name":"other","arguments":{"a":{"b":1},"c":{"b":2},"d":[{"b":1},{"b":2}]}}`)),
		`{"jsonrpc":"2.0","id":6,"result":{"content":[{"type":"text","text":"other ran"}]}}`)
	// The state the refused retry carried was not used: the honest retry goes on.
	sameJSON(t, f.HandleMessage(alice, modernCall(2, "connect", `{"q":"x"}`, answer(accepted, state))), resumedText(1, accepted))
}
