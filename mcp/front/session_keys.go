package front

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Self-contained session ids (HTTPOptions.SessionKeys)
//
// With SessionKeys, a streamable HTTP session id carries what the front
// needs of its session, authenticated with HMAC-SHA256, so that every
// replica holding the same keys serves every session without a shared
// store, and a restart ends none:
//
//	mcp-s1.<payload>.<mac>        base64url without padding, both
//
// The payload is JSON (sessionClaims): the protocol version the client
// asked for, its capabilities (experimental ones left out), an HMAC of the
// caller's issuer and subject when HTTPOptions.Resource authenticates
// callers (so a session stays its opener's on every replica, and the id
// names no one),
// the time it was issued and 128 random bits. The mac covers the payload's
// base64 text with SessionKeys[0]; an id signed with any of the keys is
// accepted, so keys can be rotated: add the new key first, and drop the old
// one once the sessions it signed are no longer wanted.
//
// What a session is then, on any replica:
//   - The requests of a session opened elsewhere are served as those of a
//     session opened here; what the front reads of the client's initialize
//     (ClientSupportsURLElicitation) comes from the id.
//   - An id is valid for HTTPOptions.SessionLifetime from its issue; after
//     that every replica answers 404 and the client opens a new session,
//     as the transport says it must.
//   - DELETE ends the session on the replica that serves it (its streams
//     close, the id gets 404 there until it would have expired). Other
//     replicas cannot know: nothing is shared. The idle TTL frees the
//     memory a replica holds for a session; it does not end the id.
//   - What one replica keeps for a session stays there: its standalone GET
//     stream (notifications go to the replica's own streams), the log
//     level set with logging/setLevel.

// sessionIDPrefix starts a signed session id (version 1 of the format).
const sessionIDPrefix = "mcp-s1."

// maxSessionIDLen bounds an id looked at: longer ones are refused unread.
const maxSessionIDLen = 4096

// maxSessionCapabilities bounds the client capabilities kept in an id, as
// JSON; beyond it only the ones the front reads (elicitation) are kept.
const maxSessionCapabilities = 1024

// DefaultSessionLifetime is HTTPOptions.SessionLifetime when zero.
const DefaultSessionLifetime = 24 * time.Hour

// sessionClaims is what a signed session id carries.
type sessionClaims struct {
	Version      string                    `json:"p,omitempty"` // the protocolVersion of initialize
	Capabilities *mcpgo.ClientCapabilities `json:"c,omitempty"`
	Owner        string                    `json:"o,omitempty"` // ownerMAC of the opener, when identified
	Issued       int64                     `json:"t"`           // unix seconds
	Nonce        string                    `json:"n"`
}

// sessionSigner mints and checks signed session ids.
type sessionSigner struct {
	keys     [][]byte // keys[0] signs
	lifetime time.Duration
	ended    *endedIDs
	now      func() time.Time
}

func newSessionSigner(keys [][]byte, lifetime time.Duration, maxEnded int) *sessionSigner {
	if lifetime <= 0 {
		lifetime = DefaultSessionLifetime
	}
	if maxEnded <= 0 {
		maxEnded = DefaultMaxSessions
	}
	return &sessionSigner{keys: keys, lifetime: lifetime, ended: &endedIDs{max: maxEnded, at: make(map[string]time.Time)}, now: time.Now}
}

func mac(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// ownerMAC names the principal of a caller under key, without revealing it.
func ownerMAC(key []byte, principal string) string {
	return base64.RawURLEncoding.EncodeToString(mac(key, "owner", principal)[:16])
}

// sign returns the id of a new session with claims c, whose Owner is set
// here from the opener's identity (nil when callers are not identified):
// a keyed hash of its issuer and subject.
func (s *sessionSigner) sign(c sessionClaims, owner *Identity) string {
	c.Issued = s.now().Unix()
	c.Nonce = rand.Text()
	if owner != nil {
		c.Owner = ownerMAC(s.keys[0], owner.principal())
	}
	b, _ := json.Marshal(c)
	payload := base64.RawURLEncoding.EncodeToString(b)
	return sessionIDPrefix + payload + "." + base64.RawURLEncoding.EncodeToString(mac(s.keys[0], "session", payload))
}

// verify returns the claims of id and the key that signed it, or false
// when id is not a session id signed by one of the keys, has expired, or
// was ended here with DELETE.
func (s *sessionSigner) verify(id string) (*sessionClaims, []byte, bool) {
	rest, ok := strings.CutPrefix(id, sessionIDPrefix)
	if !ok || len(id) > maxSessionIDLen {
		return nil, nil, false
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, nil, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return nil, nil, false
	}
	var key []byte
	for _, k := range s.keys {
		if hmac.Equal(got, mac(k, "session", payload)) {
			key = k
			break
		}
	}
	if key == nil {
		return nil, nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, nil, false
	}
	var c sessionClaims
	if json.Unmarshal(raw, &c) != nil {
		return nil, nil, false
	}
	issued := time.Unix(c.Issued, 0)
	now := s.now()
	if now.Sub(issued) >= s.lifetime || issued.After(now.Add(time.Minute)) || s.ended.has(id, now) {
		return nil, nil, false
	}
	return &c, key, true
}

// ownedBy reports whether the caller id may use the session of claims
// signed with key: it opened it, or the session names no opener. An id
// minted before issuers were part of a principal names its opener by
// subject alone: accepted only where that is unambiguous, when the
// handler trusts a single issuer.
func ownedBy(c *sessionClaims, key []byte, id *Identity) bool {
	if c.Owner == "" || hmac.Equal([]byte(c.Owner), []byte(ownerMAC(key, id.principal()))) {
		return true
	}
	return !id.several && hmac.Equal([]byte(c.Owner), []byte(ownerMAC(key, id.legacyPrincipal())))
}

// end records that id was ended with DELETE here, until it would expire.
func (s *sessionSigner) end(id string) {
	c, _, ok := s.verify(id)
	if !ok {
		return
	}
	s.ended.add(id, time.Unix(c.Issued, 0).Add(s.lifetime), s.now())
}

// endedIDs are the signed ids ended here, each until its expiry, at most
// max of them (the oldest ended are forgotten first: they become valid
// again here, as they still are on other replicas).
type endedIDs struct {
	max   int
	mu    sync.Mutex
	at    map[string]time.Time // id → its expiry
	order []string             // ids in the order ended
}

func (e *endedIDs) add(id string, expiry, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.at[id]; ok {
		return
	}
	for len(e.order) > 0 && (len(e.order) >= e.max || !e.at[e.order[0]].After(now)) {
		delete(e.at, e.order[0])
		e.order = e.order[1:]
	}
	e.at[id] = expiry
	e.order = append(e.order, id)
}

func (e *endedIDs) has(id string, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	expiry, ok := e.at[id]
	return ok && expiry.After(now)
}

// initClaims are the claims of the session an initialize (its params)
// opens.
func initClaims(params json.RawMessage) sessionClaims {
	var msg struct {
		Params struct {
			ProtocolVersion string                   `json:"protocolVersion"`
			Capabilities    mcpgo.ClientCapabilities `json:"capabilities"`
		}
	}
	_ = json.Unmarshal(params, &msg.Params)
	var c sessionClaims
	if v := msg.Params.ProtocolVersion; len(v) <= 32 {
		c.Version = v
	}
	caps := msg.Params.Capabilities
	caps.Experimental = nil
	b, _ := json.Marshal(caps)
	if len(b) > maxSessionCapabilities {
		caps = mcpgo.ClientCapabilities{Elicitation: caps.Elicitation}
		b, _ = json.Marshal(caps)
	}
	if len(b) <= maxSessionCapabilities && string(b) != "{}" {
		c.Capabilities = &caps
	}
	return c
}
