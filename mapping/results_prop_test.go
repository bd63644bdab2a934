package mapping

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpotc/mcpotc/otc"
)

// The OTC front decides from one reading of a result whether it needs the
// XMCPResult carrier. Two properties hold for every result:
//
//   - lossless: an MCP front (MCPResult) makes of the outcome the result
//     again, compared as data (an explicit "isError": false or
//     "structuredContent": null aside, which MCP reads as absent, and the
//     MCP front's own _meta carriers aside);
//   - same answer as the round trip it replaces: OTCResultFor answers what
//     the earlier implementation, which mapped every result back through
//     MCPResult and compared (roundTripOTCResult below), answered.
//
// Results are generated from the members MCP results have, in the
// combinations that take each branch; schemas cover each OutputShape.

var propSchemas = []json.RawMessage{
	nil, json.RawMessage(`null`), json.RawMessage(`{}`), json.RawMessage(`{ }`),
	json.RawMessage(`{"type":"object","properties":{"sum":{"type":"number"}}}`),
	json.RawMessage(`{"properties":{"a":{}}}`),
	json.RawMessage(`{"type":"number"}`), json.RawMessage(`{"type":"string"}`), json.RawMessage(`[]`),
}

// propResult makes a random CallToolResult.
func propResult(r *rand.Rand) json.RawMessage {
	structured := []string{`{"sum":5}`, `{"a":[1,2,{"b":null}],"big":123456789012345678901234567890}`, `{}`, `[1,2]`, `7`, `"s"`, `null`, `{"value":{"value":1}}`}
	texts := []string{"", "hello", "line\nbreak", "é \u2028 <b>", `{"sum":5}`, `{"sum": 5}`, "The tool reported an error", `"quoted"`, "15", `[1,2]`}
	blocks := func() string {
		switch r.IntN(7) {
		case 0:
			return `{"type":"image","data":"aGVsbG8=","mimeType":"image/png"}`
		case 1:
			return `{"type":"text","text":null}`
		case 2:
			return fmt.Sprintf(`{"type":"text","text":%s,"annotations":{"audience":["user"]}}`, encode(texts[r.IntN(len(texts))]))
		case 3:
			return `{"type":"resource","resource":{"uri":"file:///a","text":"x"}}`
		case 4:
			return `"not an object"`
		}
		return fmt.Sprintf(`{"type":"text","text":%s}`, encode(texts[r.IntN(len(texts))]))
	}
	var members []string
	sc := ""
	if r.IntN(3) == 0 {
		sc = structured[r.IntN(len(structured))]
		members = append(members, `"structuredContent":`+sc)
	}
	switch r.IntN(7) {
	case 0: // no content
	case 1:
		members = append(members, `"content":null`)
	case 2:
		members = append(members, `"content":[]`)
	case 3, 4:
		if sc != "" && r.IntN(2) == 0 { // the text an MCP front writes for sc
			members = append(members, fmt.Sprintf(`"content":[{"type":"text","text":%s}]`, encode(string(compactJSON([]byte(sc))))))
		} else {
			members = append(members, `"content":[`+blocks()+`]`)
		}
	default:
		n := 2 + r.IntN(2)
		var bs []string
		for range n {
			bs = append(bs, blocks())
		}
		members = append(members, `"content":[`+strings.Join(bs, ",")+`]`)
	}
	switch r.IntN(5) {
	case 0:
		members = append(members, `"isError":true`)
	case 1:
		members = append(members, `"isError":false`)
	}
	if r.IntN(6) == 0 {
		members = append(members, `"_meta":{"progressToken":"p"}`)
	}
	r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	return json.RawMessage("{" + strings.Join(members, ",") + "}")
}

func TestOTCResultProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	branches := map[string]int{}
	for i := range 20000 {
		raw := propResult(r)
		schema := propSchemas[r.IntN(len(propSchemas))]
		out, err := OTCResultFor(raw, ResultShapeOf(schema))
		if err != nil {
			t.Fatalf("%d: %s: %v", i, raw, err)
		}
		branches[propBranch(out)]++
		if msg := propLossless(raw, schema, out); msg != "" {
			t.Fatalf("%d: not lossless: %s\nresult %s\nschema %s\noutcome %s", i, msg, raw, schema, propShow(out))
		}
		old, err := roundTripOTCResult(raw, schema)
		if err != nil {
			t.Fatalf("%d: %s: the round trip failed: %v", i, raw, err)
		}
		if !reflect.DeepEqual(out, old) {
			t.Fatalf("%d: result %s, schema %s:\n got %s\nwant %s (the round trip's)", i, raw, schema, propShow(out), propShow(old))
		}
	}
	// Every branch is taken often enough to mean something.
	for _, b := range []string{"error", "error+carrier", "value", "value+carrier", "content-carrier"} {
		if branches[b] < 100 {
			t.Errorf("branch %q taken %d times: %v", b, branches[b], branches)
		}
	}
	t.Logf("branches: %v", branches)
}

// FuzzOTCResult checks the lossless property on any result, and that a
// result that is not JSON is an error, never a panic.
func FuzzOTCResult(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 40 {
		f.Add([]byte(propResult(r)), uint8(r.IntN(len(propSchemas))))
	}
	f.Add([]byte(`null`), uint8(0))
	f.Add([]byte(`{"content":5}`), uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, si uint8) {
		schema := propSchemas[int(si)%len(propSchemas)]
		out, err := OTCResultFor(raw, ResultShapeOf(schema))
		if err != nil {
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("invalid JSON %q accepted", raw)
		}
		if msg := propLossless(raw, schema, out); msg != "" {
			t.Fatalf("not lossless: %s\nresult %s\nschema %s\noutcome %s", msg, raw, schema, propShow(out))
		}
	})
}

func propBranch(out OTCOutcome) string {
	b := "value"
	if out.Error != nil {
		b = "error"
	}
	switch {
	case out.Ext[XMCPResult] != nil:
		b += "+carrier"
	case out.Ext[XMCPContent] != nil:
		b = "content-carrier"
	}
	return b
}

func propShow(out OTCOutcome) string {
	b, _ := json.Marshal(out)
	return string(b)
}

// propLossless returns what differs between raw and what an MCP front
// makes of out, or "".
func propLossless(raw, schema json.RawMessage, out OTCOutcome) string {
	want, err := decode(raw)
	if err != nil {
		return err.Error()
	}
	wm, ok := want.(map[string]any)
	if !ok {
		// Not an object (null): the carrier gives it back as it was.
		if string(out.Ext[XMCPResult]) != string(compactJSON(raw)) {
			return "a result that is not an object lost its carrier"
		}
		return ""
	}
	// Not MCP: content is an array of objects, and required. The carrier
	// holds such a result, but an MCP front cannot answer it.
	blocks, ok := wm["content"].([]any)
	if !ok {
		return ""
	}
	for _, b := range blocks {
		if _, ok := b.(map[string]any); !ok {
			return ""
		}
	}
	if m, ok := wm["_meta"]; ok {
		if _, ok := m.(map[string]any); !ok {
			return "" // not MCP: _meta is an object
		}
	}
	// Members of its own (MCP results may have them) the MCP front cannot
	// answer either: mcp-go's CallToolResult writes only the members below.
	for k := range wm {
		switch k {
		case "content", "structuredContent", "isError", "_meta":
		default:
			return ""
		}
	}
	if v, ok := wm["isError"]; ok && v == false {
		delete(wm, "isError")
	}
	if v, ok := wm["structuredContent"]; ok && v == nil {
		delete(wm, "structuredContent")
	}
	_, shape := mcpOutputSchema(schema)
	resp := &otc.CallToolResponse{Success: out.Error == nil, Value: out.Value, Error: out.Error, Ext: out.Ext}
	back, err := MCPResult(resp, shape)
	if err != nil {
		return err.Error()
	}
	b, err := json.Marshal(back)
	if err != nil {
		return err.Error()
	}
	got, err := decode(b)
	if err != nil {
		return err.Error()
	}
	gm := got.(map[string]any)
	if meta, ok := gm["_meta"].(map[string]any); ok {
		delete(meta, MetaOTCCall)
		delete(meta, MetaOTCError)
		if _, had := wm["_meta"]; len(meta) == 0 && !had {
			delete(gm, "_meta")
		}
	}
	if !reflect.DeepEqual(wm, gm) {
		return fmt.Sprintf("an MCP front answers %s", b)
	}
	return ""
}

// roundTripOTCResult is otcResult as it was before OTCResultFor: it decided
// on a carrier by mapping the outcome back through MCPResult, encoding it,
// and comparing it with the result, on every call. Kept as the reference
// the new decision must agree with (member names aside: it matched them in
// any case, as encoding/json does; MCP spells them exactly).
func roundTripOTCResult(raw json.RawMessage, outputSchema json.RawMessage) (OTCOutcome, error) {
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
		if rtPlainText(raw, r.Content[0], outputSchema) {
			return out, nil
		}
	case r.Content == nil:
		out.Value = json.RawMessage("[]")
	default:
		out.Value = encode(r.Content)
		if rtOnlyContent(raw) {
			out.Ext = otc.Extensions{XMCPContent: json.RawMessage("true")}
			return out, nil
		}
	}
	if !rtGivesBack(raw, out, outputSchema) {
		out.Ext = otc.Extensions{XMCPResult: compactJSON(raw)}
	}
	return out, nil
}

func rtGivesBack(raw json.RawMessage, out OTCOutcome, outputSchema json.RawMessage) bool {
	resp := &otc.CallToolResponse{Success: out.Error == nil, Value: out.Value, Error: out.Error}
	_, shape := mcpOutputSchema(outputSchema)
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

func rtOnlyContent(raw json.RawMessage) bool {
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

func rtPlainText(raw, block, outputSchema json.RawMessage) bool {
	if os := bytes.TrimSpace(outputSchema); len(os) > 0 && string(os) != "{}" && !isNull(os) {
		return false
	}
	var b map[string]json.RawMessage
	if json.Unmarshal(block, &b) != nil || len(b) != 2 {
		return false
	}
	return rtOnlyContent(raw)
}
