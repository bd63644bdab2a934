// Package jsonscan walks JSON text without decoding it: where a string or
// a value ends, the space around them, the members of an object. The MCP
// front reads a few top-level members of every message a client sends
// with it (the id, the method, params._meta), the OTC front the members of
// a POST /tools/call body (the dialect, the envelope, the call's fields),
// and the MCP upstream side reads the id of a message too large to hold
// from its first and last bytes; a large tool argument or result is jumped
// over, not decoded. Nothing here validates JSON: callers check it first
// (json.Valid) wherever an answer depends on it.
package jsonscan
