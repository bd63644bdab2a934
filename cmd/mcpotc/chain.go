package main

import (
	"net/http"

	"github.com/mcpotc/mcpotc/mapping"
	"github.com/mcpotc/mcpotc/otc"
)

// chainHeader is the header serve-mcp sends with every request to an OTC
// server: it reads the x-mcp carriers, which an OTC front (serve-otc) adds
// only for a caller that asks, so that MCP tools and results come back
// through both bridges as the MCP server sent them (docs/mapping.md, Round trips).
// Other OTC servers ignore it.
func chainHeader() http.Header {
	return http.Header{otc.CarriersHeader: {mapping.CarriersFamily}}
}
