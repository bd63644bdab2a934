package otc

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
)

// Extensions are the members of a wire object whose names start with "x-":
// what OTC has no field for, such as the carriers that let two bridges
// back to back lose nothing (README, "Round trips"). Readers keep them;
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
	out := bytes.TrimRight(obj, " \n")
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
func marshalWith[P any](p P, ext Extensions) ([]byte, error) {
	b, err := json.Marshal(p)
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
