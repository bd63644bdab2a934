package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestValueEnd(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`"abc",`, 5}, {`"a\"b",`, 6}, {`"a\\",`, 5}, {`"a\\\"",`, 7}, {`"abc`, -1}, {`"a\"`, -1},
		{`{"a":[1,"]",{"b":"}"}]} ,`, 23}, {`[1,2`, -1}, {`12.5e3,`, 6}, {`true}`, 4}, {`null]`, 4}, {`12`, -1}, {`,`, 0}, {``, -1},
	} {
		if got := ValueEnd([]byte(tc.in), 0); got != tc.want {
			t.Errorf("ValueEnd(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
	if got := SkipSpace([]byte(" \t\r\nx "), 0); got != 4 {
		t.Errorf("SkipSpace = %d, want 4", got)
	}
	if got := SkipSpaceBack([]byte(" x \n"), 4); got != 2 {
		t.Errorf("SkipSpaceBack = %d, want 2", got)
	}
}

// Every JSON value ends where encoding/json says it does.
func FuzzValueEnd(f *testing.F) {
	for _, s := range []string{`"x"`, `"\\\""`, `{"a":{"b":["c",1,true,null]}}`, `[[],{}]`, `-1.5e-3`, `"é\u00e9"`, `"\\\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v := bytes.TrimSpace(b)
		if len(v) == 0 || !json.Valid(v) {
			return
		}
		in := append(append([]byte(nil), v...), ',')
		if got := ValueEnd(in, 0); got != len(v) {
			t.Fatalf("ValueEnd(%q) = %d, want %d", in, got, len(v))
		}
	})
}

// ObjectMembers finds every member encoding/json finds, with the same
// values, a later key replacing an earlier one.
func FuzzObjectMembers(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : 1 , "b":[1,{"c":"}"}] } `, `{"a":1,"a":2}`, `{"\u0061":"x","b\"":null}`, `[1]`, `"x"`, `{"a\ud800":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal(b, &want)
		members, ok := ObjectMembers(nil, b)
		if ok != (wantErr == nil && want != nil) {
			t.Fatalf("ObjectMembers(%q) ok = %v, encoding/json: %v, %v", b, ok, want, wantErr)
		}
		if !ok {
			return
		}
		got := map[string]json.RawMessage{}
		for _, m := range members {
			got[string(m.Key)] = b[m.Start:m.End]
		}
		if len(got) != len(want) {
			t.Fatalf("ObjectMembers(%q) = %d keys, want %d", b, len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(bytes.TrimSpace(v), got[k]) {
				t.Fatalf("ObjectMembers(%q)[%q] = %q, want %q", b, k, got[k], v)
			}
		}
	})
}
