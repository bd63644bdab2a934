package front

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Protocol 2026-07-28 (the stateless revision)
//
// A 2026-07-28 request carries in its _meta its protocol version, the
// client's capabilities (required; {} declares none) and its identity; it
// belongs to no session. The front answers it without initialize: the
// era is decided per request, so both eras are served side by side. Its
// results carry resultType ("complete", or "input_required" when the tool
// asks the user for something: inputstate.go) and the server's identity
// in _meta; list results say how long they may be cached (ttlMs,
// Options.ListTTL) and for whom (cacheScope, Options.PrivateList). Over
// HTTP the transport checks the Mcp-Protocol-Version, Mcp-Method and
// Mcp-Name headers against the body (http.go).

// modernRequest is what a 2026-07-28 request's _meta says.
type modernRequest struct {
	version string
	caps    *mcpgo.ClientCapabilities
}

// supportedVersions are the protocol versions the front speaks, newest
// first (server/discover, and -32022's data).
var supportedVersions = mcpgo.ValidProtocolVersions

// readModern reads the _meta of params: nil, nil for a request before
// 2026-07-28; an error for a 2026-07-28 one that names a version the front
// does not speak (-32022) or lacks the client's capabilities (-32602).
func readModern(params json.RawMessage) (*modernRequest, *RPCError) {
	raw := memberOf(params, "_meta")
	if raw == nil || raw[0] != '{' {
		return nil, nil
	}
	version, _ := jsonString(memberOf(raw, mcpgo.MetaKeyProtocolVersion))
	if !mcpgo.IsModernProtocol(version) {
		return nil, nil
	}
	if !mcpgo.IsValidProtocolVersion(version) {
		return nil, unsupportedVersion(version)
	}
	capsRaw := memberOf(raw, mcpgo.MetaKeyClientCapabilities)
	var caps mcpgo.ClientCapabilities
	if capsRaw == nil || capsRaw[0] != '{' || json.Unmarshal(capsRaw, &caps) != nil {
		return nil, &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "missing or invalid _meta field " + mcpgo.MetaKeyClientCapabilities}
	}
	return &modernRequest{version: version, caps: &caps}, nil
}

// unsupportedVersion is -32022 for version, naming the versions the front
// speaks.
func unsupportedVersion(version string) *RPCError {
	e := mcpgo.UnsupportedProtocolVersionError{Version: version, Supported: supportedVersions}.JSONRPCError().Error
	return &RPCError{Code: e.Code, Message: e.Message, Data: e.Data}
}

// discover answers server/discover: the versions the front speaks and
// its capabilities, not to be cached (the tools, and so what a client
// learns here, can change at any time).
func (f *Server) discover(x *exchange) json.RawMessage {
	b, _ := encode(struct {
		SupportedVersions []string                 `json:"supportedVersions"`
		Capabilities      mcpgo.ServerCapabilities `json:"capabilities"`
		TTLMs             int64                    `json:"ttlMs"`
		CacheScope        string                   `json:"cacheScope"`
	}{supportedVersions, f.discoverCapabilities(), 0, "private"})
	return f.modernResult(json.RawMessage(b), "", nil)
}

// modernResult is result (a value, or its JSON object) with what
// 2026-07-28 adds to a result: resultType "complete" unless it has one,
// and the server's identity in _meta. With key set, value (JSON) is added
// as that member, unread (the tools of tools/list).
func (f *Server) modernResult(result any, key string, value json.RawMessage) json.RawMessage {
	var raw []byte
	switch r := result.(type) {
	case json.RawMessage:
		raw = r
	default:
		var err error
		if raw, err = encode(result); err != nil {
			raw = json.RawMessage("{}")
		}
	}
	members := map[string]json.RawMessage{}
	_ = json.Unmarshal(raw, &members)
	if _, ok := members["resultType"]; !ok {
		members["resultType"] = json.RawMessage(`"` + mcpgo.ResultTypeComplete + `"`)
	}
	meta := map[string]json.RawMessage{}
	if m, ok := members["_meta"]; ok {
		_ = json.Unmarshal(m, &meta)
	}
	if _, ok := meta[mcpgo.MetaKeyServerInfo]; !ok {
		meta[mcpgo.MetaKeyServerInfo], _ = encode(mcpgo.Implementation{Name: f.name, Version: f.version})
	}
	members["_meta"], _ = encode(meta)
	if key != "" {
		members[key] = value
	}
	out, _ := encode(members)
	return out
}

// listCacheMeta is what a 2026-07-28 tools/list answer says of its
// caching (Options.ListTTL, Options.PrivateList): ttlMs and cacheScope.
func listCacheMeta(ttl time.Duration, private bool) json.RawMessage {
	scope := "public"
	if private {
		scope = "private"
	}
	return json.RawMessage(`{"ttlMs":` + strconv.FormatInt(max(ttl.Milliseconds(), 0), 10) + `,"cacheScope":"` + scope + `"}`)
}

// listen serves subscriptions/listen: the stream stays open, and carries
// the notifications the client asked for (the front has one kind:
// notifications/tools/list_changed), each tagged with the request's id,
// until the client leaves or the transport shuts down.
func (f *Server) listen(ctx context.Context, m *message, x *exchange) []byte {
	if x.modern == nil {
		return f.answer(m, nil, &RPCError{Code: mcpgo.METHOD_NOT_FOUND,
			Message: strconv.Quote(m.method) + " requires protocol version " + mcpgo.ProtocolVersion20260728 + " or later"})
	}
	if x.notify == nil {
		return f.answer(m, nil, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "subscriptions/listen requires an active session"})
	}
	var p struct {
		Notifications mcpgo.SubscriptionFilter `json:"notifications"`
	}
	_ = json.Unmarshal(m.params, &p)
	allowed := mcpgo.SubscriptionFilter{ToolsListChanged: p.Notifications.ToolsListChanged}
	tag := map[string]any{mcpgo.MetaKeySubscriptionID: json.RawMessage(m.id)}
	x.notify(notificationFrame(mcpgo.MethodNotificationSubscriptionsAcknowledged,
		map[string]any{"_meta": tag, "notifications": allowed}))
	if allowed.ToolsListChanged {
		tagged := notificationFrame(mcpgo.MethodNotificationToolsListChanged, map[string]any{"_meta": tag})
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		if x.calls != nil { // notifications/cancelled ends it too
			key := x.scope + idKey(m.id)
			x.calls.begin(key, cancel)
			defer x.calls.end(key)
		}
		if x.life != nil {
			defer context.AfterFunc(x.life, func() { cancel(errFrontShutdown) })()
		}
		remove := f.changes.add(func([]byte) { x.notify(tagged) })
		<-ctx.Done()
		remove()
	}
	res, _ := encode(map[string]any{"_meta": tag})
	return f.answer(m, f.modernResult(json.RawMessage(res), "", nil), nil)
}

// httpStatus is the HTTP status of a 2026-07-28 JSON answer with a
// JSON-RPC error code (the revision maps them, so that intermediaries act
// on failures without reading the body).
func httpStatus(code int) int {
	switch code {
	case mcpgo.METHOD_NOT_FOUND:
		return 404
	case mcpgo.HEADER_MISMATCH, mcpgo.MISSING_REQUIRED_CLIENT_CAPABILITY, mcpgo.UNSUPPORTED_PROTOCOL_VERSION,
		mcpgo.INVALID_REQUEST, mcpgo.INVALID_PARAMS, mcpgo.PARSE_ERROR:
		return 400
	}
	return 200
}
