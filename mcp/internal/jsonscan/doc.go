// Package jsonscan walks JSON text without decoding it: where a string or
// a value ends, and the space around them. The MCP front reads a few
// top-level members of every message a client sends with it (the id, the
// method, params._meta), and the MCP upstream side reads the id of a
// message too large to hold from its first and last bytes; a large tool
// argument or result is jumped over, not decoded. Nothing here validates
// JSON: callers decide with encoding/json wherever an answer depends on
// it.
package jsonscan
