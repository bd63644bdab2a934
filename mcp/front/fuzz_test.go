package front

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Fuzz targets for the byte-level splicers of the front: what they change
// is exactly what they are for, and every other byte is kept.

const fuzzCoded = `{"code":-32602,"message":"coded","data":{"k":[1,"x"]}}`

// fuzzBook is a stream with a coded error recorded for id 7 (a number).
func fuzzBook() *streamBook {
	st := newFrontStream(8, false)
	st.put(idKey(7.0), coded{obj: []byte(fuzzCoded), code: -32602})
	return st
}

func fuzzDecode(b []byte) (map[string]any, bool) {
	if !json.Valid(b) {
		return nil, false
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// process splices the recorded error over the "error" value of the
// response with its id, and leaves every other frame byte for byte.
func FuzzProcess(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"x"}}`,
		`{ "error" : {"code":-32603} , "id" : 7.0 ,"x":[{"error":1}]}`,
		`{"jsonrpc":"2.0","id":"7","error":{"code":-32603,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`,
		`{"jsonrpc":"2.0","id":7,"method":"ping"}`,
		`{"id":7,"error":1,"error":{"code":1}}`,
		`[{"id":7,"error":{}}]`,
		`{"id":7,"error":{}} trailing`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		in := bytes.Clone(frame)
		out, c := fuzzBook().process(frame)
		if !bytes.Equal(frame, in) {
			t.Fatal("process changed its input")
		}
		m, isObject := fuzzDecode(in)
		_, hasMethod := m["method"]
		_, hasError := m["error"]
		id, _ := m["id"].(json.Number)
		idValue, _ := id.Float64()
		ours := isObject && !hasMethod && hasError && id != "" && idValue == 7
		if c == nil {
			if !bytes.Equal(out, in) {
				t.Fatalf("rewrote %q into %q without a coded error", in, out)
			}
			if ours {
				t.Fatalf("the error response of id 7 was not rewritten: %q", in)
			}
			return
		}
		if !ours {
			t.Fatalf("rewrote %q, which is not the error response of id 7, into %q", in, out)
		}
		got, ok := fuzzDecode(out)
		if !ok {
			t.Fatalf("rewrote %q into invalid JSON %q", in, out)
		}
		want, _ := fuzzDecode([]byte(`{"error":` + fuzzCoded + `}`))
		m["error"] = want["error"]
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("rewrote %q into %q: more than the error changed", in, out)
		}
	})
}

// splitEvent splits an event into the values of its data lines (what
// follows prefix) and its other lines, each in order.
func splitEvent(ev []byte, prefix string) (data [][]byte, others []string) {
	for rest := ev; len(rest) > 0; {
		line, next := cutLine(rest)
		rest = next
		if v, ok := bytes.CutPrefix(line, []byte(prefix)); ok {
			data = append(data, v)
		} else {
			others = append(others, string(line))
		}
	}
	return data, others
}

// processEvent rewrites only the data of an event whose frame process
// rewrites, and keeps its other lines in order.
func FuzzProcessEvent(f *testing.F) {
	for _, s := range []string{
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32603,\"message\":\"m\"}}\n\n",
		"id: 9\r\nevent: message\r\ndata:{\"id\":7,\r\ndata: \"error\":{}}\r\n\r\n",
		": comment\ndata: {\"id\":7,\"method\":\"x\"}\n\n",
		"event: endpoint\ndata: /message?sessionId=1\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, ev []byte) {
		in := bytes.Clone(ev)
		out := fuzzBook().processEvent(ev)
		data, others := splitEvent(in, "data:")
		for i, v := range data {
			data[i] = bytes.TrimPrefix(v, []byte(" ")) // the space SSE allows after the colon
		}
		frame, c := fuzzBook().process(bytes.Join(data, []byte("\n")))
		if len(data) == 0 || c == nil {
			if !bytes.Equal(out, in) {
				t.Fatalf("changed %q into %q", in, out)
			}
			return
		}
		outData, outOthers := splitEvent(out, "data: ")
		if !bytes.Equal(bytes.Join(outData, []byte("\n")), frame) || !reflect.DeepEqual(outOthers, others) {
			t.Fatalf("rewrote %q into %q; want its other lines and data lines that join into %q", in, out, frame)
		}
	})
}

// lineWriter writes the same bytes however its input is cut into writes:
// each complete line processed, an incomplete one held.
func FuzzLineWriter(f *testing.F) {
	f.Add([]byte("{\"id\":7,\"error\":{}}\n{\"id\":1,\"result\":{}}\npartial"), []byte{3, 20, 1})
	f.Add([]byte("\n\n{\"id\":7,\"error\":{\"code\":1}}\r\n"), []byte{0, 2})
	f.Fuzz(func(t *testing.T, input, cuts []byte) {
		var whole bytes.Buffer
		one := &lineWriter{w: &whole, st: fuzzBook()}
		if _, err := one.Write(input); err != nil {
			t.Fatal(err)
		}
		var pieces bytes.Buffer
		many := &lineWriter{w: &pieces, st: fuzzBook()}
		rest := input
		for _, c := range cuts {
			n := min(int(c), len(rest))
			if n, err := many.Write(rest[:n]); err != nil || n != int(c) && n != len(rest[:n]) {
				t.Fatalf("Write: %d, %v", n, err)
			}
			rest = rest[n:]
		}
		if _, err := many.Write(rest); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(whole.Bytes(), pieces.Bytes()) {
			t.Fatalf("one write gave %q, pieces %q", whole.Bytes(), pieces.Bytes())
		}
		// What was written is the complete lines, each as process makes it.
		var want []byte
		st := fuzzBook()
		lines := input[:bytes.LastIndexByte(input, '\n')+1]
		for len(lines) > 0 {
			i := bytes.IndexByte(lines, '\n')
			frame, _ := st.process(lines[:i])
			want = append(append(want, frame...), '\n')
			lines = lines[i+1:]
		}
		if !bytes.Equal(whole.Bytes(), want) {
			t.Fatalf("wrote %q, want %q", whole.Bytes(), want)
		}
	})
}

// fillNotificationVersion gives a notification without a protocol version
// the version mcp-go asks for, and changes nothing else: what mcp-go
// decodes of the result (its keys matched in any case, the last one
// winning) is what it decoded before, plus that field.
func FuzzFillNotificationVersion(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","method":"x","params":null,"id":null}`,
		`{"method":"x","params":{"_meta":null}}`,
		`{"method":"x","params":{"_meta":{"a":1}}}`,
		`{"method":"x","Params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1"}}}`,
		`{"method":"x","id":1}`,
		`{ }`,
	} {
		f.Add([]byte(s))
	}
	const version = "2026-07-28"
	type wire struct {
		Method *string `json:"method"`
		Params *struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in := bytes.Clone(body)
		out := fillNotificationVersion(body, version)
		if !bytes.Equal(body, in) {
			t.Fatal("fillNotificationVersion changed its input")
		}
		if bytes.Equal(out, in) {
			return
		}
		if !json.Valid(in) || !json.Valid(out) {
			t.Fatalf("rewrote %q into %q (valid in: %v, out: %v)", in, out, json.Valid(in), json.Valid(out))
		}
		var before, after wire
		if json.Unmarshal(in, &before) != nil || json.Unmarshal(out, &after) != nil || before.Method == nil {
			t.Fatalf("rewrote %q, which is no notification, into %q", in, out)
		}
		if before.Params != nil && before.Params.Meta[mcpgo.MetaKeyProtocolVersion] != nil {
			t.Fatalf("rewrote %q, which has a version, into %q", in, out)
		}
		if after.Params == nil || after.Params.Meta[mcpgo.MetaKeyProtocolVersion] != version {
			t.Fatalf("rewrote %q into %q, which mcp-go reads without the version", in, out)
		}
		// Nothing else changed: out is in with one piece inserted, or
		// one null replaced.
		p := 0
		for p < len(in) && p < len(out) && in[p] == out[p] {
			p++
		}
		q := 0
		for q < len(in)-p && q < len(out)-p && in[len(in)-1-q] == out[len(out)-1-q] {
			q++
		}
		if removed := string(in[p : len(in)-q]); removed != "" && removed != "null" {
			t.Fatalf("rewrote %q into %q: %q replaced", in, out, removed)
		}
	})
}
