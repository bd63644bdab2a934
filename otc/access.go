package otc

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Per-caller tools (Options.Access)
//
// A caller sees, and may call, the tools its filter allows: GET /tools
// lists those only, and a call of any other is answered exactly as a call
// of a tool nobody serves (the same 400 and message; its suggestions are
// among the caller's own tools; no version is named). Nothing in an
// answer tells a tool the caller may not see from one that does not
// exist.

// ToolFilter is the tools one caller may see and call.
type ToolFilter struct {
	// Key names the filter: callers whose filters have the same Key see
	// the same tools, and share the encoding of GET /tools (made once per
	// catalog and Key, and kept for a bounded number of Keys). Empty:
	// encoded for each request.
	Key string
	// Allows reports whether the caller may see and call the tool
	// Toolkit.Tool (an id without its version).
	Allows func(key string) bool
}

// allows is f.Allows, true for a nil filter.
func (f *ToolFilter) allows(key string) bool {
	return f == nil || f.Allows == nil || f.Allows(key)
}

// maxFilteredListings bounds the encodings of GET /tools kept per catalog
// for filtered callers (one per filter Key, dialect and carriers); past
// it they are dropped and encoded again as asked.
const maxFilteredListings = 64

// filteredListings are a catalog's encodings for filtered callers.
type filteredListings struct {
	mu sync.Mutex
	m  map[string][]byte
}

// filter is the caller's filter under the catalog's policy (nil: every
// tool).
func (c *catalog) filter(ctx context.Context, caller Caller) *ToolFilter {
	if c.policy.Access == nil {
		return nil
	}
	return c.policy.Access(ctx, caller)
}

// listingFor is the encoded ToolDefinition array f's caller gets (see
// catalog.listing), of the tools f allows only.
func (c *catalog) listingFor(f *ToolFilter, families []string, wrapped bool) []byte {
	if f == nil {
		return c.listing(families, wrapped)
	}
	key := ""
	if f.Key != "" {
		key = f.Key + "\x00" + strconv.FormatBool(wrapped) + "\x00" + strings.Join(families, ",")
		c.filtered.mu.Lock()
		b, ok := c.filtered.m[key]
		c.filtered.mu.Unlock()
		if ok {
			return b
		}
	}
	var defs []ToolDefinition
	var plains []json.RawMessage
	var carriers []Extensions
	for i := range c.defs {
		if !f.allows(c.keys[i]) {
			continue
		}
		defs = append(defs, c.defs[i])
		plains = append(plains, c.plains[i])
		if len(families) > 0 && c.carriers != nil {
			carriers = append(carriers, c.carriers[i].only(families))
		} else {
			carriers = append(carriers, nil)
		}
	}
	if defs == nil {
		defs, plains = []ToolDefinition{}, []json.RawMessage{}
	}
	b, err := marshal(withInputSchemas(defs, plains, carriers, wrapped))
	if err != nil {
		b = []byte("[]")
	}
	if key != "" {
		c.filtered.mu.Lock()
		if c.filtered.m == nil || len(c.filtered.m) >= maxFilteredListings {
			c.filtered.m = map[string][]byte{}
		}
		c.filtered.m[key] = b
		c.filtered.mu.Unlock()
	}
	return b
}

// notFound is the answer to a call of a tool the caller may not see or
// nobody serves: 400, the tool id quoted, suggestions among the ids the
// caller sees (none when unknown has a word to say: see Options.Unknown).
func notFound(c *catalog, f *ToolFilter, requested, dev string) *ServerErrorResponse {
	return &ServerErrorResponse{Message: "Tool '" + requested + "' was not found" + didYouMean(c.suggest.suggestFor(requested, f.allows)), DeveloperMessage: dev}
}

// tooManyRequests is the status of an Options.Admit refusal.
const tooManyRequests = http.StatusTooManyRequests
