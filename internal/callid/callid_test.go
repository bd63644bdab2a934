package callid

import (
	"strings"
	"testing"
)

func TestScope(t *testing.T) {
	a, b := Scope("jwt:alice", "c1"), Scope("jwt:bob", "c1")
	if a == b {
		t.Error("two principals' call_ids meet")
	}
	if Scope("jwt:alice", "c1") != a {
		t.Error("the same principal and call_id give another id")
	}
	if !strings.HasPrefix(a, "p") || !strings.HasSuffix(a, "-c1") || len(a) != 1+24+1+2 {
		t.Errorf("shape: %q", a)
	}
	long := strings.Repeat("x", MaxBytes)
	if s := Scope("jwt:alice", long); len(s) > MaxBytes || s == Scope("jwt:alice", long[:MaxBytes-1]) {
		t.Errorf("a long call_id: %d bytes, or it met a shorter one", len(s))
	}
}

// An unscoped call_id never equals a scoped one (issue 34, item 9): the
// sole chain peer, whose call_ids go on as they are, cannot send another
// caller's scoped id; an id of any other shape goes as it is.
func TestPassNeverMeetsScope(t *testing.T) {
	victim := Scope("jwt:alice", "c1")
	if !Scoped(victim) {
		t.Fatalf("Scoped(%q) = false", victim)
	}
	forged := Pass(victim)
	if forged == victim || forged != Pass(victim) || !Scoped(forged) || len(forged) > MaxBytes {
		t.Errorf("Pass(%q) = %q: want another scoped id, stable, at most %d bytes", victim, forged, MaxBytes)
	}
	for _, p := range []string{"jwt:alice", "", "stdio", "bearer"} {
		if Scope(p, "c1") == Pass(Scope(p, "c1")) {
			t.Errorf("the unscoped id %q meets %s's scoped one", Scope(p, "c1"), p)
		}
	}
	long := Pass(victim + strings.Repeat("x", MaxBytes))
	if len(long) > MaxBytes || long == Scope("jwt:alice", "c1"+strings.Repeat("x", MaxBytes)) {
		t.Errorf("a long scoped-looking id: %q", long)
	}
	for _, honest := range []string{"c1", "", "p-1", "P" + victim[1:], victim[:25], "pABCDEF0123456789abcdef01-x", strings.Repeat("x", MaxBytes)} {
		if Pass(honest) != honest {
			t.Errorf("Pass(%q) = %q, want it as it is", honest, Pass(honest))
		}
	}
}
