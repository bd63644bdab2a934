package front

import (
	"context"
	"encoding/json"
	"sync"
)

// Per-caller tools (Options.Visibility)
//
// A caller sees, and may call, the tools its filter allows: tools/list
// lists those only, and a tools/call of any other gets exactly the answer
// of a tool the front does not serve (-32602 "tool … not found", and over
// HTTP the 2026-07-28 parameter headers are not checked against it).
// Nothing tells a tool the caller may not see from one that does not
// exist. Without a filter, tools/list is the list encoded once per
// catalog; with one, the list is cut from that encoding (each tool's
// bytes as they are, no encoding per request) and kept per catalog and
// filter Key, for at most maxFilteredLists keys.

// ToolFilter is the tools one caller may see and call.
type ToolFilter struct {
	// Key names the filter: callers whose filters have the same Key see
	// the same tools and share one list per catalog. Empty: the list is
	// cut for each request.
	Key string
	// Allows reports whether the caller may see and call the tool name.
	Allows func(name string) bool
}

// maxFilteredLists bounds the filtered lists kept per catalog.
const maxFilteredLists = 64

// filteredLists are a catalog's lists for filtered callers, by Key.
type filteredLists struct {
	mu sync.Mutex
	m  map[string]json.RawMessage
}

// filter is the caller's filter under c's visibility, nil when every tool
// is allowed.
func (c *catalog) filter(ctx context.Context) *ToolFilter {
	if c.visibility == nil {
		return nil
	}
	if tf := c.visibility(ctx); tf != nil && tf.Allows != nil {
		return tf
	}
	return nil
}

// allows reports whether the caller of ctx may see and call name under
// c's visibility.
func (c *catalog) allows(ctx context.Context, name string) bool {
	tf := c.filter(ctx)
	return tf == nil || tf.Allows(name)
}

// toolsFor is the JSON array of the tools of c that filter tf (the
// caller's: Server.filter) lets through; nil lets every tool through.
func (f *Server) toolsFor(tf *ToolFilter, c *catalog) json.RawMessage {
	if tf == nil {
		return c.tools
	}
	if tf.Key != "" {
		c.filtered.mu.Lock()
		b, ok := c.filtered.m[tf.Key]
		c.filtered.mu.Unlock()
		if ok {
			return b
		}
	}
	out := make([]byte, 0, len(c.tools))
	out = append(out, '[')
	for i, name := range c.names {
		if !tf.Allows(name) {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, c.tools[c.spans[i][0]:c.spans[i][1]]...)
	}
	out = append(out, ']')
	if tf.Key != "" {
		c.filtered.mu.Lock()
		if c.filtered.m == nil || len(c.filtered.m) >= maxFilteredLists {
			c.filtered.m = map[string]json.RawMessage{}
		}
		c.filtered.m[tf.Key] = out
		c.filtered.mu.Unlock()
	}
	return out
}

// CallerPrincipal names the caller of the request being handled, as its
// transport established it (see "Who sent a request" in caller.go):
// "stdio", "bearer" (the --bearer-token holder), an OAuth identity's
// issuer and subject ("iss:…|sub:…", as policies key them), or "addr:"
// and the client's address (an IPv6 address by its /64). "" outside a
// transport (HandleMessage).
func CallerPrincipal(ctx context.Context) string {
	if c := callerFrom(ctx); c != nil {
		return c.principal
	}
	return ""
}
