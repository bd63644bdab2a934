package front

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Sessions of the HTTP transports
//
// A streamable HTTP session (before protocol 2026-07-28) starts with
// initialize and lives until DELETE, idle expiry or Shutdown; a legacy SSE
// session lives as long as its GET stream. HTTPOptions.MaxSessions bounds
// both together, HTTPOptions.SessionIdleTTL ends both when idle.
//
// What mcp-go v1.2.1 does, and what the front adds (all in this file and in
// sessionIDs' use in http.go):
//
//   - WithSessionIdleTTL starts a sweeper (every max(TTL/2, 1 s)) that, for
//     a streamable HTTP session idle longer than the TTL, calls the session
//     id manager's Terminate and removes the session from every map of the
//     StreamableHTTPServer and from the MCPServer. The front relies on it.
//   - Its stateful id manager, InsecureStatefulSessionIdManager, keeps every
//     ended session id forever (its "terminated" map), so a server that
//     sees many sessions grows without bound. sessionIDs replaces it and
//     forgets an id when the session ends; an ended id then gets 404 as an
//     unknown one does. Canary: TestFrontCanaryMCPGoKeepsEndedSessionIDs.
//   - Neither DELETE nor the sweeper closes the session's standalone GET
//     streams; sessionIDs closes them in Terminate.
//   - Nothing bounds the number of sessions; sessionIDs admits an
//     initialize (or a legacy SSE stream) only while fewer than MaxSessions
//     are live or being created, else the front answers 503.
//   - A DELETE that arrives after initialize's response is written but
//     before mcp-go registers the session (it registers after writing)
//     leaves a registered session that no sweep finds again; the front then
//     ends it once more (see HTTPHandler.serveStreamable).
//   - Legacy SSE sessions have no idle expiry in mcp-go: the front ends the
//     stream of a session without a message for the TTL (serveSSEStream).

// Defaults of HTTPOptions.
const (
	DefaultSessionIdleTTL = 30 * time.Minute
	DefaultMaxSessions    = 10000
	DefaultBodyTimeout    = 10 * time.Second
)

// CodeTooManySessions is the JSON-RPC error code of the 503 answer to an
// initialize (or a legacy SSE stream) beyond HTTPOptions.MaxSessions; it is
// implementation-defined (-32000…-32099).
const CodeTooManySessions = -32003

// retryAfterSessions is the Retry-After, in seconds, of that answer.
const retryAfterSessions = 5

const sessionPrefix = "mcp-session-"

var errFrontUnknownSession = errors.New("unknown or ended session")

// sessionIDs is the session id manager of a stateful streamable HTTP
// handler (mcp-go's SessionIdManager) and the count of the handler's
// sessions, legacy SSE included. It holds the ids of live sessions only,
// and the GET streams open in them, which it closes when mcp-go terminates
// the session: on DELETE, on idle expiry and on Shutdown. The streams are
// watched only while they are open.
type sessionIDs struct {
	max int // <= 0: no bound

	mu      sync.Mutex
	live    map[string]struct{}
	pending int                                         // admitted initializes still being served
	sse     int                                         // open legacy SSE streams
	streams map[string]map[*context.CancelFunc]struct{} // session id → its open GET streams
	owners  map[string]string                           // session id → who opened it (HTTPOptions.Resource)

	signer *sessionSigner // non-nil: ids are signed (see session_keys.go)
}

func newFrontSessionIDs(max int) *sessionIDs {
	return &sessionIDs{
		max:     max,
		live:    make(map[string]struct{}),
		streams: make(map[string]map[*context.CancelFunc]struct{}),
		owners:  make(map[string]string),
	}
}

// bind records who opened live session id: only they may use it.
func (m *sessionIDs) bind(id, owner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live[id]; ok {
		m.owners[id] = owner
	}
}

// usableBy reports whether owner may use session id: it opened it, or no
// one was recorded.
func (m *sessionIDs) usableBy(id, owner string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.owners[id]
	return !ok || o == owner
}

// Generate mints the id of a new streamable HTTP session (128 random bits
// or more, visible ASCII as the transport requires).
func (m *sessionIDs) Generate() string {
	id := sessionPrefix + rand.Text()
	m.add(id)
	return id
}

// add counts id as a live session of this handler.
func (m *sessionIDs) add(id string) {
	m.mu.Lock()
	m.live[id] = struct{}{}
	m.mu.Unlock()
}

// Validate reports an error for an id that is not a live session (with
// signed ids: not one signed by a key, expired, or ended here): mcp-go
// answers 404 then.
func (m *sessionIDs) Validate(id string) (isTerminated bool, err error) {
	if m.signer != nil {
		if _, _, ok := m.signer.verify(id); !ok {
			return false, errFrontUnknownSession
		}
		return false, nil
	}
	if !m.isLive(id) {
		return false, errFrontUnknownSession
	}
	return false, nil
}

func (m *sessionIDs) isLive(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.live[id]
	return ok
}

// Terminate forgets session id, then closes its open GET streams.
func (m *sessionIDs) Terminate(id string) (notAllowed bool, err error) {
	m.mu.Lock()
	delete(m.live, id)
	delete(m.owners, id)
	streams := m.streams[id]
	delete(m.streams, id)
	m.mu.Unlock()
	for stop := range streams {
		(*stop)()
	}
	return false, nil
}

// admit reserves room for a session about to be created (an initialize
// being served, which Generate will count again until release, or a legacy
// SSE stream when sse is set); false when the bound is reached. Counting an
// initialize twice while it is served keeps the bound exact under
// concurrency, at the price of refusing early while many are in flight.
func (m *sessionIDs) admit(sse bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.max > 0 && len(m.live)+m.pending+m.sse >= m.max {
		return false
	}
	if sse {
		m.sse++
	} else {
		m.pending++
	}
	return true
}

// release gives back what admit reserved.
func (m *sessionIDs) release(sse bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sse {
		m.sse--
	} else {
		m.pending--
	}
}

// count is the number of live sessions: streamable HTTP and legacy SSE.
func (m *sessionIDs) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live) + m.sse
}

// watch has the GET stream that stop ends closed when session id ends,
// until the returned function is called.
func (m *sessionIDs) watch(id string, stop context.CancelFunc) (unwatch func()) {
	key := &stop
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.streams[id] == nil {
		m.streams[id] = make(map[*context.CancelFunc]struct{})
	}
	m.streams[id][key] = struct{}{}
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if set := m.streams[id]; set != nil {
			delete(set, key)
			if len(set) == 0 {
				delete(m.streams, id)
			}
		}
	}
}

// tooManySessions answers 503 to a request that would open a session
// beyond the bound: a JSON-RPC error (null id) that says so, and
// Retry-After.
func tooManySessions(w http.ResponseWriter, max int) {
	b := errorResponse(CodeTooManySessions, "too many sessions: the server holds its maximum of "+
		strconv.Itoa(max)+" sessions; retry later, or end an unused session with DELETE")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSessions))
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(append(b, '\n'))
}
