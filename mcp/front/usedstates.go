package front

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A requestState is used once (issue 34: a state reused by its caller
// restarted the prompt count, or answered one request twice)
//
// The retry that answers an input_required result marks its requestState
// used, keyed by a hash of the state, until the state expires; a state
// marked is refused. The mark is made once every other check passed, so
// that only a retry the handler sees uses a state (one refused for a
// missing answer can be sent again, corrected). Replicas that share
// Options.StateKeys accept each other's states, so they must share the
// marks too: Options.UsedStates, a store they share (serve-mcp: the
// --state Redis); without one, a state used on one replica is refused
// there only.

// UsedStateStore records which requestStates were used (Options.
// UsedStates).
type UsedStateStore interface {
	// UseOnce marks key used until expires and reports whether it was not
	// marked before; principal is the caller the state was issued to (a
	// store may bound what one caller marks). An error refuses the retry.
	UseOnce(ctx context.Context, principal, key string, expires time.Time) (first bool, err error)
}

// Bounds of the in-memory UsedStateStore (a mark lives at most
// Options.InputStateTTL).
const (
	// MaxUsedStates bounds the marks held at once.
	MaxUsedStates = 1 << 16
	// MaxUsedStatesPerPrincipal bounds the marks of one caller: the
	// input_required results it answered within InputStateTTL.
	MaxUsedStatesPerPrincipal = 1 << 10
)

// useStateTimeout bounds the marking of a state in a shared store.
const useStateTimeout = 5 * time.Second

// ErrUsedStatesFull is the in-memory store's refusal when a bound is
// reached: the retry is refused (a state that cannot be marked is not
// used), and the caller may retry once older marks expire.
var ErrUsedStatesFull = errors.New("too many requestStates answered at once")

// memoryUsedStates is the UsedStateStore of one process: marks by key,
// bounded in all and per principal, forgotten when they expire.
type memoryUsedStates struct {
	max, perPrincipal int
	now               func() time.Time

	mu    sync.Mutex
	byKey map[string]struct{}
	held  map[string]int // principal → its marks
	order usedMarks      // by expiry
}

type usedMark struct {
	key, principal string
	expires        time.Time
}

// usedMarks is a heap of marks, soonest expiry first.
type usedMarks []usedMark

func (h usedMarks) Len() int           { return len(h) }
func (h usedMarks) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h usedMarks) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *usedMarks) Push(x any)        { *h = append(*h, x.(usedMark)) }
func (h *usedMarks) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newMemoryUsedStates(max, perPrincipal int, now func() time.Time) *memoryUsedStates {
	return &memoryUsedStates{max: max, perPrincipal: perPrincipal, now: now, byKey: map[string]struct{}{}, held: map[string]int{}}
}

func (m *memoryUsedStates) UseOnce(_ context.Context, principal, key string, expires time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for len(m.order) > 0 && !m.order[0].expires.After(now) {
		old := heap.Pop(&m.order).(usedMark)
		delete(m.byKey, old.key)
		if m.held[old.principal]--; m.held[old.principal] <= 0 {
			delete(m.held, old.principal)
		}
	}
	if _, used := m.byKey[key]; used {
		return false, nil
	}
	switch {
	case m.perPrincipal > 0 && m.held[principal] >= m.perPrincipal:
		return false, fmt.Errorf("%w: this caller answered %d input requests whose requestStates have not expired yet", ErrUsedStatesFull, m.perPrincipal)
	case m.max > 0 && len(m.byKey) >= m.max:
		return false, fmt.Errorf("%w: the server holds %d answered requestStates that have not expired yet", ErrUsedStatesFull, m.max)
	}
	m.byKey[key] = struct{}{}
	m.held[principal]++
	heap.Push(&m.order, usedMark{key: key, principal: principal, expires: expires})
	return true, nil
}
