package mapping

import (
	"bytes"
	"encoding/json"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/otc"
)

// Carriers: where a field that the other protocol has no place for travels,
// so that two bridges back to back lose nothing (docs/mapping.md, Round trips).
// A carrier is honoured only when it is well-formed; none of them is put
// into text a model reads.
const (
	// MetaOTCTool, in an MCP tool's _meta, holds the OTC identity of the
	// tool the MCP front exposes: OTCToolMeta.
	MetaOTCTool = "mcpotc/otc-tool"
	// MetaOTCError, in an isError result's _meta, holds the whole OTC
	// ToolError (developer_message, can_retry, retry_after_ms …).
	MetaOTCError = "mcpotc/otc-error"
	// MetaOTCCall, in a result's _meta, holds the OTC call_id and duration,
	// and the value when the result alone would not give it back: OTCCallMeta.
	MetaOTCCall = "mcpotc/otc-call"
	// MetaOTCRequest, in a tools/call request's _meta, is sent by an OTC
	// front to an MCP front: the exact tool id, the caller's call_id and
	// (opt-in on both sides) the call's context: OTCRequestMeta.
	MetaOTCRequest = "mcpotc/otc-request"
	// DataOTCResponse, in a JSON-RPC error's data (or the first URL
	// elicitation's _meta for -32042), holds the OTC 400 / 422 answer as
	// it was: OTCResponseCarrier.
	DataOTCResponse = "mcpotc/otc-response"
	// XMCPTool, a keyword in an OTC input_schema, holds the MCP-only fields
	// of the tool the OTC front exposes (with execution), and its original
	// schemas: MCPToolCarrier.
	XMCPTool = "x-mcp-tool"
	// XMCPResult, a member of an OTC CallToolResponse, holds the MCP
	// CallToolResult as the server sent it, when the value alone would not
	// give it back.
	XMCPResult = "x-mcp-result"
	// XMCPContent, a member of an OTC CallToolResponse, is true when the
	// value is the MCP result's content array and the result had nothing
	// else: the compact form of XMCPResult for images, audio and resources.
	XMCPContent = "x-mcp-content"
	// XMCPError, a member of an OTC 400 / 422 body or ToolError, holds the
	// MCP server's JSON-RPC error: MCPErrorCarrier.
	XMCPError = "x-mcp-error"
)

// CarriersFamily is the family of the carriers an OTC front writes
// (XMCPTool, XMCPResult, XMCPContent, XMCPError): an MCP front names it in
// the otc.CarriersHeader of its requests, and only such a caller gets them
// (docs/mapping.md, Round trips).
const CarriersFamily = "x-mcp"

// SchemaCarriers takes the XMCPTool keyword out of an input schema that
// OTCToolsFromMCP made: the schema every OTC caller is shown, and the
// keyword as the otc.Tool's SchemaCarriers, shown only to a caller that
// reads CarriersFamily (nil when the schema has none).
func SchemaCarriers(inputSchema json.RawMessage) (json.RawMessage, otc.Extensions) {
	if !bytes.Contains(inputSchema, []byte(`"`+XMCPTool+`"`)) {
		return inputSchema, nil
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(inputSchema, &top) != nil || top[XMCPTool] == nil {
		return inputSchema, nil
	}
	ext := otc.Extensions{XMCPTool: top[XMCPTool]}
	delete(top, XMCPTool)
	return encode(top), ext
}

// OTCToolMeta is the MetaOTCTool carrier.
type OTCToolMeta struct {
	ID           string            `json:"id"`
	Version      string            `json:"version"`
	Requirements *otc.Requirements `json:"requirements,omitempty"`
	// Definitions are every version's definition as the OTC server listed
	// it, latest first.
	Definitions []json.RawMessage `json:"definitions,omitempty"`
}

// OTCCallMeta is the MetaOTCCall carrier.
type OTCCallMeta struct {
	CallID   string  `json:"call_id,omitempty"`
	Duration float64 `json:"duration"`
	// Value is the OTC value when content / structuredContent alone would
	// not give it back; NoValue says the response had none.
	Value   json.RawMessage `json:"value,omitempty"`
	NoValue bool            `json:"no_value,omitempty"`
}

// OTCRequestMeta is the MetaOTCRequest carrier.
type OTCRequestMeta struct {
	ToolID  string           `json:"tool_id,omitempty"`
	CallID  string           `json:"call_id,omitempty"`
	Context *otc.CallContext `json:"context,omitempty"`
}

// OTCResponseCarrier is the DataOTCResponse carrier.
type OTCResponseCarrier struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// MCPToolCarrier is the XMCPTool carrier.
type MCPToolCarrier struct {
	Name         string          `json:"name"`
	Title        json.RawMessage `json:"title,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Icons        json.RawMessage `json:"icons,omitempty"`
	Meta         json.RawMessage `json:"_meta,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Execution    json.RawMessage `json:"execution,omitempty"`
}

// MCPErrorCarrier is the XMCPError carrier.
type MCPErrorCarrier struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// isObject reports whether raw is a JSON object.
func isObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// MetaField reads one key of a _meta object (a carrier) into dst; false
// when absent or malformed.
func MetaField(meta *mcpgo.Meta, key string, dst any) bool {
	if meta == nil || meta.AdditionalFields == nil {
		return false
	}
	v, ok := meta.AdditionalFields[key]
	if !ok {
		return false
	}
	b, err := json.Marshal(v)
	return err == nil && json.Unmarshal(b, dst) == nil
}

// rawMetaField reads one key of a raw _meta object into dst.
func rawMetaField(meta json.RawMessage, key string, dst any) bool {
	if !isObject(meta) {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil || m[key] == nil {
		return false
	}
	return json.Unmarshal(m[key], dst) == nil
}

// mcpToolCarrier reads the XMCPTool carrier of an OTC input schema.
func mcpToolCarrier(inputSchema json.RawMessage) (*MCPToolCarrier, bool) {
	if !bytes.Contains(inputSchema, []byte(`"`+XMCPTool+`"`)) {
		return nil, false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(inputSchema, &top) != nil || top[XMCPTool] == nil {
		return nil, false
	}
	var c MCPToolCarrier
	if json.Unmarshal(top[XMCPTool], &c) != nil || c.Name == "" || (c.InputSchema != nil && !isObject(c.InputSchema)) ||
		(c.OutputSchema != nil && !isObject(c.OutputSchema)) {
		return nil, false
	}
	return &c, true
}

// withoutKeyword removes one top-level keyword of a JSON object schema.
func withoutKeyword(schema json.RawMessage, key string) json.RawMessage {
	var top map[string]json.RawMessage
	if json.Unmarshal(schema, &top) != nil {
		return schema
	}
	delete(top, key)
	return encode(top)
}

// mcpErrorCarrier reads the XMCPError carrier of extensions.
func mcpErrorCarrier(ext otc.Extensions) (*MCPErrorCarrier, bool) {
	raw, ok := ext[XMCPError]
	if !ok {
		return nil, false
	}
	var c MCPErrorCarrier
	if json.Unmarshal(raw, &c) != nil || c.Code == 0 || c.Message == "" {
		return nil, false
	}
	return &c, true
}

// otcResponseCarrier reads a DataOTCResponse carrier.
func otcResponseCarrier(raw json.RawMessage) (*OTCResponseCarrier, bool) {
	var c OTCResponseCarrier
	if json.Unmarshal(raw, &c) != nil || (c.Status != 400 && c.Status != 422) || !isObject(c.Body) {
		return nil, false
	}
	return &c, true
}
