package mapping

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The fast paths answer what encoding/json answers, for every input.
func FuzzJSONFastPaths(f *testing.F) {
	for _, s := range []string{"", "plain", "tab\there", `quote"`, `back\slash`, "é and 中", "\u2028", "\u2029x",
		"bad \xff utf-8", "\x7f", "<html>&amp;</html>", `"quoted"`, `{"a": 1}`, `[1, 2]`, ` "x" `, `"a" "b"`, `{"a":"b c"}`, "null", "\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := quoteString(s), encode(s); !bytes.Equal(got, want) {
			t.Fatalf("quoteString(%q) = %s, encode gives %s", s, got, want)
		}
		q := encode(s)
		if u, ok := unquotePlain(q); ok {
			if u != s {
				t.Fatalf("unquotePlain(%s) = %q, want %q", q, u, s)
			}
			if !bytes.Equal(encode(u), q) {
				t.Fatalf("unquotePlain(%s) is plain but does not encode back", q)
			}
		}
		// Any bytes: a literal unquotePlain accepts is one encoding/json
		// reads as the same string.
		if u, ok := unquotePlain([]byte(s)); ok {
			var want string
			if err := json.Unmarshal([]byte(s), &want); err != nil || want != u {
				t.Fatalf("unquotePlain(%q) = %q, encoding/json reads %q (%v)", s, u, want, err)
			}
		}
		var buf bytes.Buffer
		want := []byte(s)
		if json.Compact(&buf, []byte(s)) == nil {
			want = buf.Bytes()
		}
		if got := compactJSON([]byte(s)); !bytes.Equal(got, want) {
			t.Fatalf("compactJSON(%q) = %q, json.Compact gives %q", s, got, want)
		}
	})
}
