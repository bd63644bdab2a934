// Package otc speaks Open Tool Calling (OTC), renamed Open eXecution Protocol
// (OXP), in every dialect found on the wire: the wire types, a tolerant HTTP
// client and an HTTP server (an http.Handler) with version resolution, input
// validation, transport auth and requirement checks.
//
// The package is a strict writer and a tolerant reader: it answers in the
// caller's dialect and reads every response shape in
// docs/mapping.md ("OTC as mcpotc speaks it"). It never logs; errors are
// returned typed.
package otc
