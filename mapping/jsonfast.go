package mapping

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Fast paths for the values a call carries
//
// A tool call's value goes through this package once per call, and a large
// value (a file, a page of text) costs encoding/json a full pass each time
// it is compacted, unquoted or quoted. Most values need none of that work:
// a string without escapes reads as its bytes between the quotes, and JSON
// without any space is already compact. The functions here recognize those
// cases with one byte scan and fall back to encoding/json for the rest, so
// every answer is the one encoding/json gives.

// plainString reports whether encoding/json, without HTML escaping, writes
// s as its own bytes between quotes: valid UTF-8 without a quote, a
// backslash, a control character, U+2028 or U+2029 (which encoding/json
// escapes).
func plainString[T string | []byte](s T) bool {
	ascii := true
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c == '"', c == '\\':
			return false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if ascii {
		return true
	}
	b := []byte(s)
	return utf8.Valid(b) && !bytes.Contains(b, lineSeparator) && !bytes.Contains(b, paragraphSeparator)
}

var (
	lineSeparator      = []byte("\u2028")
	paragraphSeparator = []byte("\u2029")
)

// quoteString is encode(s) for a string.
func quoteString(s string) json.RawMessage {
	if plainString(s) {
		out := make([]byte, 0, len(s)+2)
		return append(append(append(out, '"'), s...), '"')
	}
	return encode(s)
}

// unquotePlain returns the string a JSON string literal q holds, when q is
// a string whose encoding is plain (see plainString): then the value
// encodes back to q byte for byte.
func unquotePlain(q []byte) (string, bool) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' || !plainString(q[1:len(q)-1]) {
		return "", false
	}
	return string(q[1 : len(q)-1]), true
}

// compactJSON removes insignificant space; invalid JSON is returned as is.
// A string, and a value without any space, control character or
// backslash-free space to remove, is returned without a pass of
// encoding/json.
func compactJSON(v []byte) json.RawMessage {
	if len(v) > 0 && (v[0] == '"' && plainQuoted(v) || !bytes.ContainsAny(v, " \t\r\n")) {
		return v
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		return v
	}
	return buf.Bytes()
}

// plainQuoted reports whether v is one JSON string literal whose bytes
// between the quotes are plain (see plainString).
func plainQuoted(v []byte) bool {
	_, ok := unquotePlain(v)
	return ok
}
