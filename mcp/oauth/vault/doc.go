// Package vault keeps OAuth tokens at rest, encrypted, one record per
// (upstream, user): the bridge's own identity is user "", each OTC user of
// a per-user upstream has a record of its own.
//
// What it protects: the confidentiality and integrity of the records in
// their Store (a file, later a shared database). Each record is sealed with
// AES-256-GCM under a key derived (HKDF-SHA256) from the vault key; the
// additional data is the record's own (upstream, user), so a record copied
// to another user's slot does not open (ErrCorrupt), and neither does a
// record sealed under another key. Store ids are an HMAC of (upstream,
// user) under a second derived key: user ids do not appear in the store.
// What it does not protect: a process that holds the vault key.
//
// A Store holds opaque bytes with an expiry; Memory and OpenFile are the
// two here. Both are bounded (MaxEntries) and safe for concurrent use. A
// file store is for one process: several replicas need a shared store.
package vault
