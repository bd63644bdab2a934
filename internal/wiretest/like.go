package wiretest

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Like compares a decoded JSON value (numbers as json.Number or float64)
// with an expectation written in Go, for tests that build their expected
// answers in code rather than in vectors:
//
//   - objects have the same members, except that a want key "?k" is
//     optional, a want member "<open>": true allows any other member, and
//     the members Tolerate accepts may be there too (recorded in Ext);
//   - arrays ([]any or []string) have the same length;
//   - "<any>" matches any value (the member must be there), "<string>" a
//     non-empty string, "<number>" a number ≥ 0, "<uuid>" a UUID, "~RE" a
//     string matching RE; a func(any) string checks the value itself ("":
//     right);
//   - numbers (int, float64, json.Number) compare by exact value.
type Like struct {
	// Tolerate reports whether a member of got that want does not name
	// may be there (nil: none may).
	Tolerate func(path, key string) bool
	// Ext, when not nil, records each tolerated member: "path.key = value".
	Ext *[]string
}

var likeUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// Diff lists how got differs from want, one line each, at path.
func (l Like) Diff(path string, want, got any) []string {
	bad := func(format string, args ...any) []string {
		return []string{path + ": " + fmt.Sprintf(format, args...)}
	}
	switch w := want.(type) {
	case func(any) string:
		if msg := w(got); msg != "" {
			return bad("%s", msg)
		}
		return nil
	case string:
		g, isString := got.(string)
		switch {
		case w == "<any>":
		case w == "<string>":
			if !isString || g == "" {
				return bad("want a non-empty string, got %s", Show(got))
			}
		case w == "<number>":
			if n, ok := likeNumber(got); !ok || strings.HasPrefix(n, "-") {
				return bad("want a number ≥ 0, got %s", Show(got))
			}
		case w == "<uuid>":
			if !isString || !likeUUID.MatchString(g) {
				return bad("want a UUID, got %s", Show(got))
			}
		case strings.HasPrefix(w, "~"):
			if !isString || !regexp.MustCompile(w[1:]).MatchString(g) {
				return bad("want a string matching %q, got %s", w[1:], Show(got))
			}
		default:
			if !isString || g != w {
				return bad("want %s, got %s", Show(w), Show(got))
			}
		}
		return nil
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return bad("want an object, got %s", Show(got))
		}
		var diffs []string
		open := w["<open>"] == true
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if k == "<open>" {
				continue
			}
			name, optional := strings.CutPrefix(k, "?")
			gv, present := g[name]
			if !present {
				if !optional {
					diffs = append(diffs, fmt.Sprintf("%s.%s: missing (want %s)", path, name, Show(printable(w[k]))))
				}
				continue
			}
			diffs = append(diffs, l.Diff(path+"."+name, w[k], gv)...)
		}
		for _, k := range slices.Sorted(maps.Keys(g)) {
			_, plain := w[k]
			_, optional := w["?"+k]
			switch {
			case plain || optional || open:
			case l.Tolerate != nil && l.Tolerate(path, k):
				if l.Ext != nil {
					*l.Ext = append(*l.Ext, fmt.Sprintf("%s.%s = %s", path, k, Show(g[k])))
				}
			default:
				diffs = append(diffs, fmt.Sprintf("%s.%s: unexpected member %s", path, k, Show(g[k])))
			}
		}
		return diffs
	case []string:
		a := make([]any, len(w))
		for i, s := range w {
			a[i] = s
		}
		return l.Diff(path, a, got)
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return bad("want an array of %d, got %s", len(w), Show(got))
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, l.Diff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return diffs
	case nil:
		if got != nil {
			return bad("want null, got %s", Show(got))
		}
		return nil
	case bool:
		if g, ok := got.(bool); !ok || g != w {
			return bad("want %v, got %s", w, Show(got))
		}
		return nil
	case int, float64, json.Number:
		wn, _ := likeNumber(w)
		if gn, ok := likeNumber(got); !ok || !SameNumber(json.Number(wn), json.Number(gn)) {
			return bad("want %s, got %s", wn, Show(got))
		}
		return nil
	default:
		return bad("unsupported expectation %T", want)
	}
}

// likeNumber is the text of a number, decoded either way.
func likeNumber(v any) (string, bool) {
	switch n := v.(type) {
	case json.Number:
		return n.String(), true
	case float64:
		return strconv.FormatFloat(n, 'g', -1, 64), true
	case int:
		return strconv.Itoa(n), true
	}
	return "", false
}

// printable replaces check functions by a placeholder, for messages.
func printable(v any) any {
	switch w := v.(type) {
	case func(any) string:
		return "<check>"
	case map[string]any:
		out := map[string]any{}
		for k, x := range w {
			out[k] = printable(x)
		}
		return out
	case []any:
		out := make([]any, len(w))
		for i, x := range w {
			out[i] = printable(x)
		}
		return out
	}
	return v
}
