// Package state keeps what the replicas of a front share — the call_id
// idempotency of the OTC front (otc.IdempotencyStore) and the OAuth token
// vault (vault.Store) — in Redis. One process needs none of it: the
// in-memory stores of otc and vault are the default.
//
// Keys are "mcpotc:idem:<sha256 of the call_id>" and "mcpotc:vault:<HMAC
// id>"; values are what otc and vault hand over (an answer and hashes; a
// sealed token record). Every key expires. Every request is bounded by
// the client's timeouts (Open): Redis down makes requests fail fast, it
// never makes them hang.
package state
