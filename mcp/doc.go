// Package mcp is mcpotc's seam over mark3labs/mcp-go, in both directions:
//
//   - the MCP server front (Front): stdio, streamable HTTP and legacy SSE
//     transports that can answer a tool call with any JSON-RPC error code
//     (RPCError), which mcp-go cannot do by itself, plus bearer auth and
//     DNS-rebinding protection;
//   - upstream connections (Upstream): MCP servers the bridge calls as a
//     client — stdio children, streamable HTTP, SSE, or in-process — with
//     their lifecycle (restart, reconnect, bounded shutdown), raw tool
//     lists and exact arguments.
//
// It imports only the standard library and mcp-go, and logs through a
// *slog.Logger given in options.
package mcp
