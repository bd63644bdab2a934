package mapping

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
)

// Benchmarks of every mapping function, on inputs shaped like real traffic:
// the sample servers' tools and results, and a larger schema with $refs.
// No timing is asserted; run with go test -bench . -benchmem ./

var (
	benchSinkRaw json.RawMessage
	benchSinkAny any
	benchSinkStr string
	benchSinkErr error
)

// benchMCPTool is an MCP tool as an upstream lists it (the sample's add,
// with an outputSchema, annotations and _meta).
const benchMCPTool = `{"name":"add","title":"Add","description":"Adds two numbers and returns {\"sum\": a + b}.",
 "inputSchema":{"type":"object","properties":{"a":{"type":"number","description":"The first number."},"b":{"type":"number","description":"The second number."}},"required":["a","b"]},
 "outputSchema":{"type":"object","properties":{"sum":{"type":"number","description":"a + b"}},"required":["sum"]},
 "annotations":{"readOnlyHint":true},"_meta":{"vendor/x":1}}`

// benchRefSchema has $defs, $refs (one recursive) and properties without
// descriptions: the work otcInputSchema exists for.
const benchRefSchema = `{"type":"object","$defs":{
  "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},"zip":{"type":"string","title":"ZIP code"}}},
  "node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},
 "properties":{"name":{"type":"string"},"home":{"$ref":"#/$defs/address"},"work":{"$ref":"#/$defs/address"},"tree":{"$ref":"#/$defs/node"},
  "tags":{"type":"array","items":{"type":"string"}},"limit":{"type":"integer","minimum":1,"maximum":100}},
 "required":["name"]}`

// benchOTCDef is the sample toolkit's Calculator.Add@1.1.0 as a client lists it.
var benchOTCDef = otc.ToolDefinition{
	ID:           "Calculator.Add@1.1.0",
	Name:         "Calculator_Add",
	Description:  "Adds two numbers together and returns {\"sum\": a+b}.",
	Version:      "1.1.0",
	InputSchema:  json.RawMessage(`{"parameters":{"type":"object","properties":{"a":{"type":"number","description":"The first number to add."},"b":{"type":"number","description":"The second number to add."}},"required":["a","b"]}}`),
	OutputSchema: json.RawMessage(`{"type":"object","properties":{"sum":{"type":"number","description":"The sum of the two numbers."}},"required":["sum"]}`),
	Requirements: &otc.Requirements{Authorization: []otc.AuthorizationRequirement{{ID: "google"}}},
}

// benchPayload is a JSON string of about n bytes.
func benchPayload(n int) string { return strings.Repeat("x", n) }

func BenchmarkMCPResult(b *testing.B) {
	retry := int64(500)
	big, _ := json.Marshal(benchPayload(64 << 10))
	cases := []struct {
		name  string
		resp  otc.CallToolResponse
		shape OutputShape
	}{
		{"object", otc.CallToolResponse{CallID: "c", Duration: 0.2, Success: true, Value: json.RawMessage(`{"sum":5}`)}, OutputObject},
		{"wrapped-number", otc.CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`15`)}, OutputWrapped},
		{"string", otc.CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`"hello, benchmark"`)}, OutputAny},
		{"string-64KiB", otc.CallToolResponse{CallID: "c", Success: true, Value: big}, OutputAny},
		{"tool-error", otc.CallToolResponse{CallID: "c", Error: &otc.ToolError{Message: "Doorbell ID not found", DeveloperMessage: "no such doorbell",
			CanRetry: true, AdditionalPromptContent: "ids: doorbell42,doorbell84", RetryAfterMS: &retry}}, OutputAny},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := MCPResult(&c.resp, c.shape)
				if err != nil {
					b.Fatal(err)
				}
				benchSinkAny = res
			}
		})
	}
}

func BenchmarkOTCResult(b *testing.B) {
	big, _ := json.Marshal(benchPayload(64 << 10))
	object := json.RawMessage(`{"type":"object","properties":{"sum":{"type":"number"}}}`)
	cases := []struct {
		name, raw    string
		outputSchema json.RawMessage
	}{
		{"text", `{"content":[{"type":"text","text":"hello, benchmark"}]}`, json.RawMessage(`{}`)},
		{"structured", `{"content":[{"type":"text","text":"{\"sum\":5}"}],"structuredContent":{"sum":5}}`, object},
		{"text-64KiB", `{"content":[{"type":"text","text":` + string(big) + `}]}`, json.RawMessage(`{}`)},
		{"mixed-content", `{"content":[{"type":"text","text":"a"},{"type":"image","data":"aGVsbG8=","mimeType":"image/png"}]}`, json.RawMessage(`{}`)},
		{"is-error", `{"content":[{"type":"text","text":"this sample tool always fails"}],"isError":true}`, json.RawMessage(`{}`)},
	}
	for _, c := range cases {
		raw := json.RawMessage(c.raw)
		// As the OTC front does: the output schema is worked out when the
		// catalog changes, not per call.
		shape := ResultShapeOf(c.outputSchema)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				out, err := OTCResultFor(raw, shape)
				if err != nil {
					b.Fatal(err)
				}
				benchSinkRaw, benchSinkAny = out.Value, out.Error
			}
		})
	}
}

func BenchmarkOTCInputSchema(b *testing.B) {
	var w struct {
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if err := json.Unmarshal([]byte(benchMCPTool), &w); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		raw  json.RawMessage
	}{{"plain", w.InputSchema}, {"refs", json.RawMessage(benchRefSchema)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, _, err := otcInputSchema(c.raw)
				if err != nil {
					b.Fatal(err)
				}
				benchSinkRaw = out
			}
		})
	}
}

func BenchmarkOTCOutputSchema(b *testing.B) {
	raw := json.RawMessage(`{"type":"object","properties":{"sum":{"type":"number","description":"a + b"}},"required":["sum"]}`)
	b.ReportAllocs()
	for b.Loop() {
		out, _, err := otcOutputSchema(raw)
		if err != nil {
			b.Fatal(err)
		}
		benchSinkRaw = out
	}
}

func BenchmarkMCPInputSchema(b *testing.B) {
	for _, c := range []struct {
		name string
		raw  json.RawMessage
	}{
		{"wrapped", benchOTCDef.InputSchema},
		{"plain-typed", json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"}}}`)},
		{"untyped", json.RawMessage(`{"properties":{"a":{"type":"number"}}}`)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchSinkRaw = mcpInputSchema(c.raw)
			}
		})
	}
}

func BenchmarkMCPOutputSchema(b *testing.B) {
	for _, c := range []struct {
		name string
		raw  json.RawMessage
	}{
		{"object", benchOTCDef.OutputSchema},
		{"wrapped", json.RawMessage(`{"type":"number","description":"The sum of the two numbers."}`)},
		{"absent", nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchSinkRaw, _ = mcpOutputSchema(c.raw)
			}
		})
	}
}

func BenchmarkMCPToolFromOTC(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		benchSinkAny = MCPToolFromOTC(&benchOTCDef, "Calculator_Add", "", []*otc.ToolDefinition{&benchOTCDef})
	}
}

func BenchmarkOTCToolsFromMCP(b *testing.B) {
	raw := json.RawMessage(benchMCPTool)
	id := OTCIdentities("mcpotc_sample", "1.0.0", []string{"add"})[0]
	b.ReportAllocs()
	for b.Loop() {
		tools, _, err := OTCToolsFromMCP(raw, id, "1.0.0")
		if err != nil {
			b.Fatal(err)
		}
		benchSinkAny = tools
	}
}

func BenchmarkMCPToolName(b *testing.B) {
	raw := json.RawMessage(benchMCPTool)
	b.ReportAllocs()
	for b.Loop() {
		name, err := MCPToolName(raw)
		if err != nil {
			b.Fatal(err)
		}
		benchSinkStr = name
	}
}

func BenchmarkOTCIdentities(b *testing.B) {
	for _, n := range []int{4, 10000} {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("tool-%05d", i)
		}
		names[0] = strings.Repeat("a-very-long-tool-name-", 4) // longer than 64 once prefixed
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchSinkAny = OTCIdentities("mcp_servers_everything", "2.0.0", names)
			}
		})
	}
}

func BenchmarkNames(b *testing.B) {
	b.Run("Sanitize", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchSinkStr = Sanitize("mcp-servers/everything")
		}
	})
	b.Run("Toolkit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchSinkStr = Toolkit("", "mcpotc-sample")
		}
	})
	b.Run("OTCVersion", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchSinkStr = OTCVersion("", "2.0.0")
		}
	})
	b.Run("MCPTitle", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchSinkStr = mcpTitle("Calculator_Add")
		}
	})
}

func BenchmarkMCPError(b *testing.B) {
	cases := []struct {
		name string
		err  error
	}{
		{"422", &otc.StatusError{StatusCode: 422, Message: "Some input parameters are invalid", ParameterErrors: map[string]string{"b": "Must be a number"}}},
		{"400-unknown", &otc.StatusError{StatusCode: 400, Message: "Tool 'X.Y@1.0.0' was not found"}},
		{"500", &otc.StatusError{StatusCode: 500, Message: "boom"}},
		{"transport", errors.New("otc: dial tcp 127.0.0.1:1: connect: connection refused")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchSinkAny, benchSinkErr = MCPError(c.err, "Calculator_Add", MCPOptions{})
			}
		})
	}
}

func BenchmarkOTCError(b *testing.B) {
	cases := []struct {
		name string
		err  error
	}{
		{"invalid-params", &upstream.Error{Code: -32602, Message: "invalid arguments", Data: json.RawMessage(`{"parameter_errors":{"a":"Must be a number"}}`)}},
		{"other-rpc", &upstream.Error{Code: -32000, Message: "boom"}},
		{"lost", fmt.Errorf("call lost: %w", upstream.ErrLost)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchSinkErr = OTCError(c.err)
			}
		})
	}
}
