package front

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/internal/httpguard"
	"github.com/mcpotc/mcpotc/internal/shutdown"
)

// Paths served by an HTTPHandler.
const (
	StreamablePath = "/mcp"     // streamable HTTP
	SSEPath        = "/sse"     // legacy SSE: the event stream (GET)
	SSEMessagePath = "/message" // legacy SSE: the client's messages (POST ?sessionId=…)
	HealthPath     = "/health"  // the upstreams' state, when HTTPOptions.Health is set
	ReadyPath      = "/ready"   // readiness for load balancers, when HTTPOptions.Ready or Health is set
)

// HeaderSessionID carries a streamable HTTP session's id.
const HeaderSessionID = "Mcp-Session-Id"

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
	// those a CORS setting admits (see docs/operations.md, CORS). The CORS headers
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
	// capabilities included), there is no standalone GET stream (405) and
	// so no notifications such as tools/list_changed. False: initialize
	// mints a session id that later requests (POST, the GET stream,
	// DELETE) must carry: 400 without one, 404 when it is unknown or ended.
	// DELETE ends a session and closes its GET streams. 2026-07-28
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
	// SessionIdleTTL ends sessions idle that long: a streamable HTTP
	// session without a request (checked every max(TTL/2, 1 s)), and a
	// legacy SSE session without a message POSTed (its stream is closed).
	// Zero means DefaultSessionIdleTTL; negative means sessions are kept
	// until DELETE, the client leaves (SSE) or Shutdown.
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
	// MaxListenStreams bounds the 2026-07-28 subscriptions/listen streams
	// held open at once (each holds a connection, as a session's GET
	// stream does); beyond it a subscriptions/listen gets 503 with
	// Retry-After and a JSON-RPC error with code CodeTooManySessions that
	// names the bound and its number. Zero means DefaultMaxListenStreams;
	// negative means no bound.
	MaxListenStreams int
	// MaxListenStreamsPerClient bounds the subscriptions/listen streams one
	// client holds open (a client as MaxSessionsPerClient names it), with
	// the same answer beyond it. Zero means
	// DefaultMaxListenStreamsPerClient; negative means no bound.
	MaxListenStreamsPerClient int
	// TrustedProxies are the addresses of reverse proxies whose
	// X-Forwarded-For names the client (the rightmost entry that is not a
	// trusted proxy). Empty: X-Forwarded-For is ignored, and the client is
	// the connection's peer. It names the client for sessions, principals
	// and limits only: whether a caller is the chain peer comes from the
	// connection's own peer, and a connection from a trusted proxy is never
	// the chain peer, whatever X-Forwarded-For says (see Forwarder).
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

// HTTPHandler serves a Server over HTTP: streamable HTTP at StreamablePath,
// legacy SSE at SSEPath and SSEMessagePath, or either; other paths are 404.
// Mount it at the root of an http.Server (or at its paths) and stop it with
// Shutdown.
type HTTPHandler struct {
	f          *Server
	opts       HTTPOptions
	serveMCP   bool                 // streamable HTTP
	serveSSE   bool                 // legacy SSE
	rebinding  *httpguard.Rebinding // AllowedHosts and AllowedOrigins
	forwarders map[string]bool      // the principals of Forwarders

	count   *sessionIDs // the session count, legacy SSE included
	ids     *sessionIDs // count, as the streamable HTTP session ids; nil when Stateless
	listens *sessionIDs // the subscriptions/listen streams open (MaxListenStreams…), counted as sessions are
	peers   sync.Map    // streamable HTTP session id → *peer, for the sessions this replica saw
	sse     sync.Map    // legacy SSE session id → *sseSession
	calls   callRegistry

	refused       rateLog // initializes refused for a session bound
	refusedMine   rateLog // initializes refused for the per-client bound
	refusedListen rateLog // subscriptions/listen streams refused for a bound
	evicted       rateLog // sessions that never made a call, ended to admit others
	checks        tokenChecks

	life        context.Context // tool calls end when it does (Shutdown's deadline)
	stopCalls   context.CancelFunc
	streams     context.Context // ends the streams that stay open: GET, SSE, subscriptions/listen
	stopStreams context.CancelFunc
	closing     atomic.Bool
	running     sync.WaitGroup // legacy SSE messages being answered
	sweeper     sync.Once
}

// HTTPHandler returns a handler serving f over streamable HTTP and legacy
// SSE.
func (f *Server) HTTPHandler(opts *HTTPOptions) *HTTPHandler {
	return f.newHTTPHandler(opts, true, true)
}

// StreamableHTTPHandler returns a handler serving f over streamable HTTP
// only.
func (f *Server) StreamableHTTPHandler(opts *HTTPOptions) *HTTPHandler {
	return f.newHTTPHandler(opts, true, false)
}

// SSEHandler returns a handler serving f over legacy SSE only.
func (f *Server) SSEHandler(opts *HTTPOptions) *HTTPHandler {
	return f.newHTTPHandler(opts, false, true)
}

func (f *Server) newHTTPHandler(opts *HTTPOptions, streamable, sse bool) *HTTPHandler {
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
	if h.opts.MaxListenStreams == 0 {
		h.opts.MaxListenStreams = DefaultMaxListenStreams
	}
	if h.opts.MaxListenStreamsPerClient == 0 {
		h.opts.MaxListenStreamsPerClient = DefaultMaxListenStreamsPerClient
	}
	h.listens = newFrontSessionIDs(h.opts.MaxListenStreams, h.opts.MaxListenStreamsPerClient)
	h.rebinding = httpguard.NewRebinding(h.opts.AllowedHosts, h.opts.AllowedOrigins)
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
	if streamable && !h.opts.Stateless {
		h.ids = h.count
		if len(h.opts.SessionKeys) > 0 {
			h.ids.signer = newSessionSigner(h.opts.SessionKeys, h.opts.SessionLifetime, h.opts.MaxSessions)
		}
	}
	h.life, h.stopCalls = context.WithCancel(context.Background())
	h.streams, h.stopStreams = context.WithCancel(context.Background())
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

// refuseListen answers 503 to the subscriptions/listen request id beyond
// a bound (tooManyListens) and logs it, at most once a second, with the
// number refused since the last line.
func (h *HTTPHandler) refuseListen(w http.ResponseWriter, id json.RawMessage, why refusal) {
	max, bound := h.opts.MaxListenStreams, "max"
	if why == refusedClient {
		max, bound = h.opts.MaxListenStreamsPerClient, "max_per_client"
	}
	if n, ok := h.refusedListen.tick(); ok {
		h.f.log.Warn("mcp front: refused subscriptions/listen streams: too many open", bound, max, "refused", n)
	}
	tooManyListens(w, id, why, max)
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
	h.endSession(e.id)
}

// endSession ends streamable HTTP session id here: its id is no longer
// valid on this replica, its streams close, what the front kept of it is
// forgotten.
func (h *HTTPHandler) endSession(id string) {
	if h.ids.signer != nil {
		h.ids.signer.end(id)
	}
	h.ids.terminate(id)
	h.peers.Delete(id)
}

// sweepIdle starts the sweep of idle streamable HTTP sessions (every
// max(TTL/2, 1 s), until Shutdown): an unsigned session is ended (its id
// gets 404 from then on); a signed one is only forgotten here (its id
// stays valid until it expires: what the replica kept of it is rebuilt
// from the id).
func (h *HTTPHandler) sweepIdle() {
	ttl := h.opts.SessionIdleTTL
	if ttl <= 0 {
		return
	}
	go func() {
		t := time.NewTicker(max(ttl/2, time.Second))
		defer t.Stop()
		for {
			select {
			case <-h.streams.Done():
				return
			case <-t.C:
			}
			for _, id := range h.ids.idle(ttl) {
				if h.ids.signer == nil {
					h.endSession(id)
					continue
				}
				h.ids.terminate(id)
				h.peers.Delete(id)
			}
		}
	}()
}

// Sessions is the number of sessions the handler holds: live streamable
// HTTP sessions (none when Stateless) and open legacy SSE streams.
func (h *HTTPHandler) Sessions() int { return h.count.count() }

// ServeHTTP checks the request's Host and Origin, then its bearer token,
// and serves the MCP transports, /health and /ready, and the protected
// resource metadata.
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
	token, hasToken := httpguard.Bearer(r.Header.Get("Authorization"))
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
	if h.opts.BearerToken != "" && (!hasToken || !httpguard.EqualSecret(token, h.opts.BearerToken)) {
		challenge := `Bearer realm="mcp"`
		if hasToken {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	ctx := context.WithValue(r.Context(), callerKey{}, h.caller(r, id))
	if tp := r.Header.Get("traceparent"); tp != "" {
		ctx = context.WithValue(ctx, traceHeadersKey{}, [2]string{tp, r.Header.Get("tracestate")})
	}
	if hasToken {
		ctx = context.WithValue(ctx, tokenKey{}, secretToken{token})
	}
	if id != nil {
		ctx = context.WithValue(ctx, identityKey{}, id)
	}
	r = r.WithContext(ctx)
	switch {
	case r.URL.Path == StreamablePath && h.serveMCP:
		h.serveStreamable(w, r)
	case r.URL.Path == SSEPath && h.serveSSE:
		h.serveSSEStream(w, r)
	case r.URL.Path == SSEMessagePath && h.serveSSE:
		h.serveSSEMessage(w, r)
	default:
		NotFound(w, r, h.routes())
	}
}

// readBody reads a POST's body, bounded by MaxMessageBytes and, through
// the connection's read deadline, by BodyTimeout. A failure is answered
// here (408 for a body not complete in time, 400 with a JSON-RPC parse
// error otherwise) and gives false.
func (h *HTTPHandler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		writeFrame(w, http.StatusBadRequest, errorResponse(mcpgo.PARSE_ERROR, "request body is not valid json"))
		return nil, false
	}
	body, err := httpguard.ReadBody(w, r, h.opts.MaxMessageBytes, h.opts.BodyTimeout)
	switch {
	case httpguard.TimedOut(err):
		h.f.log.Warn("mcp front: request body not received in time", "timeout", h.opts.BodyTimeout.String(), "path", r.URL.Path)
		w.Header().Set("Connection", "close")
		http.Error(w, fmt.Sprintf("request timeout: the body was not received within %v", h.opts.BodyTimeout), http.StatusRequestTimeout)
		return nil, false
	case err != nil:
		writeFrame(w, http.StatusBadRequest, errorResponse(mcpgo.PARSE_ERROR, "read request body error: "+err.Error()))
		return nil, false
	}
	return body, true
}

// writeFrame answers with one JSON-RPC frame as a JSON body.
func writeFrame(w http.ResponseWriter, status int, frame []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(frame)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(frame, '\n'))
}

// writeText answers with a line of text, as net/http's Error does.
func writeText(w http.ResponseWriter, status int, text string) {
	http.Error(w, text, status)
}

// serveStreamable serves the streamable HTTP endpoint.
func (h *HTTPHandler) serveStreamable(w http.ResponseWriter, r *http.Request) {
	version := r.Header.Get(mcpgo.HeaderProtocolVersion)
	switch r.Method {
	case http.MethodPost:
		h.servePost(w, r)
		return
	case http.MethodGet, http.MethodDelete:
	case http.MethodHead:
		w.WriteHeader(http.StatusOK)
		return
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeText(w, http.StatusMethodNotAllowed, "Method Not Allowed: "+StreamablePath+" serves GET, POST and DELETE")
		return
	}
	if r.Method == http.MethodGet && h.closing.Load() {
		writeText(w, http.StatusServiceUnavailable, "shutting down")
		return
	}
	if mcpgo.IsModernProtocol(version) {
		w.Header().Set("Allow", http.MethodPost)
		writeText(w, http.StatusMethodNotAllowed, r.Method+" is not supported in protocol version "+mcpgo.ProtocolVersion20260728+
			": server-to-client messages use subscriptions/listen")
		return
	}
	if version != "" && !mcpgo.IsValidProtocolVersion(version) {
		writeText(w, http.StatusBadRequest, "Unsupported protocol version: "+version)
		return
	}
	if h.ids == nil {
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusOK) // nothing to end
			return
		}
		// Without sessions a standalone stream would belong to no one.
		w.Header().Set("Allow", "POST")
		writeText(w, http.StatusMethodNotAllowed, "Method Not Allowed: this server is stateless and offers no standalone stream")
		return
	}
	sid := r.Header.Get(HeaderSessionID)
	if sid == "" {
		writeText(w, http.StatusBadRequest, "Bad Request: Mcp-Session-Id header is required")
		return
	}
	if r.Method == http.MethodDelete {
		if !h.ids.valid(sid) {
			writeText(w, http.StatusNotFound, "Session not found")
			return
		}
		h.endSession(sid)
		w.WriteHeader(http.StatusOK)
		return
	}
	h.serveGet(w, r, sid)
}

// serveGet serves a session's standalone stream: its notifications
// (tools/list_changed), and pings every KeepAlive. It ends when the
// client leaves, when the session ends (DELETE, idle expiry, eviction),
// and at Shutdown.
func (h *HTTPHandler) serveGet(w http.ResponseWriter, r *http.Request, sid string) {
	if h.closing.Load() {
		writeText(w, http.StatusServiceUnavailable, "shutting down")
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(h.streams, cancel)()
	// Watch first, then check: a session that ends in between is either
	// seen ended here or closes this stream.
	defer h.ids.watch(sid, cancel)()
	if !h.ids.valid(sid) {
		writeText(w, http.StatusNotFound, "Session not found")
		return
	}
	h.ids.used(sid) // a session with a stream is in use
	es := newEventStream(w)
	defer h.f.changes.add(func(frame []byte) { es.send(frame) })()
	es.serve(ctx, h.opts.KeepAlive, func() { h.ids.touch(sid) })
}

// servePost serves one message POSTed to the streamable HTTP endpoint.
func (h *HTTPHandler) servePost(w http.ResponseWriter, r *http.Request) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		writeText(w, http.StatusBadRequest, "Invalid content type: must be 'application/json'")
		return
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	m, failure := decode(body)
	if failure != nil {
		writeFrame(w, http.StatusBadRequest, errorFrame(nil, failure))
		return
	}
	c := callerFrom(r.Context())
	x := &exchange{calls: &h.calls, life: h.life}
	headerVersion := r.Header.Get(mcpgo.HeaderProtocolVersion)
	modern, failure := h.modernPost(r, m, headerVersion)
	switch {
	case failure != nil:
		writeFrame(w, http.StatusBadRequest, errorFrame(m.id, failure))
		return
	case modern != nil:
		x.modern, x.scope = modern, "m:"+c.sessions+":"
	case m.response:
		w.WriteHeader(http.StatusAccepted)
		return
	case headerVersion != "" && m.method != string(mcpgo.MethodInitialize) && !mcpgo.IsValidProtocolVersion(headerVersion):
		writeText(w, http.StatusBadRequest, "Unsupported protocol version: "+headerVersion)
		return
	case h.ids == nil:
		x.scope = "s:" + c.sessions + ":" // stateless: a client's ids are its own
	default:
		if !h.legacySession(w, r, m, x) {
			return
		}
	}
	if m.response {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	ctx := r.Context()
	if m.method == string(mcpgo.MethodSubscriptionsListen) && modern != nil {
		// A 2026-07-28 notification stream: a POST that lasts until the
		// client leaves, or until Shutdown closes the streams. It counts
		// against MaxListenStreams and the client's
		// MaxListenStreamsPerClient while it is open.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		e, why := h.listens.admitStream(c.sessions, cancel, false)
		if why != admitted {
			h.refuseListen(w, m.id, why)
			return
		}
		defer h.listens.dropSSE(e)
		defer context.AfterFunc(h.streams, cancel)()
	}
	pw := &postWriter{w: w}
	x.notify = pw.notify
	frame := h.f.serve(ctx, m, x)
	if m.method == string(mcpgo.MethodInitialize) && x.p != nil && frame != nil {
		w.Header().Set(HeaderSessionID, x.p.id)
	}
	pw.finish(frame, modern != nil)
}

// modernPost checks a POST against 2026-07-28's rules when it is a
// 2026-07-28 message (by its _meta or its Mcp-Protocol-Version): the
// request's _meta, or the error to answer with (HTTP 400). A message of an
// earlier revision gives nil, nil.
func (h *HTTPHandler) modernPost(r *http.Request, m *message, headerVersion string) (*modernRequest, *RPCError) {
	var metaVersion string
	if raw := memberOf(m.params, "_meta"); raw != nil {
		metaVersion, _ = jsonString(memberOf(raw, mcpgo.MetaKeyProtocolVersion))
	}
	if !mcpgo.IsModernProtocol(metaVersion) && !slices.ContainsFunc(r.Header.Values(mcpgo.HeaderProtocolVersion), mcpgo.IsModernProtocol) {
		return nil, nil // (any value of a repeated header counts: it is then refused below)
	}
	mismatch := func(msg string) *RPCError { return &RPCError{Code: mcpgo.HEADER_MISMATCH, Message: msg} }
	switch name := repeatedRoutingHeader(r.Header); {
	case name != "":
		// The front checks one value; an intermediary might route by
		// another. Checked before any tool is looked up, so that the
		// answer says nothing of which tools exist.
		return nil, mismatch(name + " header is sent more than once: a " + mcpgo.ProtocolVersion20260728 +
			" routing header (" + mcpgo.HeaderProtocolVersion + ", " + mcpgo.HeaderMethod + ", " + mcpgo.HeaderName + ", " +
			mcpgo.HeaderParamPrefix + "*) must have exactly one value")
	case m.response:
		return nil, &RPCError{Code: mcpgo.INVALID_REQUEST, Message: "client-to-server responses are not supported in protocol version " +
			mcpgo.ProtocolVersion20260728 + ": server-initiated requests were replaced by multi round-trip requests"}
	case r.Header.Get("Last-Event-ID") != "":
		return nil, mismatch("Last-Event-ID is not supported in protocol version " + mcpgo.ProtocolVersion20260728 +
			": streams are not resumable, re-issue the request with a new ID")
	case headerVersion == "":
		return nil, mismatch(mcpgo.HeaderProtocolVersion + " header is required for requests carrying " + mcpgo.MetaKeyProtocolVersion)
	case metaVersion == "" && m.id == nil:
		// A notification needs no _meta version (the revision asks it of
		// requests); the header's stands for it.
		metaVersion = headerVersion
	case metaVersion == "":
		return nil, &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "missing or invalid _meta field " + mcpgo.MetaKeyProtocolVersion}
	}
	if headerVersion != metaVersion {
		return nil, mismatch(mcpgo.HeaderProtocolVersion + " header " + headerVersion + " does not match request " +
			mcpgo.MetaKeyProtocolVersion + " " + metaVersion)
	}
	if !mcpgo.IsValidProtocolVersion(metaVersion) {
		return nil, unsupportedVersion(metaVersion)
	}
	mr := &modernRequest{version: metaVersion}
	if m.id != nil {
		var failure *RPCError
		if mr, failure = readModern(m.params); failure != nil {
			return nil, failure
		}
		if err := mcpgo.ValidateStandardHeaders(r.Header.Get, metaVersion, mcpgo.MCPMethod(m.method), m.params); err != nil {
			return nil, protocolError(err)
		}
		if failure := taskNameHeader(m.method, m.params, lookupHeader(r.Header)); failure != nil {
			return nil, failure
		}
		if m.method == string(mcpgo.MethodToolsCall) {
			// A tool the caller may not see is not one the front serves.
			name := toolName(m.params)
			if cat := h.f.cat.Load(); cat.byName[name] != nil && cat.allows(r.Context(), name) {
				t := cat.byName[name]
				if err := mcpgo.ValidateParamHeadersLookup(lookupHeader(r.Header), &t.Tool, m.params); err != nil {
					return nil, protocolError(err)
				}
			}
		}
	}
	return mr, nil
}

// repeatedRoutingHeader names a 2026-07-28 routing header (Mcp-Protocol-
// Version, Mcp-Method, Mcp-Name, Mcp-Param-*) that h carries more than
// once, under any spelling of its name; "" when there is none.
func repeatedRoutingHeader(h http.Header) string {
	var seen map[string]int
	for k, v := range h {
		l := strings.ToLower(k)
		if l != "mcp-protocol-version" && l != "mcp-method" && l != "mcp-name" && !strings.HasPrefix(l, "mcp-param-") {
			continue
		}
		if seen == nil {
			seen = make(map[string]int, 4)
		}
		if seen[l] += len(v); seen[l] > 1 {
			return http.CanonicalHeaderKey(k)
		}
	}
	return ""
}

// toolName is the name of a tools/call's params, "" when it has none.
func toolName(params json.RawMessage) string {
	s, _ := jsonString(memberOf(params, "name"))
	return s
}

// lookupHeader reports the first value of a header and whether it was sent
// at all (an empty value is not a missing header).
func lookupHeader(h http.Header) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v := h.Values(name)
		if len(v) == 0 {
			return "", false
		}
		return v[0], true
	}
}

// protocolError is the JSON-RPC error of a 2026-07-28 header check.
func protocolError(err error) *RPCError {
	var mismatch mcpgo.HeaderMismatchError
	if errors.As(err, &mismatch) {
		return &RPCError{Code: mcpgo.HEADER_MISMATCH, Message: mismatch.Error()}
	}
	var missing mcpgo.MissingRequiredClientCapabilityError
	if errors.As(err, &missing) {
		return &RPCError{Code: mcpgo.MISSING_REQUIRED_CLIENT_CAPABILITY, Message: missing.Error()}
	}
	return &RPCError{Code: mcpgo.INVALID_PARAMS, Message: err.Error()}
}

// legacySession finds (or, for initialize, opens) the session of a message
// before 2026-07-28 in a handler with sessions, and records it in x; false
// when it answered the request.
func (h *HTTPHandler) legacySession(w http.ResponseWriter, r *http.Request, m *message, x *exchange) bool {
	c := callerFrom(r.Context())
	if m.method == string(mcpgo.MethodInitialize) {
		res, why := h.ids.admit(c.sessions)
		if why != admitted {
			h.refuse(w, why, "initialize")
			return false
		}
		var owner *Identity
		if ident, ok := CallerIdentity(r.Context()); ok {
			owner = ident
		}
		id := h.ids.mint(initClaims(m.params), owner)
		ownerName := ""
		if owner != nil && h.ids.signer == nil {
			ownerName = owner.principal() // a signed id carries its owner itself
		}
		h.ids.bind(id, res, ownerName)
		h.ids.release(res)
		h.sweeper.Do(h.sweepIdle)
		p := &peer{id: id}
		h.peers.Store(id, p)
		x.p, x.scope = p, id+":"
		return true
	}
	sid := r.Header.Get(HeaderSessionID)
	if sid == "" {
		writeText(w, http.StatusBadRequest, "Bad Request: Mcp-Session-Id header is required")
		return false
	}
	claims, ok := h.ids.check(sid)
	if !ok {
		writeText(w, http.StatusNotFound, "Invalid session ID")
		return false
	}
	if ident, ok := CallerIdentity(r.Context()); ok && !h.ids.ownedBy(sid, claims, ident) {
		// A session is its opener's: another caller's token with its id
		// finds no such session (MCP security best practices, "Session
		// Hijacking").
		writeText(w, http.StatusNotFound, "Session not found")
		return false
	}
	if m.method != string(mcpgo.MethodNotificationInitialized) {
		h.ids.used(sid)
	}
	h.ids.touch(sid)
	v, _ := h.peers.LoadOrStore(sid, peerOf(sid, claims))
	x.p, x.scope = v.(*peer), sid+":"
	return true
}

// peerOf is what the front knows of a session opened elsewhere (a signed
// id's claims) or forgotten here (idle).
func peerOf(id string, c *sessionClaims) *peer {
	p := &peer{id: id}
	if c != nil {
		p.version, p.caps = c.Version, c.Capabilities
	}
	return p
}

// postWriter is the answer of a POST: JSON, or an event stream once a
// notification is sent before the answer (a subscriptions/listen stream,
// progress).
type postWriter struct {
	w    http.ResponseWriter
	mu   sync.Mutex
	es   *eventStream // set once streaming
	done bool
}

func (pw *postWriter) notify(frame []byte) bool {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if pw.done {
		return false
	}
	if pw.es == nil {
		pw.es = newEventStream(pw.w)
	}
	return pw.es.write(frame)
}

// finish writes the answer (202 when there is none). A 2026-07-28 JSON
// answer's HTTP status follows its error code.
func (pw *postWriter) finish(frame []byte, modern bool) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.done = true
	switch {
	case pw.es != nil:
		if frame != nil {
			pw.es.write(frame)
		}
	case frame == nil:
		pw.w.WriteHeader(http.StatusAccepted)
	default:
		status := http.StatusOK
		code, isErr := errorCode(frame)
		if modern && isErr {
			status = httpStatus(code)
		}
		// The bridge is starting, or shutting down: when to ask again, for
		// intermediaries and clients that read no body; the frame goes
		// with 200, as any implementation-defined error, so that a client
		// reads it as the call's answer (clients drop the body of a 503:
		// the Go SDK's answers "rejected by transport").
		switch {
		case isErr && code == CodeStarting:
			pw.w.Header().Set("Retry-After", strconv.Itoa(StartingRetryAfterSeconds))
		case isErr && code == CodeShuttingDown:
			pw.w.Header().Set("Retry-After", strconv.Itoa(int(shutdown.RetryAfter/time.Second)))
		}
		writeFrame(pw.w, status, frame)
	}
}

// errorCode is the code of an error frame.
func errorCode(frame []byte) (int, bool) {
	e := memberOf(frame, "error")
	if e == nil {
		return 0, false
	}
	n, err := strconv.Atoi(string(memberOf(e, "code")))
	return n, err == nil
}

// eventStream writes server-sent events: each frame one "message" event.
type eventStream struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	mu     sync.Mutex
	queue  chan []byte // frames sent from other goroutines (notifications)
	failed bool
}

func newEventStream(w http.ResponseWriter) *eventStream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	es := &eventStream{w: w, rc: http.NewResponseController(w), queue: make(chan []byte, 64)}
	_ = es.rc.Flush()
	return es
}

// write writes one event now.
func (es *eventStream) write(frame []byte) bool {
	return es.writeRaw("event: message\ndata: ", frame, "\n\n")
}

func (es *eventStream) writeRaw(head string, frame []byte, tail string) bool {
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.failed {
		return false
	}
	b := make([]byte, 0, len(head)+len(frame)+len(tail))
	b = append(append(append(b, head...), frame...), tail...)
	if _, err := es.w.Write(b); err != nil || es.rc.Flush() != nil {
		es.failed = true
	}
	return !es.failed
}

// close ends the stream for writers on other goroutines: a write after
// its handler returned would touch a finished response.
func (es *eventStream) close() {
	es.mu.Lock()
	es.failed = true
	es.mu.Unlock()
}

// send queues a frame for serve to write (it never blocks: a client that
// does not read loses notifications past the queue).
func (es *eventStream) send(frame []byte) {
	select {
	case es.queue <- frame:
	default:
	}
}

// serve writes what send queues, and a ping every keepAlive, until ctx
// ends or a write fails; wrote is called after each write.
func (es *eventStream) serve(ctx context.Context, keepAlive time.Duration, wrote func()) {
	var tick <-chan time.Time
	if keepAlive > 0 {
		t := time.NewTicker(keepAlive)
		defer t.Stop()
		tick = t.C
	}
	var pings int64
	for {
		var frame []byte
		select {
		case <-ctx.Done():
			return
		case frame = <-es.queue:
		case <-tick:
			pings++
			frame = []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(pings, 10) + `,"method":"ping"}`)
		}
		if !es.write(frame) {
			return
		}
		if wrote != nil {
			wrote()
		}
	}
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
// If ctx ends first, the tool calls still running are ended, each answered
// with CodeShuttingDown (503 and Retry-After for a JSON answer), and those
// answers get shutdown.Flush to be written: when every request is done
// then, Shutdown returns nil; otherwise srv is closed and Shutdown returns
// ctx's error. The handler serves no streams afterwards.
func (h *HTTPHandler) Shutdown(ctx context.Context, srv *http.Server) error {
	h.closing.Store(true)
	// The server's own shutdown outlives ctx by shutdown.Flush: the calls
	// still running at ctx's end are ended and answered (CodeShuttingDown)
	// before the connections close.
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	defer scancel()
	srvDone := make(chan error, 1)
	if srv != nil {
		go func() { srvDone <- srv.Shutdown(sctx) }()
	} else {
		srvDone <- nil
	}
	sseDone := make(chan struct{})
	go func() { h.running.Wait(); close(sseDone) }()
	select {
	case <-sseDone:
	case <-ctx.Done():
		// Answers of legacy SSE sessions go on their streams: end the
		// calls and let the answers reach the streams before they close.
		h.stopCalls()
		waitBounded(sseDone, shutdown.Flush)
	}
	h.stopStreams()

	select {
	case err := <-srvDone:
		return err
	case <-ctx.Done():
	}
	h.stopCalls()
	if err, ok := waitBounded(srvDone, shutdown.Flush); ok {
		return err
	}
	scancel()
	if srv != nil {
		_ = srv.Close()
	}
	return ctx.Err()
}

// waitBounded waits at most d for a value of ch (or its close).
func waitBounded[T any](ch <-chan T, d time.Duration) (T, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case v := <-ch:
		return v, true
	case <-t.C:
		var zero T
		return zero, false
	}
}

// rejectRebinding answers 403 to a request that arrived on a loopback
// address but names a host in Host or Origin that is neither a loopback
// host nor one of AllowedHosts (DNS rebinding).
func (h *HTTPHandler) rejectRebinding(w http.ResponseWriter, r *http.Request) bool {
	refused := h.rebinding.Check(r)
	if refused == nil {
		return false
	}
	http.Error(w, fmt.Sprintf("forbidden: %s %q is not a local %s (see --allowed-host)", refused.Header, refused.Value, refused.Noun()), http.StatusForbidden)
	return true
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
