package otc

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpotc/mcpotc/internal/principal"
)

// accessHandler serves Kit.Open, Kit.Secret (two versions) and Other.Tool
// to JWT callers: bob's filter hides Kit.Secret, alice's hides nothing. It
// counts the runs of Kit.Secret.
func accessHandler(t *testing.T, opts *Options) (*Handler, func(sub string, extra map[string]any) string, *atomic.Int32) {
	t.Helper()
	secret := []byte("access-test-secret")
	var secretRuns atomic.Int32
	ok := func(context.Context, *Call) (json.RawMessage, error) { return json.RawMessage(`"ran"`), nil }
	run := func(context.Context, *Call) (json.RawMessage, error) {
		secretRuns.Add(1)
		return json.RawMessage(`"secret ran"`), nil
	}
	if opts == nil {
		opts = &Options{}
	}
	opts.JWTSecret = secret
	opts.Access = func(_ context.Context, c Caller) *ToolFilter {
		if c.Subject == "alice" {
			return nil
		}
		return &ToolFilter{Key: "not-alice", Allows: func(key string) bool { return key != "Kit.Secret" }}
	}
	h := newTestHandler(t, opts, testTool("Kit.Open@1.0.0", ok), testTool("Kit.Secret@1.0.0", run), testTool("Kit.Secret@2.0.0", run),
		testTool("Other.Tool@1.0.0", ok))
	token := func(sub string, extra map[string]any) string {
		claims := jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}
		for k, v := range extra {
			claims[k] = v
		}
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return h, token, &secretRuns
}

func listedIDs(t *testing.T, body map[string]any, member string) []string {
	t.Helper()
	items, _ := body[member].([]any)
	var ids []string
	for _, it := range items {
		ids = append(ids, it.(map[string]any)["id"].(string))
	}
	return ids
}

// A caller sees only the tools its filter allows, in both list shapes;
// another caller sees all of them; the list is the same whether it was
// encoded for the caller or taken from the encodings kept.
func TestAccessFiltersList(t *testing.T) {
	h, token, _ := accessHandler(t, nil)
	bob := map[string]string{"Authorization": "Bearer " + token("bob", nil)}
	alice := map[string]string{"Authorization": "Bearer " + token("alice", nil)}
	for i := 0; i < 2; i++ { // the second time from the kept encoding
		_, _, body := do(t, h, "GET", "/tools", bob, "")
		if got := listedIDs(t, body, "tools"); !slices.Equal(got, []string{"Kit.Open@1.0.0", "Other.Tool@1.0.0"}) {
			t.Errorf("bob's envelope list (%d): %v", i, got)
		}
		if got := listedIDs(t, body, "items"); !slices.Equal(got, []string{"Kit.Open@1.0.0", "Other.Tool@1.0.0"}) {
			t.Errorf("bob's envelope items (%d): %v", i, got)
		}
	}
	flat := map[string]string{"Authorization": bob["Authorization"], "OXP-Version": "1.0"}
	_, _, body := do(t, h, "GET", "/tools", flat, "")
	if got := listedIDs(t, body, "items"); !slices.Equal(got, []string{"Kit.Open@1.0.0", "Other.Tool@1.0.0"}) {
		t.Errorf("bob's flat list: %v", got)
	}
	_, _, body = do(t, h, "GET", "/tools", alice, "")
	if got := listedIDs(t, body, "tools"); len(got) != 4 {
		t.Errorf("alice's list: %v", got)
	}
	// One encoding kept, for bob's filter (the envelope's and the flat
	// list's tools are the same): none for alice, who is not filtered.
	if n := len(h.catalog.Load().filtered.m); n != 1 {
		t.Errorf("%d encodings kept, want 1", n)
	}
}

// Guessing a hidden tool: a call of it (with or without a version, in
// any spelling) gets exactly the answer of a call of a tool nobody
// serves, the tool does not run; suggestions never name it. The caller
// that may see it calls it.
func TestAccessHiddenIsUnknown(t *testing.T) {
	h, token, runs := accessHandler(t, nil)
	bob := map[string]string{"Authorization": "Bearer " + token("bob", nil), "OXP-Version": "1.0", "Content-Type": "application/json"}
	answer := func(hdr map[string]string, id string) (int, http.Header, map[string]any) {
		return do(t, h, "POST", "/tools/call", hdr, flatCall(id, `{}`))
	}
	for _, pair := range [][2]string{
		{"Kit.Secret", "Kit.Nothing"},
		{"Kit.Secret@2.0.0", "Kit.Nothing@2.0.0"},
		{"Kit.Secret@9.9.9", "Kit.Nothing@9.9.9"},
	} {
		hs, hh, hidden := answer(bob, pair[0])
		us, uh, unknown := answer(bob, pair[1])
		// The same answer, but for the id each quotes.
		norm := func(m map[string]any, id string) string {
			b, _ := json.Marshal(m)
			key, _, _ := strings.Cut(id, "@")
			return strings.ReplaceAll(strings.ReplaceAll(string(b), id, "ID"), key, "KEY")
		}
		if hs != us || norm(hidden, pair[0]) != norm(unknown, pair[1]) || !reflect.DeepEqual(hh.Values("Retry-After"), uh.Values("Retry-After")) {
			t.Errorf("bob calling %s: %d %v\nand %s: %d %v", pair[0], hs, hidden, pair[1], us, unknown)
		}
		if hs != http.StatusBadRequest || hidden["message"] != "Tool '"+pair[0]+"' was not found" {
			t.Errorf("bob calling %s: %d %v", pair[0], hs, hidden)
		}
	}
	// A near miss: alice is offered the hidden tool, bob is not.
	_, _, forBob := answer(bob, "kit.secret")
	alice := map[string]string{"Authorization": "Bearer " + token("alice", nil), "OXP-Version": "1.0", "Content-Type": "application/json"}
	_, _, forAlice := answer(alice, "kit.secret")
	if strings.Contains(forBob["message"].(string), "Secret") || !strings.Contains(forAlice["message"].(string), "did you mean 'Kit.Secret'") {
		t.Errorf("suggestions: bob %q, alice %q", forBob["message"], forAlice["message"])
	}
	if runs.Load() != 0 {
		t.Errorf("the hidden tool ran %d times for bob", runs.Load())
	}
	if status, _, body := answer(alice, "Kit.Secret"); status != 200 || body["value"] != "secret ran" || runs.Load() != 1 {
		t.Errorf("alice calling Kit.Secret: %d %v (runs %d)", status, body, runs.Load())
	}
}

// Admit refuses a call with 429, Retry-After and x-should-retry, its body
// in the caller's dialect; the tool does not run; the record says
// rate_limited. Calls it admits run.
func TestAdmitRefusesWith429(t *testing.T) {
	var recs []*CallRecord
	var admitted atomic.Int32
	opts := &Options{
		Observe: func(r *CallRecord) { recs = append(recs, r) },
		Admit: func(_ context.Context, c Caller, d *ToolDefinition) *ServerErrorResponse {
			if admitted.Add(1) <= 1 {
				return nil
			}
			return &ServerErrorResponse{Message: "Too many calls of " + d.ID + " by " + c.Subject, RetryAfter: 1500 * time.Millisecond}
		},
	}
	h, token, runs := accessHandler(t, opts)
	alice := map[string]string{"Authorization": "Bearer " + token("alice", nil), "OXP-Version": "1.0", "Content-Type": "application/json"}
	if status, _, body := do(t, h, "POST", "/tools/call", alice, flatCall("Kit.Secret", `{}`)); status != 200 || body["success"] != true {
		t.Fatalf("the first call: %d %v", status, body)
	}
	status, hdr, body := do(t, h, "POST", "/tools/call", alice, flatCall("Kit.Secret", `{}`))
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") != "2" || hdr.Get("x-should-retry") != "true" ||
		body["message"] != "Too many calls of Kit.Secret@2.0.0 by alice" {
		t.Errorf("the second call: %d %v %v", status, hdr, body)
	}
	// The envelope dialect gets its $schema.
	env := map[string]string{"Authorization": alice["Authorization"], "Content-Type": "application/json"}
	status, _, body = do(t, h, "POST", "/tools/call", env, `{"$schema":"urn:oxp:1.0","request":{"tool_id":"Kit.Open","input":{}}}`)
	if status != http.StatusTooManyRequests || body["$schema"] != "urn:oxp:1.0" {
		t.Errorf("an envelope call: %d %v", status, body)
	}
	if runs.Load() != 1 {
		t.Errorf("the tool ran %d times, want once", runs.Load())
	}
	if len(recs) != 3 || recs[1].Outcome != OutcomeRateLimited || recs[1].Status != 429 || recs[1].Resolved != "Kit.Secret@2.0.0" {
		t.Errorf("records: %d, second %+v", len(recs), recs[min(1, len(recs)-1)])
	}
	// A hidden tool is unknown before it is limited: bob's call of it is
	// a 400, not a 429.
	bob := map[string]string{"Authorization": "Bearer " + token("bob", nil), "OXP-Version": "1.0", "Content-Type": "application/json"}
	if status, _, _ := do(t, h, "POST", "/tools/call", bob, flatCall("Kit.Secret", `{}`)); status != http.StatusBadRequest {
		t.Errorf("bob calling the hidden tool: %d, want 400", status)
	}
}

// A JWT caller's issuer, subject, scopes and claims are its token's.
func TestJWTCallerClaims(t *testing.T) {
	var got Caller
	opts := &Options{Access: func(_ context.Context, c Caller) *ToolFilter { got = c; return nil }}
	_, token, _ := accessHandler(t, nil)
	opts.JWTSecret = []byte("access-test-secret")
	h := newTestHandler(t, opts, testTool("Kit.Open@1.0.0", func(context.Context, *Call) (json.RawMessage, error) { return json.RawMessage(`1`), nil }))
	for _, tc := range []struct {
		extra  map[string]any
		iss    string
		scopes []string
	}{
		{map[string]any{"iss": "https://apps.example.com", "scope": "tools:read tools:write", "groups": []string{"support"}}, "https://apps.example.com", []string{"tools:read", "tools:write"}},
		{map[string]any{"scp": []string{"a", "b"}}, "", []string{"a", "b"}},
	} {
		do(t, h, "GET", "/tools", map[string]string{"Authorization": "Bearer " + token("carol", tc.extra)}, "")
		if got.Subject != "carol" || got.ID != principal.Token(tc.iss, "carol") || got.Principal() != got.ID || got.Issuer != tc.iss || !slices.Equal(got.Scopes, tc.scopes) || got.Claims["sub"] != "carol" {
			t.Errorf("%v: %+v", tc.extra, got)
		}
		if g, ok := tc.extra["groups"]; ok && !reflect.DeepEqual(got.Claims["groups"], []any{g.([]string)[0]}) {
			t.Errorf("groups: %#v", got.Claims["groups"])
		}
	}
}

// withExtensions leaves its input as it was, even when it has room to
// grow in place: the schemas it adds carriers to are a catalog's, kept
// and encoded again (a filtered list after the carried ones).
func TestWithExtensionsLeavesItsInput(t *testing.T) {
	obj := make([]byte, 0, 64)
	obj = append(obj, `{"type":"object"}`...)
	out, err := withExtensions(obj, Extensions{"x-a": json.RawMessage(`1`)})
	if err != nil || string(out) != `{"type":"object","x-a":1}` {
		t.Fatalf("%s %v", out, err)
	}
	if string(obj) != `{"type":"object"}` {
		t.Errorf("the input became %s", obj)
	}
}
