package mapping

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/otc"
)

// Carrier keys: where a field that the other protocol has no place for
// travels, so that chained bridges lose nothing (README, "Round trips").
const (
	// MetaOTCTool, in an MCP tool's _meta, holds the OTC identity of the
	// tool the MCP front exposes: {"id", "version", "requirements"}.
	MetaOTCTool = "mcpotc/otc-tool"
	// MetaOTCError, in an isError result's _meta, holds the whole OTC
	// ToolError (developer_message, can_retry, retry_after_ms …): fields a
	// model must not read travel here, never in content.
	MetaOTCError = "mcpotc/otc-error"
	// MetaOTCCall, in a result's _meta, holds the OTC call_id and duration.
	MetaOTCCall = "mcpotc/otc-call"
	// XMCPTool, a keyword in an OTC input_schema, holds the MCP-only fields
	// of the tool the OTC front exposes: {"name", "title", "annotations",
	// "icons", "_meta"}.
	XMCPTool = "x-mcp-tool"
)

// OTCToolMeta is the MetaOTCTool carrier.
type OTCToolMeta struct {
	ID           string            `json:"id"`
	Version      string            `json:"version"`
	Requirements *otc.Requirements `json:"requirements,omitempty"`
}

// OTCCallMeta is the MetaOTCCall carrier.
type OTCCallMeta struct {
	CallID   string  `json:"call_id,omitempty"`
	Duration float64 `json:"duration"`
}

// MCPResult maps an OTC CallToolResponse (HTTP 200) to an MCP CallToolResult:
//
//	success, value v   structuredContent v (object) or {"value": v} (OutputWrapped);
//	                   content one text block: v itself when a string, else compact JSON
//	success, no value  content []
//	failure, error e   isError, text e.message (+ blank line + additional_prompt_content);
//	                   the whole ToolError in _meta[MetaOTCError], never in content
func MCPResult(resp *otc.CallToolResponse, shape OutputShape) *mcpgo.CallToolResult {
	meta := map[string]any{MetaOTCCall: OTCCallMeta{CallID: resp.CallID, Duration: resp.Duration}}
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
		res.Meta = &mcpgo.Meta{AdditionalFields: meta}
		return res
	}
	res.Meta = &mcpgo.Meta{AdditionalFields: meta}
	v := bytes.TrimSpace(resp.Value)
	if len(v) == 0 {
		if shape == OutputWrapped {
			res.StructuredContent = json.RawMessage(`{"value":null}`)
		}
		return res
	}
	compact := compactJSON(v)
	switch {
	case shape == OutputWrapped:
		res.StructuredContent = json.RawMessage(`{"value":` + string(compact) + `}`)
	case compact[0] == '{':
		res.StructuredContent = compact
	}
	text := string(compact)
	var s string
	if compact[0] == '"' && json.Unmarshal(compact, &s) == nil {
		text = s
	}
	res.Content = []mcpgo.Content{mcpgo.NewTextContent(text)}
	return res
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
}

// OTCResult maps a raw MCP CallToolResult to an OTC outcome:
//
//	isError false  value = structuredContent when present; else the text of
//	               the only block when the result is exactly one text block;
//	               else the content array itself (images, audio and resources
//	               kept, base64 intact)
//	isError true   a ToolError: message = the text blocks joined by newlines,
//	               can_retry false
func OTCResult(raw json.RawMessage) (value json.RawMessage, toolErr *otc.ToolError, err error) {
	var r mcpResultWire
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, nil, fmt.Errorf("malformed CallToolResult: %w", err)
	}
	if r.IsError {
		texts := textsOf(r.Content)
		msg := strings.Join(texts, "\n")
		if msg == "" {
			msg = "The tool reported an error"
		}
		return nil, &otc.ToolError{Message: msg}, nil
	}
	if sc := bytes.TrimSpace(r.StructuredContent); len(sc) > 0 && !isNull(sc) {
		return sc, nil, nil
	}
	if texts := textsOf(r.Content); len(r.Content) == 1 && len(texts) == 1 {
		return encode(texts[0]), nil, nil
	}
	if r.Content == nil {
		return json.RawMessage("[]"), nil, nil
	}
	return encode(r.Content), nil, nil
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
