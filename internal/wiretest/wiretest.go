package wiretest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

var (
	// Placeholder is a placeholder: <kind> or <kind:capture>.
	Placeholder = regexp.MustCompile(`^<([a-z0-9]+)(?::([A-Za-z_][A-Za-z0-9_]*))?>$`)
	// Reference is a use of a captured value: {{name}}.
	Reference   = regexp.MustCompile(`\{\{([^{}]*)\}\}`)
	looksLikePH = regexp.MustCompile(`^<[^<>]+>$`)
	headerName  = regexp.MustCompile(`^[A-Za-z0-9-]+$`)
	uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// Kinds match the placeholder kinds.
var Kinds = map[string]func(v any) bool{
	"uuid":   func(v any) bool { s, ok := v.(string); return ok && uuidPattern.MatchString(s) },
	"number": func(v any) bool { _, ok := v.(json.Number); return ok },
	"url": func(v any) bool {
		s, ok := v.(string)
		if !ok {
			return false
		}
		u, err := url.Parse(s)
		return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
	},
	"rfc3339": func(v any) bool {
		s, ok := v.(string)
		if !ok {
			return false
		}
		_, err := time.Parse(time.RFC3339Nano, s)
		return err == nil
	},
	"string": func(v any) bool { _, ok := v.(string); return ok },
	"any":    func(any) bool { return true },
}

// Header is one header line of a message section.
type Header struct{ Name, Value string }

// SplitMessage splits a request or response section into its first line,
// its header lines and its body.
func SplitMessage(s string) (first string, header []Header, body string, err error) {
	head, body, _ := strings.Cut(s, "\n\n")
	lines := strings.Split(strings.TrimSuffix(head, "\n"), "\n")
	first = strings.TrimSpace(lines[0])
	for _, l := range lines[1:] {
		name, value, ok := strings.Cut(l, ":")
		if !ok || !headerName.MatchString(name) {
			return "", nil, "", fmt.Errorf("bad header line %q (want Name: value; a blank line before the body)", l)
		}
		header = append(header, Header{name, strings.TrimSpace(value)})
	}
	return first, header, strings.TrimSuffix(body, "\n"), nil
}

// IsJSON reports whether a Content-Type is JSON (application/json or
// +json).
func IsJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(strings.ToLower(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// DecodeStrict decodes exactly one JSON value, numbers as json.Number and
// (for structs) no unknown fields.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// Decode decodes exactly one JSON value as data (DecodeStrict into an any:
// objects, arrays, strings, json.Number, booleans, nil); nil on error.
func Decode(data []byte) (any, error) {
	var v any
	if err := DecodeStrict(data, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// MatchPlaceholder reports whether s is a placeholder and, if so, whether
// v matches it and the capture it names.
func MatchPlaceholder(s string, v any) (isPlaceholder, matches bool, capture string) {
	m := Placeholder.FindStringSubmatch(s)
	if m == nil || Kinds[m[1]] == nil {
		return false, false, ""
	}
	return true, Kinds[m[1]](v), m[2]
}

// Matcher compares decoded JSON values (DecodeStrict), placeholders in the
// expected value matching by kind.
type Matcher struct {
	// Root names the whole value in differences: "(body)", "(frame)".
	Root string
	// ExactNumbers compares numbers by their literal text (1.0 is not 1);
	// else by value.
	ExactNumbers bool
}

// Match returns the differences between want and got, one line each, at
// path. A placeholder's capture goes to captures (when not nil).
func (m Matcher) Match(path string, want, got any, captures map[string]string) []string {
	at := path
	if at == "" {
		at = m.Root
	}
	if s, ok := want.(string); ok {
		if isPH, ok, capture := MatchPlaceholder(s, got); isPH {
			if !ok {
				return []string{fmt.Sprintf("%s: %s does not match %s", at, Show(got), s)}
			}
			if capture != "" && captures != nil {
				captures[capture] = CaptureText(got)
			}
			return nil
		}
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %s, want an object", at, Show(got))}
		}
		var problems []string
		for _, k := range SortedKeys(w) {
			if gv, ok := g[k]; ok {
				problems = append(problems, m.Match(path+"."+k, w[k], gv, captures)...)
			} else {
				problems = append(problems, fmt.Sprintf("%s.%s: missing, want %s", path, k, Show(w[k])))
			}
		}
		for _, k := range SortedKeys(g) {
			if _, ok := w[k]; !ok {
				problems = append(problems, fmt.Sprintf("%s.%s: unexpected member %s", path, k, Show(g[k])))
			}
		}
		return problems
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %s, want an array", at, Show(got))}
		}
		if len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %d elements, want %d: %s", at, len(g), len(w), Show(got))}
		}
		var problems []string
		for i := range w {
			problems = append(problems, m.Match(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], captures)...)
		}
		return problems
	case json.Number:
		if g, ok := got.(json.Number); ok && (g == w || !m.ExactNumbers && SameNumber(w, g)) {
			return nil
		}
	default: // string, bool, nil
		if want == got {
			return nil
		}
	}
	return []string{fmt.Sprintf("%s: %s, want %s", at, Show(got), Show(want))}
}

// SameNumber reports whether two JSON numbers have the same value.
func SameNumber(a, b json.Number) bool {
	x, okx := new(big.Rat).SetString(string(a))
	y, oky := new(big.Rat).SetString(string(b))
	return okx && oky && x.Cmp(y) == 0
}

// SortedKeys returns the keys of m in order.
func SortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}

// Show is v as JSON, shortened, for messages.
func Show(v any) string {
	var buf bytes.Buffer
	if err := WriteValue(&buf, v); err != nil {
		return fmt.Sprint(v)
	}
	if s := buf.String(); len(s) > 300 {
		return s[:300] + "…"
	}
	return buf.String()
}

// CaptureText is the text {{name}} expands to: a string as is, any other
// value as JSON.
func CaptureText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var buf bytes.Buffer
	_ = WriteValue(&buf, v)
	return buf.String()
}

// WalkPlaceholders calls f with each string in v that looks like a
// placeholder, <…> (to check that each is a known one).
func WalkPlaceholders(v any, f func(text string)) {
	switch x := v.(type) {
	case string:
		if looksLikePH.MatchString(x) {
			f(x)
		}
	case map[string]any:
		for _, k := range SortedKeys(x) {
			WalkPlaceholders(x[k], f)
		}
	case []any:
		for _, e := range x {
			WalkPlaceholders(e, f)
		}
	}
}

// RecordCaptures checks the placeholders of want, the decoded expected
// body of section, and records in captured each capture one of them names,
// as recorded at at (a section, a step number: anything but the zero
// value). It fails on an unknown placeholder kind and on a capture that
// captured already holds.
func RecordCaptures[K comparable](section string, want any, captured map[string]K, at K) error {
	var zero K
	var err error
	WalkPlaceholders(want, func(text string) {
		m := Placeholder.FindStringSubmatch(text)
		switch {
		case err != nil:
		case m == nil || Kinds[m[1]] == nil:
			err = fmt.Errorf("%s: unknown placeholder %s", section, text)
		case m[2] == "":
		case captured[m[2]] != zero:
			err = fmt.Errorf("%s: capture %q is recorded twice", section, m[2])
		default:
			captured[m[2]] = at
		}
	})
	return err
}

// WriteValue writes v as compact JSON without HTML escaping, a json.Number
// as its text.
func WriteValue(buf *bytes.Buffer, v any) error {
	if n, ok := v.(json.Number); ok {
		buf.WriteString(n.String())
		return nil
	}
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	return nil
}

// Writer writes a received JSON value in a vector's form, for -update:
// indented, in the sender's member order, with the expected value's
// placeholders kept where they still match.
type Writer struct {
	// Captures: a string equal to a captured value is written as
	// {{name}}.
	Captures map[string]string
	// KeepAny keeps an expected "<any>" over a whole subtree.
	KeepAny bool
	// OneLine writes a value with no more than two levels on one line when
	// it fits in this many columns (0: never).
	OneLine int
}

// WriteOrdered writes the next JSON value of dec (which decodes numbers as
// json.Number) against want, the expected value, at indent.
func (w Writer) WriteOrdered(buf *bytes.Buffer, dec *json.Decoder, want any, indent string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, isDelim := tok.(json.Delim)
	if !isDelim {
		if s, ok := want.(string); ok {
			if _, ok, _ := MatchPlaceholder(s, tok); ok {
				return WriteValue(buf, s)
			}
		}
		if s, ok := tok.(string); ok {
			for _, name := range slices.Sorted(maps.Keys(w.Captures)) {
				if w.Captures[name] == s {
					return WriteValue(buf, "{{"+name+"}}")
				}
			}
		}
		return WriteValue(buf, tok)
	}
	inner := indent + "  "
	wantObj, _ := want.(map[string]any)
	wantArr, _ := want.([]any)
	closing := byte('}')
	if delim == '[' {
		closing = ']'
	}
	buf.WriteByte(byte(delim))
	n := 0
	for dec.More() {
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString("\n" + inner)
		var sub any
		if delim == '{' {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k := kt.(string)
			if err := WriteValue(buf, k); err != nil {
				return err
			}
			buf.WriteString(": ")
			sub = wantObj[k]
		} else if n < len(wantArr) {
			sub = wantArr[n]
		}
		if s, ok := sub.(string); ok && s == "<any>" && w.KeepAny {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
			buf.WriteString(`"<any>"`)
			n++
			continue
		}
		var part bytes.Buffer
		if err := w.WriteOrdered(&part, dec, sub, inner); err != nil {
			return err
		}
		if line, ok := oneLine(part.Bytes()); ok && w.OneLine > 0 && len(inner)+len(line) <= w.OneLine {
			buf.WriteString(line)
		} else {
			buf.Write(part.Bytes())
		}
		n++
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	if n > 0 {
		buf.WriteString("\n" + indent)
	}
	buf.WriteByte(closing)
	return nil
}

// oneLine is an indented JSON value on one line ({"a": 1, "b": [2]}), when
// it holds no object or array with more than one level below it.
func oneLine(indented []byte) (string, bool) {
	if !bytes.Contains(indented, []byte("\n")) {
		return string(indented), true
	}
	dec := json.NewDecoder(bytes.NewReader(indented))
	dec.UseNumber()
	var buf bytes.Buffer
	depth, maxDepth := 0, 0
	first := true // no separator before the next token
	inObject := []bool{}
	key := false // the next token in an object is a key
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", false
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			buf.WriteByte(byte(d))
			depth--
			inObject = inObject[:len(inObject)-1]
			first = false
			key = len(inObject) > 0 && inObject[len(inObject)-1]
			continue
		}
		if !first {
			if len(inObject) > 0 && inObject[len(inObject)-1] && !key {
				buf.WriteString(": ")
			} else {
				buf.WriteString(", ")
			}
		}
		if d, ok := tok.(json.Delim); ok {
			buf.WriteByte(byte(d))
			depth++
			maxDepth = max(maxDepth, depth)
			inObject = append(inObject, d == '{')
			first, key = true, d == '{'
			continue
		}
		if err := WriteValue(&buf, tok); err != nil {
			return "", false
		}
		first = false
		if len(inObject) > 0 && inObject[len(inObject)-1] {
			key = !key
		}
	}
	return buf.String(), maxDepth <= 2
}
