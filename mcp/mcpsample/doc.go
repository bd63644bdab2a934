// Package mcpsample is the MCP server built into mcpotc: a few sample tools,
// served in-process when serve-otc names no upstream, and over stdio
// (mcpotc sample-mcp) for tests, demos and benchmarks.
package mcpsample
