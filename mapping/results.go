package mapping

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/mcp"
	"github.com/mcpotc/mcpotc/otc"
)

// MCPResult maps an OTC CallToolResponse (HTTP 200) to an MCP CallToolResult:
//
//	success, value v   structuredContent v (object) or {"value": v} (OutputWrapped);
//	                   content one text block: v itself when a string, else compact JSON
//	success, no value  content []
//	failure, error e   isError, text e.message (+ blank line + additional_prompt_content);
//	                   the whole ToolError in _meta[MetaOTCError], never in content
//
// The call_id, duration, and the value when the result alone would not give
// it back, go to _meta[MetaOTCCall]. When the response comes from an OTC
// front (a bridge), its carriers win: an XMCPResult is the result, an
// XMCPError in the ToolError is the JSON-RPC error to answer (returned as
// a *mcp.RPCError).
func MCPResult(resp *otc.CallToolResponse, shape OutputShape) (*mcpgo.CallToolResult, error) {
	return mcpResult(resp, shape, false)
}

// MCPResultOf is MCPResult for one MCP front tool: a tool given back from
// an MCP tool (FromMCP) answers without the OTC carriers in _meta, as the
// original did.
func MCPResultOf(resp *otc.CallToolResponse, t *MCPTool) (*mcpgo.CallToolResult, error) {
	return mcpResult(resp, t.Shape, t.FromMCP)
}

func mcpResult(resp *otc.CallToolResponse, shape OutputShape, fromMCP bool) (*mcpgo.CallToolResult, error) {
	if raw, ok := resp.Ext[XMCPResult]; ok {
		if res, ok := restoreMCPResult(raw); ok {
			return res, nil
		}
	}
	if string(resp.Ext[XMCPContent]) == "true" && resp.Success {
		if res, ok := restoreMCPResult(json.RawMessage(`{"content":` + string(resp.Value) + `}`)); ok {
			return res, nil
		}
	}
	if !resp.Success && resp.Error != nil {
		if c, ok := mcpErrorCarrier(resp.Error.Ext); ok {
			return nil, c.rpcError()
		}
	}
	call := OTCCallMeta{CallID: resp.CallID, Duration: resp.Duration}
	meta := map[string]any{}
	res := &mcpgo.CallToolResult{Content: []mcpgo.Content{}}
	if !resp.Success {
		e := resp.Error
		if e == nil {
			e = &otc.ToolError{Message: "The tool failed"}
		}
		text := e.Message
		if e.AdditionalPromptContent != "" {
			text += "\n\n" + e.AdditionalPromptContent
		}
		res.IsError = true
		res.Content = []mcpgo.Content{mcpgo.NewTextContent(text)}
		meta[MetaOTCError] = e
		meta[MetaOTCCall] = call
		res.Meta = &mcpgo.Meta{AdditionalFields: meta}
		if fromMCP {
			res.Meta = nil
		}
		return res, nil
	}
	res.Meta = &mcpgo.Meta{AdditionalFields: meta}
	v := bytes.TrimSpace(resp.Value)
	if len(v) == 0 {
		if shape == OutputWrapped {
			res.StructuredContent = json.RawMessage(`{"value":null}`)
		}
		call.NoValue = true
		meta[MetaOTCCall] = call
		if fromMCP {
			res.Meta = nil
		}
		return res, nil
	}
	compact := compactJSON(v)
	text := string(compact)
	var s string
	isString := compact[0] == '"' && json.Unmarshal(compact, &s) == nil
	if isString {
		text = s
	}
	switch {
	case shape == OutputWrapped:
		res.StructuredContent = json.RawMessage(`{"value":` + string(compact) + `}`)
		call.Value = compact
	case compact[0] == '{':
		res.StructuredContent = compact
	case isString:
		if !bytes.Equal(encode(s), compact) {
			call.Value = compact // escapes the text alone would not restore
		}
	default:
		call.Value = compact // a number, array, boolean or null: the text alone is a string
	}
	res.Content = []mcpgo.Content{mcpgo.NewTextContent(text)}
	meta[MetaOTCCall] = call
	if fromMCP {
		res.Meta = nil
	}
	return res, nil
}

// restoreMCPResult gives back a CallToolResult carried in XMCPResult, its
// content blocks byte for byte (mcp-go's typed blocks would add or drop
// fields).
func restoreMCPResult(raw json.RawMessage) (*mcpgo.CallToolResult, bool) {
	var w struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		IsError           bool              `json:"isError"`
		Meta              *mcpgo.Meta       `json:"_meta"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &w) != nil || w.Content == nil {
		return nil, false
	}
	res := &mcpgo.CallToolResult{Content: make([]mcpgo.Content, 0, len(w.Content)), IsError: w.IsError}
	res.Meta = w.Meta
	for _, c := range w.Content {
		if !isObject(c) {
			return nil, false
		}
		res.Content = append(res.Content, rawContent{raw: c})
	}
	if sc := bytes.TrimSpace(w.StructuredContent); len(sc) > 0 && !isNull(sc) {
		res.StructuredContent = json.RawMessage(sc)
	}
	return res, true
}

// rawContent is a content block written exactly as it was received. It
// embeds a typed block only to be an mcpgo.Content.
type rawContent struct {
	mcpgo.TextContent
	raw json.RawMessage
}

// MarshalJSON writes the block as received.
func (c rawContent) MarshalJSON() ([]byte, error) { return c.raw, nil }

func (c *MCPErrorCarrier) rpcError() *mcp.RPCError {
	e := &mcp.RPCError{Code: c.Code, Message: c.Message}
	if len(c.Data) > 0 {
		e.Data = c.Data
	}
	return e
}

// compactJSON removes insignificant space; invalid JSON is returned as is.
func compactJSON(v []byte) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		return v
	}
	return buf.Bytes()
}

// mcpResultWire is a CallToolResult as read from the wire, raw.
type mcpResultWire struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent"`
	IsError           bool              `json:"isError"`
	Meta              json.RawMessage   `json:"_meta"`
}

// OTCOutcome is an MCP result as the OTC front answers it.
type OTCOutcome struct {
	// Value is the value (nil: none) when Error is nil.
	Value json.RawMessage
	// Error is set for an isError result.
	Error *otc.ToolError
	// Ext holds the response's carriers (XMCPResult).
	Ext otc.Extensions
}

// OTCResult maps a raw MCP CallToolResult to an OTC outcome:
//
//	isError false  value = structuredContent when present; else the text of
//	               the only block when the result is exactly one text block;
//	               else the content array itself (images, audio and resources
//	               kept, base64 intact)
//	isError true   a ToolError: message = the text blocks joined by newlines,
//	               can_retry false
//
// outputSchema is the tool's OTC output_schema. When the value would not
// give the result back through an MCP front (MCPResult), the raw result
// travels in XMCPResult. A result from an MCP front (a bridge) is answered
// from its carriers: the ToolError in MetaOTCError, the value in MetaOTCCall.
func OTCResult(raw json.RawMessage, outputSchema json.RawMessage) (OTCOutcome, error) {
	var r mcpResultWire
	if err := json.Unmarshal(raw, &r); err != nil {
		return OTCOutcome{}, fmt.Errorf("malformed CallToolResult: %w", err)
	}
	if out, ok := fromOTCCarriers(&r); ok {
		return out, nil
	}
	var out OTCOutcome
	texts := textsOf(r.Content)
	switch {
	case r.IsError:
		msg := strings.Join(texts, "\n")
		if msg == "" {
			msg = "The tool reported an error"
		}
		out.Error = &otc.ToolError{Message: msg}
	case len(bytes.TrimSpace(r.StructuredContent)) > 0 && !isNull(r.StructuredContent):
		out.Value = bytes.TrimSpace(r.StructuredContent)
	case len(r.Content) == 1 && len(texts) == 1:
		out.Value = encode(texts[0])
		if plainText(raw, r.Content[0], outputSchema) {
			return out, nil // the common case: an MCP front gives it back as is
		}
	case r.Content == nil:
		out.Value = json.RawMessage("[]")
	default:
		out.Value = encode(r.Content)
		if onlyContent(raw) {
			out.Ext = otc.Extensions{XMCPContent: json.RawMessage("true")}
			return out, nil
		}
	}
	if !givesBack(raw, out, outputSchema) {
		out.Ext = otc.Extensions{XMCPResult: compactJSON(raw)}
	}
	return out, nil
}

// fromOTCCarriers answers a result of an MCP front from its carriers.
func fromOTCCarriers(r *mcpResultWire) (OTCOutcome, bool) {
	var call OTCCallMeta
	if !rawMetaField(r.Meta, MetaOTCCall, &call) {
		return OTCOutcome{}, false
	}
	if r.IsError {
		var e otc.ToolError
		if !rawMetaField(r.Meta, MetaOTCError, &e) || e.Message == "" {
			return OTCOutcome{}, false
		}
		return OTCOutcome{Error: &e}, true
	}
	switch {
	case call.NoValue:
		return OTCOutcome{}, true
	case len(call.Value) > 0:
		return OTCOutcome{Value: call.Value}, true
	case len(bytes.TrimSpace(r.StructuredContent)) > 0 && !isNull(r.StructuredContent):
		return OTCOutcome{Value: bytes.TrimSpace(r.StructuredContent)}, true
	case len(r.Content) == 1 && len(textsOf(r.Content)) == 1:
		return OTCOutcome{Value: encode(textsOf(r.Content)[0])}, true
	}
	return OTCOutcome{}, false
}

// givesBack reports whether an MCP front would turn out back into raw
// (compared as data, its own _meta carriers aside).
func givesBack(raw json.RawMessage, out OTCOutcome, outputSchema json.RawMessage) bool {
	resp := &otc.CallToolResponse{Success: out.Error == nil, Value: out.Value, Error: out.Error}
	_, shape := MCPOutputSchema(outputSchema)
	back, err := MCPResult(resp, shape)
	if err != nil {
		return false
	}
	back.Meta = nil
	b, err := json.Marshal(back)
	if err != nil {
		return false
	}
	want, err1 := decode(raw)
	got, err2 := decode(b)
	return err1 == nil && err2 == nil && reflect.DeepEqual(want, got)
}

// textsOf returns the text of every text block.
func textsOf(blocks []json.RawMessage) []string {
	var out []string
	for _, b := range blocks {
		var t struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if json.Unmarshal(b, &t) == nil && t.Type == "text" && t.Text != nil {
			out = append(out, *t.Text)
		}
	}
	return out
}

// onlyContent reports whether a raw result has no member but content (and
// isError false).
func onlyContent(raw json.RawMessage) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return false
	}
	for k, v := range top {
		if k != "content" && !(k == "isError" && string(v) == "false") {
			return false
		}
	}
	return true
}

// plainText reports whether raw is just one text block with nothing else,
// for a tool without an output schema: what MCPResult makes of its text
// value, so no carrier is needed (and givesBack's round trip is skipped).
func plainText(raw, block, outputSchema json.RawMessage) bool {
	if os := bytes.TrimSpace(outputSchema); len(os) > 0 && string(os) != "{}" && !isNull(os) {
		return false
	}
	var b map[string]json.RawMessage
	if json.Unmarshal(block, &b) != nil || len(b) != 2 {
		return false
	}
	return onlyContent(raw)
}
