package otc

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// strictUnmarshal reads with json.Unmarshal first and falls back to the
// strict decoder: it must decode and fail exactly as the strict decoder.
func checkStrict[T any](t *testing.T, data []byte) {
	t.Helper()
	var got, want T
	gotErr := strictUnmarshal(data, &got)
	wantErr := strictDecode(data, &want)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Errorf("%T %q: error %v, want %v", got, data, gotErr, wantErr)
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%T %q: decoded %#v, want %#v", got, data, got, want)
	}
}

func checkStrictAll(t *testing.T, data []byte) {
	t.Helper()
	checkStrict[map[string]json.RawMessage](t, data)
	checkStrict[wireCallResponse](t, data)
	checkStrict[[]wireTool](t, data)
	checkStrict[any](t, data)
}

func TestStrictUnmarshalMatchesDecoder(t *testing.T) {
	inputs := []string{
		``, ` `, `null`, `{}`, `[]`, `{"a":1}`, ` {"a":1} `, "{\"a\":1}\n", `{"a":1}{"b":2}`, `{"a":1} x`, `{"a":1}]`,
		`{"$schema":"urn:oxp:1.0","request":{"tool_id":"A.B@1.0.0","input":{"a":1}}}`, `{"request":null}`, `{"tool_id":1}`,
		`{"result":{"call_id":"c","success":true,"value":5}}`, `{"success":"yes"}`, `{"call_id":5,"value":1}`,
		`[{"id":"A.B@1.0.0","name":"A_B","version":"1.0.0","input":{"parameters":{"type":"object"}}}]`, `[{"id":5}]`,
		`{"a":1,"a":2}`, `{"Tool_ID":"x"}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":1e999}`, `{"a":01}`, `{"a":1,}`,
		`{"a":[1,2,{"b":null}]}`, `"str"`, `12`, `true`, `{"a":`, `{"a"`, `{`, `[`, `]`, `}`, `{"value":null}`,
	}
	for _, in := range inputs {
		checkStrictAll(t, []byte(in))
	}
	// Mutations of valid bodies: cut, duplicated, a byte replaced.
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte(`{}[]":,0 1ae-.\` + "\n")
	for range 5000 {
		in := []byte(inputs[r.IntN(len(inputs))])
		switch r.IntN(3) {
		case 0:
			in = in[:r.IntN(len(in)+1)]
		case 1:
			in = append(in, in...)
		default:
			if len(in) > 0 {
				in = append([]byte(nil), in...)
				in[r.IntN(len(in))] = alphabet[r.IntN(len(alphabet))]
			}
		}
		checkStrictAll(t, in)
	}
}

func FuzzStrictUnmarshal(f *testing.F) {
	f.Add([]byte(`{"$schema":"urn:oxp:1.0","request":{"tool_id":"A.B","input":{}}}`))
	f.Add([]byte(`{"result":{"success":true,"value":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) { checkStrictAll(t, data) })
}
