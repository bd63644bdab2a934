// Package front is mcpotc's MCP server front over mark3labs/mcp-go: the
// stdio, streamable HTTP and legacy SSE transports, with what mcp-go does
// not do by itself — answering a tool call with any JSON-RPC error code
// (RPCError), sessions with an idle TTL and bounds (per client and in all,
// sessions never used ended first: sessions.go), bearer tokens and OAuth
// callers named by issuer and subject (resource.go), who sent a request
// and whether it is the chain peer that may forward another caller's
// context (caller.go), DNS-rebinding protection, request-body timeouts and
// a graceful shutdown that delivers the answers of calls in flight.
//
// What it works around in mcp-go v1.2.1 is listed in mcpgo_compat.go, each
// with a canary test that fails when mcp-go changes.
//
// It imports only the standard library and mcp-go, and logs through the
// *slog.Logger given in Options. The MCP front (package bridge) is its
// user: it registers tools and answers their calls.
package front
