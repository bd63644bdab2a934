package mapping

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

// OTCResultPlain answers what OTCResultFor answers, less the carriers: the
// same value or error for every result, and no Ext.
func TestOTCResultPlainIsOTCResultForLessCarriers(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	carried := 0
	for i := range 5000 {
		raw := propResult(r)
		shape := ResultShapeOf(propSchemas[r.IntN(len(propSchemas))])
		full, err := OTCResultFor(raw, shape)
		if err != nil {
			t.Fatalf("%d: %s: %v", i, raw, err)
		}
		plain, err := OTCResultPlain(raw, shape)
		if err != nil {
			t.Fatalf("%d: %s: OTCResultPlain: %v", i, raw, err)
		}
		if len(full.Ext) > 0 {
			carried++
		}
		full.Ext = nil
		if plain.Ext != nil || !reflect.DeepEqual(plain, full) {
			t.Fatalf("%d: result %s:\n plain %s\n  full %s (less Ext)", i, raw, propShow(plain), propShow(full))
		}
	}
	if carried < 500 {
		t.Errorf("only %d of 5000 results needed a carrier: the comparison means little", carried)
	}
}

// SchemaCarriers splits what OTCToolsFromMCP made into the schema every
// caller sees and the keyword only a chain reads; put back together (as
// otc.Handler lists them to such a caller), the MCP front restores the
// MCP tool as before.
func TestSchemaCarriersSplit(t *testing.T) {
	raw := json.RawMessage(`{"name":"search-issues","title":"Search","description":"Searches.","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}},"annotations":{"readOnlyHint":true}}`)
	tools, _, err := OTCToolsFromMCP(raw, OTCIdentity{ID: "calc.search_issues", Name: "calc_search_issues", MCPName: "search-issues"}, "2.0.0")
	if err != nil || len(tools) != 1 {
		t.Fatalf("OTCToolsFromMCP: %v, %d tools", err, len(tools))
	}
	def := tools[0].Def
	plain, ext := SchemaCarriers(def.InputSchema)
	if bytes.Contains(plain, []byte(XMCPTool)) || len(ext) != 1 || ext[XMCPTool] == nil {
		t.Fatalf("SchemaCarriers(%s) = %s, %v", def.InputSchema, plain, ext)
	}
	var a, b map[string]any
	_ = json.Unmarshal(plain, &a)
	_ = json.Unmarshal(def.InputSchema, &b)
	delete(b, XMCPTool)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("the plain schema %s is not the schema less its carrier", plain)
	}
	// A schema without the carrier is given back as it is.
	if same, none := SchemaCarriers(plain); !bytes.Equal(same, plain) || none != nil {
		t.Errorf("SchemaCarriers of a plain schema: %s, %v", same, none)
	}
	// Put back together: the same MCP tool.
	a[XMCPTool] = json.RawMessage(ext[XMCPTool])
	joined, _ := json.Marshal(a)
	back := def
	back.InputSchema = joined
	want := MCPToolFromOTC(&def, "x", "", nil)
	got := MCPToolFromOTC(&back, "x", "", nil)
	wb, _ := json.Marshal(want.Tool)
	gb, _ := json.Marshal(got.Tool)
	if !got.FromMCP || !bytes.Equal(wb, gb) {
		t.Errorf("restored from the split carrier:\n got %s\nwant %s", gb, wb)
	}
}
