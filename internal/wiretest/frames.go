package wiretest

// The -32600 frames the MCP front answers for the messages of
// InvalidRequests, one for each kind of id and for batches.
const (
	invalidObjectID = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or a number, not an object"}}`
	invalidArrayID  = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or a number, not an array"}}`
	invalidBoolID   = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or a number, not a boolean"}}`
	invalidNullID   = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or a number, not null (MCP: a request id must not be null, a notification has none)"}}`
	invalidIDCase   = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: member \"ID\": JSON-RPC member names are case-sensitive (\"id\")"}}`
	invalidBatch    = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: batches are not accepted: send one JSON-RPC message per request"}}`
)

// InvalidRequest is a JSON-RPC message that the MCP front answers itself
// with -32600 (Invalid Request), whatever its transport, and the frame it
// answers (compare it as JSON, not as text).
type InvalidRequest struct{ Name, Frame, Want string }

// InvalidRequests are the messages whose id is neither a string nor a
// number (an object, an array, a boolean, null; in several methods, and
// under a key spelled in another case) and the batches, empty or not.
var InvalidRequests = []InvalidRequest{
	{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, invalidObjectID},
	{"array id", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, invalidArrayID},
	{"bool id", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, invalidBoolID},
	{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, invalidNullID},
	{"null id on a tool call", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}`, invalidNullID},
	{"id key in another case", `{"jsonrpc":"2.0","ID":false,"method":"ping"}`, invalidIDCase},
	{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`, invalidBatch},
	{"empty batch", ` [ ] `, invalidBatch},
	{"object id on tools/list", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, invalidObjectID},
	{"array id on tools/list", `{"jsonrpc":"2.0","id":[1],"method":"tools/list"}`, invalidArrayID},
	{"false id on tools/list", `{"jsonrpc":"2.0","id":false,"method":"tools/list"}`, invalidBoolID},
	{"null id on tools/list", `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, invalidNullID},
	{"batch of one tools/list", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, invalidBatch},
}
