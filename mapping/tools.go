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
}

// MCPToolFromOTC maps one OTC tool version to an MCP tool named name (the
// OTC name, with the upstream's prefix if any): the input schema unchanged
// (unwrapped from "parameters"), the output schema as MCPOutputSchema
// says, the title from the name, and the OTC id, version and requirements
// in _meta[MetaOTCTool].
func MCPToolFromOTC(def *otc.ToolDefinition, name string) MCPTool {
	out, shape := MCPOutputSchema(def.OutputSchema)
	t := mcpgo.Tool{
		Name:           name,
		Title:          MCPTitle(def.Name),
		Description:    def.Description,
		RawInputSchema: MCPInputSchema(def.InputSchema),
		Meta: &mcpgo.Meta{AdditionalFields: map[string]any{
			MetaOTCTool: OTCToolMeta{ID: def.ID, Version: def.Version, Requirements: def.Requirements},
		}},
	}
	if out != nil {
		t.RawOutputSchema = out
	}
	return MCPTool{Tool: t, OTCID: def.ID, Shape: shape}
}

// mcpToolWire is an MCP tool as read from the wire, raw.
type mcpToolWire struct {
	Name         string          `json:"name"`
	Title        json.RawMessage `json:"title"`
	Description  string          `json:"description"`
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

// OTCToolFromMCP maps a raw MCP tool to an OTC tool definition with the
// given identity: schemas through OTCInputSchema / OTCOutputSchema, and the
// MCP-only fields (name, title, annotations, icons, _meta) carried in the
// input schema's XMCPTool keyword.
func OTCToolFromMCP(raw json.RawMessage, id OTCIdentity, version string) (otc.ToolDefinition, SchemaNotes, error) {
	var w mcpToolWire
	if err := json.Unmarshal(raw, &w); err != nil {
		return otc.ToolDefinition{}, SchemaNotes{}, fmt.Errorf("tool %q: malformed: %w", id.MCPName, err)
	}
	in, notes, err := OTCInputSchema(w.InputSchema)
	if err != nil {
		return otc.ToolDefinition{}, notes, fmt.Errorf("tool %q: inputSchema: %w", w.Name, err)
	}
	out, outNotes, err := OTCOutputSchema(w.OutputSchema)
	if err != nil {
		return otc.ToolDefinition{}, notes, fmt.Errorf("tool %q: outputSchema: %w", w.Name, err)
	}
	notes.CutRefs = append(notes.CutRefs, outNotes.CutRefs...)
	notes.FilledDescriptions += outNotes.FilledDescriptions
	carrier := map[string]json.RawMessage{"name": encode(w.Name)}
	for k, v := range map[string]json.RawMessage{"title": w.Title, "annotations": w.Annotations, "icons": w.Icons, "_meta": w.Meta} {
		if len(v) > 0 && !isNull(v) {
			carrier[k] = v
		}
	}
	in, err = withKeyword(in, XMCPTool, carrier)
	if err != nil {
		return otc.ToolDefinition{}, notes, err
	}
	desc := w.Description
	if desc == "" {
		desc = w.Name
	}
	return otc.ToolDefinition{
		ID:           id.ID,
		Name:         id.Name,
		Description:  desc,
		Version:      version,
		InputSchema:  in,
		OutputSchema: out,
		Requirements: carriedRequirements(w.Meta),
	}, notes, nil
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
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil || m[MetaOTCTool] == nil {
		return nil
	}
	var carrier OTCToolMeta
	if json.Unmarshal(m[MetaOTCTool], &carrier) != nil || carrier.Requirements == nil {
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
