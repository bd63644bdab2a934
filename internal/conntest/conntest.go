package conntest

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Burst drives rounds of N calls that are all in flight at once and counts
// the connections a client dials for them: the server counts new
// connections with ConnState and holds each call in Hold until the round's
// N calls arrived.
type Burst struct {
	N int

	mu      sync.Mutex
	dialed  int
	gate    chan struct{} // closed when every call of the round arrived
	arrived chan struct{}
}

// NewBurst returns a Burst of n calls a round.
func NewBurst(n int) *Burst {
	return &Burst{N: n, gate: make(chan struct{}), arrived: make(chan struct{}, n)}
}

// ConnState counts new connections; set it as the server's ConnState.
func (b *Burst) ConnState(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		b.mu.Lock()
		b.dialed++
		b.mu.Unlock()
	}
}

// Hold is what the server's handler calls for each call: it returns when
// the round's N calls have all arrived, or ctx ends.
func (b *Burst) Hold(ctx context.Context) error {
	b.mu.Lock()
	g := b.gate
	b.mu.Unlock()
	b.arrived <- struct{}{}
	select {
	case <-g:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Round makes N calls with call at once, each held by the server until
// all arrived, fails t on an error, and returns the connections dialed
// during the round.
func (b *Burst) Round(t testing.TB, call func(context.Context) error) int {
	t.Helper()
	b.mu.Lock()
	before := b.dialed
	b.gate = make(chan struct{})
	g := b.gate
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, b.N)
	for range b.N {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := call(ctx); err != nil {
				errs <- err
			}
		}()
	}
	for i := range b.N {
		select {
		case <-b.arrived:
		case <-time.After(20 * time.Second):
			close(g)
			t.Fatalf("%d of the burst's %d calls arrived", i, b.N)
		}
	}
	close(g)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dialed - before
}

// KeepsConnections runs two rounds and fails t unless the first dials
// about a connection a call and the second dials none: the client kept
// the first round's connections for the second.
func (b *Burst) KeepsConnections(t testing.TB, call func(context.Context) error) {
	t.Helper()
	if n := b.Round(t, call); n < b.N/2 {
		t.Fatalf("first burst: %d connections dialed, want about %d (a connection a call in flight)", n, b.N)
	}
	if n := b.Round(t, call); n != 0 {
		t.Fatalf("second burst: %d new connections dialed, want 0 (the first burst's were closed)", n)
	}
}
