package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
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
)

// HTTPOptions configure an HTTPHandler. A nil *HTTPOptions is the zero value.
type HTTPOptions struct {
	// BearerToken, when set, must be presented as "Authorization: Bearer
	// <token>" on every request; it is compared in constant time, and any
	// other request gets 401 with WWW-Authenticate. Empty: no authentication.
	BearerToken string
	// DisableLocalhostProtection turns off DNS-rebinding protection. By
	// default a request that arrived on a loopback address must name a
	// loopback host (localhost, 127.0.0.1, [::1], any port) in Host and, when
	// it sends Origin, in Origin; others get 403. Requests that arrived on
	// other addresses are not checked.
	DisableLocalhostProtection bool
	// Stateless serves streamable HTTP without sessions: no Mcp-Session-Id,
	// and no memory of initialize between requests. False: initialize mints
	// a session id that later requests (POST, the GET stream, DELETE) must
	// carry: 400 without one, 404 when it is unknown or ended. DELETE ends a
	// session and closes its GET streams. 2026-07-28 requests are stateless
	// either way.
	Stateless bool
	// KeepAlive, when positive, is the interval of the pings sent on the
	// streams that stay open (streamable HTTP GET, legacy SSE). Zero: none.
	KeepAlive time.Duration
	// SessionIdleTTL, when positive, drops the state of streamable HTTP
	// sessions idle that long. Zero: kept until DELETE or Shutdown.
	SessionIdleTTL time.Duration
	// MaxMessageBytes bounds the body of a POST; a longer one is refused
	// (JSON-RPC parse error, HTTP 400). Zero means DefaultMaxMessageBytes;
	// negative means no bound.
	MaxMessageBytes int64
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
	sessions   sync.Map         // legacy SSE session id → *frontSSEBinding
	ids        *frontSessionIDs // streamable HTTP sessions; nil when Stateless

	life        *frontLife // tool calls end when life.stop does
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
	stop, stopCalls := context.WithCancel(context.Background())
	h.life, h.stopCalls = &frontLife{stop: stop}, stopCalls
	h.streams, h.stopStreams = context.WithCancel(context.Background())

	sopts := []mcpserver.StreamableHTTPOption{
		mcpserver.WithStreamableHTTPLogger(f.log),
		mcpserver.WithDisableLocalhostProtection(h.opts.DisableLocalhostProtection),
		mcpserver.WithHeartbeatInterval(h.opts.KeepAlive),
	}
	if streamable { // it starts a sweeper
		sopts = append(sopts, mcpserver.WithSessionIdleTTL(h.opts.SessionIdleTTL))
	}
	if h.opts.Stateless {
		sopts = append(sopts, mcpserver.WithStateLess(true))
	} else {
		// WithStateful's manager, watched: see frontSessionIDs.
		h.ids = newFrontSessionIDs()
		sopts = append(sopts, mcpserver.WithSessionIdManager(h.ids))
	}
	h.streamable = mcpserver.NewStreamableHTTPServer(f.server, sopts...)

	ssopts := []mcpserver.SSEOption{
		mcpserver.WithSSEEndpoint(SSEPath),
		mcpserver.WithMessageEndpoint(SSEMessagePath),
		mcpserver.WithSSEDisableLocalhostProtection(h.opts.DisableLocalhostProtection),
	}
	if h.opts.KeepAlive > 0 {
		ssopts = append(ssopts, mcpserver.WithKeepAliveInterval(h.opts.KeepAlive))
	}
	h.sse = mcpserver.NewSSEServer(f.server, ssopts...)
	h.sseStream, h.sseMessage = h.sse.SSEHandler(), h.sse.MessageHandler()
	return h
}

// ServeHTTP checks the request's Host and Origin, then its bearer token,
// and hands it to mcp-go's transport with the front's bookkeeping.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.opts.DisableLocalhostProtection && frontRejectRebinding(w, r) {
		return
	}
	token, hasToken := frontBearer(r.Header.Get("Authorization"))
	if h.opts.BearerToken != "" && (!hasToken || !frontTokenEqual(token, h.opts.BearerToken)) {
		challenge := `Bearer realm="mcp"`
		if hasToken {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	ctx := context.WithValue(r.Context(), frontLifeKey{}, h.life)
	if hasToken {
		ctx = context.WithValue(ctx, frontTokenKey{}, frontToken{token})
	}
	r = r.WithContext(ctx)
	if r.Method == http.MethodPost && h.opts.MaxMessageBytes > 0 {
		r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxMessageBytes)
	}

	switch {
	case r.URL.Path == StreamablePath && h.serveMCP:
		h.serveStreamable(w, r)
	case r.URL.Path == SSEPath && h.serveSSE:
		h.serveSSEStream(w, r)
	case r.URL.Path == SSEMessagePath && h.serveSSE:
		h.serveSSEMessage(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (h *HTTPHandler) serveStreamable(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		if h.closing.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		h.serveStreamableGet(w, r)
		return
	case http.MethodDelete:
		if h.rejectSession(w, r) {
			return
		}
		h.streamable.ServeHTTP(w, r)
		return
	case http.MethodPost:
	default:
		h.streamable.ServeHTTP(w, r)
		return
	}

	if !h.preparePost(w, r) {
		return
	}
	ctx := r.Context()
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
	h.streamable.ServeHTTP(rw, r.WithContext(context.WithValue(ctx, frontStreamKey{}, st)))
	rw.finish()
}

// serveStreamableGet serves the standalone stream of a session. It ends
// when the client leaves, when the session ends (DELETE, idle expiry,
// Shutdown: see frontSessionIDs) and when Shutdown closes the streams.
func (h *HTTPHandler) serveStreamableGet(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(h.streams, cancel)()
	if h.ids != nil && frontLegacySessionRequest(r) {
		id := r.Header.Get(mcpserver.HeaderKeySessionID)
		if id != "" {
			// Watch first, then check: a session that ends in between is
			// either seen ended here or closes this stream.
			defer h.ids.watch(id, cancel)()
		}
		if h.rejectSession(w, r) {
			return
		}
	}
	h.streamable.ServeHTTP(w, r.WithContext(ctx))
}

// frontLegacySessionRequest reports whether a GET or DELETE belongs to a
// protocol version with sessions, and is one that mcp-go would serve: it
// answers 2026-07-28 requests (405) and unknown versions (400) itself.
func frontLegacySessionRequest(r *http.Request) bool {
	v := r.Header.Get(mcpgo.HeaderProtocolVersion)
	return !mcpgo.IsModernProtocol(v) && (v == "" || mcpgo.IsValidProtocolVersion(v))
}

// rejectSession answers a GET or DELETE of a stateful handler that does
// not name a live session, as the streamable HTTP transport wants (since
// 2025-03-26): 400 without Mcp-Session-Id, 404 when the id is unknown or
// its session ended. mcp-go would open a stream for, or "end", any session
// a GET or DELETE names, or none.
func (h *HTTPHandler) rejectSession(w http.ResponseWriter, r *http.Request) bool {
	if h.ids == nil || !frontLegacySessionRequest(r) {
		return false
	}
	id := r.Header.Get(mcpserver.HeaderKeySessionID)
	if id == "" {
		http.Error(w, "Bad Request: Mcp-Session-Id header is required", http.StatusBadRequest)
		return true
	}
	if terminated, err := h.ids.Validate(id); err != nil || terminated {
		http.Error(w, "Session not found", http.StatusNotFound)
		return true
	}
	return false
}

// preparePost reads the body of a POST that the front has to look at, and
// gives the request a body that replays it:
//
//   - a notification of a 2026-07-28 client gets the protocol version of its
//     Mcp-Protocol-Version header in _meta when it has none (see
//     frontFillNotificationVersion);
//   - in a stateful handler, a message before 2026-07-28 other than
//     initialize or a response, without Mcp-Session-Id, is answered 400
//     (mcp-go answers 404, which tells a client its session ended).
//
// It reports false when it answered the request.
func (h *HTTPHandler) preparePost(w http.ResponseWriter, r *http.Request) bool {
	headerVersion := r.Header.Get(mcpgo.HeaderProtocolVersion)
	modern := mcpgo.IsModernProtocol(headerVersion)
	noSession := h.ids != nil && r.Header.Get(mcpserver.HeaderKeySessionID) == ""
	if (!modern && !noSession) || r.Body == nil {
		return true
	}
	body, err := io.ReadAll(r.Body)
	switch {
	case err != nil:
		// Such as a body over MaxMessageBytes: replayed after the bytes
		// read, for mcp-go to answer as it does.
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), frontErrReader{err}))
		return true
	case modern:
		body = frontFillNotificationVersion(body, headerVersion)
	case frontNeedsSession(body):
		http.Error(w, "Bad Request: Mcp-Session-Id header is required", http.StatusBadRequest)
		return false
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return true
}

type frontErrReader struct{ err error }

func (e frontErrReader) Read([]byte) (int, error) { return 0, e.err }

// frontNeedsSession reports whether a POSTed body, sent without
// Mcp-Session-Id and without a 2026-07-28 Mcp-Protocol-Version, is a
// message that must carry a session id: a request or notification other
// than initialize whose _meta names no protocol version from 2026-07-28
// on. Anything else (initialize, responses, 2026-07-28 messages, bodies
// that are not one JSON object) is left to mcp-go.
func frontNeedsSession(body []byte) bool {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Meta *mcpgo.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return false
	}
	return msg.Method != "" && msg.Method != string(mcpgo.MethodInitialize) &&
		!mcpgo.IsModernProtocol(msg.Params.Meta.ProtocolVersion())
}

// frontFillNotificationVersion fixes up the notification of a 2026-07-28
// client for mcp-go: protocol version 2026-07-28 requires the _meta
// protocol version of requests only (the official Go SDK sends
// notifications/cancelled with the Mcp-Protocol-Version header alone, and
// mcp-go's own client sends notifications without _meta), but mcp-go's
// streamable HTTP applies the check of requests to notifications too and
// answers 400, after which the Go SDK closes its session. When body is a
// notification (a method, no id or a null id) whose params lack the _meta
// field io.modelcontextprotocol/protocolVersion, that field is inserted
// with version, the request's Mcp-Protocol-Version, creating params and
// _meta when absent or null. Every other byte is kept; anything else,
// including a _meta that names a version (even a wrong one), is returned
// as is. mcp-go then serves the notification as it would with the field:
// 202, and for notifications/cancelled it cancels the in-flight
// 2026-07-28 request with that id (which mcp-go keys by id alone).
func frontFillNotificationVersion(body []byte, version string) []byte {
	top, ok := frontMembers(body)
	if !ok {
		return body
	}
	method, id, params := frontLast(top, "method"), frontLast(top, "id"), frontLast(top, "params")
	if method == nil || body[method.start] != '"' || (id != nil && string(body[id.start:id.end]) != "null") {
		return body
	}
	key, _ := json.Marshal(mcpgo.MetaKeyProtocolVersion)
	val, _ := json.Marshal(version)
	entry := slices.Concat(key, []byte(":"), val)
	meta := slices.Concat([]byte(`{`), entry, []byte(`}`))
	switch {
	case params == nil:
		open := bytes.IndexByte(body, '{')
		return frontSplice(body, open+1, open+1, slices.Concat([]byte(`"params":{"_meta":`), meta, []byte(`},`)))
	case frontNull(body, params):
		return frontSplice(body, params.start, params.end, slices.Concat([]byte(`{"_meta":`), meta, []byte(`}`)))
	case body[params.start] != '{':
		return body
	}
	pm, _ := frontMembers(body[params.start:params.end])
	m := frontLast(pm, "_meta")
	switch {
	case m == nil:
		ins := slices.Concat([]byte(`"_meta":`), meta)
		if len(pm) > 0 {
			ins = append(ins, ',')
		}
		return frontSplice(body, params.start+1, params.start+1, ins)
	case frontNull(body[params.start:], m):
		return frontSplice(body, params.start+m.start, params.start+m.end, meta)
	case body[params.start+m.start] != '{':
		return body
	}
	start := params.start + m.start
	mm, _ := frontMembers(body[start : params.start+m.end])
	for _, f := range mm {
		if f.key == mcpgo.MetaKeyProtocolVersion {
			return body
		}
	}
	if len(mm) > 0 {
		entry = append(entry, ',')
	}
	return frontSplice(body, start+1, start+1, entry)
}

// frontLast returns the last member named key, as encoding/json matches
// struct fields (case-insensitively; the last one wins), or nil.
func frontLast(members []frontMember, key string) *frontMember {
	for i := len(members) - 1; i >= 0; i-- {
		if strings.EqualFold(members[i].key, key) {
			return &members[i]
		}
	}
	return nil
}

func frontNull(b []byte, m *frontMember) bool { return string(b[m.start:m.end]) == "null" }

// frontSplice returns b with b[from:to] replaced by s, in a new slice.
func frontSplice(b []byte, from, to int, s []byte) []byte {
	return slices.Concat(b[:from], s, b[to:])
}

// frontSessionIDs is mcp-go's stateful session id manager
// (InsecureStatefulSessionIdManager, as WithStateful installs it) that also
// closes the GET streams of a session when mcp-go terminates it: on DELETE,
// on idle expiry and on Shutdown. mcp-go forgets the session then but
// leaves its GET stream open, and so Shutdown waited for it. The streams
// are watched only while they are open.
type frontSessionIDs struct {
	*mcpserver.InsecureStatefulSessionIdManager

	mu      sync.Mutex
	streams map[string]map[*context.CancelFunc]struct{} // session id → its open GET streams
}

func newFrontSessionIDs() *frontSessionIDs {
	return &frontSessionIDs{
		InsecureStatefulSessionIdManager: &mcpserver.InsecureStatefulSessionIdManager{},
		streams:                          make(map[string]map[*context.CancelFunc]struct{}),
	}
}

// Terminate ends the session id, then the session's open GET streams.
func (m *frontSessionIDs) Terminate(id string) (notAllowed bool, err error) {
	notAllowed, err = m.InsecureStatefulSessionIdManager.Terminate(id)
	if err != nil || notAllowed {
		return notAllowed, err
	}
	m.mu.Lock()
	streams := m.streams[id]
	delete(m.streams, id)
	m.mu.Unlock()
	for stop := range streams {
		(*stop)()
	}
	return false, nil
}

// watch has the GET stream that stop ends closed when session id ends,
// until the returned function is called.
func (m *frontSessionIDs) watch(id string, stop context.CancelFunc) (unwatch func()) {
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

// frontSSEBinding is a legacy SSE session as the front knows it: the
// bookkeeping of its stream, and the life of its tool calls, which mcp-go
// runs detached from the POSTs that carried them and which end with the
// stream. mcp-go makes the session id up inside the GET handler: the
// OnRegisterSession hook binds it.
type frontSSEBinding struct {
	h    *HTTPHandler
	st   *frontStream
	life *frontLife
	id   string
}

type frontSSEBindKey struct{}

func (b *frontSSEBinding) bind(id string) {
	b.id = id
	b.h.sessions.Store(id, b)
}

func (h *HTTPHandler) serveSSEStream(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && h.closing.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	stop, end := context.WithCancel(h.life.stop)
	defer end()
	b := &frontSSEBinding{h: h, st: newFrontStream(h.f.maxPending, true), life: &frontLife{stop: stop}}
	rw := newFrontResponseWriter(w, b.st)
	h.sseStream.ServeHTTP(rw, r.WithContext(context.WithValue(r.Context(), frontSSEBindKey{}, b)))
	rw.finish()
	if b.id != "" {
		h.sessions.CompareAndDelete(b.id, b)
	}
}

// serveSSEMessage gives a POSTed message the stream of its session, where
// its response will be written, and the session's life.
func (h *HTTPHandler) serveSSEMessage(w http.ResponseWriter, r *http.Request) {
	if v, ok := h.sessions.Load(r.URL.Query().Get("sessionId")); ok {
		b := v.(*frontSSEBinding)
		ctx := context.WithValue(r.Context(), frontStreamKey{}, b.st)
		r = r.WithContext(context.WithValue(ctx, frontLifeKey{}, b.life))
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
		n += v.(*frontSSEBinding).st.openCount()
		return true
	})
	return n
}

// frontRejectRebinding answers 403 to a request that arrived on a loopback
// address but names another host in Host or Origin (DNS rebinding).
func frontRejectRebinding(w http.ResponseWriter, r *http.Request) bool {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil || !frontLoopback(local.String()) {
		return false
	}
	if !frontLoopback(r.Host) {
		http.Error(w, fmt.Sprintf("forbidden: Host %q is not a loopback host", r.Host), http.StatusForbidden)
		return true
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !frontLoopback(u.Host) {
			http.Error(w, fmt.Sprintf("forbidden: Origin %q is not a loopback origin", origin), http.StatusForbidden)
			return true
		}
	}
	return false
}

// frontLoopback reports whether hostport (a host with or without a port)
// is localhost or a loopback IP address.
func frontLoopback(hostport string) bool {
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

// frontBearer returns the token of an "Authorization: Bearer" header.
func frontBearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// frontTokenEqual compares in constant time, lengths included.
func frontTokenEqual(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}
