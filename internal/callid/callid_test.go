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
