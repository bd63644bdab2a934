package front

import (
	"net/http"
	"sync"
)

// Token checks in flight, per client (docs/security.md, Security model)
//
// A token that is not cached yet is checked at the authorization server
// (JWKS or introspection); those checks share bounds of their own (one key
// set fetch per issuer at a time, a bound on introspections in flight).
// Without a bound per client, one client sending made-up tokens as fast as
// it can would hold every place of those shared bounds and turn honest
// callers' checks into 503s. So each client (its address, as the session
// bound counts it) has at most MaxTokenChecksPerClient checks in flight;
// past it, its request gets 503 with Retry-After, and nobody else's does.

// MaxTokenChecksPerClient bounds one client's token checks in flight.
const MaxTokenChecksPerClient = 8

// maxTokenCheckClients bounds the clients tracked at once (each with
// checks in flight): past it, a new client's check is refused like an
// over-bound one, so the map cannot grow without end.
const maxTokenCheckClients = 10000

type tokenChecks struct {
	mu       sync.Mutex
	inFlight map[string]int
}

// enter takes a place for client, false when it has none left.
func (tc *tokenChecks) enter(client string) bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.inFlight == nil {
		tc.inFlight = map[string]int{}
	}
	n, known := tc.inFlight[client]
	if n >= MaxTokenChecksPerClient || (!known && len(tc.inFlight) >= maxTokenCheckClients) {
		return false
	}
	tc.inFlight[client] = n + 1
	return true
}

func (tc *tokenChecks) leave(client string) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.inFlight[client] <= 1 {
		delete(tc.inFlight, client)
	} else {
		tc.inFlight[client]--
	}
}

// tooManyChecks answers a client past its bound.
func tooManyChecks(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "too many token checks from this client at once; try again", http.StatusServiceUnavailable)
}
