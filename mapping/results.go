package mapping

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

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
// a *RPCError).
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
	text := ""
	s, plain := unquotePlain(compact)
	isString := plain || compact[0] == '"' && json.Unmarshal(compact, &s) == nil
	if isString {
		text = s
	} else {
		text = string(compact)
	}
	switch {
	case shape == OutputWrapped:
		res.StructuredContent = json.RawMessage(`{"value":` + string(compact) + `}`)
		call.Value = compact
	case compact[0] == '{':
		res.StructuredContent = compact
	case isString:
		if !plain && !bytes.Equal(encode(s), compact) {
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

func (c *MCPErrorCarrier) rpcError() *RPCError {
	e := &RPCError{Code: c.Code, Message: c.Message}
	if len(c.Data) > 0 {
		e.Data = c.Data
	}
	return e
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

// OTCResultShape is what mapping an MCP result to OTC needs to know of the
// tool's output_schema: how an MCP front would map the value back, and
// whether there is no schema at all. It is worked out once per tool, when
// the catalog changes (OTCTool.Result), not on every call.
type OTCResultShape struct {
	shape OutputShape // mcpOutputSchema of the output_schema
	plain bool        // output_schema absent, null or {}
}

// ResultShapeOf works out the OTCResultShape of an OTC output_schema.
func ResultShapeOf(outputSchema json.RawMessage) OTCResultShape {
	_, shape := mcpOutputSchema(outputSchema)
	os := bytes.TrimSpace(outputSchema)
	return OTCResultShape{shape: shape, plain: len(os) == 0 || string(os) == "{}" || isNull(os)}
}

// otcResult maps a raw MCP CallToolResult to an OTC outcome:
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
// OTCResultFor does the same with the output schema worked out beforehand.
func otcResult(raw json.RawMessage, outputSchema json.RawMessage) (OTCOutcome, error) {
	return OTCResultFor(raw, ResultShapeOf(outputSchema))
}

// OTCResultFor is otcResult for a tool whose OTCResultShape is known. It
// reads the result once and decides from that reading whether a carrier
// is needed; the property that decision keeps (MCPResult of the outcome is
// the result again) is tested over random results in results_prop_test.go.
func OTCResultFor(raw json.RawMessage, s OTCResultShape) (OTCOutcome, error) {
	return otcResultFor(raw, s, true)
}

// OTCResultPlain is OTCResultFor for a caller that does not read the
// x-mcp carriers (otc.CarriersHeader): the same value or error, with no
// Ext, and without the copy of the result that XMCPResult would hold.
func OTCResultPlain(raw json.RawMessage, s OTCResultShape) (OTCOutcome, error) {
	return otcResultFor(raw, s, false)
}

func otcResultFor(raw json.RawMessage, s OTCResultShape, carriers bool) (OTCOutcome, error) {
	r, err := readMCPResult(raw)
	if err != nil {
		return OTCOutcome{}, fmt.Errorf("malformed CallToolResult: %w", err)
	}
	if out, ok := fromOTCCarriers(&r.mcpResultWire); ok {
		return out, nil
	}
	var out OTCOutcome
	switch {
	case r.IsError:
		msg := strings.Join(textsOf(r.Content), "\n")
		if msg == "" {
			msg = "The tool reported an error"
		}
		out.Error = &otc.ToolError{Message: msg}
		// An MCP front answers the message as the only text block.
		if r.exact("isError") && r.text != "" {
			return out, nil
		}
	case r.structured != nil:
		out.Value = r.structured
		// An MCP front answers an object value as structuredContent and
		// its compact JSON as the only text block.
		if s.shape != OutputWrapped && r.structured[0] == '{' && r.exact("structuredContent") &&
			(r.text == string(r.structured) || r.text == string(compactJSON(r.structured))) {
			return out, nil
		}
	case r.isText:
		out.Value = quoteString(r.text)
		// An MCP front answers a string value as the only text block;
		// without an output schema, also when isError false is written.
		if s.shape != OutputWrapped && (r.exact() || s.plain && r.onlyContent() && len(r.block) == 2) {
			return out, nil
		}
	case r.Content == nil:
		out.Value = json.RawMessage("[]")
	default:
		out.Value = encode(r.Content)
		if r.onlyContent() {
			if carriers {
				out.Ext = otc.Extensions{XMCPContent: json.RawMessage("true")}
			}
			return out, nil
		}
	}
	if carriers {
		out.Ext = otc.Extensions{XMCPResult: compactJSON(raw)}
	}
	return out, nil
}

// mcpResultRead is a CallToolResult read once: its members, raw, and what
// the mapping asks of them.
type mcpResultRead struct {
	mcpResultWire
	members map[string]json.RawMessage
	// structured is structuredContent, space trimmed; nil when absent or null.
	structured json.RawMessage
	// block is the members of the only content block, when there is one.
	block map[string]json.RawMessage
	// isText: the only block is a text block (type "text", a string text),
	// whose text is text.
	isText bool
	text   string
}

// readMCPResult reads a raw CallToolResult. Member names are matched
// exactly, as MCP spells them.
func readMCPResult(raw json.RawMessage) (*mcpResultRead, error) {
	r := &mcpResultRead{}
	if err := json.Unmarshal(raw, &r.members); err != nil {
		return nil, err
	}
	if c, ok := r.members["content"]; ok {
		if err := json.Unmarshal(c, &r.Content); err != nil {
			return nil, fmt.Errorf("content: %w", err)
		}
	}
	if e, ok := r.members["isError"]; ok {
		if err := json.Unmarshal(e, &r.IsError); err != nil {
			return nil, fmt.Errorf("isError: %w", err)
		}
	}
	r.StructuredContent = r.members["structuredContent"]
	r.Meta = r.members["_meta"]
	if sc := bytes.TrimSpace(r.StructuredContent); len(sc) > 0 && !isNull(sc) {
		r.structured = sc
	}
	if len(r.Content) == 1 && json.Unmarshal(r.Content[0], &r.block) == nil {
		text, ok := r.block["text"]
		r.isText = ok && jsonStringIs(r.block["type"], "text") && !isNull(text) && jsonString(text, &r.text)
	}
	return r, nil
}

// jsonString reads the JSON string raw into s, as json.Unmarshal does
// (false when raw is not a string); a string without escapes, in valid
// UTF-8, is taken as it is.
func jsonString(raw json.RawMessage, s *string) bool {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		in := raw[1 : len(raw)-1]
		if bytes.IndexByte(in, '\\') < 0 && bytes.IndexByte(in, '"') < 0 && utf8.Valid(in) && !hasControl(in) {
			*s = string(in)
			return true
		}
	}
	return json.Unmarshal(raw, s) == nil
}

// jsonStringIs reports whether raw is the JSON string want.
func jsonStringIs(raw json.RawMessage, want string) bool {
	if len(raw) == len(want)+2 && raw[0] == '"' && string(raw[1:len(raw)-1]) == want {
		return true
	}
	var s string
	return bytes.IndexByte(raw, '\\') >= 0 && json.Unmarshal(raw, &s) == nil && s == want
}

// hasControl reports whether b holds a control character, which a JSON
// string may not hold unescaped.
func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// exact reports whether the result is just its only text block, whose
// members are type and text, and the members named (with content).
func (r *mcpResultRead) exact(members ...string) bool {
	if !r.isText || len(r.block) != 2 || len(r.members) != 1+len(members) {
		return false
	}
	for _, m := range members {
		if _, ok := r.members[m]; !ok {
			return false
		}
	}
	return true
}

// onlyContent reports whether the result has no member but content (and
// isError false).
func (r *mcpResultRead) onlyContent() bool {
	for k, v := range r.members {
		if k != "content" && !(k == "isError" && string(v) == "false") {
			return false
		}
	}
	return true
}

// fromOTCCarriers answers a result of an MCP front from its carriers.
func fromOTCCarriers(r *mcpResultWire) (OTCOutcome, bool) {
	if len(r.Meta) == 0 {
		return OTCOutcome{}, false
	}
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
		return OTCOutcome{Value: quoteString(textsOf(r.Content)[0])}, true
	}
	return OTCOutcome{}, false
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
