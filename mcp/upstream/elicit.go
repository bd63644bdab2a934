package upstream

import (
	"context"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Elicitations during a call (MCP 2025-11-25, client/elicitation)
//
// A server of 2025-11-25 or earlier asks its client for input with an
// elicitation/create request while a call runs. The bridge shows nothing
// to anyone, so by default it answers at once: "cancel" to URL mode (the
// user was not asked), "decline" to form mode. A call made with
// WithElicitation lets its caller decide instead: the caller may hold the
// answer until the user had a chance to open the URL (an OTC client shows
// the URL, the user opens it, the client calls again) and then answer
// "accept", which in URL mode means the user agreed to open it.
//
// Which call a request belongs to: over streamable HTTP the server sends
// it on the stream of the call's POST, and the request carries the call's
// context. Over stdio and legacy SSE a request names no call: it is taken
// to be the call's when exactly one call is in flight on the upstream;
// with several, nobody can tell, and the default answer is sent.

type elicitKey struct{}

// ElicitationFunc decides the answer to an elicitation/create an upstream
// sends during a call made with WithElicitation. e.Action is empty. It
// returns the action: "accept", "decline" or "cancel" ("": the default,
// cancel for URL mode and decline for form mode; "accept" to a form is
// sent as "decline": the bridge has no content to give).
//
// It runs on a goroutine of its own and may block until ctx ends (the
// upstream waits for the answer meanwhile; then it should return
// promptly). ctx carries the call's values and ends with the call, or
// answerMargin before the transport could no longer deliver the answer
// (mcp-go's streamable HTTP client gives an answer 30 s).
type ElicitationFunc func(ctx context.Context, e Elicitation) string

// WithElicitation returns ctx for a CallTool whose upstream's
// elicitation/create requests f answers (see ElicitationFunc).
func WithElicitation(ctx context.Context, f ElicitationFunc) context.Context {
	return context.WithValue(ctx, elicitKey{}, f)
}

// answerMargin is kept between the end of an ElicitationFunc's context and
// the transport's own deadline for the answer, to send it.
const answerMargin = 3 * time.Second

// elicitor is a call in flight made WithElicitation.
type elicitor struct {
	ctx context.Context
	f   ElicitationFunc
}

// trackElicitor records a call made WithElicitation while it is in flight;
// the returned function ends that.
func (u *Upstream) trackElicitor(ctx context.Context, f ElicitationFunc) func() {
	e := &elicitor{ctx: ctx, f: f}
	u.elicitMu.Lock()
	if u.elicitors == nil {
		u.elicitors = map[*elicitor]struct{}{}
	}
	u.elicitors[e] = struct{}{}
	u.elicitMu.Unlock()
	return func() {
		u.elicitMu.Lock()
		delete(u.elicitors, e)
		u.elicitMu.Unlock()
	}
}

// elicitorFor is the call a server request received with ctx belongs to:
// the one whose context it carries, else the only call in flight when it
// was made WithElicitation. nil: none, or nobody can tell.
func (u *Upstream) elicitorFor(ctx context.Context) *elicitor {
	if f, ok := ctx.Value(elicitKey{}).(ElicitationFunc); ok {
		return &elicitor{ctx: ctx, f: f}
	}
	u.mu.Lock()
	inflight := u.inflight
	u.mu.Unlock()
	u.elicitMu.Lock()
	defer u.elicitMu.Unlock()
	if inflight != 1 || len(u.elicitors) != 1 {
		if len(u.elicitors) > 0 {
			u.log.Info("an elicitation/create names no call and several calls are in flight: the default answer is sent", "calls", inflight)
		}
		return nil
	}
	for e := range u.elicitors {
		return e
	}
	return nil
}

// elicitAction asks the call's ElicitationFunc, if any, for the action to
// answer e with (transport: the server request's context, Background when the
// transport gives none); "" when nobody decides (the default).
func (u *Upstream) elicitAction(transport context.Context, e Elicitation) string {
	el := u.elicitorFor(transport)
	if el == nil {
		return ""
	}
	ctx, cancel := context.WithCancel(el.ctx)
	defer cancel()
	if dl, ok := transport.Deadline(); ok {
		var cancelDL context.CancelFunc
		ctx, cancelDL = context.WithDeadline(ctx, dl.Add(-answerMargin))
		defer cancelDL()
	}
	stop := context.AfterFunc(transport, cancel)
	defer stop()
	action := el.f(ctx, e)
	switch {
	case action == string(mcpgo.ElicitationResponseActionAccept) && e.Mode != mcpgo.ElicitationModeURL:
		return string(mcpgo.ElicitationResponseActionDecline)
	case action == string(mcpgo.ElicitationResponseActionAccept),
		action == string(mcpgo.ElicitationResponseActionDecline),
		action == string(mcpgo.ElicitationResponseActionCancel):
		return action
	}
	return ""
}
