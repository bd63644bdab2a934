package policy

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/principal"
)

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "anything", true},
		{"Calculator_Add", "Calculator_Add", true},
		{"Calculator_Add", "Calculator_Adds", false},
		{"Calculator_*", "Calculator_Add", true},
		{"Calculator_*", "Calculator_", true},
		{"Calculator_*", "calculator_Add", false},
		{"*_get", "tickets_get", true},
		{"*_get", "tickets_get_all", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXcYb", false},
		{"a*b*b", "ab", false},
		{"a*bc*bc", "abcbc", true},
		{"a*bc*bc", "abc", false},
		{"*.*", "Sample.add", true},
		{"*.*", "Sampleadd", false},
		{"**", "x", true},
	} {
		if got := Glob(tc.pattern, tc.name); got != tc.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func mustAccess(t *testing.T, rules ...Rule) *Access {
	t.Helper()
	a, err := NewAccess(rules)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAccessRules(t *testing.T) {
	const op = "https://op.example.com/"
	a := mustAccess(t,
		Rule{Anyone: true, Tools: []string{"Calculator_Add"}},
		Rule{Issuer: "https://op.example.com", Subject: "alice", Tools: []string{"admin_*"}},
		Rule{Claims: map[string][]string{"groups": {"support", "ops"}}, Tools: []string{"tickets_*"}},
		Rule{Scopes: []string{"tools:read", "tools:list"}, Tools: []string{"*_get"}},
		Rule{Issuer: op, Tools: []string{"whoami"}},
		Rule{Subject: "svc", Tools: []string{"jobs_run"}}, // issuer "": a token without iss
		Rule{Authenticated: true, Tools: []string{"echo"}},
		Rule{Claims: map[string][]string{"realm_access.roles": {"auditor"}}, Tools: []string{"audit_*"}},
		Rule{Claims: map[string][]string{"https://example.com/team": {"blue"}}, Tools: []string{"blue_*"}},
	)
	alice := &Principal{Key: principal.Token(op, "alice"), Authenticated: true, Token: true, Issuer: op, Subject: "alice"}
	bob := &Principal{Key: principal.Token(op, "bob"), Authenticated: true, Token: true, Issuer: op, Subject: "bob",
		Scopes: []string{"tools:list", "tools:read"},
		Claims: map[string]any{"groups": []any{"sales", "support"}, "realm_access": map[string]any{"roles": []any{"auditor"}},
			"https://example.com/team": "blue"}}
	// alice of another issuer: a subject is one issuer's.
	mallory := &Principal{Key: principal.Token("https://evil.example.com", "alice"), Authenticated: true, Token: true, Issuer: "https://evil.example.com", Subject: "alice",
		Claims: map[string]any{"groups": "support-team", "realm_access": "auditor"}}
	anon := &Principal{Key: principal.Address(netip.MustParseAddr("192.0.2.1"))}
	apiKey := &Principal{Key: "api-key", Authenticated: true}
	svc := &Principal{Key: principal.Token("", "svc"), Authenticated: true, Token: true, Subject: "svc"}
	for _, tc := range []struct {
		who   string
		p     *Principal
		tools map[string]bool
	}{
		{"alice", alice, map[string]bool{"Calculator_Add": true, "admin_users": true, "tickets_open": false, "whoami": true, "echo": true, "jobs_run": false, "audit_log": false}},
		{"bob", bob, map[string]bool{"Calculator_Add": true, "admin_users": false, "tickets_open": true, "users_get": true, "whoami": true, "audit_log": true, "blue_x": true}},
		{"alice of another issuer", mallory, map[string]bool{"Calculator_Add": true, "admin_users": false, "tickets_open": false, "whoami": false, "echo": true, "audit_log": false}},
		{"an address", anon, map[string]bool{"Calculator_Add": true, "echo": false, "whoami": false, "admin_users": false}},
		{"the API key", apiKey, map[string]bool{"Calculator_Add": true, "echo": true, "jobs_run": false, "users_get": false}},
		{"svc (no iss)", svc, map[string]bool{"jobs_run": true, "whoami": false}},
		{"nobody (nil)", nil, map[string]bool{"Calculator_Add": true, "echo": false}},
	} {
		g := a.For(tc.p)
		for tool, want := range tc.tools {
			if got := g.Allows(tool); got != want {
				t.Errorf("%s: Allows(%q) = %v, want %v", tc.who, tool, got, want)
			}
		}
	}
	// Grants: the same rules, the same key; other rules, another key.
	bob2 := *bob
	bob2.Subject, bob2.Key = "bob2", principal.Token(op, "bob2")
	if a.For(bob).Key() != a.For(&bob2).Key() {
		t.Errorf("two principals matching the same rules: keys %q and %q", a.For(bob).Key(), a.For(&bob2).Key())
	}
	if a.For(bob).Key() == a.For(alice).Key() {
		t.Errorf("alice and bob match other rules, and share the key %q", a.For(bob).Key())
	}
	// Another policy's keys never meet this one's.
	b := mustAccess(t, Rule{Anyone: true, Tools: []string{"Calculator_Add"}})
	if a.For(anon).Key() == b.For(anon).Key() {
		t.Errorf("two policies give the key %q", a.For(anon).Key())
	}
	// No policy: everything, for everyone.
	var none *Access
	if g := none.For(anon); !g.Allows("anything") || g.Key() != "" {
		t.Errorf("nil Access: %v %q", g.Allows("anything"), g.Key())
	}
	// A policy without rules: nothing.
	if mustAccess(t).For(alice).Allows("Calculator_Add") {
		t.Error("a policy of no rules allowed a tool")
	}
}

func TestAccessRuleErrors(t *testing.T) {
	for _, tc := range []struct {
		rule Rule
		want string
	}{
		{Rule{Tools: []string{"*"}}, "names no caller"},
		{Rule{Anyone: true, Subject: "x", Tools: []string{"*"}}, "give it alone"},
		{Rule{Anyone: true}, "grants no tool"},
		{Rule{Anyone: true, Tools: []string{""}}, "empty glob"},
		{Rule{Claims: map[string][]string{"groups": nil}, Tools: []string{"*"}}, "at least one value"},
	} {
		_, err := NewAccess([]Rule{{Anyone: true, Tools: []string{"*"}}, tc.rule})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "rule 1: ") {
			t.Errorf("%+v: %v, want rule 1: …%s…", tc.rule, err, tc.want)
		}
	}
}

func TestRateString(t *testing.T) {
	for _, tc := range []struct {
		r    Rate
		want string
	}{
		{Rate{Requests: 10, Per: time.Minute}, "10 calls per minute"},
		{Rate{Requests: 1, Per: time.Second}, "1 call per second"},
		{Rate{Requests: 100, Per: 2 * time.Hour, Burst: 5}, "100 calls per 2 hours, 5 at once"},
		{Rate{Requests: 3, Per: 90 * time.Second}, "3 calls per 90 seconds"},
		{Rate{Requests: 3, Per: 1500 * time.Millisecond}, "3 calls per 1.5s"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.r, got, tc.want)
		}
	}
}

func TestLimitsErrors(t *testing.T) {
	for _, tc := range []struct {
		p    *Rate
		t    []ToolRate
		want string
	}{
		{&Rate{Requests: 0, Per: time.Minute}, nil, "per principal: requests must be"},
		{&Rate{Requests: 1}, nil, "per principal: per must be"},
		{nil, []ToolRate{{Tools: []string{"*"}, Rate: Rate{Requests: 1, Per: time.Second, Burst: -1}}}, "per tool 0: burst"},
		{nil, []ToolRate{{Rate: Rate{Requests: 1, Per: time.Second}}}, "per tool 0: tools must"},
		{nil, []ToolRate{{Tools: []string{"*"}, Rate: Rate{Requests: 2_000_000, Per: time.Second}}}, "no limit"},
	} {
		if _, err := NewLimits(tc.p, tc.t); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v %+v: %v, want %q", tc.p, tc.t, err, tc.want)
		}
	}
}

// clock is a manual clock for the limiter and its memory.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestLimiter(t *testing.T, l *Limits, shared Store) (*Limiter, *clock) {
	t.Helper()
	c := &clock{t: time.Unix(1_000_000, 0)}
	mem := NewMemory(0)
	mem.now = c.now
	lim := NewLimiter(l, shared, mem, nil)
	lim.now = c.now
	return lim, c
}

// Per principal and per (principal, upstream, tool): each caller has its
// own buckets, so one caller exhausting its limits leaves the others
// theirs; a refusal says how long to wait, and after it the call passes.
func TestLimiterBuckets(t *testing.T) {
	limits, err := NewLimits(&Rate{Requests: 5, Per: time.Minute},
		[]ToolRate{{Tools: []string{"search_*"}, Rate: Rate{Requests: 2, Per: 10 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	l, c := newTestLimiter(t, limits, nil)
	ctx := context.Background()
	// alice: two searches, the third refused by the tool's bucket for 5 s.
	for i := 0; i < 2; i++ {
		if d := l.Admit(ctx, "alice", "up", "search_web"); d.Wait != 0 {
			t.Fatalf("alice's search %d refused: %+v", i+1, d)
		}
	}
	d := l.Admit(ctx, "alice", "up", "search_web")
	if d.Wait != 5*time.Second || d.Limit != LimitTool || d.Rate.Requests != 2 {
		t.Fatalf("alice's third search: %+v, want 5s by the tool's limit", d)
	}
	// The refused call took nothing: alice has 3 of her 5 left.
	for i := 0; i < 3; i++ {
		if d := l.Admit(ctx, "alice", "up", "calc"); d.Wait != 0 {
			t.Fatalf("alice's call %d of another tool refused: %+v", i+1, d)
		}
	}
	d = l.Admit(ctx, "alice", "up", "calc")
	if d.Wait != 12*time.Second || d.Limit != LimitPrincipal {
		t.Fatalf("alice's sixth call: %+v, want 12s by the principal's limit", d)
	}
	// bob is untouched by alice's spending.
	for i := 0; i < 2; i++ {
		if d := l.Admit(ctx, "bob", "up", "search_web"); d.Wait != 0 {
			t.Fatalf("bob's search %d refused: %+v", i+1, d)
		}
	}
	// The same tool name at another upstream is another bucket (two
	// tokens of alice's own have come back by then).
	c.add(24 * time.Second)
	if d := l.Admit(ctx, "alice", "other", "search_web"); d.Wait != 0 {
		t.Fatalf("alice's search at another upstream after the wait: %+v", d)
	}
	if d := l.Admit(ctx, "alice", "up", "search_web"); d.Wait != 0 {
		t.Fatalf("alice's search after the wait: %+v", d)
	}
	// No limits: everything passes, the store untouched.
	var none *Limiter
	if d := none.Admit(ctx, "x", "u", "t"); d.Wait != 0 {
		t.Error("a nil limiter refused")
	}
	noTool, _ := NewLimits(nil, []ToolRate{{Tools: []string{"search_*"}, Rate: Rate{Requests: 1, Per: time.Hour}}})
	l2, _ := newTestLimiter(t, noTool, nil)
	for i := 0; i < 10; i++ {
		if d := l2.Admit(ctx, "x", "u", "calc"); d.Wait != 0 {
			t.Fatal("a tool no limit names was refused")
		}
	}
	if n := l2.local.Len(); n != 0 {
		t.Errorf("%d buckets for calls no limit names", n)
	}
}

// countingStore counts Take calls, and fails when told.
type countingStore struct {
	Store
	mu    sync.Mutex
	takes int
	fail  error
}

func (s *countingStore) Take(ctx context.Context, b []Bucket) (time.Duration, int, error) {
	s.mu.Lock()
	s.takes++
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return 0, 0, fail
	}
	return s.Store.Take(ctx, b)
}

// A 429 storm: after a refusal, repeats within its wait are refused
// without asking the store; after the wait, the store is asked again.
func TestLimiterRemembersRefusals(t *testing.T) {
	limits, _ := NewLimits(&Rate{Requests: 1, Per: time.Minute}, nil)
	c := &clock{t: time.Unix(1_000_000, 0)}
	mem := NewMemory(0)
	mem.now = c.now
	shared := &countingStore{Store: mem}
	l := NewLimiter(limits, shared, nil, nil)
	l.now = c.now
	ctx := context.Background()
	if d := l.Admit(ctx, "p", "u", "t"); d.Wait != 0 {
		t.Fatal(d)
	}
	for i := 0; i < 1000; i++ {
		d := l.Admit(ctx, "p", "u", "t")
		if d.Wait <= 0 || d.Wait > time.Minute {
			t.Fatalf("repeat %d: %+v", i, d)
		}
		c.add(10 * time.Millisecond)
	}
	if shared.takes != 2 {
		t.Errorf("the store was asked %d times, want 2 (the call, the first refusal)", shared.takes)
	}
	c.add(time.Minute)
	if d := l.Admit(ctx, "p", "u", "t"); d.Wait != 0 {
		t.Errorf("after the wait: %+v", d)
	}
	if shared.takes != 3 {
		t.Errorf("after the wait the store was asked %d times in all, want 3", shared.takes)
	}
}

// The shared store failing: calls are counted in this process's buckets
// meanwhile, and the failure is told once, its end once.
func TestLimiterSharedDown(t *testing.T) {
	limits, _ := NewLimits(&Rate{Requests: 2, Per: time.Hour}, nil)
	shared := &countingStore{Store: NewMemory(0), fail: errors.New("redis: connection refused")}
	var told []error
	l := NewLimiter(limits, shared, nil, func(err error) { told = append(told, err) })
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if d := l.Admit(ctx, "p", "u", "t"); d.Wait != 0 {
			t.Fatalf("call %d with the store down: %+v", i+1, d)
		}
	}
	if d := l.Admit(ctx, "p", "u", "t"); d.Wait == 0 {
		t.Error("with the store down, the local buckets did not hold the limit")
	}
	shared.fail = nil
	if d := l.Admit(ctx, "q", "u", "t"); d.Wait != 0 {
		t.Fatalf("the store is back: %+v", d)
	}
	if len(told) != 2 || told[0] == nil || told[1] != nil {
		t.Errorf("told %v, want the error once, then nil once", told)
	}
}

// Memory holds at most its bound of buckets, the least recently used
// going first.
func TestMemoryBound(t *testing.T) {
	m := NewMemory(3)
	ctx := context.Background()
	b := func(k string) []Bucket { return []Bucket{{Key: k, Capacity: 1, PerSecond: 1.0 / 3600}} }
	for _, k := range []string{"a", "b", "c"} {
		if w, _, _ := m.Take(ctx, b(k)); w != 0 {
			t.Fatal(k)
		}
	}
	if w, _, _ := m.Take(ctx, b("a")); w == 0 { // a is empty, and now the most recent
		t.Fatal("a was not empty")
	}
	if w, _, _ := m.Take(ctx, b("d")); w != 0 { // b goes
		t.Fatal("d")
	}
	if m.Len() != 3 {
		t.Errorf("%d buckets, want 3", m.Len())
	}
	if w, _, _ := m.Take(ctx, b("a")); w == 0 {
		t.Error("a, used recently, was dropped")
	}
	if w, _, _ := m.Take(ctx, b("b")); w != 0 {
		t.Error("b, used least recently, was kept")
	}
}
