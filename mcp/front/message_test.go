package front

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// A tool's text reaches the client byte for byte: "<", ">" and "&" are
// not escaped (as json.Marshal would), in a result, a 2026-07-28 result,
// an error and tools/list.
func TestFrontWritesTextAsIs(t *testing.T) {
	t.Parallel()
	const text = `<b> & "c" é`
	f := New("escape-test", "1.0.0", nil)
	f.SetTools(Tool{Tool: mcpgo.NewTool("t", mcpgo.WithDescription(text)), Handler: func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		if string(req.Params.RawArguments) == `{"fail":true}` {
			return nil, &RPCError{Code: mcpgo.INVALID_PARAMS, Message: text, Data: map[string]any{"why": text}}
		}
		return mcpgo.NewToolResultText(text), nil
	}})
	want := []byte(`<b> & \"c\" é`)
	ctx := context.Background()
	modern := `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for name, msg := range map[string][]byte{
		"result":         request(1, "tools/call", `{"name":"t","arguments":{}}`),
		"modern result":  request(1, "tools/call", `{"name":"t","arguments":{}`+modern+`}`),
		"error":          request(1, "tools/call", `{"name":"t","arguments":{"fail":true}}`),
		"tools/list":     request(1, "tools/list", `{}`),
		"modern listing": request(1, "tools/list", `{`+modern[1:]+`}`),
	} {
		got := f.HandleMessage(ctx, msg)
		if n := bytes.Count(got, want); n == 0 || bytes.Contains(got, []byte(`\u003c`)) || bytes.Contains(got, []byte(`\u0026`)) {
			t.Errorf("%s: %s, want the text as is", name, got)
		}
	}
}

func TestUnescapeHTML(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`"\u003cb\u003e \u0026"`:  `"<b> &"`,
		`"\\u003c"`:               `"\\u003c"`, // an escaped backslash, then text
		`"\\\u003c"`:              `"\\<"`,
		`"\u2028 \u00e9 \n \""`:   `"\u2028 \u00e9 \n \""`,
		`{"\u0026":["\u003E",1]}`: `{"&":[">",1]}`,
		`"no escapes"`:            `"no escapes"`,
	} {
		got := unescapeHTML([]byte(in))
		if string(got) != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
		var a, b any
		if json.Unmarshal([]byte(in), &a) != nil || json.Unmarshal(got, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("%s: %s is not the same JSON", in, got)
		}
	}
}
