package front

import (
	"encoding/json"
	"errors"
	"maps"
	"unicode/utf8"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// The result of a tools/call, written directly
//
// mcp-go's CallToolResult.MarshalJSON builds a map of every member and
// encodes it by reflection. The front writes the same members in the same
// order (a map's: sorted by name) into one buffer: text blocks and raw
// structured content as they are, anything else (images, resources,
// annotated blocks, _meta) through encode.

// callResult is res as the answer of a tools/call: for a 2026-07-28
// request with its resultType ("complete" unless the handler set one) and
// the server's identity in _meta.
func (f *Server) callResult(res *mcpgo.CallToolResult, modern bool) (json.RawMessage, error) {
	if modern {
		r := *res
		if r.ResultType == "" {
			r.ResultType = mcpgo.ResultTypeComplete
		}
		meta := mcpgo.Meta{}
		if res.Meta != nil {
			meta = *res.Meta
		}
		if _, ok := meta.AdditionalFields[mcpgo.MetaKeyServerInfo]; !ok {
			meta.AdditionalFields = maps.Clone(meta.AdditionalFields)
			if meta.AdditionalFields == nil {
				meta.AdditionalFields = map[string]any{}
			}
			meta.AdditionalFields[mcpgo.MetaKeyServerInfo] = mcpgo.Implementation{Name: f.name, Version: f.version}
		}
		r.Meta = &meta
		res = &r
	}
	return appendCallResult(make([]byte, 0, 256), res)
}

// appendCallResult appends r's JSON to out.
func appendCallResult(out []byte, r *mcpgo.CallToolResult) ([]byte, error) {
	out = append(out, '{')
	sep := false
	member := func(name string) {
		if sep {
			out = append(out, ',')
		}
		sep = true
		out = append(out, '"')
		out = append(out, name...)
		out = append(out, '"', ':')
	}
	value := func(v any) error {
		b, err := encode(v)
		out = append(out, b...)
		return err
	}
	switch m := r.Meta; {
	case m == nil:
	case m.ProgressToken == nil && len(m.AdditionalFields) > 0:
		// What (*mcpgo.Meta).MarshalJSON writes, without its copy of the
		// map and the compaction of its output (every bridged result
		// has a _meta).
		member("_meta")
		if err := value(m.AdditionalFields); err != nil {
			return nil, err
		}
	default:
		member("_meta")
		if err := value(m); err != nil {
			return nil, err
		}
	}
	member("content")
	out = append(out, '[')
	for i, c := range r.Content {
		if i > 0 {
			out = append(out, ',')
		}
		if t, ok := c.(mcpgo.TextContent); ok && t.Annotations == nil && t.Meta == nil {
			out = append(out, `{"type":`...)
			out = appendString(out, t.Type)
			out = append(out, `,"text":`...)
			out = appendString(out, t.Text)
			out = append(out, '}')
			continue
		}
		if err := value(c); err != nil {
			return nil, err
		}
	}
	out = append(out, ']')
	if len(r.InputRequests) > 0 {
		member("inputRequests")
		if err := value(r.InputRequests); err != nil {
			return nil, err
		}
	}
	if r.IsError {
		member("isError")
		out = append(out, "true"...)
	}
	if r.RequestState != "" {
		member("requestState")
		out = appendString(out, r.RequestState)
	}
	if r.ResultType != "" {
		member("resultType")
		out = appendString(out, string(r.ResultType))
	}
	structured := r.StructuredContent
	if len(r.RawStructuredContent) > 0 {
		structured = r.RawStructuredContent
	}
	switch v := structured.(type) {
	case nil:
	case json.RawMessage:
		member("structuredContent")
		if !json.Valid(v) {
			return nil, errors.New("the structured content is not valid JSON")
		}
		out = append(out, v...)
	default:
		member("structuredContent")
		if err := value(v); err != nil {
			return nil, err
		}
	}
	return append(out, '}'), nil
}

// appendString appends s as a JSON string, as encoding/json writes it
// without HTML escaping: '"', '\\' and control characters escaped, invalid
// UTF-8 as U+FFFD, U+2028 and U+2029 escaped (JavaScript reads them as
// line ends).
func appendString(out []byte, s string) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			out = append(out, s[start:i]...)
			switch b {
			case '"', '\\':
				out = append(out, '\\', b)
			case '\n':
				out = append(out, '\\', 'n')
			case '\r':
				out = append(out, '\\', 'r')
			case '\t':
				out = append(out, '\\', 't')
			case '\b':
				out = append(out, '\\', 'b')
			case '\f':
				out = append(out, '\\', 'f')
			default:
				out = append(out, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			out = append(out, s[start:i]...)
			out = append(out, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			out = append(out, s[start:i]...)
			out = append(out, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}
