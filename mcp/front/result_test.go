package front

import (
	"bytes"
	"encoding/json"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// The front writes a tools/call result byte for byte as mcp-go's
// CallToolResult.MarshalJSON does (the same members, in the same order,
// the same escapes), except that "<", ">" and "&" stay as they are.
func TestAppendCallResultIsMCPGosEncoding(t *testing.T) {
	t.Parallel()
	text := "a \"quoted\" \\ line\nand\ttab \x01 <b>&amp; é \u2028 \u2029 \xff end"
	meta := &mcpgo.Meta{ProgressToken: "p", AdditionalFields: map[string]any{"k": []any{1.5, "v"}}}
	for name, r := range map[string]*mcpgo.CallToolResult{
		"empty":  {},
		"text":   {Content: []mcpgo.Content{mcpgo.NewTextContent(text)}},
		"blocks": {Content: []mcpgo.Content{mcpgo.NewTextContent("x"), mcpgo.NewImageContent("aGk=", "image/png"), mcpgo.TextContent{Type: "text", Text: "n", Annotated: mcpgo.Annotated{Annotations: &mcpgo.Annotations{Priority: new(0.5)}}}}},
		"meta":   {Result: mcpgo.Result{Meta: meta}, Content: []mcpgo.Content{mcpgo.TextContent{Type: "text", Text: "m", Meta: meta}}},
		"metaFields": {Result: mcpgo.Result{Meta: &mcpgo.Meta{AdditionalFields: map[string]any{
			"mcpotc/otc-call": struct {
				CallID   string  `json:"call_id"`
				Duration float64 `json:"duration,omitempty"`
			}{"c<1>", 1.5}, "a": text, "progressToken": "in the fields"}}}},
		"metaEmpty": {Result: mcpgo.Result{Meta: &mcpgo.Meta{}}},
		"any":       {Content: []mcpgo.Content{}, StructuredContent: map[string]any{"sum": 3, "s": text}},
		"raw":       {StructuredContent: json.RawMessage(`{"a":[1,2,{"b":null}]}`)},
		"rawWire":   {RawStructuredContent: json.RawMessage(`{"w":true}`), StructuredContent: map[string]any{"ignored": 1}},
		"error":     {Content: []mcpgo.Content{mcpgo.NewTextContent("failed")}, IsError: true},
		"modern":    {Result: mcpgo.Result{ResultType: mcpgo.ResultTypeComplete}, MultiRoundTripResult: mcpgo.MultiRoundTripResult{RequestState: "st<1>"}},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("%s: mcp-go: %v", name, err)
		}
		got, err := appendCallResult(nil, r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, unescapeHTML(want)) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
	if _, err := appendCallResult(nil, &mcpgo.CallToolResult{StructuredContent: json.RawMessage(`{"a":`)}); err == nil {
		t.Error("invalid raw structured content was written")
	}
}

// appendString writes what encoding/json writes without HTML escaping.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\/\b\f\n\r\t", "\x00\x1f\x7f", "é\u2028\u2029😀", "\xff\xfe", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got, want := appendString(nil, s), bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(got, want) {
			t.Errorf("%q:\n got %s\nwant %s", s, got, want)
		}
	})
}
