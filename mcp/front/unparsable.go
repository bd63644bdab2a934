package front

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// onUnparsable answers a tools/call whose params mcp-go cannot decode into
// its types with -32602 and a message a model can act on, instead of
// mcp-go's -32600 "unparsable tools/call request: json: cannot unmarshal
// number 1e400 into Go struct field CallToolRequest.params of type
// float64": the request is a valid JSON-RPC request whose params are not
// valid (JSON-RPC 2.0, section 5.1). Other decoding failures keep mcp-go's
// answer.
func (f *Front) onUnparsable(ctx context.Context, id any, method mcpgo.MCPMethod, _ any, err error) {
	var pe *mcpserver.UnparsableMessageError
	var te *json.UnmarshalTypeError
	if method != mcpgo.MethodToolsCall || !errors.As(err, &pe) || !errors.As(pe.Unwrap(), &te) {
		return
	}
	var msg string
	switch got, isNumber := strings.CutPrefix(te.Value, "number "); {
	case isNumber && te.Type.Kind() == reflect.Float64:
		msg = fmt.Sprintf("invalid arguments: the number %s is out of range: a number must be within ±1.8e308 (a 64-bit float)", got)
	case te.Field != "":
		msg = fmt.Sprintf("invalid tools/call params: %s must be %s, not %s", te.Field, jsonKind(te.Type), article(te.Value))
	default:
		return
	}
	f.onError(ctx, id, method, nil, &RPCError{Code: mcpgo.INVALID_PARAMS, Message: msg})
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16,
		reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// article puts "a" or "an" before a JSON value kind as encoding/json names
// it (number, string, bool, array, object).
func article(kind string) string {
	kind, _, _ = strings.Cut(kind, " ")
	switch kind {
	case "array", "object":
		return "an " + kind
	case "bool":
		return "a boolean"
	}
	return "a " + kind
}
