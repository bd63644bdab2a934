package mapping

import (
	"encoding/json"
	"fmt"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/otc"
)

// MCPTool is one OTC tool as the MCP front lists it.
type MCPTool struct {
	Tool mcpgo.Tool
	// OTCID is the exact id calls are sent with (Toolkit.Tool@x.y.z).
	OTCID string
	// Shape says how results are shaped for the tool's outputSchema.
	Shape OutputShape
	// FromMCP: the tool is an MCP tool given back from an XMCPTool
	// carrier; its results carry no OTC _meta (the original had none).
	FromMCP bool
}

// MCPToolFromOTC maps one OTC tool version to an MCP tool named name (the
// OTC name, with the upstream's prefix if any): the input schema unchanged
// (unwrapped from "parameters"), the output schema as mcpOutputSchema
// says, the title from the name, and the OTC identity with every version's
// definition (versions, latest first, def among them) in _meta[MetaOTCTool].
//
// A tool an OTC front made from an MCP tool (a well-formed XMCPTool
// carrier) is given back as that MCP tool: its name (with the prefix),
// title, annotations, icons, _meta and schemas.
func MCPToolFromOTC(def *otc.ToolDefinition, name, prefix string, versions []*otc.ToolDefinition) MCPTool {
	out, shape := mcpOutputSchema(def.OutputSchema)
	if c, ok := mcpToolCarrier(def.InputSchema); ok {
		return MCPTool{Tool: restoreMCPTool(def, c, prefix), OTCID: def.ID, Shape: shape, FromMCP: true}
	}
	carrier := OTCToolMeta{ID: def.ID, Version: def.Version, Requirements: def.Requirements}
	for _, v := range versions {
		if b, err := json.Marshal(v); err == nil {
			carrier.Definitions = append(carrier.Definitions, b)
		}
	}
	t := mcpgo.Tool{
		Name:           name,
		Title:          mcpTitle(def.Name),
		Description:    def.Description,
		RawInputSchema: mcpInputSchema(def.InputSchema),
		Meta:           &mcpgo.Meta{AdditionalFields: map[string]any{MetaOTCTool: carrier}},
	}
	if out != nil {
		t.RawOutputSchema = out
	}
	return MCPTool{Tool: t, OTCID: def.ID, Shape: shape}
}

// restoreMCPTool gives back the MCP tool an OTC front exposed as def.
func restoreMCPTool(def *otc.ToolDefinition, c *MCPToolCarrier, prefix string) mcpgo.Tool {
	t := mcpgo.Tool{Name: prefix + c.Name, Description: def.Description}
	if c.InputSchema != nil {
		t.RawInputSchema = c.InputSchema
	} else {
		t.RawInputSchema = mcpInputSchema(withoutKeyword(def.InputSchema, XMCPTool))
	}
	if c.OutputSchema != nil {
		t.RawOutputSchema = c.OutputSchema
	}
	_ = json.Unmarshal(c.Title, &t.Title)
	_ = json.Unmarshal(c.Annotations, &t.Annotations)
	_ = json.Unmarshal(c.Icons, &t.Icons)
	// execution as the MCP server listed it (docs/mapping.md, Round trips): the
	// OTC front runs a taskSupport "required" tool as a task upstream, and
	// the MCP front, which declares no tasks capability, answers a plain
	// call of it -32601 as the server would (mcp-go enforces "required").
	if isObject(c.Execution) {
		var e mcpgo.ToolExecution
		if json.Unmarshal(c.Execution, &e) == nil {
			t.Execution = &e
		}
	}
	if isObject(c.Meta) {
		var m mcpgo.Meta
		if json.Unmarshal(c.Meta, &m) == nil {
			t.Meta = &m
		}
	}
	return t
}

// mcpToolWire is an MCP tool as read from the wire, raw.
type mcpToolWire struct {
	Name         string          `json:"name"`
	Title        json.RawMessage `json:"title"`
	Description  string          `json:"description"`
	Execution    json.RawMessage `json:"execution"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	Annotations  json.RawMessage `json:"annotations"`
	Icons        json.RawMessage `json:"icons"`
	Meta         json.RawMessage `json:"_meta"`
}

// MCPToolName reads the name of a raw MCP tool.
func MCPToolName(raw json.RawMessage) (string, error) {
	var w mcpToolWire
	if err := json.Unmarshal(raw, &w); err != nil {
		return "", fmt.Errorf("malformed tool: %w", err)
	}
	if w.Name == "" {
		return "", fmt.Errorf("tool without a name")
	}
	return w.Name, nil
}

// OTCTool is one OTC tool an MCP tool is exposed as.
type OTCTool struct {
	Def otc.ToolDefinition
	// Restored: the definition is an OTC tool's own, given back from the
	// MetaOTCTool carrier of an MCP front. Calls name it in MetaOTCRequest
	// and its requirements are the upstream's to check (it answers with
	// its own challenges).
	Restored bool
}

// OTCToolsFromMCP maps a raw MCP tool to OTC tool definitions with the
// given identity: schemas through otcInputSchema / otcOutputSchema, and the
// MCP-only fields (name, title, annotations, icons, _meta) and the original
// schemas carried in the input schema's XMCPTool keyword. A tool an MCP
// front made from OTC tools (a well-formed MetaOTCTool carrier with
// definitions) is given back as those OTC tools, every version.
func OTCToolsFromMCP(raw json.RawMessage, id OTCIdentity, version string) ([]OTCTool, SchemaNotes, error) {
	var w mcpToolWire
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, SchemaNotes{}, fmt.Errorf("tool %q: malformed: %w", id.MCPName, err)
	}
	if defs := carriedDefinitions(w.Meta); defs != nil {
		return defs, SchemaNotes{}, nil
	}
	in, notes, err := otcInputSchema(w.InputSchema)
	if err != nil {
		return nil, notes, fmt.Errorf("tool %q: inputSchema: %w", w.Name, err)
	}
	out, outNotes, err := otcOutputSchema(w.OutputSchema)
	if err != nil {
		return nil, notes, fmt.Errorf("tool %q: outputSchema: %w", w.Name, err)
	}
	notes.CutRefs = append(notes.CutRefs, outNotes.CutRefs...)
	notes.FilledDescriptions += outNotes.FilledDescriptions
	carrier := MCPToolCarrier{Name: w.Name, InputSchema: w.InputSchema, OutputSchema: w.OutputSchema}
	for _, f := range []struct {
		dst *json.RawMessage
		v   json.RawMessage
	}{{&carrier.Title, w.Title}, {&carrier.Annotations, w.Annotations}, {&carrier.Icons, w.Icons}, {&carrier.Meta, w.Meta}, {&carrier.Execution, w.Execution}} {
		if len(f.v) > 0 && !isNull(f.v) {
			*f.dst = f.v
		}
	}
	if isNull(carrier.InputSchema) {
		carrier.InputSchema = nil
	}
	if isNull(carrier.OutputSchema) {
		carrier.OutputSchema = nil
	}
	in, err = withKeyword(in, XMCPTool, carrier)
	if err != nil {
		return nil, notes, err
	}
	desc := w.Description
	if desc == "" {
		desc = w.Name
	}
	return []OTCTool{{Def: otc.ToolDefinition{
		ID:           id.ID,
		Name:         id.Name,
		Description:  desc,
		Version:      version,
		InputSchema:  in,
		OutputSchema: out,
		Requirements: carriedRequirements(w.Meta),
	}}}, notes, nil
}

// carriedDefinitions gives back the OTC definitions of a MetaOTCTool
// carrier, or nil when it has none or any of them is malformed.
func carriedDefinitions(meta json.RawMessage) []OTCTool {
	var carrier OTCToolMeta
	if !rawMetaField(meta, MetaOTCTool, &carrier) || len(carrier.Definitions) == 0 {
		return nil
	}
	out := make([]OTCTool, 0, len(carrier.Definitions))
	for _, raw := range carrier.Definitions {
		var d otc.ToolDefinition
		if json.Unmarshal(raw, &d) != nil || !otc.ValidToolName(d.Name) || !otc.ValidVersion(d.Version) {
			return nil
		}
		if id, err := otc.ParseToolID(d.ID); err != nil || (id.Version != "" && id.Version != d.Version) {
			return nil
		}
		out = append(out, OTCTool{Def: d, Restored: true})
	}
	return out
}

// withKeyword sets one keyword of a JSON object schema.
func withKeyword(schema json.RawMessage, key string, value any) (json.RawMessage, error) {
	v, err := decode(schema)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema is not an object")
	}
	m[key] = value
	return encode(m), nil
}

// carriedRequirements restores an OTC tool's requirements from the
// MetaOTCTool carrier of a tool an MCP front exposes (nil unless the
// carrier is well-formed).
func carriedRequirements(meta json.RawMessage) *otc.Requirements {
	var carrier OTCToolMeta
	if !rawMetaField(meta, MetaOTCTool, &carrier) || carrier.Requirements == nil {
		return nil
	}
	for _, a := range carrier.Requirements.Authorization {
		if a.ID == "" {
			return nil
		}
	}
	for _, s := range carrier.Requirements.Secrets {
		if s.ID == "" {
			return nil
		}
	}
	return carrier.Requirements
}
