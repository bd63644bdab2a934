package otc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/otcsample"
)

// BenchmarkHandlerToolsCall is one POST /tools/call served in process,
// from its bytes to the answer's (the tool answers at once): a tool whose
// schema has properties (the input is decoded once, for the validator), a
// tool whose schema is {"type":"object"} (the input is not decoded), and
// a call with a call_id (its fingerprint read from the body's bytes).
func BenchmarkHandlerToolsCall(b *testing.B) {
	sh, err := otcsample.New(nil).Handler(nil)
	if err != nil {
		b.Fatal(err)
	}
	echo := func(_ context.Context, c *otc.Call) (json.RawMessage, error) {
		return json.RawMessage(`{"ok":true}`), nil
	}
	ph, err := otc.NewHandler([]otc.Tool{{Definition: otc.ToolDefinition{ID: "Bench.Plain@1.0.0", Name: "Bench_Plain", Description: "d", Version: "1.0.0",
		InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{}`)}, Func: echo}},
		&otc.Options{IdempotencyTTL: 10 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	hdr := map[string]string{"Content-Type": "application/json"}
	for _, c := range []struct {
		name string
		h    http.Handler
		body string
	}{
		{"schema-with-properties", sh, `{"$schema":"urn:oxp:1.0","request":{"tool_id":"Calculator.Add@1.1.0","input":{"a":2,"b":3}}}`},
		{"schema-type-object", ph, `{"$schema":"urn:oxp:1.0","request":{"tool_id":"Bench.Plain@1.0.0","input":{"text":"hello, benchmark","n":[1,2,3]}}}`},
		{"call-id", ph, `{"$schema":"urn:oxp:1.0","request":{"tool_id":"Bench.Plain@1.0.0","call_id":"%d","input":{ "text": "hello, benchmark", "n": [1, 2, 3] }}}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				body := c.body
				if c.name == "call-id" {
					i++
					body = fmt.Sprintf(c.body, i)
				}
				serve(b, c.h, http.MethodPost, "/tools/call", []byte(body), hdr, http.StatusOK)
			}
		})
	}
}
