package shutdown

import (
	"context"
	"errors"
	"testing"
)

// A detached call outlives its caller but not the shutdown: after the
// request's context ended (the client left), ending the Base ends the
// detached context with ErrShutdown.
func TestDetachEndsOnlyWithTheShutdown(t *testing.T) {
	base, end := Base()
	req, leave := context.WithCancel(base)
	d, release := Detach(req)
	defer release()
	leave()
	if d.Err() != nil {
		t.Fatalf("the caller left: detached %v, want it running", d.Err())
	}
	if Is(req) {
		t.Errorf("a caller that left reads as a shutdown")
	}
	end()
	<-d.Done()
	if !Is(d) || !errors.Is(context.Cause(d), ErrShutdown) {
		t.Errorf("after the shutdown: detached %v (cause %v), want ErrShutdown", d.Err(), context.Cause(d))
	}

	// Without a Base: detached from the end of ctx only.
	ctx, cancel := context.WithCancel(context.Background())
	d, release = Detach(ctx)
	cancel()
	if d.Err() != nil {
		t.Errorf("detached without a Base: %v", d.Err())
	}
	release()
	if d.Err() == nil || Is(d) {
		t.Errorf("released: %v", d.Err())
	}
}
