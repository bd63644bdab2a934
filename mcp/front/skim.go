package front

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/mcp/internal/jsonscan"
)

// A skim of the messages clients send
//
// The front looks at every message before mcp-go does (checkMessage,
// sessionless, fillNotificationVersion) for a few top-level members: the
// id, the method, params._meta. Decoding the message with encoding/json
// for that costs as much as mcp-go's own decoding, and a tool call's
// arguments can be megabytes. skimMembers walks the top-level object
// instead, jumping over strings with bytes.IndexByte and over nested
// values by counting brackets, without validating them. Its findings are
// used only where they cannot change an answer: when a skim says a
// message is one the front acts on (answers itself, or counts as an
// initialize), the exact encoding/json path decides; when it says the
// message is mcp-go's to serve, that is also what the exact path says for
// every well-formed message, and malformed ones go to mcp-go either way
// (FuzzSkimAgreesWithDecode checks this).

// skimMembers returns the members of the JSON object b, in order, keys
// unescaped, without decoding or validating their values. It reports false
// when b is not one object (with optional space around it) as far as the
// walk can tell.
func skimMembers(b []byte) ([]member, bool) {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	members := make([]member, 0, 8) // one allocation for a message's usual members
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil, jsonscan.SkipSpace(b, i+1) == len(b)
	}
	for {
		i = jsonscan.SkipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		end := jsonscan.StringEnd(b, i)
		if end < 0 {
			return nil, false
		}
		raw := b[i+1 : end-1]
		key := commonKey(raw)
		if bytes.IndexByte(raw, '\\') >= 0 || !utf8.ValidString(key) { // as encoding/json reads it
			var ok bool
			if key, ok = unquote(b[i:end]); !ok {
				return nil, false
			}
		}
		i = jsonscan.SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = jsonscan.SkipSpace(b, i+1)
		end = jsonscan.ValueEnd(b, i)
		if end <= i {
			return nil, false
		}
		members = append(members, member{key, i, end})
		i = jsonscan.SkipSpace(b, end)
		if i >= len(b) {
			return nil, false
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] != '}' {
			return nil, false
		}
		return members, jsonscan.SkipSpace(b, i+1) == len(b)
	}
}

// commonKey is string(k), without an allocation for the members every
// message has.
func commonKey(k []byte) string {
	switch string(k) { // compared without converting
	case "jsonrpc":
		return "jsonrpc"
	case "id":
		return "id"
	case "method":
		return "method"
	case "params":
		return "params"
	case "name":
		return "name"
	case "arguments":
		return "arguments"
	case "_meta":
		return "_meta"
	}
	return string(k)
}

// skimString returns the string the JSON string literal v holds.
func skimString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if s := string(v[1 : len(v)-1]); bytes.IndexByte(v, '\\') < 0 && utf8.ValidString(s) {
		return s, true
	}
	return unquote(v)
}

// unquote is the string literal v as encoding/json reads it.
func unquote(v []byte) (string, bool) {
	var s string
	return s, json.Unmarshal(v, &s) == nil
}

// skimSessionless is sessionless from a skim: for a well-formed body it
// answers what sessionless answers.
func skimSessionless(body []byte) (method string, needsSession bool) {
	top, ok := skimMembers(body)
	if !ok {
		return "", false
	}
	if m := lastMember(top, "method"); m != nil {
		v := body[m.start:m.end]
		if string(v) != "null" {
			if method, ok = skimString(v); !ok {
				return "", false // not a string: encoding/json fails
			}
		}
	}
	if p := lastMember(top, "params"); p != nil && string(body[p.start:p.end]) != "null" {
		params := body[p.start:p.end]
		pm, ok := skimMembers(params)
		if !ok {
			return "", false
		}
		if mt := lastMember(pm, "_meta"); mt != nil && string(params[mt.start:mt.end]) != "null" {
			meta := params[mt.start:mt.end]
			mm, ok := skimMembers(meta)
			if !ok {
				return "", false
			}
			// Meta decodes into a map: the exact key, the last one wins.
			var version string
			for _, f := range mm {
				if f.key == mcpgo.MetaKeyProtocolVersion {
					version, _ = skimString(meta[f.start:f.end])
				}
			}
			if mcpgo.IsModernProtocol(version) {
				return "", false
			}
		}
	}
	return method, method != "" && method != string(mcpgo.MethodInitialize)
}
