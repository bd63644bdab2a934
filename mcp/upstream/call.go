package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Causes of a call's context ending other than the caller.
var (
	errTimeout   = errors.New("call timeout")
	errAbandoned = errors.New("upstream closing")
)

type requestIDsKey struct{}

// WithRequestIDs returns ctx for a CallTool that tells record the JSON-RPC
// id of each tools/call request it sends (one per attempt), for a trace
// span's jsonrpc.request.id.
func WithRequestIDs(ctx context.Context, record func(id int64)) context.Context {
	return context.WithValue(ctx, requestIDsKey{}, record)
}

// CallTool calls tool name of the upstream and returns the raw
// CallToolResult object (isError results included: they are results).
//
// arguments must be a JSON object (nil or empty: {}); it is sent as is
// (compacted, with <, > and & escaped as JSON allows), never through
// float64. meta, when not empty, is sent as the request's _meta (for
// example {"progressToken": …}; progress then reaches
// Options.OnNotification). header holds extra HTTP headers for this
// call, such as a forwarded "Authorization: Bearer …"; it overrides
// Config.Headers and is ignored by stdio and in-process upstreams.
//
// The call ends with the caller's ctx, CallTimeout, or Close; once the
// request was sent, notifications/cancelled is sent upstream. Errors:
// *Error for a JSON-RPC error answer; otherwise see ErrUnavailable,
// ErrLost and ErrUnauthorized; a call ended by ctx wraps ctx.Err().
//
// A streamable HTTP upstream that dropped the session (404) is
// re-initialized and the call retried once, since it did not reach the tool.
//
// A 2026-07-28 upstream (era.go) gets the _meta and headers that revision
// asks for; a -32022 moves the connection to another version the server
// names and sends the call again, once (it was refused, not run); when
// there is none the call fails with ErrUnavailable and the next connection
// probes again. Its result's resultType is read: an input_required result
// asking only for URLs to open is returned as the *Error a 2025-11-25
// server answers for them (-32042 with data.elicitations, each
// elicitationId the input request's key), so that callers handle both eras
// alike; one asking for anything else is an *InputRequiredError naming it;
// an unknown resultType fails with ErrLost.
//
// A 2025-11-25 (or earlier) upstream may send elicitation/create during
// the call: see WithElicitation for who answers it.
func (u *Upstream) CallTool(ctx context.Context, name string, arguments json.RawMessage, meta map[string]any, header http.Header) (json.RawMessage, error) {
	return u.CallToolResume(ctx, name, arguments, meta, header, nil)
}

// Resume continues a call that a 2026-07-28 upstream answered with
// input_required (*InputRequiredError): the answers to its input requests,
// by key, and the requestState it gave (MCP 2026-07-28, multi round-trip
// requests).
type Resume struct {
	// InputResponses maps each input request's key to its answer (for a
	// URL elicitation the user agreed to open: {"action":"accept"}).
	InputResponses map[string]json.RawMessage
	// RequestState is InputRequiredError.RequestState, sent back as it is
	// ("": none).
	RequestState string
}

// CallToolResume is CallTool sending the call again with r's
// inputResponses and requestState (nil r: CallTool). They are sent only to
// an upstream that speaks 2026-07-28 now; to one that no longer does (its
// server changed era) the call is sent afresh.
func (u *Upstream) CallToolResume(ctx context.Context, name string, arguments json.RawMessage, meta map[string]any, header http.Header, r *Resume) (json.RawMessage, error) {
	params, err := callParams(name, arguments, meta)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, &callError{extra: err, msg: fmt.Sprintf("call to %q not sent: %v", name, err)}
	}
	conn, err := u.acquire()
	if err != nil {
		return nil, err
	}
	defer u.release()
	if r != nil && conn.isModern() {
		if params, err = withResume(params, r); err != nil {
			return nil, err
		}
	}
	if f, ok := ctx.Value(elicitKey{}).(ElicitationFunc); ok && !conn.isModern() {
		// Server requests that cannot name their call (stdio, SSE) find it
		// here while it is the only one (WithElicitation).
		done := u.trackElicitor(ctx, f)
		defer done()
	}

	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopAbandon := context.AfterFunc(u.callsCtx, func() { cancel(errAbandoned) })
	defer stopAbandon()
	if u.cfg.CallTimeout > 0 {
		t := time.AfterFunc(u.cfg.CallTimeout, func() { cancel(errTimeout) })
		defer t.Stop()
	}

	debug := u.log.Enabled(ctx, slog.LevelDebug)
	renegotiated, relisted := false, false
	for attempt := 0; ; attempt++ {
		epoch := conn.epoch.Load()
		var r sendResult
		start := time.Now()
		if conn.tasks.needsTask(name) {
			r = conn.sendTask(callCtx, name, params, header) // tasks.go
		} else {
			r = conn.send(callCtx, string(mcpgo.MethodToolsCall), params, header)
		}
		if record, ok := ctx.Value(requestIDsKey{}).(func(int64)); ok && r.id != 0 {
			record(r.id)
		}
		if debug {
			u.log.Debug("tools/call sent", "tool", name, "attempt", attempt+1, "took", time.Since(start).String(),
				"answered", r.err == nil, "http_status", r.status)
		}
		if conn.isModern() {
			if e := answeredError(r); e != nil {
				switch e.Code {
				case codeUnsupportedVersion:
					if !renegotiated && conn.renegotiate(e, r.version) {
						renegotiated = true
						continue
					}
					return nil, u.unavailable(fmt.Sprintf("the server refused protocol version %s of the call (%d %s)", conn.protocolOf(), e.Code, e.Message))
				case codeHeaderMismatch:
					// The x-mcp-header parameters may have changed: read
					// the list again and send the call again, once (spec:
					// streamable HTTP, client behavior). It was refused,
					// not run.
					u.triggerRelist()
					if !relisted && r.status == http.StatusBadRequest {
						relisted = true
						if _, err := conn.listTools(callCtx); err == nil {
							continue
						}
					}
				}
				if r.err != nil {
					return nil, e // an HTTP error status with a JSON-RPC error: refused
				}
			}
		}
		if r.err == nil {
			return u.callResult(conn, name, r)
		}
		if callCtx.Err() != nil {
			return nil, u.callEnded(ctx, callCtx, conn, name, header, r)
		}
		if attempt == 0 && conn.kind == kindStreamable && errors.Is(r.err, mcptransport.ErrSessionTerminated) && !conn.isModern() {
			// The server does not know the session: the call did not reach
			// the tool. Start a new session and send it again, once.
			u.log.Debug("the server dropped the session: re-initializing and sending the call again", "tool", name)
			if err := conn.reinitialize(callCtx, epoch); err != nil {
				if callCtx.Err() != nil {
					r.sent = false
					return nil, u.callEnded(ctx, callCtx, conn, name, header, r)
				}
				return nil, u.unavailable("the server dropped the session and re-initializing failed")
			}
			continue
		}
		return nil, u.callFailed(conn, name, r)
	}
}

// callParams builds the params of tools/call.
func callParams(name string, arguments json.RawMessage, meta map[string]any) (json.RawMessage, error) {
	if name == "" {
		return nil, errors.New("mcp: CallTool: empty tool name")
	}
	args := bytes.TrimSpace(arguments)
	switch {
	case len(args) == 0, string(args) == "null":
		args = json.RawMessage(`{}`)
	case args[0] != '{':
		return nil, fmt.Errorf("mcp: CallTool: the arguments of %q are not a JSON object", name)
	}
	// What json.Marshal writes for {name, arguments, _meta (omitempty)},
	// in one pass over the arguments (compacted and checked at once)
	// instead of two.
	quoted, _ := json.Marshal(name) // a string always encodes
	var metaJSON []byte
	var metaErr error // reported after the arguments' own error, as before
	if len(meta) > 0 {
		metaJSON, metaErr = json.Marshal(meta)
	}
	buf := bytes.NewBuffer(make([]byte, 0, len(`{"name":,"arguments":,"_meta":}`)+len(quoted)+len(args)+len(metaJSON)))
	buf.WriteString(`{"name":`)
	buf.Write(quoted)
	buf.WriteString(`,"arguments":`)
	start := buf.Len()
	if json.Compact(buf, args) != nil {
		return nil, fmt.Errorf("mcp: CallTool: the arguments of %q are not a JSON object", name)
	}
	if needsHTMLEscape(buf.Bytes()[start:]) {
		// json.Marshal escapes <, > and & (and U+2028, U+2029) in strings.
		var esc bytes.Buffer
		json.HTMLEscape(&esc, buf.Bytes()[start:])
		buf.Truncate(start)
		buf.Write(esc.Bytes())
	}
	if metaErr != nil {
		return nil, fmt.Errorf("mcp: CallTool: _meta of %q: %w", name, metaErr)
	}
	if len(meta) > 0 {
		buf.WriteString(`,"_meta":`)
		buf.Write(metaJSON)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// withResume adds r's inputResponses and requestState to tools/call params.
func withResume(params json.RawMessage, r *Resume) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(params, &top); err != nil {
		return nil, err
	}
	if len(r.InputResponses) > 0 {
		b, err := json.Marshal(r.InputResponses)
		if err != nil {
			return nil, fmt.Errorf("mcp: CallToolResume: inputResponses: %w", err)
		}
		top["inputResponses"] = b
	}
	if r.RequestState != "" {
		top["requestState"], _ = json.Marshal(r.RequestState)
	}
	return json.Marshal(top)
}

// needsHTMLEscape reports whether JSON holds a byte json.Marshal escapes
// in strings: <, >, & or the start of U+2028 / U+2029.
func needsHTMLEscape(b []byte) bool {
	return bytes.IndexByte(b, '<') >= 0 || bytes.IndexByte(b, '>') >= 0 || bytes.IndexByte(b, '&') >= 0 ||
		bytes.Contains(b, []byte("\xe2\x80\xa8")) || bytes.Contains(b, []byte("\xe2\x80\xa9"))
}

// callResult turns a response into the result or an *Error.
func (u *Upstream) callResult(conn *connection, name string, r sendResult) (json.RawMessage, error) {
	if r.resp.Error != nil {
		return nil, upstreamError(r.resp.Error)
	}
	res := bytes.TrimSpace(r.resp.Result)
	if len(res) == 0 || res[0] != '{' {
		if r.status >= 400 {
			return nil, u.statusError(name, r.status)
		}
		return nil, &callError{class: ErrLost, msg: fmt.Sprintf("upstream %q answered %q with a malformed result", u.Name(), name)}
	}
	if conn.isModern() {
		switch t := resultType(res); t {
		case "", string(mcpgo.ResultTypeComplete):
		case string(mcpgo.ResultTypeInputRequired):
			return nil, u.inputRequired(name, res)
		default:
			return nil, &callError{class: ErrLost, msg: fmt.Sprintf("upstream %q answered %q with resultType %q, which the bridge does not know", u.Name(), name, t)}
		}
	}
	return r.resp.Result, nil
}

// callEnded is the error of a call whose context ended.
func (u *Upstream) callEnded(ctx, callCtx context.Context, conn *connection, name string, header http.Header, r sendResult) error {
	cause := context.Cause(callCtx)
	reason := "cancelled by the client"
	switch {
	case ctx.Err() != nil:
	case errors.Is(cause, errTimeout):
		reason = "timed out"
	case errors.Is(cause, errAbandoned):
		reason = "the bridge is shutting down"
	}
	if r.sent {
		conn.cancelUpstream(ctx, header, r.id, reason)
	}
	switch {
	case ctx.Err() != nil:
		return &callError{extra: ctx.Err(), msg: fmt.Sprintf("call to %q on upstream %q: %v", name, u.Name(), ctx.Err())}
	case errors.Is(cause, errTimeout):
		return &callError{class: ErrLost, extra: context.DeadlineExceeded,
			msg: fmt.Sprintf("call to %q on upstream %q timed out after %s", name, u.Name(), u.cfg.CallTimeout)}
	case r.sent:
		return &callError{class: ErrLost, msg: fmt.Sprintf("call to %q abandoned: upstream %q is closing", name, u.Name())}
	default:
		return u.unavailable("closing")
	}
}

// callFailed classifies a call that failed without an answer.
func (u *Upstream) callFailed(conn *connection, name string, r sendResult) error {
	var authErr *mcptransport.AuthorizationRequiredError
	var tooLarge *TooLargeError
	switch {
	case errors.As(r.err, &tooLarge):
		e := *tooLarge
		e.Tool = name
		return &e
	case authorizationURL(r.err) != "":
		return &callError{class: ErrUnauthorized, extra: r.err, msg: fmt.Sprintf("call to %q: %s", name, safeError(r.err))}
	case u.cfg.Auth != nil && r.status == 0 && !r.sent:
		// The Authorizer failed before the request went (a token refresh,
		// the vault): nothing reached the tool.
		return &callError{class: ErrUnavailable, extra: r.err, msg: fmt.Sprintf("call to %q not sent to upstream %q: %s", name, u.Name(), safeError(r.err))}
	case errors.As(r.err, &authErr):
		return u.statusError(name, http.StatusUnauthorized)
	case !r.sent:
		conn.suspect()
		return &callError{class: ErrUnavailable, msg: fmt.Sprintf("call to %q not sent to upstream %q: %s", name, u.Name(), safeError(r.err))}
	case r.status == http.StatusNotFound && conn.kind == kindSSE:
		conn.die("session lost (HTTP 404)")
		return u.statusError(name, r.status)
	case r.status >= 400 && r.status < 500, r.status == http.StatusServiceUnavailable:
		return u.statusError(name, r.status)
	default:
		conn.suspect()
		return &callError{class: ErrLost, msg: fmt.Sprintf("call to %q on upstream %q lost: %s", name, u.Name(), safeError(r.err))}
	}
}

// statusError classifies an HTTP error status of a call's POST.
//
//	401, 403                ErrUnauthorized
//	other 4xx, 503          ErrUnavailable: refused before reaching the tool
//	other 5xx               ErrLost: the server may have failed inside the tool
func (u *Upstream) statusError(name string, status int) error {
	msg := fmt.Sprintf("upstream %q answered the call to %q with HTTP %d", u.Name(), name, status)
	switch {
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return &callError{class: ErrUnauthorized, msg: msg}
	case status >= 400 && status < 500, status == http.StatusServiceUnavailable:
		return &callError{class: ErrUnavailable, msg: msg}
	default:
		return &callError{class: ErrLost, msg: msg}
	}
}
