package mapping

import (
	"testing"

	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/mcp/oauth"
	"github.com/mcpotc/mcpotc/mcp/upstream"
)

// mapping reads the transports' errors by their methods, without importing
// them; these are the types that must keep those methods.
var (
	_ rpcFailure           = (*upstream.Error)(nil)
	_ limitFailure         = (*upstream.TooLargeError)(nil)
	_ inputFailure         = (*upstream.InputRequiredError)(nil)
	_ authorizationFailure = (*oauth.AuthorizationRequired)(nil)
	_ front.CodedError     = (*RPCError)(nil)
)

func TestFailureKinds(t *testing.T) {
	for err, kind := range map[error]string{
		upstream.ErrUnavailable: FailureUnavailable, upstream.ErrLost: FailureLost, upstream.ErrUnauthorized: FailureUnauthorized,
	} {
		if !isFailure(err, kind) {
			t.Errorf("%v is not a %s failure", err, kind)
		}
	}
	if isFailure(upstream.ErrLost, FailureUnavailable) {
		t.Error("a lost call reads as unavailable")
	}
}
