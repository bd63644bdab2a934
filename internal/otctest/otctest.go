package otctest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpotc/mcpotc/internal/conntest"
	"github.com/mcpotc/mcpotc/otc"
)

// BenchEcho is the tool Bench.Echo@1.0.0 (OTC name Bench_Echo) of the
// benchmarks: it answers the message of its input, as is.
func BenchEcho() otc.Tool {
	return otc.Tool{
		Definition: otc.ToolDefinition{ID: "Bench.Echo@1.0.0", Name: "Bench_Echo", Description: "echo", Version: "1.0.0",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"m"}},"required":["message"]}`)},
		Func: func(_ context.Context, c *otc.Call) (json.RawMessage, error) {
			var in struct {
				Message json.RawMessage `json:"message"`
			}
			err := json.Unmarshal(c.Request.Input, &in)
			return in.Message, err
		},
	}
}

// PostCall posts body to base's /tools/call as an OTC 1.0 client would (a
// JSON body, OXP-Version 1.0) and returns the answer's status and its
// JSON object; it fails t when the request fails or the answer is not
// JSON.
func PostCall(t testing.TB, base string, body []byte) (int, map[string]any) {
	t.Helper()
	status, _, data, err := conntest.Post(context.Background(), base+"/tools/call",
		map[string]string{"Content-Type": "application/json", "OXP-Version": "1.0"}, body)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("the answer %q is not JSON: %v", data, err)
	}
	return status, got
}
