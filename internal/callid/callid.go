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
