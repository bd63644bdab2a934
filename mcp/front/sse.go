package front

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// The legacy SSE transport (protocol 2024-11-05)
//
// GET /sse opens a session: its stream's first event names the endpoint
// where the client POSTs its messages (/message?sessionId=…). Each message
// is answered 202 at once and its answer written on the stream. The
// session lives as long as its stream: the client leaving, the idle TTL
// without a message (the stream is closed) and Shutdown end it; its tool
// calls end with it.

// sseSession is a legacy SSE session.
type sseSession struct {
	id     string
	p      *peer
	es     *eventStream
	owner  string // who opened it (HTTPOptions.Resource), "" when callers are not identified
	entry  *sessionEntry
	life   context.Context // its tool calls end when it does
	open   atomic.Int64    // messages being answered
	active atomic.Int64    // unix nanoseconds of the last message POSTed, or of the stream's start
}

func (h *HTTPHandler) serveSSEStream(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeText(w, http.StatusMethodNotAllowed, "Method not allowed")
		return
	}
	if h.closing.Load() {
		writeText(w, http.StatusServiceUnavailable, "shutting down")
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(h.streams, cancel)()
	entry, why := h.count.admitSSE(callerFrom(r.Context()).sessions, cancel)
	if why != admitted {
		h.refuse(w, why, "SSE stream")
		return
	}
	defer h.count.dropSSE(entry)
	life, end := context.WithCancel(h.life)
	defer end()
	s := &sseSession{id: rand.Text(), p: &peer{}, entry: entry, life: life}
	if ident, ok := CallerIdentity(r.Context()); ok {
		s.owner = ident.principal()
	}
	s.active.Store(time.Now().UnixNano())
	h.sse.Store(s.id, s)
	defer h.sse.Delete(s.id)
	s.es = newEventStream(w)
	defer s.es.close() // answers still being written are dropped
	s.es.writeRaw("event: endpoint\ndata: ", []byte(SSEMessagePath+"?sessionId="+url.QueryEscape(s.id)), "\r\n\r\n")
	defer h.f.changes.add(func(frame []byte) { s.es.send(frame) })()
	if ttl := h.opts.SessionIdleTTL; ttl > 0 {
		go s.expire(ctx, ttl, cancel, h)
	}
	s.es.serve(ctx, h.opts.KeepAlive, nil)
}

// expire ends the session's stream (end) once no message was POSTed in it
// for ttl and no message of it is being answered; it returns when ctx ends.
func (s *sseSession) expire(ctx context.Context, ttl time.Duration, end context.CancelFunc, h *HTTPHandler) {
	timer := time.NewTimer(ttl)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		idle := time.Since(time.Unix(0, s.active.Load()))
		if idle >= ttl && s.open.Load() == 0 {
			h.f.log.Info("mcp front: SSE session idle, closing its stream", "idle_ttl", ttl.String())
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

// serveSSEMessage answers a message POSTed to a legacy SSE session: 202,
// then the answer on the session's stream. A session is its opener's:
// another caller's message to it finds no such session (MCP security best
// practices, "Session Hijacking").
func (h *HTTPHandler) serveSSEMessage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeFrame(w, http.StatusBadRequest, errorResponse(mcpgo.INVALID_REQUEST, "Method not allowed"))
		return
	}
	sid := r.URL.Query().Get("sessionId")
	if sid == "" {
		writeFrame(w, http.StatusBadRequest, errorResponse(mcpgo.INVALID_PARAMS, "Missing sessionId"))
		return
	}
	v, ok := h.sse.Load(sid)
	if !ok {
		writeFrame(w, http.StatusBadRequest, errorResponse(mcpgo.INVALID_PARAMS, "Invalid session ID"))
		return
	}
	s := v.(*sseSession)
	if ident, ok := CallerIdentity(r.Context()); s.owner != "" && (!ok || ident.principal() != s.owner) {
		writeText(w, http.StatusNotFound, "Session not found")
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
	s.active.Store(time.Now().UnixNano())
	if m.method != string(mcpgo.MethodNotificationInitialized) && m.method != string(mcpgo.MethodInitialize) {
		h.count.usedSSE(s.entry)
	}
	w.WriteHeader(http.StatusAccepted)
	// Answered detached from this POST: the session's stream carries it.
	ctx := context.WithoutCancel(r.Context())
	x := &exchange{p: s.p, calls: &h.calls, scope: "sse:" + s.id + ":", life: s.life, notify: s.es.write, stream: true}
	s.open.Add(1)
	h.running.Add(1)
	go func() {
		defer h.running.Done()
		defer s.open.Add(-1)
		if frame := h.f.serve(ctx, m, x); frame != nil {
			s.es.write(frame)
		}
	}()
}
