package httpguard

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"
)

// Bearer returns the token of an Authorization header value of the
// Bearer scheme (RFC 6750 §2.1; the scheme compared case-insensitively,
// RFC 9110 §11.1), and whether there was a non-empty one.
func Bearer(authorization string) (string, bool) {
	scheme, token, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// EqualSecret compares two secrets (an API key, a bearer token) in
// constant time, with respect to their lengths too: it compares their
// SHA-256 digests.
func EqualSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}
