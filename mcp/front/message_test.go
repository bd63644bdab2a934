package front

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"runtime/debug"
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

// A tools/call is read once before its handler runs: the message is
// checked and its top level walked (decode), the params' top level walked
// (callRequest), and nothing else; the handler's arguments are the bytes
// of the message itself, not a copy or a re-encoding.
func TestFrontReadsToolsCallOnce(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"Calculator_Add","arguments":{"a":2,"b":3}}}`)
	// The fewest of five measures: AllocsPerRun counts the process's
	// allocations, and a goroutine left by another test can add some.
	allocs := 1e9
	for range 5 {
		allocs = min(allocs, testing.AllocsPerRun(100, func() {
			m, failure := decode(msg)
			if failure != nil {
				t.Fatal(failure.Message)
			}
			if _, failure := callRequest(m.params); failure != nil {
				t.Fatal(failure.Message)
			}
		}))
	}
	// The envelope and the tool's name: two allocations (the member
	// lists stay on the stack), none of them of the arguments.
	// The race detector allocates on its own, now and then: the count
	// holds in a build without it.
	if allocs > 2 && !raceBuild() {
		t.Errorf("decoding a tools/call allocates %v times, want at most 2", allocs)
	}

	f := New("once-test", "1.0.0", nil)
	aliased := false
	f.SetTools(Tool{Tool: mcpgo.NewTool("Calculator_Add"), Handler: func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		at := bytes.Index(msg, []byte(`{"a":2`))
		msg[at+2] = 'A' // the message's own bytes: the handler's arguments change with them
		aliased = string(req.Params.RawArguments) == `{"A":2,"b":3}`
		msg[at+2] = 'a'
		return mcpgo.NewToolResultText("ok"), nil
	}})
	f.HandleMessage(context.Background(), msg)
	if !aliased {
		t.Error("the handler's arguments are not the bytes of the message")
	}
}

// BenchmarkFrontToolsCall is one tools/call served in process, from its
// bytes to the answer's (the handler answers at once).
func BenchmarkFrontToolsCall(b *testing.B) {
	f := New("bench", "1.0.0", nil)
	res := &mcpgo.CallToolResult{Content: []mcpgo.Content{mcpgo.NewTextContent(`{"sum":5}`)}, StructuredContent: map[string]any{"sum": 5}}
	f.SetTools(Tool{Tool: mcpgo.NewTool("Calculator_Add"), Handler: func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return res, nil
	}})
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"Calculator_Add","arguments":{"a":2,"b":3}}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if f.HandleMessage(ctx, msg) == nil {
			b.Fatal("no answer")
		}
	}
}

// raceBuild reports whether the test binary was built with -race.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
