// Package mapping translates between MCP and OTC: tool identities, schemas,
// results and the two error tables of the mapping contract (README.md:
// "What MCP hosts see", "What OTC clients see", "Round trips"). It is pure:
// no I/O, no logging.
package mapping
