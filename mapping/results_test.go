package mapping

import (
	"encoding/json"
	"errors"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/otc"
)

func TestMCPResult(t *testing.T) {
	retry := int64(500)
	tests := []struct {
		name  string
		resp  otc.CallToolResponse
		shape OutputShape
		want  string
	}{
		{"object value", otc.CallToolResponse{CallID: "c", Duration: 2, Success: true, Value: json.RawMessage(`{"sum": 15}`)}, OutputObject,
			`{"content":[{"type":"text","text":"{\"sum\":15}"}],"structuredContent":{"sum":15},"_meta":{"mcpotc/otc-call":{"call_id":"c","duration":2}}}`},
		{"wrapped number", otc.CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`15`)}, OutputWrapped,
			`{"content":[{"type":"text","text":"15"}],"structuredContent":{"value":15},"_meta":{"mcpotc/otc-call":{"call_id":"c","duration":0,"value":15}}}`},
		{"big integer exact", otc.CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`123456789012345678901234567891`)}, OutputWrapped,
			`{"content":[{"type":"text","text":"123456789012345678901234567891"}],"structuredContent":{"value":123456789012345678901234567891},"_meta":{"mcpotc/otc-call":{"call_id":"c","duration":0,"value":123456789012345678901234567891}}}`},
		{"number without output schema", otc.CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`15`)}, OutputAny,
			`{"content":[{"type":"text","text":"15"}],"_meta":{"mcpotc/otc-call":{"call_id":"c","duration":0,"value":15}}}`},
		{"string value is its own text", otc.CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`"hello"`)}, OutputAny,
			`{"content":[{"type":"text","text":"hello"}],"_meta":{"mcpotc/otc-call":{"call_id":"c","duration":0}}}`},
		{"null value", otc.CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`null`)}, OutputAny,
			`{"content":[{"type":"text","text":"null"}],"_meta":{"mcpotc/otc-call":{"call_id":"c","duration":0,"value":null}}}`},
		{"no value", otc.CallToolResponse{CallID: "c", Success: true}, OutputAny,
			`{"content":[],"_meta":{"mcpotc/otc-call":{"call_id":"c","duration":0,"no_value":true}}}`},
		{"carried MCP result", otc.CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`"x"`), Ext: otc.Extensions{
			XMCPResult: json.RawMessage(`{"content":[{"type":"text","text":"x"},{"type":"image","data":"iVBO","mimeType":"image/png"}],"structuredContent":{"n":123456789012345678901234567890}}`)}}, OutputAny,
			`{"content":[{"type":"text","text":"x"},{"type":"image","data":"iVBO","mimeType":"image/png"}],"structuredContent":{"n":123456789012345678901234567890}}`},
		{"tool error", otc.CallToolResponse{CallID: "c", Duration: 60, Success: false, Error: &otc.ToolError{
			Message: "Doorbell ID not found", DeveloperMessage: "The doorbell with ID 'doorbell1' does not exist.", CanRetry: true,
			AdditionalPromptContent: "ids: doorbell42,doorbell84", RetryAfterMS: &retry}}, OutputAny,
			`{"content":[{"type":"text","text":"Doorbell ID not found\n\nids: doorbell42,doorbell84"}],"isError":true,"_meta":{
			  "mcpotc/otc-call":{"call_id":"c","duration":60},
			  "mcpotc/otc-error":{"message":"Doorbell ID not found","developer_message":"The doorbell with ID 'doorbell1' does not exist.","can_retry":true,"additional_prompt_content":"ids: doorbell42,doorbell84","retry_after_ms":500}}}`},
	}
	for _, tt := range tests {
		res, err := MCPResult(&tt.resp, tt.shape)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, got, []byte(tt.want)) {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

func TestOTCResult(t *testing.T) {
	tests := []struct {
		name, in, value, errMsg string
	}{
		{"structured", `{"content":[{"type":"text","text":"{\"sum\":5}"}],"structuredContent":{"sum":5}}`, `{"sum":5}`, ""},
		{"one text", `{"content":[{"type":"text","text":"Echo: hi"}]}`, `"Echo: hi"`, ""},
		{"image kept", `{"content":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]}`, `[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]`, ""},
		{"two blocks", `{"content":[{"type":"text","text":"a"},{"type":"resource_link","uri":"test://x","name":"x"}]}`, `[{"type":"text","text":"a"},{"type":"resource_link","uri":"test://x","name":"x"}]`, ""},
		{"empty", `{"content":[]}`, `[]`, ""},
		{"big number structured", `{"content":[],"structuredContent":{"n":123456789012345678901234567890}}`, `{"n":123456789012345678901234567890}`, ""},
		{"error", `{"content":[{"type":"text","text":"boom"},{"type":"text","text":"again"}],"isError":true}`, ``, "boom\nagain"},
		{"error without text", `{"content":[],"isError":true}`, ``, "The tool reported an error"},
	}
	for _, tt := range tests {
		out, err := otcResult(json.RawMessage(tt.in), nil)
		value, toolErr := out.Value, out.Error
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if tt.errMsg != "" {
			if toolErr == nil || toolErr.Message != tt.errMsg || toolErr.CanRetry {
				t.Errorf("%s: error %+v, want message %q", tt.name, toolErr, tt.errMsg)
			}
			continue
		}
		if toolErr != nil || !jsonEqual(t, value, []byte(tt.value)) {
			t.Errorf("%s: value %s (error %v), want %s", tt.name, value, toolErr, tt.value)
		}
		if tt.name == "big number structured" && string(value) != tt.value {
			t.Errorf("big number not byte-exact: %s", value)
		}
	}
	if _, err := otcResult(json.RawMessage(`{"content":"x"}`), nil); err == nil {
		t.Error("malformed result accepted")
	}
}

func TestMCPResultCarriedError(t *testing.T) {
	resp := otc.CallToolResponse{CallID: "c", Error: &otc.ToolError{Message: "The tool failed", Ext: otc.Extensions{
		XMCPError: json.RawMessage(`{"code":-32000,"message":"disk full","data":{"free":0}}`)}}}
	_, err := MCPResult(&resp, OutputAny)
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != -32000 || rpc.Message != "disk full" || string(rpc.Data.(json.RawMessage)) != `{"free":0}` {
		t.Errorf("err = %#v", err)
	}
}

// TestOTCResultRoundTrips checks both directions of the result carriers:
// an MCP result through otcResult and back through MCPResult is the same
// result, and an OTC response through MCPResult and back through otcResult
// is the same value or error.
func TestOTCResultRoundTrips(t *testing.T) {
	mcpResults := []struct{ result, outputSchema string }{
		{`{"content":[{"type":"text","text":"Echo: hi"}]}`, ``},
		{`{"content":[{"type":"text","text":"{\"sum\":5}"}],"structuredContent":{"sum":5}}`, `{"type":"object"}`},
		{`{"content":[{"type":"text","text":"pretty {\n \"sum\": 5\n}"}],"structuredContent":{"sum":5}}`, `{"type":"object"}`},
		{`{"content":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]}`, ``},
		{`{"content":[{"type":"text","text":"a"},{"type":"resource_link","uri":"test://x","name":"x"}]}`, ``},
		{`{"content":[{"type":"text","text":"boom"}],"isError":true}`, ``},
		{`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"isError":true}`, ``},
		{`{"content":[],"_meta":{"k":"v"}}`, ``},
	}
	for _, tt := range mcpResults {
		out, err := otcResult(json.RawMessage(tt.result), json.RawMessage(tt.outputSchema))
		if err != nil {
			t.Fatal(err)
		}
		resp := &otc.CallToolResponse{Success: out.Error == nil, Value: out.Value, Error: out.Error, Ext: out.Ext}
		_, shape := mcpOutputSchema(json.RawMessage(tt.outputSchema))
		back, err := MCPResult(resp, shape)
		if err != nil {
			t.Fatal(err)
		}
		back.Meta = dropOurMeta(back.Meta)
		got, _ := json.Marshal(back)
		if !jsonEqual(t, got, []byte(tt.result)) {
			t.Errorf("MCP → OTC → MCP:\n got %s\nwant %s (carrier %s)", got, tt.result, out.Ext[XMCPResult])
		}
	}
	retry := int64(500)
	otcResponses := []struct {
		resp  otc.CallToolResponse
		shape OutputShape
	}{
		{otc.CallToolResponse{Success: true, Value: json.RawMessage(`15`)}, OutputWrapped},
		{otc.CallToolResponse{Success: true, Value: json.RawMessage(`15`)}, OutputAny},
		{otc.CallToolResponse{Success: true, Value: json.RawMessage(`{"sum":15}`)}, OutputObject},
		{otc.CallToolResponse{Success: true, Value: json.RawMessage(`"text"`)}, OutputAny},
		{otc.CallToolResponse{Success: true, Value: json.RawMessage(`"caf\u00e9"`)}, OutputAny},
		{otc.CallToolResponse{Success: true, Value: json.RawMessage(`null`)}, OutputAny},
		{otc.CallToolResponse{Success: true}, OutputAny},
		{otc.CallToolResponse{Success: true}, OutputWrapped},
		{otc.CallToolResponse{Success: true, Value: json.RawMessage(`[1,{"a":true}]`)}, OutputAny},
		{otc.CallToolResponse{Success: false, Error: &otc.ToolError{Message: "Doorbell ID not found", DeveloperMessage: "d", CanRetry: true,
			AdditionalPromptContent: "ids: doorbell42,doorbell84", RetryAfterMS: &retry}}, OutputAny},
	}
	for _, tt := range otcResponses {
		res, err := MCPResult(&tt.resp, tt.shape)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(res)
		out, err := otcResult(raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(out.Value) != string(tt.resp.Value) || (out.Error == nil) != tt.resp.Success || len(out.Ext) != 0 {
			t.Errorf("OTC → MCP → OTC: value %s error %+v ext %v; want value %s", out.Value, out.Error, out.Ext, tt.resp.Value)
		}
		if !tt.resp.Success {
			got, _ := json.Marshal(out.Error)
			want, _ := json.Marshal(tt.resp.Error)
			if string(got) != string(want) {
				t.Errorf("error %s, want %s", got, want)
			}
		}
	}
}

// dropOurMeta removes the bridge's own _meta keys.
func dropOurMeta(m *mcpgo.Meta) *mcpgo.Meta {
	if m == nil {
		return nil
	}
	delete(m.AdditionalFields, MetaOTCCall)
	delete(m.AdditionalFields, MetaOTCError)
	if len(m.AdditionalFields) == 0 && m.ProgressToken == nil {
		return nil
	}
	return m
}
