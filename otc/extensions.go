package otc

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
)

// Extensions are the members of a wire object whose names start with "x-":
// what OTC has no field for, such as the carriers that let two bridges
// back to back lose nothing (docs/mapping.md, Round trips). Readers keep them;
// writers send them after the object's own members.
type Extensions map[string]json.RawMessage

// extensionsOf returns the "x-" members of a JSON object (nil when none).
func extensionsOf(data []byte) Extensions {
	if !bytes.Contains(data, []byte(`"x-`)) {
		return nil
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return nil
	}
	var ext Extensions
	for k, v := range top {
		if strings.HasPrefix(k, "x-") {
			if ext == nil {
				ext = Extensions{}
			}
			ext[k] = v
		}
	}
	return ext
}

// withExtensions appends ext's members to the encoded object obj.
func withExtensions(obj []byte, ext Extensions) ([]byte, error) {
	if len(ext) == 0 {
		return obj, nil
	}
	keys := make([]string, 0, len(ext))
	for k := range ext {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// A copy: appending in place would write over obj's closing brace
	// whenever obj has room beyond it (a validator's schema, kept).
	out := bytes.Clone(bytes.TrimRight(obj, " \n"))
	out = out[:len(out)-1] // the closing brace
	for _, k := range keys {
		if len(out) > 1 {
			out = append(out, ',')
		}
		name, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		var val bytes.Buffer
		if err := json.Compact(&val, ext[k]); err != nil {
			return nil, err
		}
		out = append(append(append(out, name...), ':'), val.Bytes()...)
	}
	return append(out, '}'), nil
}

// marshalWith encodes p, a wire type's plain twin (the same fields
// without the methods, so that encoding does not recurse), and appends ext.
// Like every answer of the package, without HTML escaping: a value's <, >
// and & stay one byte each, as the tool wrote them.
func marshalWith[P any](p P, ext Extensions) ([]byte, error) {
	b, err := marshal(p)
	if err != nil {
		return nil, err
	}
	return withExtensions(b, ext)
}

// unmarshalWith decodes data into a fresh P, a wire type's plain twin,
// stores it in *into, then keeps data's extensions in *ext (a member of
// *into).
func unmarshalWith[P any](data []byte, into *P, ext *Extensions) error {
	var p P
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*into = p
	*ext = extensionsOf(data)
	return nil
}

// MarshalJSON writes the error with its extensions.
func (e ToolError) MarshalJSON() ([]byte, error) {
	type plain ToolError
	return marshalWith(plain(e), e.Ext)
}

// UnmarshalJSON reads the error and keeps its extensions.
func (e *ToolError) UnmarshalJSON(data []byte) error {
	type plain ToolError
	return unmarshalWith(data, (*plain)(e), &e.Ext)
}

// MarshalJSON writes the 400 body with its extensions.
func (e ServerErrorResponse) MarshalJSON() ([]byte, error) {
	type plain ServerErrorResponse
	return marshalWith(plain(e), e.Ext)
}

// UnmarshalJSON reads the 400 body and keeps its extensions.
func (e *ServerErrorResponse) UnmarshalJSON(data []byte) error {
	type plain ServerErrorResponse
	return unmarshalWith(data, (*plain)(e), &e.Ext)
}

// MarshalJSON writes the 422 body with its extensions.
func (e ValidationErrorResponse) MarshalJSON() ([]byte, error) {
	type plain ValidationErrorResponse
	return marshalWith(plain(e), e.Ext)
}

// UnmarshalJSON reads the 422 body and keeps its extensions.
func (e *ValidationErrorResponse) UnmarshalJSON(data []byte) error {
	type plain ValidationErrorResponse
	return unmarshalWith(data, (*plain)(e), &e.Ext)
}

// CarriersHeader is the request header by which a client says which
// families of "x-" members (carriers) it reads: a comma-separated list such
// as "x-mcp", the family of x-mcp-tool, x-mcp-result, x-mcp-content and
// x-mcp-error. A Handler writes a carrier (in an answer, an error body, or
// a listed input_schema: Tool.SchemaCarriers) only to a caller that names
// its family; every other caller gets plain OTC. An MCP front in front of an
// OTC front sends it (docs/mapping.md, Round trips); an OTC client has no use for
// the carriers and need not pay for them.
const CarriersHeader = "Mcpotc-Carriers"

// Bounds on what CarriersHeader is read of: a longer list or family is
// ignored past them.
const (
	maxCarrierFamilies  = 8
	maxCarrierFamilyLen = 64
)

// carrierFamilies reads the families a request's CarriersHeader names:
// lower-cased, each starting with "x-"; nil when none.
func carrierFamilies(h http.Header) []string {
	var out []string
	for _, line := range h.Values(CarriersHeader) {
		for f := range strings.SplitSeq(line, ",") {
			f = strings.ToLower(strings.TrimSpace(f))
			if len(out) == maxCarrierFamilies {
				return out
			}
			if len(f) > len("x-") && len(f) <= maxCarrierFamilyLen && strings.HasPrefix(f, "x-") {
				out = append(out, f)
			}
		}
	}
	return out
}

// inFamilies reports whether the member name belongs to one of families:
// it is the family's name, or starts with it and a "-".
func inFamilies(name string, families []string) bool {
	name = strings.ToLower(name)
	for _, f := range families {
		if rest, ok := strings.CutPrefix(name, f); ok && (rest == "" || rest[0] == '-') {
			return true
		}
	}
	return false
}

// only returns the members of ext in one of families (ext itself when all
// are; nil when none).
func (ext Extensions) only(families []string) Extensions {
	kept := 0
	for k := range ext {
		if inFamilies(k, families) {
			kept++
		}
	}
	switch kept {
	case len(ext):
		return ext
	case 0:
		return nil
	}
	out := make(Extensions, kept)
	for k, v := range ext {
		if inFamilies(k, families) {
			out[k] = v
		}
	}
	return out
}

// ReadsCarriers reports whether the caller of this call reads the carriers
// of family (such as "x-mcp"): a tool function need not work out carriers
// that would not be sent (the Handler leaves out the others anyway).
func (c *Call) ReadsCarriers(family string) bool {
	return c.HTTP != nil && inFamilies(family, carrierFamilies(c.HTTP.Header))
}

// forCaller returns a copy of an answer whose carriers are only those of
// families (resp itself when nothing is left out).
func (r *CallToolResponse) forCaller(families []string) *CallToolResponse {
	ext := r.Ext.only(families)
	var errExt Extensions
	if r.Error != nil {
		errExt = r.Error.Ext.only(families)
	}
	if len(ext) == len(r.Ext) && (r.Error == nil || len(errExt) == len(r.Error.Ext)) {
		return r
	}
	c := *r
	c.Ext = ext
	if r.Error != nil {
		e := *r.Error
		e.Ext = errExt
		c.Error = &e
	}
	return &c
}

// errorForCaller returns a 400 / 422 body whose carriers are only those of
// families (body itself when nothing is left out).
func errorForCaller(body any, families []string) any {
	switch b := body.(type) {
	case *ServerErrorResponse:
		if ext := b.Ext.only(families); len(ext) != len(b.Ext) {
			c := *b
			c.Ext = ext
			return &c
		}
	case *ValidationErrorResponse:
		if ext := b.Ext.only(families); len(ext) != len(b.Ext) {
			c := *b
			c.Ext = ext
			return &c
		}
	}
	return body
}
