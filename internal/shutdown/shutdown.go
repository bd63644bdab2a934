// Package shutdown names how the bridge ends the calls a shutdown's grace
// cannot wait for (docs/mcp-front.md, MCP front; docs/otc-front.md, OTC front). At the grace's end the
// server cancels every request's context with ErrShutdown as its cause; each
// front turns a call ended so into an answer of its own that says the
// bridge is shutting down, with Retry-After — serve-otc an OTC server error
// (HTTP 503), serve-mcp a JSON-RPC error with CodeShuttingDown — and the
// server then gives the writers Flush to deliver those answers before it
// closes the connections.
package shutdown

import (
	"context"
	"errors"
	"time"
)

// ErrShutdown is the cause of a call's context ended by a shutdown.
var ErrShutdown = errors.New("the bridge is shutting down")

// Is tells whether ctx ended because the bridge is shutting down.
func Is(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrShutdown)
}

// Message is the answer's text for the caller.
const Message = "The bridge is shutting down: the call was ended before it finished; retry it (another replica, or this one once it is back, will take it)"

// RetryAfter is the Retry-After of that answer.
const RetryAfter = 2 * time.Second

// Flush bounds how long, after the grace, the answers of the calls ended so
// may take to be written before the connections close.
const Flush = 2 * time.Second

// stopKey is the context key of a server's base context (Base).
type stopKey struct{}

// Base returns the base context of a server's requests (http.Server's
// BaseContext) and end, which ends it with ErrShutdown: every request's context,
// and every call Detach detached from one, then ends with ErrShutdown.
func Base() (ctx context.Context, end func()) {
	base, cancel := context.WithCancelCause(context.Background())
	return context.WithValue(base, stopKey{}, base), func() { cancel(ErrShutdown) }
}

// Detach returns a context with ctx's values that the end of ctx does not
// end (a call that runs on when its caller leaves), except a shutdown: it
// ends with ErrShutdown when the Base that ctx descends from is ended, even after
// ctx itself ended for another reason. release frees it.
func Detach(ctx context.Context) (detached context.Context, release func()) {
	d, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	base, ok := ctx.Value(stopKey{}).(context.Context)
	if !ok {
		return d, func() { cancel(nil) }
	}
	stop := context.AfterFunc(base, func() { cancel(context.Cause(base)) })
	return d, func() { stop(); cancel(nil) }
}
