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

// FuzzDuplicateKey: duplicateKey's byte walk finds a repeated key exactly
// when encoding/json's token stream shows one (keys compared unescaped),
// at any depth, for any valid JSON object.
func FuzzDuplicateKey(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"a":1,"a":2}`, `{"a":{"b":1,"b":[1,{"c":2,"c":3}]}}`, `{"q":"x","\u0071":"y"}`,
		`{"a":[{"x":1},{"x":2}],"b":"a"}`, `{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":0,"k11":1,"k12":2,"k13":3,"k14":4,"k15":5,"k16":6,"k3":7}`,
		` { "a" : "\"}" , "b" : [ ] , "c" : { } } `,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if !json.Valid(v) || len(bytes.TrimSpace(v)) == 0 || bytes.TrimSpace(v)[0] != '{' {
			return
		}
		k, dup := duplicateKey(v)
		wantK, wantDup := duplicateKeyByTokens(v)
		if dup != wantDup || (dup && k != wantK) {
			t.Fatalf("duplicateKey(%s) = %q %v, encoding/json's tokens say %q %v", v, k, dup, wantK, wantDup)
		}
	})
}

// duplicateKeyByTokens is duplicateKey by encoding/json's tokens: the
// first repeated key in document order.
func duplicateKeyByTokens(v []byte) (string, bool) {
	type frame struct {
		object, expectKey bool
		keys              map[string]bool
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
			if k, ok := tok.(string); ok {
				if stack[n-1].keys[k] {
					return k, true
				}
				stack[n-1].keys[k], stack[n-1].expectKey = true, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, expectKey: true, keys: map[string]bool{}})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].expectKey = true
		}
	}
}
