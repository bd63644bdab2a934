// Package bridge runs the two fronts as services: MCPFront serves OTC tool
// servers to MCP clients, OTCFront serves MCP servers to OTC clients. It
// owns what lies between a front's wire (packages otc and mcp/front) and
// its upstreams (otc.Client, mcp/upstream): the catalogs of upstream tools
// and their refresh, call routing, timeouts, cancellation, per-user
// binding, the operator's controls (controls.go: tool overrides, access
// policy and rate limits, whose data is package bridge/policy's), the logs,
// metrics, traces and audit lines of calls (package audit writes those),
// and the swap of a reloaded configuration (reload.go); translation is
// package mapping's.
package bridge
