package answers

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// check recounts s and compares with its totals and bounds.
func check(t *testing.T, s *Store[int64], running map[*Entry[int64]]bool, step int, op string) {
	t.Helper()
	var sum int64
	nRunning, nKept := 0, 0
	perBytes, perKept, perRunning := map[string]int64{}, map[string]int{}, map[string]int{}
	for k, e := range s.byKey {
		if e.key != k {
			t.Fatalf("step %d (%s): entry under %q has key %q", step, op, k, e.key)
		}
		sum += e.size
		base := baseSize(e.key, e.principal)
		if e.el == nil {
			nRunning++
			perRunning[e.principal]++
			if e.size != base {
				t.Fatalf("step %d (%s): running entry size %d, want %d", step, op, e.size, base)
			}
		} else {
			nKept++
			perKept[e.principal]++
			perBytes[e.principal] += e.size
			if e.size != base+e.value {
				t.Fatalf("step %d (%s): kept entry size %d, want %d", step, op, e.size, base+e.value)
			}
		}
	}
	if sum != s.bytes {
		t.Fatalf("step %d (%s): bytes %d, recount %d", step, op, s.bytes, sum)
	}
	if nRunning != s.running || nRunning != len(running) {
		t.Fatalf("step %d (%s): running %d, counter %d, started and not finished %d", step, op, nRunning, s.running, len(running))
	}
	if nKept != s.kept || nKept != len(s.expiry) {
		t.Fatalf("step %d (%s): kept %d, counter %d, heap %d", step, op, nKept, s.kept, len(s.expiry))
	}
	for i, e := range s.expiry {
		if e.heapIdx != i {
			t.Fatalf("step %d (%s): heap index %d at %d", step, op, e.heapIdx, i)
		}
	}
	for p, o := range s.owners {
		if o.bytes != perBytes[p] || o.kept.Len() != perKept[p] || o.running != perRunning[p] {
			t.Fatalf("step %d (%s): principal %q holds %d bytes, %d kept, %d running; recount %d, %d, %d",
				step, op, p, o.bytes, o.kept.Len(), o.running, perBytes[p], perKept[p], perRunning[p])
		}
		if o.kept.Len() == 0 && o.running == 0 {
			t.Fatalf("step %d (%s): principal %q holds nothing but is kept", step, op, p)
		}
		if o.kept.Len() > s.b.PrincipalEntries || o.bytes > s.b.PrincipalBytes {
			t.Fatalf("step %d (%s): principal %q holds %d answers, %d bytes: over its share %d, %d", step, op, p, o.kept.Len(), o.bytes, s.b.PrincipalEntries, s.b.PrincipalBytes)
		}
	}
	if len(perKept)+len(perRunning) > 0 && len(s.owners) == 0 {
		t.Fatalf("step %d (%s): no owners", step, op)
	}
	if op == "keep" && s.kept > 0 && (len(s.byKey) > s.b.Entries || s.bytes > s.b.Bytes) {
		t.Fatalf("step %d (%s): %d entries, %d bytes kept over the bounds %d, %d", step, op, len(s.byKey), s.bytes, s.b.Entries, s.b.Bytes)
	}
	for e := range running {
		if s.byKey[e.key] != e {
			t.Fatalf("step %d (%s): running entry %q was dropped", step, op, e.key)
		}
	}
}

// Random Begin / Finish / expire sequences with a fake clock and small
// bounds: after every step the totals match a recount (in all and per
// principal), kept answers are within the bounds and shares, and no
// running entry was dropped.
func TestAccountingProperty(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewSource(seed))
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		s := New[int64](Bounds{Entries: 1 + rng.Intn(30), Bytes: int64(2000 + rng.Intn(20000)), Running: 1 + rng.Intn(12), PrincipalRunning: 1 + rng.Intn(6)},
			func() time.Time { return now })
		running := map[*Entry[int64]]bool{}
		var list []*Entry[int64]
		for step := 0; step < 3000; step++ {
			op := ""
			switch r := rng.Intn(10); {
			case r < 4:
				op = "begin"
				p := strings.Repeat("p", rng.Intn(5))
				key := fmt.Sprintf("%d-%s", rng.Intn(60), strings.Repeat("x", rng.Intn(256)))
				e, first, err := s.Begin(key, p, [32]byte{})
				switch {
				case err != nil:
					if s.running < s.b.Running && s.owners[p].running < s.b.PrincipalRunning {
						t.Fatalf("step %d: running bound refused below the bounds", step)
					}
				case first:
					running[e] = true
					list = append(list, e)
				}
			case r < 8:
				op = "finish"
				if len(list) == 0 {
					continue
				}
				i := rng.Intn(len(list))
				e := list[i]
				list = append(list[:i], list[i+1:]...)
				delete(running, e)
				size := int64(rng.Intn(3000))
				s.Finish(e, size, size, []time.Duration{0, time.Second, 30 * time.Second, time.Minute}[rng.Intn(4)])
				if e.el != nil {
					op = "keep"
				}
			default:
				op = "expire"
				now = now.Add(time.Duration(rng.Intn(20)) * time.Second)
				s.mu.Lock()
				s.expire()
				s.mu.Unlock()
			}
			s.mu.Lock()
			check(t, s, running, step, op)
			s.mu.Unlock()
		}
	}
}

// One principal storing many large answers loses its own oldest; another
// principal's answer stays (issue 34, item 5). With the default bounds a
// principal holds at most 8 MiB: eleven 6 MB answers leave one.
func TestShareKeepsOthersAnswers(t *testing.T) {
	s := New[string](Bounds{}, nil)
	keep := func(key, p string, n int) {
		e, first, err := s.Begin(key, p, [32]byte{})
		if err != nil || !first {
			t.Fatalf("Begin(%s): first %v, %v", key, first, err)
		}
		s.Finish(e, key, int64(n), time.Hour)
	}
	keep("victim-1", "victim", 100)
	for i := range 11 {
		keep(fmt.Sprintf("flood-%d", i), "mallory", 6_000_000)
	}
	if e, first, _ := s.Begin("victim-1", "victim", [32]byte{}); first || e.Value() != "victim-1" {
		t.Errorf("the victim's answer was evicted by another principal's")
	}
	for i := range 10 {
		if _, first, _ := s.Begin(fmt.Sprintf("flood-%d", i), "mallory", [32]byte{}); !first {
			t.Errorf("mallory's answer %d is still kept, want her oldest evicted", i)
		}
	}
	if kept, bytes := s.Stats(); bytes > s.Bounds().Bytes || kept > 2 {
		t.Errorf("%d answers, %d bytes kept", kept, bytes)
	}
}

// Running entries outlive bounds on entries and bytes that they alone
// exceed, and eviction stops (it must not look for an answer to drop
// when none is kept).
func TestRunningNeverEvicted(t *testing.T) {
	s := New[int64](Bounds{Entries: 2, Bytes: 2000, Running: 100}, nil)
	running := map[*Entry[int64]]bool{}
	for i := 0; i < 10; i++ {
		e, first, err := s.Begin(fmt.Sprintf("run-%d-%s", i, strings.Repeat("r", 200)), "", [32]byte{})
		if !first || err != nil {
			t.Fatalf("Begin %d: first %v, %v", i, first, err)
		}
		running[e] = true
	}
	e, _, _ := s.Begin("done", "", [32]byte{})
	s.Finish(e, 1, 1, time.Hour)
	s.mu.Lock()
	check(t, s, running, 0, "finish over the bounds")
	s.mu.Unlock()
	if _, ok := s.byKey["done"]; ok {
		t.Error("the finished entry was kept although running entries exceed the bounds")
	}
	for e := range running {
		delete(running, e)
		s.Finish(e, 1, 1, time.Hour)
		s.mu.Lock()
		check(t, s, running, 1, "finish")
		s.mu.Unlock()
	}
	if n, b := s.Len(), s.bytes; n > 2 || b > 2000 {
		t.Errorf("after the runs ended: %d entries, %d bytes", n, b)
	}
}

// Past the bounds of all, with every principal within its share, the
// oldest answer of the principal holding the most goes; of equals, the
// oldest answer.
func TestEvictLargestHolder(t *testing.T) {
	s := New[int64](Bounds{Entries: 4, PrincipalEntries: 3}, nil)
	keep := func(key, p string) {
		e, _, _ := s.Begin(key, p, [32]byte{})
		s.Finish(e, 0, 0, time.Hour)
	}
	keep("a1", "a")
	keep("b1", "b")
	keep("b2", "b")
	keep("c1", "c")
	keep("c2", "c") // 5 > 4: b and c hold 2 each; b1 is older than c1
	if _, ok := s.byKey["b1"]; ok {
		t.Error("b1 kept, want it evicted")
	}
	for _, k := range []string{"a1", "b2", "c1", "c2"} {
		if _, ok := s.byKey[k]; !ok {
			t.Errorf("%s evicted", k)
		}
	}
}
