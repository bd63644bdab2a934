package front

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/internal/jsonscan"
)

// One message as a client sent it
//
// Each message is read once: json.Valid checks it (no allocation), then a
// walk of its top level (jsonscan) finds its members, whose values are
// kept as slices of the message's own bytes — the id exactly as sent, the
// params undecoded. Only what a method needs is decoded, by that method:
// a tools/call's name and _meta (its arguments go to the handler as the
// bytes the client sent).
//
// MCP narrows JSON-RPC 2.0: a request id "MUST be a string or integer" and
// "MUST NOT be null" (MCP basic protocol, Requests), and batches were
// removed in 2025-06-18. Such messages get -32600 Invalid Request with a
// null id (JSON-RPC 2.0 §5), on every transport.

// message is one decoded JSON-RPC message.
type message struct {
	id       json.RawMessage // as sent; nil for a notification
	method   string
	params   json.RawMessage // as sent; nil when absent
	response bool            // a response (result or error, no method)
}

// decode reads one message. A message the front must refuse gets the
// error to answer it with (and a null id).
func decode(b []byte) (*message, *RPCError) {
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) > 0 && t[0] == '[' {
		return nil, &RPCError{Code: mcpgo.INVALID_REQUEST, Message: "Invalid Request: batches are not accepted: send one JSON-RPC message per request"}
	}
	if !json.Valid(t) {
		return nil, &RPCError{Code: mcpgo.PARSE_ERROR, Message: "Parse error: the message is not valid JSON"}
	}
	var room [8]member // a message has at most 4 members of its own: no allocation
	members, ok := objectMembers(room[:0], t)
	if !ok {
		return nil, &RPCError{Code: mcpgo.INVALID_REQUEST, Message: "Invalid Request: a JSON-RPC message is an object"}
	}
	m := &message{}
	var version, method json.RawMessage
	hasResult := false
	for _, mb := range members {
		v := t[mb.start:mb.end]
		switch mb.key {
		case "jsonrpc":
			version = v
		case "id":
			m.id = v
		case "method":
			method = v
		case "params":
			m.params = v
		case "result", "error":
			hasResult = true
		default:
			if name := reservedFold(mb.key); name != "" {
				// encoding/json, and so many a JSON-RPC library, would
				// read it as that member: refused rather than read one
				// way here and another elsewhere.
				return nil, &RPCError{Code: mcpgo.INVALID_REQUEST, Message: "Invalid Request: member " +
					strconv.Quote(mb.key) + ": JSON-RPC member names are case-sensitive (" + strconv.Quote(name) + ")"}
			}
		}
	}
	if method == nil {
		if m.id != nil && hasResult {
			m.response = true
			return m, nil
		}
		return nil, &RPCError{Code: mcpgo.INVALID_REQUEST, Message: "Invalid Request: no method"}
	}
	if s, ok := jsonString(method); ok {
		m.method = s
	} else {
		return nil, &RPCError{Code: mcpgo.INVALID_REQUEST, Message: "Invalid Request: the method must be a string"}
	}
	if string(version) != `"2.0"` {
		return nil, &RPCError{Code: mcpgo.INVALID_REQUEST, Message: `Invalid Request: jsonrpc must be "2.0"`}
	}
	if m.id != nil {
		switch m.id[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		case 'n':
			return nil, &RPCError{Code: mcpgo.INVALID_REQUEST, Message: "Invalid Request: the id must be a string or a number, not null (MCP: a request id must not be null, a notification has none)"}
		case '{':
			return nil, &RPCError{Code: mcpgo.INVALID_REQUEST, Message: "Invalid Request: the id must be a string or a number, not an object"}
		case '[':
			return nil, &RPCError{Code: mcpgo.INVALID_REQUEST, Message: "Invalid Request: the id must be a string or a number, not an array"}
		default:
			return nil, &RPCError{Code: mcpgo.INVALID_REQUEST, Message: "Invalid Request: the id must be a string or a number, not a boolean"}
		}
	}
	if len(m.params) > 0 && string(m.params) == "null" {
		m.params = nil
	}
	return m, nil
}

// reservedFold is the JSON-RPC member name that key spells in another
// case ("ID": "id"), or "".
func reservedFold(key string) string {
	for _, name := range [...]string{"jsonrpc", "id", "method", "params", "result", "error"} {
		if len(key) == len(name) && strings.EqualFold(key, name) {
			return name
		}
	}
	return ""
}

// member is a member of a JSON object: its key, and where its value lies
// in the object's text.
type member struct {
	key        string
	start, end int
}

// objectMembers appends to members those of the valid JSON text b when it
// is an object, in order, keys unescaped; the last of a key is the one
// that counts (as encoding/json decides), so callers walk them in order.
func objectMembers(members []member, b []byte) ([]member, bool) {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i = jsonscan.SkipSpace(b, i+1)
	if b[i] == '}' {
		return members, true
	}
	for {
		i = jsonscan.SkipSpace(b, i)
		end := jsonscan.StringEnd(b, i)
		key, ok := jsonString(b[i:end])
		if !ok {
			return nil, false
		}
		i = jsonscan.SkipSpace(b, end) + 1 // the colon
		i = jsonscan.SkipSpace(b, i)
		end = jsonscan.ValueEnd(b, i)
		if end <= i {
			return nil, false
		}
		members = append(members, member{key, i, end})
		i = jsonscan.SkipSpace(b, end)
		if b[i] == '}' {
			return members, true
		}
		i++ // the comma
	}
}

// member returns the value of the last member named key of the object
// b, or nil.
func memberOf(b []byte, key string) json.RawMessage {
	var room [8]member
	members, ok := objectMembers(room[:0], b)
	if !ok {
		return nil
	}
	var v json.RawMessage
	for _, m := range members {
		if m.key == key {
			v = b[m.start:m.end]
		}
	}
	return v
}

// jsonString is the string a JSON string literal holds.
func jsonString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if inner := v[1 : len(v)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return commonString(inner), true
	}
	var s string
	return s, json.Unmarshal(v, &s) == nil
}

// commonString is string(b) without an allocation for the keys and
// methods every message has.
func commonString(b []byte) string {
	switch string(b) { // compared without converting
	case "jsonrpc":
		return "jsonrpc"
	case "id":
		return "id"
	case "method":
		return "method"
	case "params":
		return "params"
	case "name":
		return "name"
	case "arguments":
		return "arguments"
	case "_meta":
		return "_meta"
	case "tools/call":
		return "tools/call"
	case "tools/list":
		return "tools/list"
	}
	return string(b)
}

// The answers
//
// Every response the front writes is made here: result frames from the
// handler's value or from bytes encoded once (tools/list), error frames
// from an *RPCError — the one place where the code of an answer is set.

// encode is json.Marshal without HTML escaping: a tool's text reaches the
// client byte for byte ("<", ">" and "&" included), as the client or the
// upstream wrote it. mcp-go's types marshal themselves with json.Marshal,
// which escapes those three whatever the outer encoder says, so the
// escapes are undone afterwards (unescapeHTML).
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return unescapeHTML(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// unescapeHTML turns the escapes \u003c, \u003e and \u0026 of the valid
// JSON text b back into "<", ">" and "&" (the same strings, as JSON), in
// place. Other escapes are kept: each escape is read whole, so the "\\"
// of an escaped backslash is never taken for the start of another.
func unescapeHTML(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u00`)) {
		return b
	}
	out := b[:0]
	for i := 0; i < len(b); {
		c := b[i]
		if c != '\\' || i+1 >= len(b) {
			out = append(out, c)
			i++
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch string(b[i+2 : i+6]) {
			case "003c", "003C":
				out, i = append(out, '<'), i+6
				continue
			case "003e", "003E":
				out, i = append(out, '>'), i+6
				continue
			case "0026":
				out, i = append(out, '&'), i+6
				continue
			}
		}
		out = append(out, c, b[i+1]) // an escape of two bytes, or the start of a longer one
		i += 2
	}
	return out
}

// resultFrame is a JSON-RPC response carrying result (a value to encode,
// or json.RawMessage), without a trailing newline.
func resultFrame(id json.RawMessage, result any) []byte {
	raw, ok := result.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = encode(result); err != nil {
			return errorFrame(id, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "Internal error: the result could not be encoded"})
		}
	}
	out := make([]byte, 0, len(raw)+len(id)+40)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"result":`...)
	out = append(out, raw...)
	return append(out, '}')
}

// errorFrame is the JSON-RPC error response for e (a nil id: null),
// without a trailing newline. A Code of zero is sent as -32603, and so is
// an error whose Data does not encode (its message kept, its data left
// out: the answer the handler meant cannot be sent whole).
func errorFrame(id json.RawMessage, e *RPCError) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	code := e.Code
	var data []byte
	if e.Data != nil {
		var err error
		if data, err = encode(e.Data); err != nil {
			code, data = 0, nil
		}
	}
	if code == 0 {
		code = mcpgo.INTERNAL_ERROR
	}
	out := make([]byte, 0, 96+len(e.Message))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"error":{"code":`...)
	out = strconv.AppendInt(out, int64(code), 10)
	out = append(out, `,"message":`...)
	msg, _ := encode(e.Message)
	out = append(out, msg...)
	if data != nil {
		out = append(out, `,"data":`...)
		out = append(out, data...)
	}
	return append(out, "}}"...)
}

// notificationFrame is a JSON-RPC notification, without a trailing
// newline.
func notificationFrame(method string, params any) []byte {
	b, _ := encode(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{mcpgo.JSONRPC_VERSION, method, params})
	return b
}

// errorResponse is the JSON-RPC error response with a null id for code
// and message, without a trailing newline.
func errorResponse(code int, message string) []byte {
	return errorFrame(nil, &RPCError{Code: code, Message: message})
}
