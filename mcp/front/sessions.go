package front

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/json"
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
// both together, HTTPOptions.MaxSessionsPerClient bounds those of one
// client, HTTPOptions.SessionIdleTTL ends both when idle.
//
//   - An ended session's id is forgotten (it gets 404 as an unknown one
//     does), and its GET streams close.
//   - One client could fill MaxSessions with sessions it never uses, and
//     every other client would be refused until they expire. So when the
//     handler is full, the oldest session that never made a call
//     (initialize, and notifications/initialized, are all it ever sent) is
//     ended to admit the new one: its id then gets 404 and its client, if
//     it comes back, initializes again. Only when every session held has
//     made a call is a new one refused.
//   - Idle streamable HTTP sessions are swept every max(TTL/2, 1 s); a
//     legacy SSE session's stream is closed after the TTL without a
//     message (sse.go).
//   - 2026-07-28 subscriptions/listen streams have no session, but each
//     holds a connection as a GET stream does: a second sessionIDs
//     (HTTPHandler.listens) counts them the same way, against
//     HTTPOptions.MaxListenStreams and MaxListenStreamsPerClient, and
//     never ends one to make room (a stream open is in use).

// Defaults of HTTPOptions.
const (
	DefaultSessionIdleTTL       = 30 * time.Minute
	DefaultMaxSessions          = 10000
	DefaultMaxSessionsPerClient = 100
	DefaultBodyTimeout          = 10 * time.Second
	// A client needs one subscriptions/listen stream (it carries every
	// notification); a few more leave room for restarts and tabs.
	DefaultMaxListenStreams          = 1000
	DefaultMaxListenStreamsPerClient = 10
)

// CodeTooManySessions is the JSON-RPC error code of the 503 answer to an
// initialize (or a legacy SSE stream) beyond HTTPOptions.MaxSessions or
// MaxSessionsPerClient, and to a 2026-07-28 subscriptions/listen beyond
// MaxListenStreams or MaxListenStreamsPerClient; it is
// implementation-defined (-32000…-32099).
const CodeTooManySessions = -32003

// retryAfterSessions is the Retry-After, in seconds, of that answer.
const retryAfterSessions = 5

const sessionPrefix = "mcp-session-"

// sessionIDs mints and checks the ids of a stateful streamable HTTP
// handler and keeps the bookkeeping of the handler's sessions, legacy SSE
// included: who holds each, whether it made a call, when it was last used,
// and the GET streams open in it, which it closes when the session ends
// (DELETE, idle expiry, eviction). It holds live sessions only; the
// streams are watched only while they are open.
type sessionIDs struct {
	max       int // <= 0: no bound
	perClient int // <= 0: no bound

	mu      sync.Mutex
	live    map[string]*sessionEntry // streamable HTTP sessions minted here, by id
	sse     map[*sessionEntry]struct{}
	bound   int                                         // live sessions bound to their client (bind)
	pending int                                         // admitted initializes still being served
	held    map[string]int                              // client → its sessions and admitted initializes
	unused  *list.List                                  // of *sessionEntry: those that never made a call, oldest first
	streams map[string]map[*context.CancelFunc]struct{} // session id → its open GET streams

	// evict ends a session removed to make room (see admit), without mu.
	evict func(*sessionEntry)

	signer *sessionSigner // non-nil: ids are signed (see session_keys.go)
}

// sessionEntry is one session as the handler counts it.
type sessionEntry struct {
	id     string             // a streamable HTTP session's id; "" for legacy SSE
	active time.Time          // its last request (streamable HTTP)
	client string             // what it counts against (caller.sessions); "" until bound
	owner  string             // the principal that may use it (HTTPOptions.Resource), "" when callers are not identified
	end    context.CancelFunc // legacy SSE: closes its stream
	queued *list.Element      // its place in unused, while it never made a call
}

// reservation is the room admit made for an initialize being served.
type reservation struct {
	client   string
	consumed bool // bind made it a session
}

// refusal says which bound refused a new session.
type refusal int

const (
	admitted refusal = iota
	refusedServer
	refusedClient
)

func newFrontSessionIDs(max, perClient int) *sessionIDs {
	return &sessionIDs{
		max:       max,
		perClient: perClient,
		live:      make(map[string]*sessionEntry),
		sse:       make(map[*sessionEntry]struct{}),
		held:      make(map[string]int),
		unused:    list.New(),
		streams:   make(map[string]map[*context.CancelFunc]struct{}),
	}
}

// bind records, once the initialize that reserved res made session id,
// that the session is res's client's and who may use it (owner, "" when
// callers are not identified). From then on the session counts instead
// of the reservation, and it may be evicted until it makes a call.
func (m *sessionIDs) bind(id string, res *reservation, owner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.live[id]
	if !ok || e.client != "" || res.consumed {
		return
	}
	res.consumed = true
	m.pending--
	m.bound++
	e.client, e.owner = res.client, owner
	e.queued = m.unused.PushBack(e)
}

// usableBy reports whether owner may use session id: it opened it, or no
// one was recorded.
func (m *sessionIDs) usableBy(id, owner string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.live[id]
	return !ok || e.owner == "" || e.owner == owner
}

// used records that session id made a call (any message but initialize and
// notifications/initialized, or a GET stream): it is no longer evicted to
// make room.
func (m *sessionIDs) used(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.live[id]; ok {
		m.dequeue(e)
	}
}

// usedSSE is used for a legacy SSE session.
func (m *sessionIDs) usedSSE(e *sessionEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dequeue(e)
}

func (m *sessionIDs) dequeue(e *sessionEntry) {
	if e.queued != nil {
		m.unused.Remove(e.queued)
		e.queued = nil
	}
}

// remove forgets session e, under mu; it is a no-op for one already gone.
func (m *sessionIDs) remove(e *sessionEntry) {
	if e.id != "" {
		if m.live[e.id] != e {
			return
		}
		delete(m.live, e.id)
		if e.client != "" {
			m.bound--
		}
	} else {
		if _, ok := m.sse[e]; !ok {
			return
		}
		delete(m.sse, e)
	}
	if e.client != "" {
		if m.held[e.client]--; m.held[e.client] <= 0 {
			delete(m.held, e.client)
		}
	}
	m.dequeue(e)
}

// mint returns the id of a new streamable HTTP session (128 random bits
// or more, visible ASCII as the transport requires; signed, with claims
// and its opener, when the handler has SessionKeys), live from now on.
func (m *sessionIDs) mint(claims sessionClaims, owner *Identity) string {
	id := sessionPrefix + rand.Text()
	if m.signer != nil {
		id = m.signer.sign(claims, owner)
	}
	m.mu.Lock()
	m.live[id] = &sessionEntry{id: id, active: time.Now()}
	m.mu.Unlock()
	return id
}

// check reports whether id is a session the handler serves: a live one
// here, or, with signed ids, one signed by a key, not expired and not
// ended here (then its claims).
func (m *sessionIDs) check(id string) (*sessionClaims, bool) {
	if m.signer != nil {
		c, _, ok := m.signer.verify(id)
		return c, ok
	}
	return nil, m.isLive(id)
}

// valid is check without the claims.
func (m *sessionIDs) valid(id string) bool {
	_, ok := m.check(id)
	return ok
}

// ownedBy reports whether the caller ident may use session id.
func (m *sessionIDs) ownedBy(id string, claims *sessionClaims, ident *Identity) bool {
	if m.signer != nil {
		if _, key, ok := m.signer.verify(id); ok {
			return ownedBy(claims, key, ident)
		}
		return false
	}
	return m.usableBy(id, ident.principal())
}

func (m *sessionIDs) isLive(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.live[id]
	return ok
}

// touch records a request in session id (its idle time starts again).
func (m *sessionIDs) touch(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.live[id]; ok {
		e.active = time.Now()
	}
}

// terminate forgets session id, then closes its open GET streams.
func (m *sessionIDs) terminate(id string) {
	m.mu.Lock()
	if e, ok := m.live[id]; ok {
		m.remove(e)
	}
	streams := m.streams[id]
	delete(m.streams, id)
	m.mu.Unlock()
	for stop := range streams {
		(*stop)()
	}
}

// idle returns the live streamable HTTP sessions without a request for
// ttl and no GET stream open.
func (m *sessionIDs) idle(ttl time.Duration) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	now := time.Now()
	for id, e := range m.live {
		if now.Sub(e.active) >= ttl && len(m.streams[id]) == 0 {
			out = append(out, id)
		}
	}
	return out
}

// admit reserves room for a streamable HTTP session about to be created
// by an initialize of client; release gives the reservation back once the
// initialize is served (bind has made it a session by then, or it made
// none). See room for when it refuses.
func (m *sessionIDs) admit(client string) (*reservation, refusal) {
	m.mu.Lock()
	victim, why := m.room(client)
	if why == admitted {
		m.pending++
		m.held[client]++
	}
	m.mu.Unlock()
	m.ended(victim)
	if why != admitted {
		return nil, why
	}
	return &reservation{client: client}, admitted
}

// release gives back what admit reserved, unless bind made it a session.
func (m *sessionIDs) release(res *reservation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if res.consumed {
		return
	}
	res.consumed = true
	m.pending--
	if m.held[res.client]--; m.held[res.client] <= 0 {
		delete(m.held, res.client)
	}
}

// admitSSE counts a legacy SSE session of client, whose stream end
// closes; dropSSE forgets it when the stream has ended.
func (m *sessionIDs) admitSSE(client string, end context.CancelFunc) (*sessionEntry, refusal) {
	return m.admitStream(client, end, true)
}

// admitStream counts a stream of client that holds no session id (a
// legacy SSE session, or, in HTTPHandler.listens, a 2026-07-28
// subscriptions/listen stream), whose stream end closes; evictable: until
// it is used (usedSSE) it may be ended to make room, as a session that
// never made a call is. dropSSE forgets it when the stream has ended.
func (m *sessionIDs) admitStream(client string, end context.CancelFunc, evictable bool) (*sessionEntry, refusal) {
	m.mu.Lock()
	victim, why := m.room(client)
	var e *sessionEntry
	if why == admitted {
		e = &sessionEntry{client: client, end: end}
		m.sse[e] = struct{}{}
		m.held[client]++
		if evictable {
			e.queued = m.unused.PushBack(e)
		}
	}
	m.mu.Unlock()
	m.ended(victim)
	return e, why
}

func (m *sessionIDs) dropSSE(e *sessionEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.remove(e)
}

// room makes room for one more session of client, under mu: refusedClient
// when client holds MaxSessionsPerClient (sessions and initializes being
// served), else, when the handler holds MaxSessions, the oldest session
// that never made a call is removed (victim, for ended to end once mu is
// released) — refusedServer when there is none.
func (m *sessionIDs) room(client string) (victim *sessionEntry, why refusal) {
	if m.perClient > 0 && m.held[client] >= m.perClient {
		return nil, refusedClient
	}
	if m.max > 0 && m.bound+m.pending+len(m.sse) >= m.max {
		front := m.unused.Front()
		if front == nil {
			return nil, refusedServer
		}
		victim = front.Value.(*sessionEntry)
		m.remove(victim)
	}
	return victim, admitted
}

// ended ends a session room removed, without mu.
func (m *sessionIDs) ended(victim *sessionEntry) {
	if victim != nil && m.evict != nil {
		m.evict(victim)
	}
}

// count is the number of live sessions: streamable HTTP and legacy SSE.
func (m *sessionIDs) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live) + len(m.sse)
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
// beyond a bound (why): a JSON-RPC error (null id) that says which, and
// Retry-After.
func tooManySessions(w http.ResponseWriter, why refusal, max int) {
	msg := "too many sessions: the server holds its maximum of " + strconv.Itoa(max) +
		" sessions; retry later, or end an unused session with DELETE"
	if why == refusedClient {
		msg = "too many sessions for this client: it holds its maximum of " + strconv.Itoa(max) +
			" sessions; end an unused session with DELETE, or retry later"
	}
	tooMany(w, errorResponse(CodeTooManySessions, msg))
}

// tooManyListens answers 503 to the subscriptions/listen request id
// beyond a bound (why: HTTPOptions.MaxListenStreamsPerClient or
// MaxListenStreams, whose value is max): a JSON-RPC error that says
// which bound and its number (in its message, and in data as the
// option's name and max), and Retry-After.
func tooManyListens(w http.ResponseWriter, id json.RawMessage, why refusal, max int) {
	bound, msg := "MaxListenStreams", "too many subscriptions/listen streams: the server holds its maximum of "+strconv.Itoa(max)+
		" streams; retry later"
	if why == refusedClient {
		bound, msg = "MaxListenStreamsPerClient", "too many subscriptions/listen streams for this client: it holds its maximum of "+
			strconv.Itoa(max)+" streams; close one (one stream carries every notification), or retry later"
	}
	tooMany(w, errorFrame(id, &RPCError{Code: CodeTooManySessions, Message: msg, Data: map[string]any{"bound": bound, "max": max}}))
}

// tooMany writes frame with 503 and Retry-After.
func tooMany(w http.ResponseWriter, frame []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSessions))
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(append(frame, '\n'))
}
