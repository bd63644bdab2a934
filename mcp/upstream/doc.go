// Package upstream connects mcpotc to MCP servers as a client, over
// mark3labs/mcp-go's transports: stdio children, streamable HTTP, legacy
// SSE, or a server in process. An Upstream owns one server's connection and
// its lifecycle (restart with backoff, reconnect, re-initialize a lost
// session, bounded shutdown and kill of the child's process group), reads
// its tool list raw and sends each call's arguments exactly as given,
// bounds every message (ErrTooLarge), and classifies failures by whether a
// call may have reached the tool (ErrUnavailable, ErrLost, *Error). It
// negotiates the protocol era of each connection (era.go): the stateless
// revision 2026-07-28 when the server speaks it, else 2025-11-25 with the
// initialize handshake.
//
// On Linux a detached watchdog per stdio child kills the child's process
// group when the bridge dies without closing it, SIGKILL included
// (watchdog_linux.go); any binary linking this package serves as that
// watchdog when started with its hidden argument.
//
// What it works around in mcp-go v1.2.1 is listed in mcpgo_compat.go.
//
// It imports only the standard library and mcp-go, and logs through the
// *slog.Logger given in Options. The OTC front (package bridge) is its user.
package upstream
