package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// callParamsReference is what callParams did with json.Valid and
// json.Marshal: it must write the same bytes, and fail the same way.
func callParamsReference(name string, arguments json.RawMessage, meta map[string]any) (json.RawMessage, error) {
	if name == "" {
		return nil, errors.New("mcp: CallTool: empty tool name")
	}
	args := bytes.TrimSpace(arguments)
	switch {
	case len(args) == 0, string(args) == "null":
		args = json.RawMessage(`{}`)
	case args[0] != '{' || !json.Valid(args):
		return nil, fmt.Errorf("mcp: CallTool: the arguments of %q are not a JSON object", name)
	}
	p := struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      map[string]any  `json:"_meta,omitempty"`
	}{name, args, meta}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("mcp: CallTool: _meta of %q: %w", name, err)
	}
	return b, nil
}

func TestUpCallParamsMatchesMarshal(t *testing.T) {
	args := []string{
		``, `null`, ` null `, `{}`, ` { "a" : 1 , "b" : [ 1, 2 ] } `, `{"n":123456789012345678901234567890}`,
		`{"html":"<b>&amp;</b>"}`, "{\"ls\":\"a\u2028b\u2029c\"}", `{"esc":"\u003c\n\t\"\\"}`, `{"s":"` + strings.Repeat("x", 100000) + `"}`,
		"{\"bad\":\"\xff\xfe\"}", `[1]`, `"x"`, `{"a":1} {"b":2}`, `{"a":`, `{"a":1,}`, `{a:1}`,
	}
	metas := []map[string]any{nil, {}, {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		{"progressToken": 7, "x": "<&>"}, {"bad": func() {}}}
	for _, name := range []string{"echo", "a<b>&c", "ünïcode", ""} {
		for _, a := range args {
			for _, m := range metas {
				got, gotErr := callParams(name, json.RawMessage(a), m)
				want, wantErr := callParamsReference(name, json.RawMessage(a), m)
				if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Errorf("callParams(%q, %.40q, %v): error %v, want %v", name, a, m, gotErr, wantErr)
					continue
				}
				if !bytes.Equal(got, want) {
					t.Errorf("callParams(%q, %.40q, %v) =\n %.200s\nwant\n %.200s", name, a, m, got, want)
				}
			}
		}
	}
}
