package mapping

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
)

// TestOTCErrorRetryClasses: a call never sent is a temporary 400 with a
// Retry-After; a call whose outcome is unknown is can_retry with
// retry_after_ms (how long otc.Handler replays it); a -32042 without a URL
// did not run the tool (NotRun: not replayed).
func TestOTCErrorRetryClasses(t *testing.T) {
	unavailable := OTCError(fmt.Errorf("%w: restarting", upstream.ErrUnavailable))
	var se *otc.ServerErrorResponse
	if !errors.As(unavailable, &se) || se.RetryAfter != time.Second || se.Message != msgUnavailableToolServe {
		t.Errorf("ErrUnavailable → %#v; want a 400 with RetryAfter 1s", unavailable)
	}
	unauthorized := OTCError(fmt.Errorf("%w: 401", upstream.ErrUnauthorized))
	if !errors.As(unauthorized, &se) || se.RetryAfter != 0 {
		t.Errorf("ErrUpstreamUnauthorized → %#v; want a 400 without RetryAfter", unauthorized)
	}
	for _, err := range []error{fmt.Errorf("%w: child died", upstream.ErrLost), fmt.Errorf("call: %w", context.DeadlineExceeded)} {
		var te *otc.ToolError
		if !errors.As(OTCError(err), &te) || !te.CanRetry || te.RetryAfterMS == nil || *te.RetryAfterMS != 1000 || te.NotRun {
			t.Errorf("%v → %#v; want can_retry, retry_after_ms 1000", err, OTCError(err))
		}
	}
	var te *otc.ToolError
	noURL := OTCError(&upstream.Error{Code: CodeURLElicitationReq, Message: "auth", Data: []byte(`{"elicitations":[]}`)})
	if !errors.As(noURL, &te) || !te.NotRun {
		t.Errorf("-32042 without a URL → %#v; want a ToolError marked NotRun", noURL)
	}
	failed := OTCError(&upstream.Error{Code: -32000, Message: "boom"})
	if !errors.As(failed, &te) || te.NotRun || te.CanRetry {
		t.Errorf("other JSON-RPC error → %#v; want a definite tool error", failed)
	}
}
