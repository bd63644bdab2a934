// Package mapping translates between MCP and OTC: tool identities, schemas,
// results and the two error tables of the mapping contract (docs/mcp-front.md,
// What MCP hosts see; docs/otc-front.md, What OTC clients see; docs/mapping.md, Round trips). It is pure:
// no I/O, no logging.
package mapping
