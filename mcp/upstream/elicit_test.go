package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

type ctxMark struct{}

// A 2026-07-28 input_required that asks only for URLs is an
// *InputRequiredError with the URL requests and the requestState (and
// still the -32042 *Error for callers that read only that); the call sent
// again with CallToolResume carries inputResponses and that requestState,
// and the server's tool finishes with them.
func TestUpstreamEraResumeWithInputResponses(t *testing.T) {
	u, wire, _, _ := startModern(t, Config{}, Options{})
	_, err := callTool(t, u, "ask_url", `{"repo":"x"}`)
	var ir *InputRequiredError
	if !errors.As(err, &ir) {
		t.Fatalf("err = %v, want an *InputRequiredError", err)
	}
	want := []URLRequest{{Key: "github", URL: "https://auth.example/github", Message: "Connect GitHub"}}
	if !slices.Equal(ir.URLs, want) || ir.RequestState != "state-1" {
		t.Fatalf("URLs %+v, state %q; want %+v and state-1", ir.URLs, ir.RequestState, want)
	}
	var ue *Error
	if !errors.As(err, &ue) || ue.Code != -32042 {
		t.Errorf("the error does not unwrap to -32042: %v", err)
	}
	res, err := u.CallToolResume(context.Background(), "ask_url", json.RawMessage(`{"repo":"x"}`), nil, nil, &Resume{
		InputResponses: map[string]json.RawMessage{"github": json.RawMessage(`{"action":"accept"}`)},
		RequestState:   ir.RequestState,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); got != "resumed: accept with state-1" {
		t.Errorf("resumed call: %q", got)
	}
	// The wire, as data: the second tools/call carries both.
	wire.mu.Lock()
	var calls []map[string]any
	for _, r := range wire.reqs {
		if r.rpcMethod == "tools/call" {
			calls = append(calls, r.decoded(t))
		}
	}
	wire.mu.Unlock()
	if len(calls) != 2 {
		t.Fatalf("%d tools/call sent, want 2", len(calls))
	}
	first, _ := calls[0]["params"].(map[string]any)
	second, _ := calls[1]["params"].(map[string]any)
	if _, ok := first["inputResponses"]; ok {
		t.Errorf("the first call carried inputResponses: %s", asJSON(first))
	}
	if asJSON(second["inputResponses"]) != `{"github":{"action":"accept"}}` || second["requestState"] != "state-1" ||
		asJSON(second["arguments"]) != `{"repo":"x"}` {
		t.Errorf("the resumed call's params: %s", asJSON(second))
	}
}

// A call made WithElicitation decides the answers to the elicitations its
// upstream sends during it (stdio: the only call in flight); its function
// sees the call's context. An "accept" to a form goes out as "decline".
func TestUpstreamElicitationDecidedByTheCall(t *testing.T) {
	var mu sync.Mutex
	var reported []Elicitation
	u, _ := startFake(t, Config{}, Options{OnElicitation: func(e Elicitation) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, e)
	}})
	waitReady(t, u)
	var seen []string
	ctx := context.WithValue(context.Background(), ctxMark{}, "the call's")
	ctx = WithElicitation(ctx, func(ctx context.Context, e Elicitation) string {
		mark, _ := ctx.Value(ctxMark{}).(string)
		seen = append(seen, e.Mode+" "+mark)
		return "accept"
	})
	res, err := u.CallTool(ctx, "elicit", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var answers []struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(resultText(t, res)), &answers); err != nil || len(answers) != 5 {
		t.Fatalf("answers %s: %v", resultText(t, res), err)
	}
	if string(answers[0].Result) != `{"action":"accept"}` || string(answers[1].Result) != `{"action":"decline"}` {
		t.Errorf("answers: URL %s, form %s; want accept, decline", answers[0].Result, answers[1].Result)
	}
	if !slices.Equal(seen, []string{"url the call's", "form the call's"}) {
		t.Errorf("the call's function saw %q", seen)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 2 || reported[0].Action != "accept" || reported[1].Action != "decline" {
		t.Errorf("reported %+v", reported)
	}
}

// Over stdio a server request names no call: with two calls in flight
// nobody can tell whose it is, and no call's function is asked (the
// default answer goes out): a caller never answers a request that may be
// another's.
func TestUpstreamElicitationAmbiguousOverStdio(t *testing.T) {
	u, _ := startFake(t, Config{}, Options{})
	waitReady(t, u)
	slowCtx, stopSlow := context.WithCancel(context.Background())
	defer stopSlow()
	asked := make(chan struct{}, 2)
	slowDone := make(chan struct{})
	go func() {
		defer close(slowDone)
		_, _ = u.CallTool(slowCtx, "slow", nil, nil, nil) // another caller's, made without WithElicitation
	}()
	eventually(t, 5*time.Second, "the slow call in flight", func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.inflight == 1
	})
	ctx := WithElicitation(context.Background(), func(context.Context, Elicitation) string { asked <- struct{}{}; return "accept" })
	res, err := u.CallTool(ctx, "elicit", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var answers []struct {
		Result json.RawMessage `json:"result"`
	}
	_ = json.Unmarshal([]byte(resultText(t, res)), &answers)
	if len(answers) < 2 || string(answers[0].Result) != `{"action":"cancel"}` || string(answers[1].Result) != `{"action":"decline"}` {
		t.Errorf("answers %s, want the defaults cancel and decline", resultText(t, res))
	}
	select {
	case <-asked:
		t.Error("a call's function was asked about an elicitation nobody can place")
	default:
	}
	stopSlow()
	<-slowDone
}

// Over streamable HTTP the request comes on the call's own stream: the
// call's function decides, whatever else is in flight, and its context
// ends before the transport's bound for an answer (mcp-go: 30 s) so that
// the answer can still be sent.
func TestUpstreamElicitationOverHTTPBoundedWait(t *testing.T) {
	_, ts, _ := newStreamable(t, nil)
	u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp", Protocol: ProtocolLegacy}, Options{})
	waitReady(t, u)
	var deadline time.Time
	ctx := WithElicitation(context.Background(), func(ctx context.Context, e Elicitation) string {
		deadline, _ = ctx.Deadline()
		return "accept"
	})
	start := time.Now()
	res, err := u.CallTool(ctx, "url_elicit", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); got != "accept" {
		t.Errorf("the server got %q, want accept", got)
	}
	if end := time.Now(); deadline.IsZero() || deadline.After(end.Add(30*time.Second-answerMargin)) || deadline.Before(start.Add(20*time.Second)) {
		t.Errorf("the function's deadline is %v after the call began: want the transport's bound less %v (%v)", deadline.Sub(start), answerMargin, 30*time.Second-answerMargin)
	}
}
