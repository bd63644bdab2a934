package jsonscan

import "bytes"

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
