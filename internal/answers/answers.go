// Package answers keeps the answers of calls made with an idempotency
// key, for both fronts: serve-otc's call_id store (package otc) and
// serve-mcp's idempotency_key store (package bridge). It is one bounded
// store with a share per principal: no caller can flush the answers kept
// for the others (docs/security.md, Security model).
//
// An entry is running from Begin until Finish, then kept until its time
// to live ends or it is evicted. Running entries are never evicted; their
// number has bounds of its own. Bounds (Bounds, with their defaults):
//
//   - Entries (10,000) and Bytes (64 MiB) bound all entries, running and
//     kept; a kept entry costs EntryOverhead, its key, its principal and
//     its answer's bytes, a running one the same without the answer.
//   - PrincipalEntries (a tenth of Entries: 1,000) and PrincipalBytes (an
//     eighth of Bytes: 8 MiB) bound one principal's kept answers. A
//     principal that goes past its share loses its own oldest answers;
//     the others' stay.
//   - When all principals together go past Entries or Bytes, the oldest
//     answer of the principal holding the most (entries, or bytes) goes.
//   - An answer larger than a tenth of Bytes is not kept.
//   - Running (1,000) and PrincipalRunning (Running unless set) bound the
//     entries running at once; beyond them Begin answers ErrBusy.
package answers

import (
	"container/heap"
	"container/list"
	"errors"
	"sync"
	"time"
)

// Defaults of Bounds.
const (
	DefaultEntries = 10_000
	DefaultBytes   = 64 << 20
	DefaultRunning = 1_000
	// EntryOverhead is what an entry costs besides its key, principal and
	// answer (the struct, its map slot, list element, heap slot and
	// channel), counted in the byte bounds.
	EntryOverhead = 320
)

// Bounds bound a Store; a zero field takes its default (package doc).
type Bounds struct {
	Entries, PrincipalEntries int
	Bytes, PrincipalBytes     int64
	Running, PrincipalRunning int
}

// withDefaults fills the zero fields.
func (b Bounds) withDefaults() Bounds {
	if b.Entries <= 0 {
		b.Entries = DefaultEntries
	}
	if b.Bytes <= 0 {
		b.Bytes = DefaultBytes
	}
	if b.Running <= 0 {
		b.Running = DefaultRunning
	}
	if b.PrincipalEntries <= 0 {
		b.PrincipalEntries = max(b.Entries/10, 1)
	}
	if b.PrincipalBytes <= 0 {
		b.PrincipalBytes = max(b.Bytes/8, 1)
	}
	if b.PrincipalRunning <= 0 {
		b.PrincipalRunning = b.Running
	}
	return b
}

// ErrBusy is Begin's refusal of a new entry beyond a running bound.
var ErrBusy = errors.New("too many calls with an idempotency key are running")

// Store keeps answers of type V by key. Its methods are safe for
// concurrent use.
type Store[V any] struct {
	b   Bounds
	now func() time.Time

	mu      sync.Mutex
	byKey   map[string]*Entry[V]
	owners  map[string]*owner[V]
	expiry  entryHeap[V] // kept entries by expires
	bytes   int64        // of all entries in byKey
	kept    int
	running int
	seq     uint64 // of the last answer kept
}

// owner is what one principal holds.
type owner[V any] struct {
	kept    list.List // of *Entry[V]: its kept entries, oldest first
	bytes   int64     // of its kept entries
	running int
}

// Entry is one key's call: running until Done is closed, then its Value.
type Entry[V any] struct {
	key, principal string
	print          [32]byte
	done           chan struct{}
	value          V
	size           int64
	expires        time.Time     // zero unless kept
	el             *list.Element // in its owner's kept list; nil unless kept
	heapIdx        int           // in expiry; -1 unless kept
	seq            uint64        // the order in which answers were kept
}

// Key, Principal and Print are what Begin was given for the entry.
func (e *Entry[V]) Key() string       { return e.key }
func (e *Entry[V]) Principal() string { return e.principal }
func (e *Entry[V]) Print() [32]byte   { return e.print }

// Done is closed when the entry's run ended (Finish).
func (e *Entry[V]) Done() <-chan struct{} { return e.done }

// Value is what Finish recorded; valid once Done is closed.
func (e *Entry[V]) Value() V { return e.value }

// New returns a Store of bounds b (zero fields: their defaults); now is
// its clock (nil: time.Now).
func New[V any](b Bounds, now func() time.Time) *Store[V] {
	if now == nil {
		now = time.Now
	}
	return &Store[V]{b: b.withDefaults(), now: now, byKey: map[string]*Entry[V]{}, owners: map[string]*owner[V]{}}
}

// Bounds are the store's bounds, defaults filled in.
func (s *Store[V]) Bounds() Bounds { return s.b }

// baseSize is what an entry costs before it has an answer.
func baseSize(key, principal string) int64 {
	return int64(EntryOverhead + len(key) + len(principal))
}

// Begin finds the entry of key (first false: the caller checks that its
// principal and print are its own, then waits for Done), or makes a
// running one for principal (first true: the caller runs the call and
// must Finish the entry). A new entry beyond a running bound is ErrBusy.
func (s *Store[V]) Begin(key, principal string, print [32]byte) (e *Entry[V], first bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	if e, ok := s.byKey[key]; ok {
		return e, false, nil
	}
	o := s.owners[principal]
	if s.running >= s.b.Running || (o != nil && o.running >= s.b.PrincipalRunning) {
		return nil, false, ErrBusy
	}
	if o == nil {
		o = &owner[V]{}
		s.owners[principal] = o
	}
	e = &Entry[V]{key: key, principal: principal, print: print, done: make(chan struct{}), size: baseSize(key, principal), heapIdx: -1}
	s.byKey[key] = e
	s.bytes += e.size
	s.running++
	o.running++
	return e, true, nil
}

// Finish records v as the answer of a running entry and wakes those that
// wait for it. The answer is kept for ttl when ttl is positive and the
// entry (answerBytes besides its key) fits in a tenth of Bytes; then the
// bounds are enforced, the principal's own oldest answers going first.
// Otherwise the entry is forgotten (a repeat runs anew).
func (s *Store[V]) Finish(e *Entry[V], v V, answerBytes int64, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.value = v
	o := s.owners[e.principal]
	s.running--
	o.running--
	full := baseSize(e.key, e.principal) + answerBytes
	if ttl <= 0 || full > s.b.Bytes/10 {
		s.remove(e)
		close(e.done)
		return
	}
	s.bytes += full - e.size
	e.size = full
	e.expires = s.now().Add(ttl)
	s.seq++
	e.seq = s.seq
	e.el = o.kept.PushBack(e)
	o.bytes += full
	s.kept++
	heap.Push(&s.expiry, e)
	close(e.done)
	s.evict(o)
}

// evict enforces the shares of o, which just kept an answer, then the
// bounds of all. Running entries are never dropped: when they alone
// exceed a bound, the loops end with nothing kept left to drop.
func (s *Store[V]) evict(o *owner[V]) {
	for o.kept.Len() > 0 && (o.kept.Len() > s.b.PrincipalEntries || o.bytes > s.b.PrincipalBytes) {
		s.remove(o.kept.Front().Value.(*Entry[V]))
	}
	for s.kept > 0 && (len(s.byKey) > s.b.Entries || s.bytes > s.b.Bytes) {
		byBytes := s.bytes > s.b.Bytes
		// The principal holding the most; of equals, the one whose
		// oldest answer is the oldest.
		var top *owner[V]
		holds := func(o *owner[V]) int64 {
			if byBytes {
				return o.bytes
			}
			return int64(o.kept.Len())
		}
		for _, c := range s.owners {
			switch {
			case c.kept.Len() == 0:
			case top == nil, holds(c) > holds(top),
				holds(c) == holds(top) && c.kept.Front().Value.(*Entry[V]).seq < top.kept.Front().Value.(*Entry[V]).seq:
				top = c
			}
		}
		s.remove(top.kept.Front().Value.(*Entry[V]))
	}
}

// expire drops kept answers past their time.
func (s *Store[V]) expire() {
	now := s.now()
	for len(s.expiry) > 0 && now.After(s.expiry[0].expires) {
		s.remove(s.expiry[0])
	}
}

// remove forgets e (running or kept); its owner goes when it holds
// nothing more.
func (s *Store[V]) remove(e *Entry[V]) {
	if s.byKey[e.key] != e {
		return
	}
	delete(s.byKey, e.key)
	s.bytes -= e.size
	o := s.owners[e.principal]
	if e.el != nil {
		o.kept.Remove(e.el)
		o.bytes -= e.size
		e.el = nil
		s.kept--
	}
	if e.heapIdx >= 0 {
		heap.Remove(&s.expiry, e.heapIdx)
	}
	if o.kept.Len() == 0 && o.running == 0 {
		delete(s.owners, e.principal)
	}
}

// Stats is the number of answers kept and the bytes of all entries.
func (s *Store[V]) Stats() (kept int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kept, s.bytes
}

// Len is the number of entries, running and kept.
func (s *Store[V]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}

// Running is the number of principal's running entries.
func (s *Store[V]) Running(principal string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.owners[principal]; o != nil {
		return o.running
	}
	return 0
}

// entryHeap is a min-heap of kept entries by expires (container/heap).
type entryHeap[V any] []*Entry[V]

func (h entryHeap[V]) Len() int           { return len(h) }
func (h entryHeap[V]) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h entryHeap[V]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}
func (h *entryHeap[V]) Push(x any) {
	e := x.(*Entry[V])
	e.heapIdx = len(*h)
	*h = append(*h, e)
}
func (h *entryHeap[V]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.heapIdx = -1
	return e
}
