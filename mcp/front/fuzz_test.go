package front

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The decoder reads a message's top level with a walk (jsonscan) after
// json.Valid; encoding/json is the reference: what decode accepts,
// encoding/json reads the same way (the id as sent, the method, the
// params; the last of a duplicated key counts), and a valid message
// encoding/json reads as a request is accepted.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":"}"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"1"}}`,
		` { "id" : "a\"b" , "jsonrpc":"2.0", "method":"ping", "method":"tools/list" } `,
		`{"jsonrpc":"2.0","id":{"n":1},"method":"x"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1e3,"method":"\u0074ools/list","params":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"x"} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, failure := decode(b)
		var ref map[string]json.RawMessage
		refOK := json.Unmarshal(b, &ref) == nil && ref != nil
		if failure == nil {
			if !refOK {
				t.Fatalf("decode accepted what encoding/json does not read as an object: %q", b)
			}
			if !bytes.Equal(m.id, ref["id"]) {
				t.Fatalf("id %q, encoding/json %q: %q", m.id, ref["id"], b)
			}
			if m.response {
				return
			}
			var method string
			if json.Unmarshal(ref["method"], &method) != nil || method != m.method {
				t.Fatalf("method %q, encoding/json %q: %q", m.method, ref["method"], b)
			}
			p := ref["params"]
			if string(p) == "null" {
				p = nil
			}
			if !bytes.Equal(m.params, p) {
				t.Fatalf("params %q, encoding/json %q: %q", m.params, p, b)
			}
			return
		}
		// Refused: encoding/json must see a reason too.
		if !refOK {
			return
		}
		var method string
		methodOK := json.Unmarshal(ref["method"], &method) == nil && ref["method"] != nil
		id := ref["id"]
		idOK := id == nil || (len(id) > 0 && (id[0] == '"' || id[0] == '-' || (id[0] >= '0' && id[0] <= '9')))
		if methodOK && idOK && string(ref["jsonrpc"]) == `"2.0"` {
			t.Fatalf("decode refused a valid request (%s): %q", failure.Message, b)
		}
	})
}
