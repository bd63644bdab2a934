package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/audit"
	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/bridge/policy"
	"github.com/mcpotc/mcpotc/otc"
)

// callRecords counts what an MCP front wrote of its calls: its "call" log
// lines, its mcpotc_calls_total, and (once the audit log is closed) its
// audit lines.
type callRecords struct {
	t     *testing.T
	logs  *syncBuffer
	mt    *metrics.Metrics
	lines *syncBuffer
	al    *audit.Log
}

func newCallRecords(t *testing.T) *callRecords {
	r := &callRecords{t: t, logs: &syncBuffer{}, mt: metrics.New(), lines: &syncBuffer{}}
	r.al = audit.New(r.lines, nil)
	return r
}

func (r *callRecords) options(o *MCPFrontOptions) *MCPFrontOptions {
	o.Logger, o.Metrics, o.Audit = zerolog.New(r.logs), r.mt, r.al
	return o
}

// counts are the call log lines and the calls counted so far.
func (r *callRecords) counts() (logLines int, counted float64) {
	for _, l := range strings.Split(r.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "call" {
			logLines++
		}
	}
	for _, n := range callSeries(r.t, r.mt) {
		counted += n
	}
	return logLines, counted
}

// once runs step, an answered tools/call, and checks it wrote one call
// log line and counted one call.
func (r *callRecords) once(what string, step func()) {
	r.t.Helper()
	logs0, n0 := r.counts()
	step()
	logs1, n1 := r.counts()
	if logs1-logs0 != 1 || n1-n0 != 1 {
		r.t.Errorf("%s: %d call log lines and %v calls counted, want one of each", what, logs1-logs0, n1-n0)
	}
}

// auditLines closes the audit log and returns its call lines as
// "tool|outcome|detail".
func (r *callRecords) auditLines() []string {
	r.t.Helper()
	if err := r.al.Close(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(r.lines.String()), "\n") {
		var rec struct{ Audit, Tool, Outcome, Detail string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			r.t.Fatalf("audit line %q: %v", l, err)
		}
		if rec.Audit == audit.KindCall {
			out = append(out, rec.Tool+"|"+rec.Outcome+"|"+rec.Detail)
		}
	}
	return out
}

// Every answered tools/call of the MCP front is one call record — one
// log line, one metric increment, one audit line — whichever way it ended:
// the tool's answer, a rate limit, a malformed idempotency_key, a tool the
// access policy does not grant, a tool not served, params of the wrong
// shape, a refused requestState.
func TestMCPFrontEveryCallRecordedOnce(t *testing.T) {
	rec := newCallRecords(t)
	srv := realOTCServer(t, nil)
	client, _ := otc.NewClient(srv.URL, nil)
	access, err := policy.NewAccess([]policy.Rule{{Anyone: true, Tools: []string{"Calculator_*", "System_*"}}})
	if err != nil {
		t.Fatal(err)
	}
	limits, err := policy.NewLimits(nil, []policy.ToolRate{{Tools: []string{"Calculator_Add"}, Rate: policy.Rate{Requests: 1, Per: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewMCPFront(context.Background(), []OTCServer{{Name: "sample", Client: client}},
		rec.options(&MCPFrontOptions{Controls: &Controls{Access: access, Limits: limits}}))
	if err != nil {
		t.Fatal(err)
	}
	call := func(id int, params string) string {
		t.Helper()
		return string(f.Server().HandleMessage(context.Background(), []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, params))))
	}
	expect := func(frame string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(frame, w) {
				t.Errorf("answer %s, want %s in it", frame, w)
			}
		}
	}
	rec.once("a call", func() {
		expect(call(1, `{"name":"Calculator_Add","arguments":{"a":2,"b":3}}`), `"structuredContent":{"sum":5}`)
	})
	rec.once("a rate-limited call", func() {
		expect(call(2, `{"name":"Calculator_Add","arguments":{"a":2,"b":3}}`), `"isError":true`, `Rate limit reached`, `mcpotc/rate-limit`)
	})
	rec.once("a malformed idempotency_key", func() {
		expect(call(3, `{"name":"System_GetTimestamp","arguments":{"idempotency_key":5}}`), `"isError":true`, `idempotency_key`)
	})
	rec.once("a tool the access policy does not grant", func() {
		expect(call(4, `{"name":"Doorbell_Ring","arguments":{}}`), `"code":-32602`, `tool 'Doorbell_Ring' not found`)
	})
	rec.once("a tool not served", func() {
		expect(call(5, `{"name":"Nope","arguments":{}}`), `"code":-32602`, `tool 'Nope' not found`)
	})
	rec.once("params of the wrong shape", func() {
		expect(call(6, `{"name":5}`), `"code":-32602`)
	})
	rec.once("a refused requestState", func() {
		expect(call(7, `{"name":"System_GetTimestamp","arguments":{},`+modernCallMeta+`,"requestState":"forged","inputResponses":{"google":{"action":"accept"}}}`),
			`"code":-32602`, `requestState refused`)
	})
	want := []string{
		"Calculator_Add|ok|",
		"Calculator_Add|rate_limited|rate limited (tool)",
		"System_GetTimestamp|invalid_input|malformed idempotency_key",
		"Doorbell_Ring|unknown_tool|not granted by the access policy",
		"Nope|unknown_tool|no such tool",
		"|invalid_input|invalid tools/call params",
		"System_GetTimestamp|invalid_input|retry refused: its requestState or inputResponses",
	}
	if got := rec.auditLines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit call lines\n got %q\nwant %q", got, want)
	}
}

// A resumed 2026-07-28 authorization that ends the call at the front — the
// user declined, or has not finished and is asked again — is one call
// record too, as the challenge that started it is.
func TestMCPFrontResumedAuthorizationRecordedOnce(t *testing.T) {
	rec := newCallRecords(t)
	g := newGrantServer(t)
	c, err := otc.NewClient(g.srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewMCPFront(context.Background(), []OTCServer{{Name: "mail", Client: c, UserID: "u1"}}, rec.options(&MCPFrontOptions{AuthorizationWait: -1}))
	if err != nil {
		t.Fatal(err)
	}
	var p *prompt
	rec.once("a challenged call", func() { p, _ = mailCall(t, f, 1, "", "") })
	if p == nil {
		t.Fatal("no challenge")
	}
	rec.once("a declined authorization", func() {
		if p2, frame := mailCall(t, f, 2, "decline", p.State); p2 != nil || !strings.Contains(frame, "declined") {
			t.Errorf("the decline: %+v %s", p2, frame)
		}
	})
	rec.once("a challenged call", func() { p, _ = mailCall(t, f, 3, "", "") })
	rec.once("an authorization accepted but not finished", func() {
		if p2, frame := mailCall(t, f, 4, "accept", p.State); p2 == nil {
			t.Errorf("not asked again: %s", frame)
		}
	})
	want := []string{
		"Mail_Get|auth_required|",
		"Mail_Get|auth_required|authorization declined",
		"Mail_Get|auth_required|",
		"Mail_Get|auth_required|authorization pending: asked again",
	}
	if got := rec.auditLines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit call lines\n got %q\nwant %q", got, want)
	}
}
