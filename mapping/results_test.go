package mapping

import (
	"encoding/json"
	"testing"

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
			`{"content":[{"type":"text","text":"15"}],"structuredContent":{"value":15},"_meta":{"mcpotc/otc-call":{"call_id":"c","duration":0}}}`},
		{"big integer exact", otc.CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`123456789012345678901234567891`)}, OutputWrapped,
			`{"content":[{"type":"text","text":"123456789012345678901234567891"}],"structuredContent":{"value":123456789012345678901234567891},"_meta":{"mcpotc/otc-call":{"call_id":"c","duration":0}}}`},
		{"string value is its own text", otc.CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`"hello"`)}, OutputAny,
			`{"content":[{"type":"text","text":"hello"}],"_meta":{"mcpotc/otc-call":{"call_id":"c","duration":0}}}`},
		{"null value", otc.CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`null`)}, OutputAny,
			`{"content":[{"type":"text","text":"null"}],"_meta":{"mcpotc/otc-call":{"call_id":"c","duration":0}}}`},
		{"no value", otc.CallToolResponse{CallID: "c", Success: true}, OutputAny,
			`{"content":[],"_meta":{"mcpotc/otc-call":{"call_id":"c","duration":0}}}`},
		{"tool error", otc.CallToolResponse{CallID: "c", Duration: 60, Success: false, Error: &otc.ToolError{
			Message: "Doorbell ID not found", DeveloperMessage: "The doorbell with ID 'doorbell1' does not exist.", CanRetry: true,
			AdditionalPromptContent: "ids: doorbell42,doorbell84", RetryAfterMS: &retry}}, OutputAny,
			`{"content":[{"type":"text","text":"Doorbell ID not found\n\nids: doorbell42,doorbell84"}],"isError":true,"_meta":{
			  "mcpotc/otc-call":{"call_id":"c","duration":60},
			  "mcpotc/otc-error":{"message":"Doorbell ID not found","developer_message":"The doorbell with ID 'doorbell1' does not exist.","can_retry":true,"additional_prompt_content":"ids: doorbell42,doorbell84","retry_after_ms":500}}}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(MCPResult(&tt.resp, tt.shape))
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
		value, toolErr, err := OTCResult(json.RawMessage(tt.in))
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
	if _, _, err := OTCResult(json.RawMessage(`{"content":"x"}`)); err == nil {
		t.Error("malformed result accepted")
	}
}
