// Command gosdkpeer is an MCP server on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), an upstream of `mcpotc
// serve-otc` in the e2e tests of its protocol era negotiation:
//
//	gosdkpeer -transport http -era modern   streamable HTTP, Stateless, advertising 2026-07-28 only
//	gosdkpeer -transport http -era dual     streamable HTTP, Stateless, every version
//	gosdkpeer -transport stdio -era modern  stdio, advertising 2026-07-28 only
//	gosdkpeer -transport stdio -era dual    stdio, every version
//
// "Advertising 2026-07-28 only" (ServerOptions.SupportedProtocolVersions)
// is not modern-only: go-sdk 1.8.0 still answers initialize, with
// 2025-11-25 (negotiatedVersion in its shared.go). It is a server that
// prefers the modern era.
//
// Over HTTP it serves /mcp on -listen (127.0.0.1:0 by default) and writes
// "listening on ADDR" to stderr. It serves the tools of
// testdata/era_server.mjs: echo, add (with an output schema), fail (an
// isError result) and region (an x-mcp-header parameter).
//
// It is a test helper: only the e2e tests build it.
package main
