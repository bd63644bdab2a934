package front

import (
	"sync"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// The JSON-RPC id of a tools/call, for its handler
//
// mcp-go v1.2.1 gives a tool handler the request's params but not its
// JSON-RPC id (server/request_handler.go passes the id to the hooks
// only), which a trace span wants (jsonrpc.request.id). The hooks see a
// pointer to the request whose copy the handler gets; a copy keeps the
// pointer Params.Meta. So BeforeCallTool gives a request without _meta an
// empty one and records its id under that pointer, the handler reads it
// (RequestID), and AfterCallTool or OnError forgets it: an entry lives as
// long as its call. Canary: TestFrontCanaryMCPGoHandlerSharesMeta.

// requestIDs maps the Params.Meta of calls in flight to their ids.
type requestIDs struct{ m sync.Map }

func (r *requestIDs) begin(id any, req *mcpgo.CallToolRequest) {
	if req == nil {
		return
	}
	if req.Params.Meta == nil {
		req.Params.Meta = &mcpgo.Meta{}
	}
	r.m.Store(req.Params.Meta, id)
}

func (r *requestIDs) end(req *mcpgo.CallToolRequest) {
	if req != nil && req.Params.Meta != nil {
		r.m.Delete(req.Params.Meta)
	}
}

// RequestID is the JSON-RPC id of the tools/call req, as its handler got
// it; false outside a call.
func (f *Front) RequestID(req mcpgo.CallToolRequest) (any, bool) {
	if req.Params.Meta == nil {
		return nil, false
	}
	return f.ids.m.Load(req.Params.Meta)
}
