package front

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// Workarounds of mark3labs/mcp-go v1.2.1's streamable HTTP transport
// (server/streamable_http.go), gathered here. Each names what mcp-go does,
// and has a canary test (mcpgo_compat_test.go) that fails when mcp-go
// stops doing it; the workaround can then go.
//
//   - handleGet opens a standalone stream for a GET without
//     Mcp-Session-Id and for any id it never made, and handleDelete "ends"
//     any id: rejectSession answers 400 / 404 as the transport asks
//     (TestFrontCanaryMCPGoStreamsForAnySession).
//   - A stateless server's handleGet opens a stream that belongs to no
//     session: serveStreamable answers 405 instead
//     (TestFrontCanaryMCPGoStatelessStream).
//   - handlePost answers a request without Mcp-Session-Id 404 ("Invalid
//     session ID"), which tells a client its session ended: preparePost
//     answers 400 (TestFrontCanaryMCPGoSessionlessRequest404).
//   - handlePost (validateModernRequest) asks a 2026-07-28 notification for
//     the _meta protocol version, which the protocol asks of requests
//     only: fillNotificationVersion supplies it from the
//     Mcp-Protocol-Version header
//     (TestFrontCanaryMCPGoNotificationNeedsMetaVersion).
//   - handlePost registers a session after writing the initialize answer,
//     so a DELETE can come first: endStreamableSession ends it again.
//
// The front's larger mechanisms over mcp-go keep files of their own, each
// saying what of mcp-go v1.2.1 it works around: coded JSON-RPC errors
// (stream.go: every handler error becomes -32603), session ids and idle
// expiry (sessions.go: ended ids stay valid, the sweeper leaves streams
// open; TestFrontCanaryMCPGoKeepsEndedSessionIDs,
// TestFrontCanaryMCPGoSweeperLeavesStreamOpen), invalid JSON-RPC ids
// (jsonrpc.go; TestFrontCanaryMCPGoServesInvalidIDs), one stdio session
// per process (stdio.go), task augmentation (front.go) and the JSON-RPC id
// a tool handler is not given (requestid.go;
// TestFrontCanaryMCPGoHandlerSharesMeta).

// endStreamableSession has mcp-go remove every trace of session id, as its
// DELETE does.
func (h *HTTPHandler) endStreamableSession(id string) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodDelete, StreamablePath, nil)
	if err != nil {
		return
	}
	req.Header.Set(mcpserver.HeaderKeySessionID, id)
	h.streamable.ServeHTTP(discard{header: http.Header{}}, req)
}

// discard is a ResponseWriter that drops the response.
type discard struct{ header http.Header }

func (d discard) Header() http.Header         { return d.header }
func (d discard) Write(p []byte) (int, error) { return len(p), nil }
func (d discard) WriteHeader(int)             {}

// serveStreamableGet serves the standalone stream of a session. It ends
// when the client leaves, when the session ends (DELETE, idle expiry,
// Shutdown: see sessionIDs) and when Shutdown closes the streams.
func (h *HTTPHandler) serveStreamableGet(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(h.streams, cancel)()
	if h.ids != nil && legacySessionRequest(r) {
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

// legacySessionRequest reports whether a GET or DELETE belongs to a
// protocol version with sessions, and is one that mcp-go would serve: it
// answers 2026-07-28 requests (405) and unknown versions (400) itself.
func legacySessionRequest(r *http.Request) bool {
	v := r.Header.Get(mcpgo.HeaderProtocolVersion)
	return !mcpgo.IsModernProtocol(v) && (v == "" || mcpgo.IsValidProtocolVersion(v))
}

// rejectSession answers a GET or DELETE of a stateful handler that does
// not name a live session, as the streamable HTTP transport wants (since
// 2025-03-26): 400 without Mcp-Session-Id, 404 when the id is unknown or
// its session ended. mcp-go would open a stream for, or "end", any session
// a GET or DELETE names, or none.
func (h *HTTPHandler) rejectSession(w http.ResponseWriter, r *http.Request) bool {
	if h.ids == nil || !legacySessionRequest(r) {
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

// preparePost looks at the body of a POST to the streamable HTTP
// endpoint (nil when it could not be read) and reports whether it is an
// initialize that creates a session:
//
//   - a notification of a 2026-07-28 client gets the protocol version of its
//     Mcp-Protocol-Version header in _meta when it has none (see
//     fillNotificationVersion);
//   - in a stateful handler, a message before 2026-07-28 other than
//     initialize or a response, without Mcp-Session-Id, is answered 400
//     (mcp-go answers 404, which tells a client its session ended).
//
// ok is false when it answered the request.
func (h *HTTPHandler) preparePost(w http.ResponseWriter, r *http.Request, body []byte) (init, ok bool) {
	headerVersion := r.Header.Get(mcpgo.HeaderProtocolVersion)
	if body == nil {
		return false, true
	}
	if mcpgo.IsModernProtocol(headerVersion) {
		body = fillNotificationVersion(body, headerVersion)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		return false, true
	}
	if h.ids == nil {
		return false, true
	}
	// mcp-go mints a session for any initialize, with Mcp-Session-Id or not.
	// A skim (skim.go) serves the common case; what the front acts on is
	// decided by encoding/json.
	noSession := r.Header.Get(mcpserver.HeaderKeySessionID) == ""
	method, needsSession := skimSessionless(body)
	if needsSession && noSession || method == string(mcpgo.MethodInitialize) {
		method, needsSession = sessionless(body)
	}
	if needsSession && noSession {
		http.Error(w, "Bad Request: Mcp-Session-Id header is required", http.StatusBadRequest)
		return false, false
	}
	return method == string(mcpgo.MethodInitialize), true
}

// sessionless looks at a POSTed body sent without a 2026-07-28
// Mcp-Protocol-Version. It returns the message's method, and whether it is
// a message that must carry a session id: a
// request or notification other than initialize whose _meta names no
// protocol version from 2026-07-28 on. Anything else (initialize,
// responses, 2026-07-28 messages, bodies that are not one JSON object) is
// left to mcp-go; an initialize whose _meta names a 2026-07-28 version is
// not "initialize" here, as mcp-go mints no session for it.
func sessionless(body []byte) (method string, needsSession bool) {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Meta *mcpgo.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return "", false
	}
	if mcpgo.IsModernProtocol(msg.Params.Meta.ProtocolVersion()) {
		return "", false
	}
	return msg.Method, msg.Method != "" && msg.Method != string(mcpgo.MethodInitialize)
}

// fillNotificationVersion fixes up the notification of a 2026-07-28
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
func fillNotificationVersion(body []byte, version string) []byte {
	// A request (an id that is not null) or a message without a string
	// method is returned as is, malformed or not: a skim (skim.go) tells
	// without decoding the body.
	if top, ok := skimMembers(body); ok {
		method, id := lastMember(top, "method"), lastMember(top, "id")
		if method == nil || body[method.start] != '"' || (id != nil && string(body[id.start:id.end]) != "null") {
			return body
		}
	}
	return fillNotification(body, version)
}

// fillNotification is fillNotificationVersion without the skim.
func fillNotification(body []byte, version string) []byte {
	top, ok := topMembers(body)
	if !ok {
		return body
	}
	method, id, params := lastMember(top, "method"), lastMember(top, "id"), lastMember(top, "params")
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
		return splice(body, open+1, open+1, slices.Concat([]byte(`"params":{"_meta":`), meta, []byte(`},`)))
	case null(body, params):
		return splice(body, params.start, params.end, slices.Concat([]byte(`{"_meta":`), meta, []byte(`}`)))
	case body[params.start] != '{':
		return body
	}
	pm, _ := topMembers(body[params.start:params.end])
	m := lastMember(pm, "_meta")
	switch {
	case m == nil:
		ins := slices.Concat([]byte(`"_meta":`), meta)
		if len(pm) > 0 {
			ins = append(ins, ',')
		}
		return splice(body, params.start+1, params.start+1, ins)
	case null(body[params.start:], m):
		return splice(body, params.start+m.start, params.start+m.end, meta)
	case body[params.start+m.start] != '{':
		return body
	}
	start := params.start + m.start
	mm, _ := topMembers(body[start : params.start+m.end])
	for _, f := range mm {
		if f.key == mcpgo.MetaKeyProtocolVersion {
			return body
		}
	}
	if len(mm) > 0 {
		entry = append(entry, ',')
	}
	return splice(body, start+1, start+1, entry)
}

// lastMember returns the last member named key, as encoding/json matches
// struct fields (case-insensitively; the last one wins), or nil.
func lastMember(members []member, key string) *member {
	for i := len(members) - 1; i >= 0; i-- {
		if strings.EqualFold(members[i].key, key) {
			return &members[i]
		}
	}
	return nil
}
