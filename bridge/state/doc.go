// Package state keeps what the replicas of a front share — the call_id
// idempotency of the OTC front (otc.IdempotencyStore), the OAuth token
// vault (vault.Store) and the state of calls that wait for a user to open
// a URL (bridge.ResumeStore, Redis.Resumes) and the rate limits' token
// buckets (policy.Store, limits.go), and which of the MCP front's
// requestStates were used (front.UsedStateStore, usedstates.go) — in Redis. One process needs
// none of it: the in-memory stores of otc, vault and bridge are the
// default.
//
// Keys are "mcpotc:idem:<sha256 of the call_id>", "mcpotc:vault:<HMAC
// id>", "mcpotc:{resume}:…" (resume.go), "mcpotc:rl:{<hash of the
// principal>}:…" (limits.go) and "mcpotc:mrts:<hash of a requestState>"
// (usedstates.go); values are what otc, vault and bridge hand
// over (an answer and hashes; a sealed token record; a requestState and a
// status; a bucket's tokens and time). Every key expires. Every request is bounded by
// the client's timeouts (Open): Redis down makes requests fail fast, it
// never makes them hang.
package state
