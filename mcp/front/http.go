package front

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// Paths served by an HTTPHandler.
const (
	StreamablePath = "/mcp"     // streamable HTTP
	SSEPath        = "/sse"     // legacy SSE: the event stream (GET)
	SSEMessagePath = "/message" // legacy SSE: the client's messages (POST ?sessionId=…)
	HealthPath     = "/health"  // the upstreams' state, when HTTPOptions.Health is set
	ReadyPath      = "/ready"   // readiness for load balancers, when HTTPOptions.Ready or Health is set
)

// HTTPOptions configure an HTTPHandler. A nil *HTTPOptions is the zero value.
type HTTPOptions struct {
	// BearerToken, when set, must be presented as "Authorization: Bearer
	// <token>" on every request; it is compared in constant time, and any
	// other request gets 401 with WWW-Authenticate. Empty: no authentication.
	BearerToken string
	// Resource makes the handler an OAuth 2.1 protected resource: its
	// metadata is served (RFC 9728) and every other request but /health
	// needs a token it accepts (see ResourceAuth). Exclusive with
	// BearerToken. Nil: no OAuth.
	Resource *ResourceAuth
	// DisableLocalhostProtection turns off DNS-rebinding protection. By
	// default a request that arrived on a loopback address must name a
	// local host in Host and, when it sends Origin, in Origin; others get
	// 403. Local hosts are localhost, 127.0.0.0/8 and ::1, with any port,
	// and the names in AllowedHosts. Requests that arrived on other
	// addresses are not checked.
	DisableLocalhostProtection bool
	// AllowedHosts are more host names that the DNS-rebinding protection
	// accepts in Host and Origin: those of a reverse proxy in front of a
	// loopback listener. A name matches with any port, a name:port only
	// with that port, case-insensitively.
	AllowedHosts []string
	// AllowedOrigins are browser origins ("https://app.example.com", or
	// "*" for any) that the DNS-rebinding protection accepts in Origin:
	// those a CORS setting admits (see the README, CORS). The CORS headers
	// themselves are not this handler's.
	AllowedOrigins []string
	// Health, when set, answers GET /health (before any bearer token is
	// checked, like the OTC front's): 200 with its body when ok, else 503.
	// Nil: /health is 404 like any other path.
	Health func(context.Context) (ok bool, body any)
	// Ready, when set, answers GET /ready, a load balancer's readiness
	// probe, the same way (open, 200 or 503). Nil: Health's answer, or 404
	// when Health is nil too.
	Ready func(context.Context) (ok bool, body any)
	// Stateless serves streamable HTTP without sessions: initialize mints no
	// Mcp-Session-Id, nothing is remembered between requests (a client's
	// capabilities and log level included), there is no standalone GET
	// stream (405) and so no notifications such as tools/list_changed, and
	// tool calls cannot ask the client anything (elicitation, sampling).
	// False: initialize mints a session id that later requests (POST, the
	// GET stream, DELETE) must carry: 400 without one, 404 when it is unknown
	// or ended. DELETE ends a session and closes its GET streams. 2026-07-28
	// requests are stateless either way.
	Stateless bool
	// SessionKeys, when set (and not Stateless), make streamable HTTP
	// session ids self-contained: each carries what the front needs of its
	// session, signed with HMAC-SHA256 under SessionKeys[0] (an id signed
	// with any of them is accepted, for key rotation). Replicas that share
	// the keys then serve each other's sessions with no shared store, and
	// a restart ends none. Keys should be 32 random bytes or more. See
	// session_keys.go for what a session is then.
	SessionKeys [][]byte
	// SessionLifetime is how long a signed session id stays valid from its
	// issue (SessionKeys); then every replica answers 404 and the client
	// opens a new session. Zero means DefaultSessionLifetime.
	SessionLifetime time.Duration
	// KeepAlive, when positive, is the interval of the pings sent on the
	// streams that stay open (streamable HTTP GET, legacy SSE). Zero: none.
	KeepAlive time.Duration
	// SessionIdleTTL ends sessions idle that long: a streamable HTTP session
	// without a request (mcp-go checks every max(TTL/2, 1 s)), and a legacy
	// SSE session without a message POSTed (its stream is closed). Zero
	// means DefaultSessionIdleTTL; negative means sessions are kept until
	// DELETE, the client leaves (SSE) or Shutdown.
	SessionIdleTTL time.Duration
	// MaxSessions bounds the sessions held at once, streamable HTTP and
	// legacy SSE together. When they are all held, the oldest session that
	// never made a call (it sent initialize, maybe notifications/
	// initialized, nothing else) is ended to admit a new one; when every
	// one made calls, an initialize (or a legacy SSE stream) gets 503 with
	// Retry-After and a JSON-RPC error with code CodeTooManySessions. Zero
	// means DefaultMaxSessions; negative means no bound.
	MaxSessions int
	// MaxSessionsPerClient bounds the sessions one client holds, counted
	// as MaxSessions counts them; beyond it the client's initialize gets
	// the same 503. A client is the verified token's issuer and subject
	// with Resource, else the client's address (an IPv6 address counts as
	// its /64; see TrustedProxies). With SessionKeys, what one replica
	// counts are the sessions opened on it. Zero means
	// DefaultMaxSessionsPerClient; negative means no bound.
	MaxSessionsPerClient int
	// TrustedProxies are the addresses of reverse proxies whose
	// X-Forwarded-For names the client (the rightmost entry that is not a
	// trusted proxy). Empty: X-Forwarded-For is ignored, and the client is
	// the connection's peer.
	TrustedProxies []netip.Prefix
	// Forwarders are the OAuth callers (Resource) trusted to pass on
	// another caller's OTC context, as an mcpotc OTC front chained in front
	// of this one does (see Forwarder): the Issuer and Subject of their
	// tokens (Issuer may be empty when Resource trusts one issuer). Other
	// OAuth callers never are. Without Resource it is not used: see
	// Forwarder for who the chain peer is then.
	Forwarders []Identity
	// MaxMessageBytes bounds the body of a POST; a longer one is refused
	// (JSON-RPC parse error, HTTP 400). Zero means DefaultMaxMessageBytes;
	// negative means no bound.
	MaxMessageBytes int64
	// BodyTimeout bounds the time to receive a POST's body, from the start
	// of the request's handling; a body still incomplete then gets 408 and
	// the connection is closed. Zero means DefaultBodyTimeout; negative
	// means no bound.
	BodyTimeout time.Duration
}

// DefaultMaxMessageBytes is HTTPOptions.MaxMessageBytes when zero.
const DefaultMaxMessageBytes = 4 << 20

// HTTPHandler serves a Front over HTTP: streamable HTTP at StreamablePath,
// legacy SSE at SSEPath and SSEMessagePath, or either; other paths are 404.
// Mount it at the root of an http.Server (or at its paths) and stop it with
// Shutdown.
type HTTPHandler struct {
	f          *Front
	opts       HTTPOptions
	serveMCP   bool // streamable HTTP
	serveSSE   bool // legacy SSE
	streamable *mcpserver.StreamableHTTPServer
	sse        *mcpserver.SSEServer
	sseStream  http.Handler
	sseMessage http.Handler
	sessions   sync.Map        // legacy SSE session id → *sseBinding
	count      *sessionIDs     // the session count, legacy SSE included
	ids        *sessionIDs     // count as the streamable HTTP session id manager; nil when Stateless
	allowed    map[string]bool // AllowedHosts, lower case
	forwarders map[string]bool // the principals of Forwarders

	refused     rateLog // initializes refused for a session bound
	refusedMine rateLog // initializes refused for the per-client bound
	evicted     rateLog // sessions that never made a call, ended to admit others
	checks      tokenChecks

	life        *lifecycle // tool calls end when life.stop does
	stopCalls   context.CancelFunc
	streams     context.Context // ends the streams that stay open: GET, 2026-07-28 subscriptions/listen
	stopStreams context.CancelFunc
	closing     atomic.Bool
}

// HTTPHandler returns a handler serving f over streamable HTTP and legacy
// SSE.
func (f *Front) HTTPHandler(opts *HTTPOptions) *HTTPHandler {
	return f.newHTTPHandler(opts, true, true)
}

// StreamableHTTPHandler returns a handler serving f over streamable HTTP
// only.
func (f *Front) StreamableHTTPHandler(opts *HTTPOptions) *HTTPHandler {
	return f.newHTTPHandler(opts, true, false)
}

// SSEHandler returns a handler serving f over legacy SSE only.
func (f *Front) SSEHandler(opts *HTTPOptions) *HTTPHandler {
	return f.newHTTPHandler(opts, false, true)
}

func (f *Front) newHTTPHandler(opts *HTTPOptions, streamable, sse bool) *HTTPHandler {
	h := &HTTPHandler{f: f, serveMCP: streamable, serveSSE: sse}
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.MaxMessageBytes == 0 {
		h.opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if h.opts.SessionIdleTTL == 0 {
		h.opts.SessionIdleTTL = DefaultSessionIdleTTL
	}
	if h.opts.MaxSessions == 0 {
		h.opts.MaxSessions = DefaultMaxSessions
	}
	if h.opts.MaxSessionsPerClient == 0 {
		h.opts.MaxSessionsPerClient = DefaultMaxSessionsPerClient
	}
	if h.opts.BodyTimeout == 0 {
		h.opts.BodyTimeout = DefaultBodyTimeout
	}
	h.allowed = make(map[string]bool, len(h.opts.AllowedHosts))
	for _, name := range h.opts.AllowedHosts {
		if _, _, err := net.SplitHostPort(name); err == nil {
			h.allowed[strings.ToLower(name)] = true // only with this port
		} else {
			h.allowed[strings.ToLower(strings.Trim(name, "[]"))] = true
		}
	}
	h.forwarders = make(map[string]bool, len(h.opts.Forwarders))
	if a := h.opts.Resource; a != nil {
		for _, fw := range h.opts.Forwarders {
			iss, ok := a.issuer(fw.Issuer)
			if !ok || fw.Subject == "" {
				f.log.Warn("mcp front: a forwarder that is not a trusted issuer's subject is ignored", "issuer", fw.Issuer)
				continue
			}
			h.forwarders[(&Identity{Issuer: iss, Subject: fw.Subject}).principal()] = true
		}
	}
	h.count = newFrontSessionIDs(h.opts.MaxSessions, h.opts.MaxSessionsPerClient)
	h.count.evict = h.evictSession
	stop, stopCalls := context.WithCancel(context.Background())
	h.life, h.stopCalls = &lifecycle{stop: stop}, stopCalls
	h.streams, h.stopStreams = context.WithCancel(context.Background())

	// mcp-go's own DNS-rebinding check (Host only, loopback names only) is
	// off: the front's, in ServeHTTP, checks Host and Origin and knows
	// AllowedHosts.
	sopts := []mcpserver.StreamableHTTPOption{
		mcpserver.WithStreamableHTTPLogger(f.log),
		mcpserver.WithDisableLocalhostProtection(true),
		mcpserver.WithHeartbeatInterval(h.opts.KeepAlive),
	}
	if streamable && h.opts.SessionIdleTTL > 0 { // it starts a sweeper
		sopts = append(sopts, mcpserver.WithSessionIdleTTL(h.opts.SessionIdleTTL))
	}
	switch {
	case h.opts.Stateless:
		sopts = append(sopts, mcpserver.WithStateLess(true))
	case len(h.opts.SessionKeys) > 0:
		h.ids = h.count
		h.ids.signer = newSessionSigner(h.opts.SessionKeys, h.opts.SessionLifetime, h.opts.MaxSessions)
		sopts = append(sopts, mcpserver.WithSessionIdManagerResolver(signingIDs{h.ids}))
	default:
		// Instead of WithStateful's manager: see sessionIDs.
		h.ids = h.count
		sopts = append(sopts, mcpserver.WithSessionIdManager(h.ids))
	}
	h.streamable = mcpserver.NewStreamableHTTPServer(f.server, sopts...)

	ssopts := []mcpserver.SSEOption{
		mcpserver.WithSSEEndpoint(SSEPath),
		mcpserver.WithMessageEndpoint(SSEMessagePath),
		mcpserver.WithSSEDisableLocalhostProtection(true), // the front checks
	}
	if h.opts.KeepAlive > 0 {
		ssopts = append(ssopts, mcpserver.WithKeepAliveInterval(h.opts.KeepAlive))
	}
	h.sse = mcpserver.NewSSEServer(f.server, ssopts...)
	h.sseStream, h.sseMessage = h.sse.SSEHandler(), h.sse.MessageHandler()
	return h
}

// rateLog counts events for a log line written at most once a second.
type rateLog struct {
	n    atomic.Int64 // events not logged yet
	last atomic.Int64 // unix nanoseconds of the last line
}

// tick counts one event; when a line is due it returns the events since
// the last one and true.
func (l *rateLog) tick() (int64, bool) {
	n := l.n.Add(1)
	now := time.Now().UnixNano()
	last := l.last.Load()
	if now-last < int64(time.Second) || !l.last.CompareAndSwap(last, now) {
		return 0, false
	}
	l.n.Add(-n)
	return n, true
}

// refuse answers 503 to a request that would open a session beyond a
// bound (see tooManySessions) and logs it, at most once a second per
// bound, with the number refused since the last line.
func (h *HTTPHandler) refuse(w http.ResponseWriter, why refusal, what string) {
	if why == refusedClient {
		if n, ok := h.refusedMine.tick(); ok {
			h.f.log.Warn("mcp front: refused new sessions: too many sessions for one client", "request", what,
				"max_per_client", h.opts.MaxSessionsPerClient, "refused", n)
		}
		tooManySessions(w, why, h.opts.MaxSessionsPerClient)
		return
	}
	if n, ok := h.refused.tick(); ok {
		h.f.log.Warn("mcp front: refused new sessions: too many sessions", "request", what,
			"max", h.opts.MaxSessions, "refused", n)
	}
	tooManySessions(w, why, h.opts.MaxSessions)
}

// evictSession ends a session that never made a call, removed to admit a
// new one (sessionIDs.room): a legacy SSE session's stream is closed; a
// streamable HTTP session ends as with DELETE (its id gets 404 here from
// now on, its streams close).
func (h *HTTPHandler) evictSession(e *sessionEntry) {
	if n, ok := h.evicted.tick(); ok {
		h.f.log.Info("mcp front: ended sessions that never made a call, to admit new ones", "max", h.opts.MaxSessions, "ended", n)
	}
	if e.end != nil {
		e.end()
		return
	}
	if h.ids.signer != nil {
		h.ids.signer.end(e.id)
	}
	h.endStreamableSession(e.id)
}

// Sessions is the number of sessions the handler holds: live streamable
// HTTP sessions (none when Stateless) and open legacy SSE streams.
func (h *HTTPHandler) Sessions() int { return h.count.count() }

// ServeHTTP checks the request's Host and Origin, then its bearer token,
// reads a POST's body within BodyTimeout, answers an invalid JSON-RPC
// message (see checkMessage), and hands the request to mcp-go's
// transport with the front's bookkeeping.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.opts.DisableLocalhostProtection && h.rejectRebinding(w, r) {
		return
	}
	if r.URL.Path == HealthPath && h.opts.Health != nil {
		h.serveProbe(w, r, h.opts.Health)
		return
	}
	if r.URL.Path == ReadyPath && (h.opts.Ready != nil || h.opts.Health != nil) {
		probe := h.opts.Ready
		if probe == nil {
			probe = h.opts.Health
		}
		h.serveProbe(w, r, probe)
		return
	}
	if a := h.opts.Resource; a != nil && slices.Contains(a.metadataPaths(), r.URL.Path) {
		a.metadataHandler().ServeHTTP(w, r)
		return
	}
	token, hasToken := bearer(r.Header.Get("Authorization"))
	var id *Identity
	if a := h.opts.Resource; a != nil {
		client := addrKey(h.clientAddr(r))
		if !h.checks.enter(client) {
			tooManyChecks(w)
			return
		}
		id = a.check(w, r, token, hasToken)
		h.checks.leave(client)
		if id == nil {
			return
		}
	}
	if h.opts.BearerToken != "" && (!hasToken || !tokenEqual(token, h.opts.BearerToken)) {
		challenge := `Bearer realm="mcp"`
		if hasToken {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	ctx := context.WithValue(r.Context(), lifeKey{}, h.life)
	ctx = context.WithValue(ctx, callerKey{}, h.caller(r, id))
	if tp := r.Header.Get("traceparent"); tp != "" {
		ctx = context.WithValue(ctx, traceHeadersKey{}, [2]string{tp, r.Header.Get("tracestate")})
	}
	if hasToken {
		ctx = context.WithValue(ctx, tokenKey{}, secretToken{token})
	}
	if id != nil {
		ctx = context.WithValue(ctx, identityKey{}, id)
	}
	// A session is its opener's: another caller's token with its id finds
	// no such session (MCP security best practices, "Session Hijacking").
	if sid := r.Header.Get(mcpserver.HeaderKeySessionID); sid != "" && h.ids != nil {
		owned := true
		if h.ids.signer != nil {
			if c, key, ok := h.ids.signer.verify(sid); ok {
				owned = id == nil || ownedBy(c, key, id)
				ctx = context.WithValue(ctx, sessionClaimsKey{}, c)
			}
		} else if id != nil {
			owned = h.ids.usableBy(sid, id.principal())
		}
		if !owned {
			http.Error(w, "Session not found", http.StatusNotFound)
			return
		}
	}
	r = r.WithContext(ctx)

	streamable := r.URL.Path == StreamablePath && h.serveMCP
	message := r.URL.Path == SSEMessagePath && h.serveSSE
	var body []byte
	if r.Method == http.MethodPost && (streamable || message) {
		var ok bool
		if body, ok = h.readBody(w, r); !ok {
			return
		}
		if why := checkMessage(body); why != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(append(why.frame(), '\n'))
			return
		}
	}

	switch {
	case streamable:
		h.serveStreamable(w, r, body)
	case r.URL.Path == SSEPath && h.serveSSE:
		h.serveSSEStream(w, r)
	case message:
		h.serveSSEMessage(w, r, body)
	default:
		NotFound(w, r, h.routes())
	}
}

// readBody reads a POST's body, bounded by MaxMessageBytes and, through
// the connection's read deadline, by BodyTimeout, and gives the request a
// body that replays it. A body that is not complete in time gets 408 and
// false. Other read errors (such as a body over MaxMessageBytes) are
// replayed after the bytes read, for mcp-go to answer as it does: nil
// body, true.
func (h *HTTPHandler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	var rc *http.ResponseController
	if h.opts.BodyTimeout > 0 {
		rc = http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(h.opts.BodyTimeout)) != nil {
			rc = nil // not a net/http server connection (a test recorder)
		}
	}
	src := r.Body
	if h.opts.MaxMessageBytes > 0 {
		src = http.MaxBytesReader(w, src, h.opts.MaxMessageBytes)
	}
	body, err := io.ReadAll(src)
	if rc != nil {
		// Clear the deadline at once: net/http's background read, which
		// watches for the client leaving while the handler runs, would
		// otherwise fail at the deadline and cancel the request.
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		h.f.log.Warn("mcp front: request body not received in time", "timeout", h.opts.BodyTimeout.String(),
			"path", r.URL.Path)
		w.Header().Set("Connection", "close")
		http.Error(w, fmt.Sprintf("request timeout: the body was not received within %v", h.opts.BodyTimeout),
			http.StatusRequestTimeout)
		return nil, false
	}
	if err != nil {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		return nil, true
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return body, true
}

func (h *HTTPHandler) serveStreamable(w http.ResponseWriter, r *http.Request, body []byte) {
	switch r.Method {
	case http.MethodGet:
		if h.closing.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		if h.ids != nil {
			h.ids.used(r.Header.Get(mcpserver.HeaderKeySessionID)) // a session with a stream is in use
		}
		if h.ids == nil && legacySessionRequest(r) {
			// Without sessions a standalone stream would belong to no one:
			// mcp-go would share one among every client. The transport
			// lets a server without one answer 405.
			w.Header().Set("Allow", "POST")
			http.Error(w, "Method Not Allowed: this server is stateless and offers no standalone stream", http.StatusMethodNotAllowed)
			return
		}
		h.serveStreamableGet(w, r)
		return
	case http.MethodDelete:
		if h.rejectSession(w, r) {
			return
		}
		h.streamable.ServeHTTP(w, r)
		if h.ids != nil && h.ids.signer != nil && legacySessionRequest(r) {
			h.ids.signer.end(r.Header.Get(mcpserver.HeaderKeySessionID))
		}
		return
	case http.MethodPost:
	default:
		h.streamable.ServeHTTP(w, r)
		return
	}

	init, ok := h.preparePost(w, r, body)
	if !ok {
		return
	}
	var res *reservation
	if init {
		var why refusal
		if res, why = h.ids.admit(callerFrom(r.Context()).sessions); why != admitted {
			h.refuse(w, why, "initialize")
			return
		}
		defer h.ids.release(res)
	} else if sid := r.Header.Get(mcpserver.HeaderKeySessionID); sid != "" && h.ids != nil && madeCall(body) {
		h.ids.used(sid)
	}
	ctx := r.Context()
	if init && h.ids.signer != nil {
		n := &newSession{claims: initClaims(body)}
		if ident, ok := CallerIdentity(ctx); ok {
			n.owner = ident
		}
		ctx = context.WithValue(ctx, newSessionKey{}, n)
	}
	if r.Header.Get(mcpgo.HeaderMethod) == string(mcpgo.MethodSubscriptionsListen) {
		// A 2026-07-28 notification stream: a POST that lasts until the
		// client leaves, or until Shutdown closes the streams.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(h.streams, cancel)()
	}
	st := newFrontStream(h.f.maxPending, false)
	rw := newFrontResponseWriter(w, st)
	h.streamable.ServeHTTP(rw, r.WithContext(context.WithValue(ctx, streamKey{}, st)))
	rw.finish()
	if id := w.Header().Get(mcpserver.HeaderKeySessionID); init && id != "" {
		owner := ""
		if ident, ok := CallerIdentity(r.Context()); ok && h.ids.signer == nil {
			owner = ident.principal() // a signed id carries its owner itself
		}
		h.ids.bind(id, res, owner)
	}
	if id := w.Header().Get(mcpserver.HeaderKeySessionID); init && id != "" && !h.ids.isLive(id) {
		// Ended (DELETE) between the answer and mcp-go's registration of
		// the session, which came after: end it again, for mcp-go to
		// forget it (see sessionIDs).
		h.endStreamableSession(id)
	}
}

// madeCall reports whether the message body (of a POST in a session)
// makes the session one in use: anything but notifications/initialized
// (and initialize, which opens a session rather than using one).
func madeCall(body []byte) bool {
	method, _ := skimSessionless(body)
	return method != string(mcpgo.MethodNotificationInitialized) && method != string(mcpgo.MethodInitialize)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func null(b []byte, m *member) bool { return string(b[m.start:m.end]) == "null" }

// splice returns b with b[from:to] replaced by s, in a new slice.
func splice(b []byte, from, to int, s []byte) []byte {
	return slices.Concat(b[:from], s, b[to:])
}

// sseBinding is a legacy SSE session as the front knows it: the
// bookkeeping of its stream, and the life of its tool calls, which mcp-go
// runs detached from the POSTs that carried them and which end with the
// stream. mcp-go makes the session id up inside the GET handler: the
// OnRegisterSession hook binds it.
type sseBinding struct {
	h      *HTTPHandler
	st     *streamBook
	life   *lifecycle
	entry  *sessionEntry // as the session count knows it
	id     string
	owner  string       // who opened it (HTTPOptions.Resource), "" when callers are not identified
	active atomic.Int64 // unix nanoseconds of the last message POSTed, or of the stream's start
}

type sseBindKey struct{}

func (b *sseBinding) bind(id string) {
	b.id = id
	b.h.sessions.Store(id, b)
}

func (h *HTTPHandler) serveSSEStream(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && h.closing.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var entry *sessionEntry
	if r.Method == http.MethodGet {
		var why refusal
		if entry, why = h.count.admitSSE(callerFrom(r.Context()).sessions, cancel); why != admitted {
			h.refuse(w, why, "SSE stream")
			return
		}
		defer h.count.dropSSE(entry)
	}
	stop, end := context.WithCancel(h.life.stop)
	defer end()
	b := &sseBinding{h: h, st: newFrontStream(h.f.maxPending, true), life: &lifecycle{stop: stop}, entry: entry}
	if ident, ok := CallerIdentity(r.Context()); ok {
		b.owner = ident.principal()
	}
	b.active.Store(time.Now().UnixNano())
	if ttl := h.opts.SessionIdleTTL; ttl > 0 && r.Method == http.MethodGet {
		go b.expire(ctx, ttl, cancel)
	}
	rw := newFrontResponseWriter(w, b.st)
	h.sseStream.ServeHTTP(rw, r.WithContext(context.WithValue(ctx, sseBindKey{}, b)))
	rw.finish()
	if b.id != "" {
		h.sessions.CompareAndDelete(b.id, b)
	}
}

// expire ends the session's stream (end) once no message was POSTed in it
// for ttl and no tool call of it is open; it returns when ctx ends.
func (b *sseBinding) expire(ctx context.Context, ttl time.Duration, end context.CancelFunc) {
	timer := time.NewTimer(ttl)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		idle := time.Since(time.Unix(0, b.active.Load()))
		if idle >= ttl && b.st.openCount() == 0 {
			b.h.f.log.Info("mcp front: SSE session idle, closing its stream", "idle_ttl", ttl.String())
			end()
			return
		}
		next := ttl - idle
		if next <= 0 { // idle, but a call is open
			next = ttl
		}
		timer.Reset(next)
	}
}

// serveSSEMessage gives a POSTed message the stream of its session, where
// its response will be written, and the session's life. A session is its
// opener's: another caller's message to it finds no such session (MCP
// security best practices, "Session Hijacking").
func (h *HTTPHandler) serveSSEMessage(w http.ResponseWriter, r *http.Request, body []byte) {
	if v, ok := h.sessions.Load(r.URL.Query().Get("sessionId")); ok {
		b := v.(*sseBinding)
		if ident, ok := CallerIdentity(r.Context()); b.owner != "" && (!ok || ident.principal() != b.owner) {
			http.Error(w, "Session not found", http.StatusNotFound)
			return
		}
		b.active.Store(time.Now().UnixNano())
		if b.entry != nil && madeCall(body) {
			h.count.usedSSE(b.entry)
		}
		ctx := context.WithValue(r.Context(), streamKey{}, b.st)
		r = r.WithContext(context.WithValue(ctx, lifeKey{}, b.life))
	}
	h.sseMessage.ServeHTTP(w, r)
}

// Shutdown closes the handler's sessions cleanly, together with srv, the
// server it is mounted on, when srv is not nil:
//
//  1. srv stops accepting connections (srv.Shutdown runs meanwhile) and the
//     handler refuses new streams with 503;
//  2. the tool calls in flight on legacy SSE sessions get their answers
//     written on their streams (a streamable HTTP call holds its POST open,
//     which srv.Shutdown waits for);
//  3. every session and stream is closed, so that srv.Shutdown can return.
//
// If ctx ends first, the tool calls still running are cancelled, srv is
// closed and Shutdown returns ctx's error. The handler serves no streams
// afterwards.
func (h *HTTPHandler) Shutdown(ctx context.Context, srv *http.Server) error {
	h.closing.Store(true)
	srvDone := make(chan error, 1)
	if srv != nil {
		go func() { srvDone <- srv.Shutdown(ctx) }()
	} else {
		srvDone <- nil
	}

	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for h.sseOpenCalls() > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	h.sse.CloseSessions()
	h.stopStreams()
	_ = h.streamable.Shutdown(ctx) // closes its sessions; it has no server of its own

	var err error
	select {
	case err = <-srvDone:
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		h.stopCalls()
		if srv != nil {
			_ = srv.Close()
		}
		return ctx.Err()
	}
	return err
}

func (h *HTTPHandler) sseOpenCalls() int {
	n := 0
	h.sessions.Range(func(_, v any) bool {
		n += v.(*sseBinding).st.openCount()
		return true
	})
	return n
}

// rejectRebinding answers 403 to a request that arrived on a loopback
// address but names a host in Host or Origin that is neither a loopback
// host nor one of AllowedHosts (DNS rebinding).
func (h *HTTPHandler) rejectRebinding(w http.ResponseWriter, r *http.Request) bool {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil || !loopback(local.String()) {
		return false
	}
	if !h.localHost(r.Host) {
		http.Error(w, fmt.Sprintf("forbidden: Host %q is not a local host (see --allowed-host)", r.Host), http.StatusForbidden)
		return true
	}
	if origin := r.Header.Get("Origin"); origin != "" && !originListed(h.opts.AllowedOrigins, origin) {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !h.localHost(u.Host) {
			http.Error(w, fmt.Sprintf("forbidden: Origin %q is not a local origin (see --allowed-host)", origin), http.StatusForbidden)
			return true
		}
	}
	return false
}

// serveProbe answers GET /health or /ready with probe.
func (h *HTTPHandler) serveProbe(w http.ResponseWriter, r *http.Request, probe func(context.Context) (bool, any)) {
	w.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		w.WriteHeader(http.StatusMethodNotAllowed)
		_, _ = w.Write([]byte(`{"message":"` + r.Method + ` is not allowed on ` + r.URL.Path + `; use GET"}` + "\n"))
		return
	}
	ok, body := probe(r.Context())
	b, err := json.Marshal(body)
	if err != nil {
		ok, b = false, []byte(`{"status":"unavailable"}`)
	}
	if ok {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write(append(b, '\n'))
}

// originListed reports whether origin is one of origins (scheme, host and
// port, compared case-insensitively; a trailing slash ignored) or origins
// holds "*".
func originListed(origins []string, origin string) bool {
	origin = strings.TrimSuffix(origin, "/")
	for _, o := range origins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

// localHost reports whether hostport (a host with or without a port) is a
// loopback host or one of AllowedHosts: a name matches with any port, a
// name:port only that port, case-insensitively (the OTC front's rule).
func (h *HTTPHandler) localHost(hostport string) bool {
	if loopback(hostport) {
		return true
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	return host != "" && (h.allowed[host] || h.allowed[strings.ToLower(hostport)])
}

// loopback reports whether hostport (a host with or without a port)
// is localhost or a loopback IP address.
func loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// bearer returns the token of an "Authorization: Bearer" header.
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// tokenEqual compares in constant time, lengths included.
func tokenEqual(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}
