package jsonscan

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// IsSpace reports whether c is JSON white space.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// SkipSpace returns the index of the first byte at or after i that is not
// white space (len(b) when there is none).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

// SkipSpaceBack returns the index after the last byte before i that is not
// white space (0 when there is none).
func SkipSpaceBack(b []byte, i int) int {
	for i > 0 && IsSpace(b[i-1]) {
		i--
	}
	return i
}

// StringEnd returns the index after the string that opens at b[i] (a
// quote), or -1 when b ends first. It jumps from quote to quote with
// bytes.IndexByte; a quote ends the string unless an odd run of
// backslashes escapes it.
func StringEnd(b []byte, i int) int {
	j := i + 1
	for {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return -1
		}
		q += j
		n := 0
		for k := q - 1; k > i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// ValueEnd returns the index after the value that starts at b[i], or -1
// when b ends first. Objects and arrays end at their matching bracket
// (counted, not checked); anything else at the next white space, comma or
// closing bracket, which is i itself where no value starts.
func ValueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return StringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = StringEnd(b, j)
				if j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	for j := i; j < len(b); j++ {
		if c := b[j]; c == ',' || c == '}' || c == ']' || IsSpace(c) {
			return j
		}
	}
	return -1
}

// Member is a member of a JSON object: its key (unescaped: a slice of the
// object's text when it has no escapes, so that listing members allocates
// nothing; compare it as string(m.Key), which does not convert), and where
// its value lies in the object's text.
type Member struct {
	Key        []byte
	Start, End int
}

// ObjectMembers appends to members those of the valid JSON text b when it
// is an object, in order; false when b is not an object. A key may come
// more than once: the last is the one encoding/json would keep, so callers
// walk the members in order and let a later one replace an earlier one.
func ObjectMembers(members []Member, b []byte) ([]Member, bool) {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return members, true
	}
	for i < len(b) {
		i = SkipSpace(b, i)
		end := StringEnd(b, i)
		if end < 0 {
			return nil, false
		}
		key := b[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			k, ok := Unquote(b[i:end])
			if !ok {
				return nil, false
			}
			key = []byte(k)
		}
		i = SkipSpace(b, end) + 1 // the colon
		i = SkipSpace(b, i)
		end = ValueEnd(b, i)
		if end <= i {
			return nil, false
		}
		members = append(members, Member{key, i, end})
		i = SkipSpace(b, end)
		if i < len(b) && b[i] == '}' {
			return members, true
		}
		i++ // the comma
	}
	return nil, false
}

// Unquote is the string a JSON string literal holds, as encoding/json
// decodes it (invalid UTF-8 becomes U+FFFD); false when v is not a string.
// A string without escapes is copied, not decoded.
func Unquote(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	if inner := v[1 : len(v)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	return s, json.Unmarshal(v, &s) == nil
}
