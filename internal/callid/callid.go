package callid

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxBytes is the longest call_id an OTC server takes.
const MaxBytes = 256

// prefixLen is the length of a scoped id's prefix: "p", 24 hex digits,
// "-".
const prefixLen = 1 + 24 + 1

// Scope is callID as sent for principal: "p", 24 hex digits of a hash of
// the principal, "-", then callID. The same principal and call_id always
// give the same id (an idempotency key stays one), and the result is at
// most MaxBytes when callID is: a callID too long for the prefix is
// replaced by its SHA-256.
func Scope(principal, callID string) string {
	return withPrefix("call_id scope\x00"+principal, callID)
}

// Pass is callID as sent for a caller whose call_ids go on unscoped (the
// sole chain peer, a caller that is not told apart from others): callID
// itself, unless it has the shape of an id Scope makes (Scoped); such an
// id is scoped in its turn, under a hash input that starts otherwise than
// every principal's, so that no call_id passed on can equal an id Scope
// made for a principal (a caller could otherwise compute another
// caller's scoped id and claim or replay it at the OTC server). The same
// callID always gives the same id, at most MaxBytes long.
func Pass(callID string) string {
	if !Scoped(callID) {
		return callID
	}
	return withPrefix("call_id passed on\x00", callID)
}

// Scoped reports whether id has the shape of an id Scope makes: "p", 24
// lowercase hex digits, "-".
func Scoped(id string) bool {
	if len(id) < prefixLen || id[0] != 'p' || id[prefixLen-1] != '-' {
		return false
	}
	for i := 1; i < prefixLen-1; i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// withPrefix is callID after "p", 24 hex digits of SHA-256 of scope, and
// "-"; a callID too long for the prefix is replaced by its SHA-256.
func withPrefix(scope, callID string) string {
	sum := sha256.Sum256([]byte(scope))
	prefix := "p" + hex.EncodeToString(sum[:12]) + "-"
	if len(prefix)+len(callID) > MaxBytes {
		h := sha256.Sum256([]byte(callID))
		return prefix + hex.EncodeToString(h[:])
	}
	return prefix + callID
}
