package front

import (
	"context"
	"encoding/json"
	"sync/atomic"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// tools/list from an encoding made once per catalog
//
// mcp-go v1.2.1 encodes the whole tool list for every tools/list:
// mcp.Tool.MarshalJSON builds a map per tool, and encoding/json compacts
// the output of every nested marshaler again, so 10,000 tools cost about
// a quarter of a second a request. When the tools are set with
// Front.SetTools, the front encodes the list once per catalog instead:
// the AfterListTools hook (which runs before mcp-go writes the response)
// takes the encoded tools of the current catalog (encoding them the first
// time), empties result.Tools, and records the bytes for the request's
// response frame, where the stream splices them over "tools": [] (see
// stream.go). Everything else in the response is mcp-go's own: its
// session checks, its headers, its other result members, each protocol
// era's. A request with a cursor, a paginated result, a front whose tools
// are changed on Server() directly, or a transport without a stream
// (HandleMessage) is answered by mcp-go as before.
//
// The cache is keyed by a generation that SetTools increments after it
// replaced the tools: a list read by mcp-go just before a replacement can
// be stored under the old generation, which the increment then retires,
// so a stale list is never served past the SetTools that changed it.

type toolsJSON struct {
	gen uint64
	b   []byte
}

// SetTools replaces the front's tools (mcp-go's SetTools, which notifies
// the clients) and has tools/list served from an encoding made once for
// them.
func (f *Front) SetTools(tools ...mcpserver.ServerTool) {
	f.server.SetTools(tools...)
	f.toolsGen.Add(1)
	f.cacheTools.Store(true)
}

// encodedTools returns the JSON of tools, the list of the current catalog,
// from the cache when it holds this generation's.
func (f *Front) encodedTools(tools []mcpgo.Tool) []byte {
	gen := f.toolsGen.Load()
	if c := f.toolsCache.Load(); c != nil && c.gen == gen {
		return c.b
	}
	if tools == nil {
		tools = []mcpgo.Tool{}
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return nil
	}
	f.toolsCache.Store(&toolsJSON{gen: gen, b: b})
	return b
}

// afterListTools hands the encoded tools to the response frame (see
// above).
func (f *Front) afterListTools(ctx context.Context, id any, req *mcpgo.ListToolsRequest, result *mcpgo.ListToolsResult) {
	st := streamFrom(ctx)
	if !f.cacheTools.Load() || st == nil || result == nil || result.NextCursor != "" || (req != nil && req.Params.Cursor != "") {
		return
	}
	b := f.encodedTools(result.Tools)
	if b == nil {
		return
	}
	result.Tools = []mcpgo.Tool{}
	st.put(idKey(id), coded{tools: b})
}

// cacheState is the front's tools/list cache (see SetTools).
type cacheState struct {
	cacheTools atomic.Bool
	toolsGen   atomic.Uint64
	toolsCache atomic.Pointer[toolsJSON]
}
