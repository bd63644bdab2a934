package front

import (
	"bytes"
	"encoding/json"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Invalid requests the front answers itself
//
// JSON-RPC 2.0 lets a request id be a string, a number or null, and allows
// batches (an array of messages). MCP narrows both: a request id "MUST be a
// string or integer" and "MUST NOT be null" (MCP basic protocol, Requests;
// a notification carries no id at all), and batches were removed in
// protocol version 2025-06-18. mcp-go v1.2.1 serves such messages anyway:
// it takes "id": null for a notification and answers nothing, echoes an
// object, array or boolean id as given, and answers a batch with -32700
// "Failed to parse message". The front answers each with JSON-RPC -32600
// (Invalid Request) and, as JSON-RPC 2.0 §5 asks when the id cannot be
// determined, a null id — on stdio, streamable HTTP and the legacy SSE
// message endpoint alike (HTTP: status 400). The canary test
// TestFrontCanaryMCPGoServesInvalidIDs fails once mcp-go changes this.

// invalid is why a message is an Invalid Request; "" when it is not.
type invalid string

// checkMessage reports whether msg, one message as a client sent it,
// is one the front answers with -32600 itself: a batch, or a request or
// notification (a message with a method) whose id is present but not a
// string or a number. Anything else, including malformed JSON and
// responses, is left to mcp-go.
func checkMessage(msg []byte) invalid {
	t := bytes.TrimLeft(msg, " \t\r\n")
	if len(t) == 0 {
		return ""
	}
	if t[0] == '[' {
		return "batches are not accepted: send one JSON-RPC message per request"
	}
	if t[0] != '{' {
		return ""
	}
	// The common case, a string or number id, from a skim (skim.go);
	// anything else is decided by encoding/json.
	if top, ok := skimMembers(t); ok {
		id, method := lastMember(top, "id"), lastMember(top, "method")
		if id == nil || method == nil {
			return ""
		}
		switch t[id.start] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return ""
		}
	}
	return checkObject(t)
}

// checkObject is checkMessage for a message that starts with '{', decided
// by encoding/json as mcp-go decodes: the same case-insensitive key
// matching, and the last duplicate wins.
func checkObject(t []byte) invalid {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
	}
	if json.Unmarshal(t, &m) != nil || m.Method == nil || m.ID == nil {
		return ""
	}
	switch m.ID[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return ""
	case 'n':
		return "the id must be a string or a number, not null (MCP: a request id must not be null, a notification has none)"
	case '{':
		return "the id must be a string or a number, not an object"
	case '[':
		return "the id must be a string or a number, not an array"
	default:
		return "the id must be a string or a number, not a boolean"
	}
}

// frame is the JSON-RPC error response for an invalid message, with a null
// id, without a trailing newline.
func (why invalid) frame() []byte {
	return errorResponse(mcpgo.INVALID_REQUEST, "Invalid Request: "+string(why))
}

// errorResponse is a JSON-RPC error response with a null id, without
// a trailing newline.
func errorResponse(code int, message string) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string                    `json:"jsonrpc"`
		ID      *int                      `json:"id"`
		Error   mcpgo.JSONRPCErrorDetails `json:"error"`
	}{mcpgo.JSONRPC_VERSION, nil, mcpgo.JSONRPCErrorDetails{Code: code, Message: message}})
	return b
}
