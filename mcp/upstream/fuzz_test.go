package upstream

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// FuzzMsgEnds checks the scanners that find the id of a message over the
// limit from its first and last bytes: whatever part of a message they
// see, an id they report is the message's own top-level id, and a method
// they report is there. (A wrong id would fail another caller's request.)
// Messages whose top level has "id" or "method" more than once, in any
// case, are left out: which one counts is the decoder's choice.
func FuzzMsgEnds(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"xxxx"}]}}`,
		`{"result":{"t":"a\"b"},"jsonrpc":"2.0","id":"x\\"}`,
		`{"_meta":{"id":1,"s":"}\"{"},"id":5,"result":{"x":"y"}}`,
		`{"result":{"id":4,"text":"q"},"method":"m"}`,
		`{ "id" : -3 , "result":{"x":"\",\"id\":9}"} }`,
		`{"method":"sampling/createMessage","params":{"x":[1,{"id":2}]},"jsonrpc":"2.0","id":3}`,
	} {
		f.Add([]byte(s), uint16(len(s)/2), uint16(len(s)/3))
	}
	f.Fuzz(func(t *testing.T, msg []byte, head, tail uint16) {
		id, method, ok := fuzzTop(msg)
		if !ok {
			return
		}
		h := msg[:int(head)%(len(msg)+1)]
		tl := msg[len(msg)-int(tail)%(len(msg)+1):]
		var e msgEnds
		e.scanHead(h)
		e.scanTail(tl)
		if e.id != nil && (id == nil || !fuzzSameJSON(e.id, id)) {
			t.Fatalf("%s: found id %s, the message's is %s (head %q, tail %q)", msg, e.id, id, h, tl)
		}
		if e.method && !method {
			t.Fatalf("%s: found a method, the message has none (head %q, tail %q)", msg, h, tl)
		}
	})
}

// fuzzTop reads the top-level id and whether there is a method, for a
// valid JSON object in which neither key appears twice (in any case).
func fuzzTop(msg []byte) (id json.RawMessage, method, ok bool) {
	if !json.Valid(msg) {
		return nil, false, false
	}
	dec := json.NewDecoder(bytes.NewReader(msg))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false, false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false, false
		}
		key := strings.ToLower(t.(string))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false, false
		}
		if key == "id" || key == "method" {
			if seen[key] {
				return nil, false, false
			}
			seen[key] = true
		}
		switch t.(string) {
		case "id":
			id = raw
		case "method":
			method = true
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, false, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false, false
	}
	return id, method, true
}

func fuzzSameJSON(a, b []byte) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	return da.Decode(&x) == nil && db.Decode(&y) == nil && x == y
}
