package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mcpotc/mcpotc/internal/editdist"
)

// Duration is a time.Duration written as "60s" in config files.
type Duration time.Duration

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf(`want a duration such as "60s"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return fmt.Errorf("%q is not a positive duration such as \"60s\"", s)
	}
	*d = Duration(v)
	return nil
}

// configError names the file (or the flag), the key and the reason of one
// problem.
type configError struct {
	file, key, reason string
}

func (e *configError) Error() string {
	if e.key == "" {
		return fmt.Sprintf("%s: %s", e.file, e.reason)
	}
	return fmt.Sprintf("%s: %s: %s", e.file, e.key, e.reason)
}

// problems collects every problem of a configuration — the config file and
// the flags that name environment variables — so that one run reports them
// all (docs/mcp-front.md, Config file). The zero value is ready to use.
type problems struct {
	list    []*configError
	missing []string // unset environment variables, in the order met
}

// add records a problem with key in file.
func (p *problems) add(file, key, reason string) {
	p.list = append(p.list, &configError{file, key, reason})
}

// addErr records err: a *configError as itself, a *problemsError's problems
// one by one, anything else under file.
func (p *problems) addErr(file, key string, err error) {
	var pe *problemsError
	var ce *configError
	switch {
	case errors.As(err, &pe):
		p.list = append(p.list, pe.list...)
		for _, name := range pe.missing {
			p.noteMissing(name)
		}
	case errors.As(err, &ce):
		p.list = append(p.list, ce)
	default:
		p.add(file, key, err.Error())
	}
}

func (p *problems) noteMissing(name string) {
	if !slices.Contains(p.missing, name) {
		p.missing = append(p.missing, name)
	}
}

// env reads the environment variable that key names: a problem when the
// value is not a variable name or the variable is unset or empty.
func (p *problems) env(getenv func(string) string, file, key, name string) string {
	if !envName(name) {
		// The value is not repeated: it may be a secret written in by mistake.
		p.add(file, key, "must name an environment variable (letters, digits, _): secrets are never written in the file, only the variable that holds them")
		return ""
	}
	v := getenv(name)
	if v == "" {
		p.add(file, key, fmt.Sprintf("environment variable %s is not set", name))
		p.noteMissing(name)
	}
	return v
}

// err is nil without problems, else a *problemsError holding them all.
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &problemsError{list: slices.Clone(p.list), missing: slices.Clone(p.missing)}
}

// problemsError is every problem of a configuration, in one message. It is
// the caller's wording: exit code 2.
type problemsError struct {
	list    []*configError
	missing []string
}

func (e *problemsError) Error() string {
	if len(e.list) == 1 && len(e.missing) == 0 {
		return e.list[0].Error()
	}
	var b strings.Builder
	if len(e.list) == 1 {
		b.WriteString(e.list[0].Error())
	} else {
		fmt.Fprintf(&b, "%d problems:", len(e.list))
		for _, c := range e.list {
			b.WriteString("\n  ")
			b.WriteString(c.Error())
		}
	}
	if len(e.missing) > 0 && len(e.list) > 1 {
		verb := "is"
		if len(e.missing) > 1 {
			verb = "are"
		}
		fmt.Fprintf(&b, "\n%s %s not set: set %s in the environment and run again (the configuration names the variables; secrets are never written in it)",
			andList(e.missing), verb, map[bool]string{true: "it", false: "them"}[len(e.missing) == 1])
	}
	return b.String()
}

// andList writes "A", "A and B", "A, B and C".
func andList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// readConfig reads a config file as JSON: a syntax error names the line and
// the column.
func readConfig(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: config file: %v", errUsage, err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			off, msg := syn.Offset, strings.TrimPrefix(syn.Error(), "invalid character ")
			if msg == "unexpected end of JSON input" {
				off, msg = off+1, "the file ends before the JSON does (a missing } or ]?)"
			}
			line, col := lineCol(data, off)
			return nil, &configError{path, "", fmt.Sprintf("line %d, column %d: invalid JSON: %s", line, col, msg)}
		}
		return nil, &configError{path, "", "invalid JSON: " + err.Error()}
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, &configError{path, "", "want a JSON object"}
	}
	return data, nil
}

// lineCol turns a byte offset of a JSON syntax error (the offset after the
// offending byte) into a 1-based line and column.
func lineCol(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data))+1 {
		offset = int64(len(data)) + 1
	}
	before := data[:max(offset-1, 0)]
	line = bytes.Count(before, []byte("\n")) + 1
	col = len(before) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// loadConfig reads a JSON config file strictly into dst: every unknown key
// and every value of the wrong type is a problem naming the file, the key
// and the reason, all of them in one error.
func loadConfig(path string, dst any) error {
	data, err := readConfig(path)
	if err != nil {
		return err
	}
	var p problems
	decodeStrict(&p, path, "", data, reflect.ValueOf(dst).Elem())
	return p.err()
}

// decodeStrict decodes data into v, walking structs, slices and maps so that
// every unknown key is reported with its path. Problems go to p; decoding
// goes on past them, so that one run reports every one.
func decodeStrict(p *problems, file, path string, data []byte, v reflect.Value) {
	fail := func(reason string) { p.add(file, path, reason) }
	data = bytes.TrimSpace(data)
	if u, ok := v.Addr().Interface().(json.Unmarshaler); ok {
		if err := u.UnmarshalJSON(data); err != nil {
			fail(err.Error())
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		decodeStruct(p, file, path, data, v)
	case reflect.Slice:
		var items []json.RawMessage
		if err := json.Unmarshal(data, &items); err != nil {
			fail("want a list")
			return
		}
		s := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, item := range items {
			decodeStrict(p, file, fmt.Sprintf("%s[%d]", path, i), item, s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
			fail("want an object")
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(obj))
		for _, k := range sortedKeys(obj) {
			e := reflect.New(v.Type().Elem()).Elem()
			decodeStrict(p, file, join(path, k), obj[k], e)
			m.SetMapIndex(reflect.ValueOf(k), e)
		}
		v.Set(m)
	case reflect.Pointer:
		if string(data) == "null" {
			return
		}
		e := reflect.New(v.Type().Elem())
		decodeStrict(p, file, path, data, e.Elem())
		v.Set(e)
	default:
		if err := json.Unmarshal(data, v.Addr().Interface()); err != nil {
			fail("want " + kindName(v.Kind()))
		}
	}
}

// decodeStruct is decodeStrict for a struct: its JSON object's keys are
// the fields' json tags; any other key is a problem that names the nearest.
func decodeStruct(p *problems, file, path string, data []byte, v reflect.Value) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		p.add(file, path, "want an object")
		return
	}
	fields := map[string]reflect.Value{}
	var names []string
	for i := 0; i < v.NumField(); i++ {
		tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if tag != "" && tag != "-" {
			fields[tag] = v.Field(i)
			names = append(names, tag)
		}
	}
	for _, k := range sortedKeys(obj) {
		f, ok := fields[k]
		if !ok {
			reason := "unknown key (known: " + strings.Join(names, ", ") + ")"
			if near := nearest(k, names); near != "" {
				reason = fmt.Sprintf("unknown key: did you mean %q? (known: %s)", near, strings.Join(names, ", "))
			}
			p.add(file, join(path, k), reason)
			continue
		}
		decodeStrict(p, file, join(path, k), obj[k], f)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// nearest returns the name of names that key most likely misspells (edit
// distance at most 2, or the same ignoring case and _ -), or "".
func nearest(key string, names []string) string {
	norm := func(s string) string { return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s)) }
	best, bestD := "", 3
	for _, n := range names {
		if norm(n) == norm(key) {
			return n
		}
		if d := editdist.Distance(key, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "a number"
	}
	return "a " + k.String()
}

// envName checks that a config value names an environment variable.
func envName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// oneOf checks an enumerated value.
func oneOf(file, key, value string, allowed ...string) error {
	if slices.Contains(allowed, value) {
		return nil
	}
	return &configError{file, key, fmt.Sprintf("%q is not one of %s", value, strings.Join(allowed, ", "))}
}

// networks reads CIDRs ("10.0.0.0/8", "fd00::/8") or single addresses
// (a /32 or /128) for the OAuth dial guard's allowed networks (docs/otc-front.md,
// OAuth-protected MCP servers).
func networks(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		return nil, fmt.Errorf("%q is not a network (CIDR such as 10.0.0.0/8) nor an IP address", s)
	}
	return out, nil
}
