package mapping

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// jsonEqual compares two JSON texts as data.
func jsonEqual(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %s", got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want is not JSON: %s", want)
	}
	return reflect.DeepEqual(g, w)
}

func TestOTCInputSchema(t *testing.T) {
	tests := []struct {
		name, in, want string
		cut            int
	}{
		{"empty", ``, `{"type":"object"}`, 0},
		{"no type", `{"properties":{"a":{"type":"string","description":"A"}}}`, `{"type":"object","properties":{"a":{"type":"string","description":"A"}}}`, 0},
		{"fills descriptions", `{"type":"object","properties":{"a":{"type":"string","title":"The A"},"b":{"type":"number"}}}`,
			`{"type":"object","properties":{"a":{"type":"string","title":"The A","description":"The A"},"b":{"type":"number","description":"b"}}}`, 0},
		{"inlines $defs with siblings", `{"type":"object","$defs":{"n":{"type":"number","minimum":0}},"properties":{"a":{"$ref":"#/$defs/n","description":"A"}}}`,
			`{"type":"object","properties":{"a":{"type":"number","minimum":0,"description":"A"}}}`, 0},
		{"inlines definitions", `{"type":"object","definitions":{"s":{"type":"string"}},"properties":{"a":{"type":"array","items":{"$ref":"#/definitions/s"},"description":"A"}}}`,
			`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"},"description":"A"}}}`, 0},
		{"cuts recursion", `{"type":"object","$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}}}},"properties":{"n":{"$ref":"#/$defs/node"}}}`,
			`{"type":"object","properties":{"n":{"type":"object","properties":{"next":{"description":"next"}},"description":"n"}}}`, 1},
		{"remote ref cut", `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`,
			`{"type":"object","properties":{"a":{"description":"a"}}}`, 1},
		{"big numbers exact", `{"type":"object","properties":{"a":{"type":"integer","maximum":123456789012345678901234567890,"description":"A"}}}`,
			`{"type":"object","properties":{"a":{"type":"integer","maximum":123456789012345678901234567890,"description":"A"}}}`, 0},
		{"keeps keywords", `{"type":"object","anyOf":[{"required":["a"]},{"required":["b"]}],"additionalProperties":false,"properties":{"a":{"type":"string","description":"A"},"b":{"type":"string","description":"B"}}}`,
			`{"type":"object","anyOf":[{"required":["a"]},{"required":["b"]}],"additionalProperties":false,"properties":{"a":{"type":"string","description":"A"},"b":{"type":"string","description":"B"}}}`, 0},
	}
	for _, tt := range tests {
		got, notes, err := otcInputSchema(json.RawMessage(tt.in))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !jsonEqual(t, got, []byte(tt.want)) {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
		if len(notes.CutRefs) != tt.cut {
			t.Errorf("%s: cut %v, want %d cuts", tt.name, notes.CutRefs, tt.cut)
		}
	}
	// The output of the big-number case keeps its digits as written.
	got, _, _ := otcInputSchema(json.RawMessage(`{"type":"object","properties":{"a":{"maximum":123456789012345678901234567890,"description":"A"}}}`))
	if !json.Valid(got) || !strings.Contains(string(got), "123456789012345678901234567890") {
		t.Errorf("big number lost: %s", got)
	}
	if _, _, err := otcInputSchema(json.RawMessage(`[1]`)); err == nil {
		t.Error("an array inputSchema was accepted")
	}
}

func TestRecursionStaysBounded(t *testing.T) {
	// Five mutually recursive branches would explode if unrolled to depth.
	in := `{"type":"object","$defs":{"t":{"type":"object","properties":{
		"a":{"$ref":"#/$defs/t"},"b":{"$ref":"#/$defs/t"},"c":{"$ref":"#/$defs/t"},"d":{"$ref":"#/$defs/t"},"e":{"$ref":"#/$defs/t"}}}},
		"properties":{"root":{"$ref":"#/$defs/t"}}}`
	got, notes, err := otcInputSchema(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > 2000 || len(notes.CutRefs) != 5 {
		t.Errorf("size %d, cuts %d: %s", len(got), len(notes.CutRefs), got)
	}
}

func TestMCPSchemas(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{``, `{"type":"object"}`},
		{`{"parameters":{"type":"object","properties":{"a":{"type":"number","description":"A"}},"required":["a"]}}`,
			`{"type":"object","properties":{"a":{"type":"number","description":"A"}},"required":["a"]}`},
		{`{"parameters":{"type":"object"}}`, `{"type":"object"}`},
		{`{"properties":{"q":{"type":"string","description":"Q"}}}`, `{"type":"object","properties":{"q":{"type":"string","description":"Q"}}}`},
	} {
		if got := mcpInputSchema(json.RawMessage(tt.in)); !jsonEqual(t, got, []byte(tt.want)) {
			t.Errorf("mcpInputSchema(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
	for _, tt := range []struct {
		in, want string
		shape    OutputShape
	}{
		{``, ``, OutputAny},
		{`null`, ``, OutputAny},
		{`{}`, ``, OutputAny},
		{`{"type":"object","properties":{"sum":{"type":"number"}}}`, `{"type":"object","properties":{"sum":{"type":"number"}}}`, OutputObject},
		{`{"type":"number","description":"The sum"}`, `{"type":"object","properties":{"value":{"type":"number","description":"The sum"}},"required":["value"]}`, OutputWrapped},
		{`{"type":["object","null"]}`, `{"type":"object","properties":{"value":{"type":["object","null"]}},"required":["value"]}`, OutputWrapped},
	} {
		got, shape := mcpOutputSchema(json.RawMessage(tt.in))
		if shape != tt.shape || (tt.want == "" && got != nil) || (tt.want != "" && !jsonEqual(t, got, []byte(tt.want))) {
			t.Errorf("mcpOutputSchema(%s) = %s, %v; want %s, %v", tt.in, got, shape, tt.want, tt.shape)
		}
	}
}
