// Package front is mcpotc's MCP server: it owns its wire — JSON-RPC
// decoding, dispatch, and the stdio, streamable HTTP (sessions for clients
// before 2026-07-28, stateless 2026-07-28 requests) and legacy SSE
// transports — and uses mark3labs/mcp-go for MCP's types only.
//
// How a message flows. A transport reads one message (a stdio line, a POST
// body bounded in size and time) and decode checks it once (json.Valid)
// and walks its top level once, keeping the id and the params as the
// client's own bytes: no batch, an id that is a string or a number, a
// method that is a string (message.go). The HTTP transport then checks
// what the transport adds (Host and Origin, the bearer token or OAuth
// identity, the session and its owner, or for 2026-07-28 the
// Mcp-Protocol-Version, Mcp-Method and Mcp-Name headers against the body).
// serve, the one dispatch table, answers each method for its protocol era
// (front.go, modern.go): tools/list from the encoding made when the tools
// were set (cut to the tools the caller may see when Options.Visibility
// filters them: visibility.go), tools/call by walking the params' top level (the arguments
// stay the message's bytes) and calling the tool's handler under a context
// that notifications/cancelled, the client leaving and shutdown end. The
// handler returns a result, written directly (result.go), or an error:
// an *RPCError (or any CodedError) is answered with its own code, an
// *InputRequired or a URLElicitationRequiredError as -32042 (or, to a
// 2026-07-28 client, an input_required result whose requestState the
// front seals, and whose retry it checks before the handler sees it:
// inputstate.go), anything else as -32603. errorFrame is the one place
// where the code of an answer is written.
//
// Sessions have an idle TTL and bounds (per client and in all; sessions
// never used are ended first: sessions.go), may be signed for replicas
// (session_keys.go) and belong to the caller that opened them; 2026-07-28
// subscriptions/listen streams are bounded the same way. Callers are
// named by OAuth issuer and subject (resource.go), and caller.go says who
// sent a request and whether it is the chain peer that may forward another
// caller's context (from the connection's own peer, never a forwarded
// address). Shutdown delivers the answers of calls in flight.
//
// It imports the standard library, mcp-go's mcp package and mcpotc's
// internal packages, and logs through the *slog.Logger given in Options.
// The MCP front (package bridge) is its user: it sets the tools and
// answers their calls.
package front
