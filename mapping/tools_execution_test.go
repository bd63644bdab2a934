package mapping

import (
	"encoding/json"
	"testing"
)

// execution travels in the x-mcp-tool carrier and the MCP front lists it
// as the MCP server did, whatever taskSupport says (docs/mapping.md, Round trips).
func TestExecutionRoundTrip(t *testing.T) {
	for _, execution := range []string{`{"taskSupport":"required"}`, `{"taskSupport":"optional"}`, `{"taskSupport":"forbidden"}`} {
		raw := json.RawMessage(`{"name":"simulate-research-query","description":"Researches.","inputSchema":{"type":"object","properties":{"topic":{"type":"string"}}},"execution":` + execution + `}`)
		defs, _, err := OTCToolsFromMCP(raw, OTCIdentity{ID: "everything.simulate_research_query", Name: "simulate_research_query", MCPName: "simulate-research-query"}, "2.0.0")
		if err != nil || len(defs) != 1 {
			t.Fatalf("%s: OTCToolsFromMCP: %v, %d tools", execution, err, len(defs))
		}
		c, ok := mcpToolCarrier(defs[0].Def.InputSchema)
		if !ok || !execJSONEqual(t, c.Execution, execution) {
			t.Errorf("%s: x-mcp-tool carrier %s: execution %s", execution, defs[0].Def.InputSchema, c.Execution)
		}
		def := defs[0].Def
		back := MCPToolFromOTC(&def, "simulate-research-query", "", nil)
		listed, err := json.Marshal(back.Tool)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Execution json.RawMessage `json:"execution"`
		}
		_ = json.Unmarshal(listed, &got)
		if !back.FromMCP || !execJSONEqual(t, got.Execution, execution) {
			t.Errorf("%s: the MCP front lists %s", execution, listed)
		}
	}
}

func execJSONEqual(t *testing.T, a json.RawMessage, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
