package front

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// tools/call params of the wrong shape (a number beyond float64, a name
// that is not a string or is missing, arguments or _meta that are not
// objects) are -32602 with a message a model can act on, on stdio and HTTP
// alike, and the same call with good params runs.
func TestUnparsableToolsCallParams(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			f, _ := testFront(t, nil)
			var c client
			if transport == "stdio" {
				c = startFrontStdio(t, context.Background(), f)
			} else {
				_, _, hc := startFrontSession(t, f, nil)
				hc.version = "2025-11-25"
				c = hc
			}
			if transport == "stdio" {
				initialize(t, c)
			}
			for i, tc := range []struct{ params, want string }{
				{`{"name":"add","arguments":{"a":1e400,"b":1}}`,
					`{"jsonrpc":"2.0","id":%d,"error":{"code":-32602,"message":"invalid arguments: the number 1e400 is out of range: a number must be within ±1.8e308 (a 64-bit float)"}}`},
				{`{"name":"add","arguments":{"a":{"deep":[1,-1e999]}}}`,
					`{"jsonrpc":"2.0","id":%d,"error":{"code":-32602,"message":"invalid arguments: the number -1e999 is out of range: a number must be within ±1.8e308 (a 64-bit float)"}}`},
				{`{"name":5,"arguments":{}}`,
					`{"jsonrpc":"2.0","id":%d,"error":{"code":-32602,"message":"invalid tools/call params: params.name must be a string, not a number"}}`},
				{`{"name":"add","arguments":[1,2]}`,
					`{"jsonrpc":"2.0","id":%d,"error":{"code":-32602,"message":"invalid tools/call params: params.arguments must be an object, not an array"}}`},
				{`{"name":"add","arguments":{"s":"1e999"},"_meta":"x"}`,
					`{"jsonrpc":"2.0","id":%d,"error":{"code":-32602,"message":"invalid tools/call params: params._meta must be an object, not a string"}}`},
				{`{"arguments":{}}`,
					`{"jsonrpc":"2.0","id":%d,"error":{"code":-32602,"message":"invalid tools/call params: params.name is required: the name of a tool from tools/list"}}`},
				{`{"name":"add","arguments":{"a":1e300,"b":1,"s":"1e999"}}`,
					`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"1e+300"}],"structuredContent":{"sum":1e+300}}}`},
			} {
				id := 100 + i
				got := callTool(t, c, id, "tools/call", tc.params)
				var g, w any
				_ = json.Unmarshal(got, &g)
				if err := json.Unmarshal([]byte(fmt.Sprintf(tc.want, id)), &w); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(g, w) {
					t.Errorf("%s:\n got %s\nwant %s", tc.params, got, fmt.Sprintf(tc.want, id))
				}
			}
		})
	}
}
