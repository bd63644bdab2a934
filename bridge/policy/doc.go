// Package policy holds the operator's controls over calls (docs/operations.md,
// Operator controls), as data that the fronts of package bridge consult:
//
//   - Access: which principals may see and call which tools. A principal
//     is who calls as a front's transport established it (Principal): a
//     verified token's issuer and subject, its scopes and claims; an API
//     key's or a bearer token's holder; or, unauthenticated, a client
//     address. Rules are matched on what the transport verified, never on
//     what a caller states (an OTC context.user_id, a forwarded _meta).
//   - Limits: token buckets per principal and per (principal, upstream,
//     tool), held by a Limiter in this process (Memory) or in a Store the
//     replicas share (bridge/state: Redis, atomically). The Limiter asks
//     the store under a context of its own (StoreTimeout), never the
//     caller's: a caller that hangs up is Decision.Gone, not a store
//     down, and its call is not started.
//   - Override: a tool's name, title, description or hidden, per upstream,
//     applied when a catalog is built.
//
// Every value here is built once from a configuration and never changed
// after: a configuration reload builds new ones and swaps them whole, so
// that a call in flight keeps those it started with. The package does no
// I/O of its own (a Store does) and never logs.
package policy
