package otc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/mcpotc/mcpotc/internal/jsonscan"
)

// PlainInputSchema returns the JSON Schema of a tool's input: the schema
// itself, or the inside of the OTC 1.0 {"parameters": <schema>} wrapper.
// A missing or empty schema is {"type":"object"}.
func PlainInputSchema(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isJSONNull(raw) || string(raw) == "{}" {
		return json.RawMessage(`{"type":"object"}`)
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return raw
	}
	inner, wrapped := top["parameters"]
	_, hasType := top["type"]
	_, hasProps := top["properties"]
	if wrapped && !hasType && !hasProps && bytes.HasPrefix(bytes.TrimSpace(inner), []byte("{")) {
		return PlainInputSchema(inner)
	}
	return raw
}

// CheckInputSchema reports whether a tool's input schema (plain or
// wrapped) compiles, as Handler.SetTools will require.
func CheckInputSchema(toolID string, raw json.RawMessage) error {
	_, err := compileInputSchema(toolID, raw)
	return err
}

// inputValidator checks call input against one tool version's input schema.
// It is compiled once, when the tool is registered.
type inputValidator struct {
	schema *jsonschema.Schema
	plain  json.RawMessage // the schema it was compiled from (PlainInputSchema)
	// anyObject: the schema asks only that the input be an object (it is
	// {"type":"object"}, with annotations at most): the input is checked
	// without being decoded.
	anyObject bool
}

var errNoRemoteRefs = errors.New("input schemas may not load external references")

// compileInputSchema compiles a tool's input schema (wrapped or plain).
// External references are never fetched: a schema from an upstream must not
// make the bridge read files or call URLs.
func compileInputSchema(toolID string, raw json.RawMessage) (*inputValidator, error) {
	plain := PlainInputSchema(raw)
	c := jsonschema.NewCompiler()
	c.LoadURL = func(string) (io.ReadCloser, error) { return nil, errNoRemoteRefs }
	url := "mem:///" + toolID + "/input_schema.json"
	if err := c.AddResource(url, bytes.NewReader(plain)); err != nil {
		return nil, fmt.Errorf("input schema of %s: %w", toolID, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("input schema of %s: %w", toolID, err)
	}
	return &inputValidator{schema: s, plain: plain, anyObject: onlyObject(plain)}, nil
}

// onlyObject reports whether the schema plain accepts every object: it is
// {"type":"object"} with nothing else that constrains (annotations,
// empty properties or required, additionalProperties true).
func onlyObject(plain json.RawMessage) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(plain, &top) != nil || string(top["type"]) != `"object"` {
		return false
	}
	for k, v := range top {
		switch k {
		case "type", "$schema", "$id", "$comment", "title", "description", "examples", "default", "deprecated", "readOnly", "writeOnly":
		case "properties", "patternProperties", "$defs", "definitions":
			if string(bytes.TrimSpace(v)) != "{}" {
				return false
			}
		case "required":
			if string(bytes.TrimSpace(v)) != "[]" {
				return false
			}
		case "additionalProperties", "unevaluatedProperties":
			if string(bytes.TrimSpace(v)) != "true" {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// validate decodes input (absent means {}) and checks it. It returns nil when
// the input is valid, else the parameter errors keyed by top-level
// parameter name (nested paths are named in the message). A problem with the
// input as a whole is keyed "input".
func (v *inputValidator) validate(input json.RawMessage) map[string]string {
	return v.validateRead(input, false)
}

// validateRead is validate; wellFormed says input is known to be valid
// JSON (a slice of a call's body, which json.Valid checked). The input is
// decoded once, for the validator, and not at all when the schema accepts
// every object: then a walk of its bytes finds its numbers' bounds.
func (v *inputValidator) validateRead(input json.RawMessage, wellFormed bool) map[string]string {
	input = bytes.TrimSpace(input)
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if v.anyObject && input[0] == '{' && (wellFormed || json.Valid(input)) && numbersBounded(input) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return map[string]string{"input": "Must be valid JSON"}
	}
	if _, ok := doc.(map[string]any); !ok {
		return map[string]string{"input": "Must be an object"}
	}
	// The validator works on numbers as exact rationals: an exponent like
	// 1e99999999 would cost it unbounded time and memory (or make it panic),
	// so such numbers are refused first.
	if pe := checkNumbers(doc, nil); pe != nil {
		return map[string]string{pe.param: pe.message}
	}
	err := safeValidate(v.schema, doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return map[string]string{"input": "Could not be validated"}
	}
	out := map[string]string{}
	collect(ve, out)
	if len(out) == 0 {
		out["input"] = "Does not match the input schema"
	}
	return out
}

// collect walks the validator's error tree and keeps, for each top-level
// parameter, the readable message of its first leaf error.
func collect(ve *jsonschema.ValidationError, out map[string]string) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collect(c, out)
		}
		return
	}
	for _, pe := range describe(ve) {
		if _, seen := out[pe.param]; !seen {
			out[pe.param] = pe.message
		}
	}
}

type paramError struct{ param, message string }

var quotedName = regexp.MustCompile(`'((?:[^'\\]|\\.)*)'`)

// describe turns one leaf validation error into readable messages, each for
// one top-level parameter.
func describe(ve *jsonschema.ValidationError) []paramError {
	path := splitPointer(ve.InstanceLocation)
	keyword := ve.KeywordLocation
	if i := strings.LastIndexByte(keyword, '/'); i >= 0 {
		keyword = keyword[i+1:]
	}
	msg := readable(keyword, ve.Message)
	// Errors about object members that are absent or not allowed name the
	// members in the message: attach them to each member's own path.
	if keyword == "required" || keyword == "additionalProperties" || keyword == "unevaluatedProperties" {
		var out []paramError
		for _, m := range quotedName.FindAllStringSubmatch(ve.Message, -1) {
			name := strings.ReplaceAll(m[1], `\'`, "'")
			if u, err := strconv.Unquote(`"` + name + `"`); err == nil {
				name = u
			}
			member := append(append([]string(nil), path...), name)
			text := "Is required"
			if keyword != "required" {
				text = "Is not an allowed parameter"
			}
			out = append(out, atPath(member, text))
		}
		if len(out) > 0 {
			return out
		}
	}
	return []paramError{atPath(path, msg)}
}

// atPath keys a message by the first path element, naming the rest in the text.
func atPath(path []string, msg string) paramError {
	if len(path) == 0 {
		return paramError{"input", msg}
	}
	if len(path) == 1 {
		return paramError{path[0], msg}
	}
	return paramError{path[0], strings.Join(path[1:], ".") + ": " + msg}
}

var expectedType = regexp.MustCompile(`^expected (.+), but got (\w+)$`)

// readable rewrites the validator's messages as short sentences a user or a
// model can act on ("Must be a number").
func readable(keyword, msg string) string {
	switch keyword {
	case "type":
		if m := expectedType.FindStringSubmatch(msg); m != nil {
			types := strings.Split(m[1], " or ")
			sort.Strings(types)
			for i, t := range types {
				types[i] = article(t)
			}
			return "Must be " + strings.Join(types, " or ")
		}
	case "enum":
		if msg == "enum failed" {
			return "Must be one of the allowed values"
		}
		return "Must be one of the allowed values (" + strings.TrimPrefix(strings.TrimPrefix(msg, "value must be one of "), "value must be ") + ")"
	case "const":
		return "Must be " + strings.TrimPrefix(msg, "value must be ")
	case "format":
		return "Must be a valid " + strings.Trim(msg[strings.LastIndexByte(msg, ' ')+1:], "'")
	}
	if msg == "" {
		return "Is invalid"
	}
	return strings.ToUpper(msg[:1]) + msg[1:]
}

func article(t string) string {
	switch t {
	case "integer", "object", "array":
		return "an " + t
	case "null":
		return "null"
	}
	return "a " + t
}

// splitPointer splits a JSON pointer into unescaped segments.
func splitPointer(p string) []string {
	if p == "" || p == "/" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts
}

// Bounds on numbers in call input, far beyond float64 and any real argument.
const (
	maxNumberDigits   = 4096
	maxNumberExponent = 1000
)

// checkNumbers finds the first number in doc that is too large to validate.
func checkNumbers(doc any, path []string) *paramError {
	switch v := doc.(type) {
	case json.Number:
		if !numberInBounds(string(v)) {
			pe := atPath(path, fmt.Sprintf("Is out of range (at most %d digits and an exponent within ±%d)", maxNumberDigits, maxNumberExponent))
			return &pe
		}
	case map[string]any:
		for k, e := range v {
			if pe := checkNumbers(e, append(path, k)); pe != nil {
				return pe
			}
		}
	case []any:
		for i, e := range v {
			if pe := checkNumbers(e, append(path, strconv.Itoa(i))); pe != nil {
				return pe
			}
		}
	}
	return nil
}

// numbersBounded reports whether every number in the valid JSON text b
// is within the bounds checkNumbers holds them to (without decoding b:
// strings are jumped over, each number is read in place).
func numbersBounded(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			end := jsonscan.StringEnd(b, i)
			if end < 0 {
				return false
			}
			i = end - 1
		case c == '-' || (c >= '0' && c <= '9'):
			end := jsonscan.ValueEnd(b, i)
			if end < 0 {
				end = len(b)
			}
			if !numberInBounds(string(b[i:end])) {
				return false
			}
			i = end - 1
		}
	}
	return true
}

func numberInBounds(n string) bool {
	if len(n) > maxNumberDigits+16 {
		return false
	}
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return true
	}
	exp, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
	return err == nil && exp >= -maxNumberExponent && exp <= maxNumberExponent
}

// safeValidate runs the validator, turning a panic inside it into an error.
func safeValidate(s *jsonschema.Schema, doc any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("validator failed: %v", p)
		}
	}()
	return s.Validate(doc)
}
