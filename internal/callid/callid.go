// Package callid scopes an OTC call_id to a principal: the call_id a
// bridge sends on for a caller is prefixed with a hash of who the caller
// is, so that two callers' call_ids never meet at the OTC server behind
// the bridge (which sees one caller: the bridge). Both fronts use it: the
// MCP front for the call_ids its callers forward, the OTC front for those
// it passes to an MCP front further on.
package callid

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxBytes is the longest call_id an OTC server takes.
const MaxBytes = 256

// Scope is callID as sent for principal: "p", 24 hex digits of a hash of
// the principal, "-", then callID. The same principal and call_id always
// give the same id (an idempotency key stays one), and the result is at
// most MaxBytes when callID is: a callID too long for the prefix is
// replaced by its SHA-256.
func Scope(principal, callID string) string {
	sum := sha256.Sum256([]byte("call_id scope\x00" + principal))
	prefix := "p" + hex.EncodeToString(sum[:12]) + "-"
	if len(prefix)+len(callID) > MaxBytes {
		h := sha256.Sum256([]byte(callID))
		return prefix + hex.EncodeToString(h[:])
	}
	return prefix + callID
}
