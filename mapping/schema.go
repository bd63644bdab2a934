package mapping

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpotc/mcpotc/otc"
)

// MaxRefDepth bounds how deep chains of $refs are inlined; deeper refs, and
// a ref met again inside its own expansion (recursion), become {} (any value).
const MaxRefDepth = 8

// SchemaNotes says what a schema translation had to give up, for the log.
type SchemaNotes struct {
	// CutRefs are the $refs replaced by {}: recursive beyond MaxRefDepth,
	// remote, or unresolvable.
	CutRefs []string
	// FilledDescriptions counts properties that got a description.
	FilledDescriptions int
}

// decode reads JSON keeping numbers exact.
func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// encode writes v as compact JSON without HTML escaping.
func encode(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // values here come from decode: always encodable
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// otcInputSchema turns an MCP inputSchema into an OTC input_schema: $ref,
// $defs and definitions inlined (OTC forbids them), every property given a
// description (OTC requires one: its title, else its name), and the result
// always an object schema.
func otcInputSchema(raw json.RawMessage) (json.RawMessage, SchemaNotes, error) {
	if len(bytes.TrimSpace(raw)) == 0 || isNull(raw) {
		return json.RawMessage(`{"type":"object"}`), SchemaNotes{}, nil
	}
	v, notes, err := otcSchema(raw)
	if err != nil {
		return nil, notes, err
	}
	fillDescriptions(v, &notes)
	m, ok := v.(map[string]any)
	if !ok {
		return nil, notes, fmt.Errorf("inputSchema is not a JSON object")
	}
	if _, has := m["type"]; !has {
		m["type"] = "object"
	}
	return encode(m), notes, nil
}

// otcOutputSchema turns an MCP outputSchema into an OTC output_schema: as
// is, with refs inlined. No outputSchema is {} (any value).
func otcOutputSchema(raw json.RawMessage) (json.RawMessage, SchemaNotes, error) {
	if len(bytes.TrimSpace(raw)) == 0 || isNull(raw) {
		return json.RawMessage(`{}`), SchemaNotes{}, nil
	}
	v, notes, err := otcSchema(raw)
	if err != nil {
		return nil, notes, err
	}
	return encode(v), notes, nil
}

func otcSchema(raw json.RawMessage) (any, SchemaNotes, error) {
	var notes SchemaNotes
	root, err := decode(raw)
	if err != nil {
		return nil, notes, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	in := &inliner{root: root, notes: &notes}
	return in.walk(root, nil), notes, nil
}

// maxInlinedNodes bounds the size of a schema with refs inlined.
const maxInlinedNodes = 100_000

// inliner replaces $refs by the schemas they point to.
type inliner struct {
	root  any
	notes *SchemaNotes
	nodes int // JSON nodes written so far
}

// walk returns a copy of v with refs inlined; stack holds the refs being
// expanded (recursion detection).
func (in *inliner) walk(v any, stack []string) any {
	in.nodes++
	switch t := v.(type) {
	case map[string]any:
		if ref, ok := t["$ref"].(string); ok {
			return in.expand(t, ref, stack)
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			if k == "$defs" || k == "definitions" {
				continue
			}
			out[k] = in.walk(e, stack)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = in.walk(e, stack)
		}
		return out
	}
	return v
}

func (in *inliner) expand(node map[string]any, ref string, stack []string) any {
	cut := func() any {
		in.notes.CutRefs = append(in.notes.CutRefs, ref)
		return in.siblings(node, map[string]any{}, stack)
	}
	// A ref inside its own expansion is recursion: it is cut there, so a
	// recursive type is unrolled once. Chains of distinct refs stop at
	// MaxRefDepth, and the whole expansion at maxInlinedNodes.
	if len(stack) >= MaxRefDepth || in.nodes > maxInlinedNodes || slices.Contains(stack, ref) {
		return cut()
	}
	target, ok := resolvePointer(in.root, ref)
	if !ok {
		return cut()
	}
	resolved := in.walk(target, append(stack, ref))
	m, ok := resolved.(map[string]any)
	if !ok {
		// A boolean schema (true/false) cannot carry siblings.
		if len(node) == 1 {
			return resolved
		}
		m = map[string]any{}
		if b, isBool := resolved.(bool); isBool && !b {
			m["not"] = map[string]any{}
		}
	}
	return in.siblings(node, m, stack)
}

// siblings merges the keywords beside a $ref over the resolved schema
// (a description next to a $ref is the usual case).
func (in *inliner) siblings(node, into map[string]any, stack []string) map[string]any {
	for k, e := range node {
		if k == "$ref" || k == "$defs" || k == "definitions" {
			continue
		}
		into[k] = in.walk(e, stack)
	}
	return into
}

// resolvePointer follows a local JSON pointer ref ("#", "#/$defs/x").
// Remote refs do not resolve: OTC schemas must stand alone.
func resolvePointer(root any, ref string) (any, bool) {
	if !strings.HasPrefix(ref, "#") {
		return nil, false
	}
	p := strings.TrimPrefix(ref, "#")
	if p == "" {
		return root, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false // anchors are not supported
	}
	cur := root
	for _, seg := range strings.Split(p[1:], "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[seg]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// fillDescriptions gives every property in v that lacks a description its
// title, else its name.
func fillDescriptions(v any, notes *SchemaNotes) {
	switch t := v.(type) {
	case map[string]any:
		if props, ok := t["properties"].(map[string]any); ok {
			for name, p := range props {
				if pm, ok := p.(map[string]any); ok {
					if _, has := pm["description"]; !has {
						if title, ok := pm["title"].(string); ok && title != "" {
							pm["description"] = title
						} else {
							pm["description"] = name
						}
						notes.FilledDescriptions++
					}
				}
			}
		}
		for _, e := range t {
			fillDescriptions(e, notes)
		}
	case []any:
		for _, e := range t {
			fillDescriptions(e, notes)
		}
	}
}

// OutputShape says how an OTC tool's output maps to MCP.
type OutputShape int

const (
	// OutputAny: output_schema is {}, null or absent; no MCP outputSchema.
	OutputAny OutputShape = iota
	// OutputObject: an object schema, passed as the MCP outputSchema.
	OutputObject
	// OutputWrapped: any other schema S, passed as
	// {"type":"object","properties":{"value":S},"required":["value"]};
	// results are wrapped to match.
	OutputWrapped
)

// mcpInputSchema turns an OTC input_schema (plain or wrapped in
// "parameters") into an MCP inputSchema: unchanged, an object schema, and
// {"type":"object"} when empty or missing.
func mcpInputSchema(raw json.RawMessage) json.RawMessage {
	plain := otc.PlainInputSchema(raw)
	v, err := decode(plain)
	if err != nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return json.RawMessage(`{"type":"object"}`)
	}
	if _, has := m["type"]; has {
		return plain
	}
	m["type"] = "object"
	return encode(m)
}

// mcpOutputSchema turns an OTC output_schema into an MCP outputSchema (nil:
// none) and says how results must be shaped.
func mcpOutputSchema(raw json.RawMessage) (json.RawMessage, OutputShape) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return nil, OutputAny
	}
	v, err := decode(raw)
	if err != nil {
		return nil, OutputAny
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return nil, OutputAny
	}
	if isObjectSchema(m) {
		if _, typed := m["type"]; !typed {
			m["type"] = "object" // MCP requires an object root to say so
			return encode(m), OutputObject
		}
		return raw, OutputObject
	}
	return encode(map[string]any{
		"type":       "object",
		"properties": map[string]any{"value": m},
		"required":   []any{"value"},
	}), OutputWrapped
}

// isObjectSchema reports whether a schema describes only JSON objects.
func isObjectSchema(m map[string]any) bool {
	switch t := m["type"].(type) {
	case string:
		return t == "object"
	case nil:
		_, hasProps := m["properties"]
		return hasProps
	}
	return false
}

func isNull(raw []byte) bool { return string(bytes.TrimSpace(raw)) == "null" }
