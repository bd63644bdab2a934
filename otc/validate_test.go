package otc

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestPlainInputSchema(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, `{"type":"object"}`},
		{`null`, `{"type":"object"}`},
		{`{}`, `{"type":"object"}`},
		{`{"parameters":{"type":"object","properties":{"a":{"type":"number"}}}}`, `{"type":"object","properties":{"a":{"type":"number"}}}`},
		{`{"parameters":{}}`, `{"type":"object"}`},
		// A plain schema with a parameter called "parameters" is not a wrapper.
		{`{"type":"object","properties":{"parameters":{"type":"string"}}}`, `{"type":"object","properties":{"parameters":{"type":"string"}}}`},
		{`{"type":"object"}`, `{"type":"object"}`},
	}
	for _, tt := range tests {
		if got := string(PlainInputSchema(json.RawMessage(tt.in))); got != tt.want {
			t.Errorf("PlainInputSchema(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestValidateMessages(t *testing.T) {
	schema := `{"type":"object","properties":{
		"a":{"type":"number","description":"a"},
		"n":{"type":"integer","description":"n","minimum":1},
		"s":{"type":["string","null"],"description":"s"},
		"e":{"enum":["x","y"],"description":"e"},
		"o":{"type":"object","description":"o","properties":{"deep":{"type":"boolean"}},"required":["deep"]},
		"l":{"type":"array","description":"l","items":{"type":"string"}},
		"d":{"type":"string","format":"date-time","description":"d"}
	},"required":["a"],"additionalProperties":false}`
	v, err := compileInputSchema("T.T@1.0.0", json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		input string
		want  map[string]string
	}{
		{`{"a":1}`, nil},
		{``, map[string]string{"a": "Is required"}},
		{`{"a":"infinity"}`, map[string]string{"a": "Must be a number"}},
		{`{"a":1,"n":1.5}`, map[string]string{"n": "Must be an integer"}},
		{`{"a":1,"n":0}`, map[string]string{"n": "Must be >= 1 but found 0"}},
		{`{"a":1,"s":3}`, map[string]string{"s": "Must be null or a string"}},
		{`{"a":1,"e":"z"}`, map[string]string{"e": `Must be one of the allowed values ("x", "y")`}},
		{`{"a":1,"o":{}}`, map[string]string{"o": "deep: Is required"}},
		{`{"a":1,"o":{"deep":"yes"}}`, map[string]string{"o": "deep: Must be a boolean"}},
		{`{"a":1,"l":["ok",2]}`, map[string]string{"l": "1: Must be a string"}},
		{`{"a":1,"zz":1}`, map[string]string{"zz": "Is not an allowed parameter"}},
		{`{"a":1,"d":"yesterday"}`, map[string]string{"d": "Must be a valid date-time"}},
		{`{"b":"x","a":"y"}`, map[string]string{"a": "Must be a number", "b": "Is not an allowed parameter"}},
		{`[1]`, map[string]string{"input": "Must be an object"}},
		{`{"a":`, map[string]string{"input": "Must be valid JSON"}},
		// Big integers are numbers: no float64 overflow complaint.
		{`{"a":123456789012345678901234567890}`, nil},
		{`{"a":1e400}`, nil},
		// Exponents that would make exact arithmetic unbounded are refused.
		{`{"a":1e99999999}`, map[string]string{"a": "Is out of range (at most 4096 digits and an exponent within ±1000)"}},
		{`{"a":1,"o":{"deep":[1E-5000]}}`, map[string]string{"o": "deep.0: Is out of range (at most 4096 digits and an exponent within ±1000)"}},
	}
	for _, tt := range tests {
		got := v.validate(json.RawMessage(tt.input))
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("validate(%s) = %v, want %v", tt.input, got, tt.want)
		}
	}
}

func TestCompileRefusesRemoteRefs(t *testing.T) {
	for _, ref := range []string{"file:///etc/passwd", "http://127.0.0.1:1/schema.json"} {
		_, err := compileInputSchema("T.T@1.0.0", json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"`+ref+`"}}}`))
		if err == nil {
			t.Errorf("schema with $ref %s compiled; want an error", ref)
		}
	}
	// Local refs still work.
	v, err := compileInputSchema("T.T@1.0.0", json.RawMessage(`{"type":"object","$defs":{"n":{"type":"number"}},"properties":{"a":{"$ref":"#/$defs/n"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.validate(json.RawMessage(`{"a":"x"}`)); got["a"] != "Must be a number" {
		t.Errorf("local $ref: got %v", got)
	}
}
