package mcp

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
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
	// a session id that later requests must carry (404 when unknown) and
	// DELETE ends. 2026-07-28 requests are stateless either way.
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
	sessions   sync.Map // legacy SSE session id → *frontSSEBinding

	life        *frontLife // tool calls end when life.stop does
	stopCalls   context.CancelFunc
	streams     context.Context // ends the 2026-07-28 subscriptions/listen streams
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
		sopts = append(sopts, mcpserver.WithStateful(true))
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
	if r.Method != http.MethodPost {
		if r.Method == http.MethodGet && h.closing.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		h.streamable.ServeHTTP(w, r)
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
