// Package mcpgotest serves mcp-go servers (mark3labs/mcp-go/server) as
// in-process upstreams, for tests: production code serves MCP with
// mcp/front and reaches in-process servers through upstream.Piped.
package mcpgotest

import (
	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/mcpotc/mcpotc/mcp/upstream"
)

// InProcess is the upstream.InProcess of s: mcp-go's in-process
// transport, the server's requests to the client answered by the
// upstream's own handlers.
func InProcess(s *mcpserver.MCPServer) upstream.InProcess {
	return func(h upstream.ServerRequests) mcptransport.Interface {
		return mcptransport.NewInProcessTransportWithOptions(s,
			mcptransport.WithElicitationHandler(h),
			mcptransport.WithSamplingHandler(h),
			mcptransport.WithRootsHandler(h),
		)
	}
}
