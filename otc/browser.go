package otc

import (
	"fmt"
	"net/http"
)

// rejectRebinding answers 403 to a request that arrived on a loopback
// address but names a host that is not local in Host or Origin: a web page
// that rebound its own name to 127.0.0.1 (DNS rebinding) must not reach the
// tools of a server that trusts its loopback listener. Local is localhost,
// 127.0.0.0/8 and ::1 with any port, and Options.AllowedHosts; an Origin
// in Options.AllowedOrigins passes too. An absent Origin is fine (not a
// browser, or a same-origin GET). The rule is internal/httpguard's
// Rebinding, which the MCP front applies as well.
func (h *Handler) rejectRebinding(w http.ResponseWriter, r *http.Request) bool {
	refused := h.rebinding.Check(r)
	if refused == nil {
		return false
	}
	writeJSON(w, http.StatusForbidden, map[string]string{"message": fmt.Sprintf("forbidden: %s %q is not a loopback %s (see --allowed-host)", refused.Header, refused.Value, refused.Noun())})
	return true
}
