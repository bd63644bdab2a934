package otc

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/mcpotc/mcpotc/internal/answers"
	"github.com/mcpotc/mcpotc/internal/jsonscan"
)

// Defaults of the idempotency bounds (Options).
const (
	DefaultIdempotencyMaxEntries = answers.DefaultEntries
	DefaultIdempotencyMaxBytes   = answers.DefaultBytes
	DefaultIdempotencyMaxRunning = answers.DefaultRunning
	// MaxIDBytes bounds call_id and trace_id: a longer one is a 400
	// before anything is stored.
	MaxIDBytes = 256
)

// idemKey is an idempotency key: the caller's principal (Caller.Principal)
// and its call_id. Entries are found by call_id;
// a call_id held by another caller is refused (400), never replayed and
// never run a second time under the same id.
type idemKey struct{ caller, callID string }

// idempotency remembers the answers of calls by (caller, call_id) in an
// answers.Store, the bounded store serve-mcp's idempotency_key uses too:
// bounded in count, bytes and time, in all and per caller (a caller that
// goes past its share loses its own oldest answers, never another
// caller's; package internal/answers has the bounds). Running entries are
// never evicted; their number has a bound of its own.
type idempotency struct {
	ttl        time.Duration
	maxRunning int
	store      *answers.Store[outcome]
}

func newIdempotency(ttl time.Duration, maxN int, maxBytes int64, maxRunning int, now func() time.Time) *idempotency {
	if maxN <= 0 {
		maxN = DefaultIdempotencyMaxEntries
	}
	if maxBytes <= 0 {
		maxBytes = DefaultIdempotencyMaxBytes
	}
	if maxRunning <= 0 {
		maxRunning = DefaultIdempotencyMaxRunning
	}
	return &idempotency{ttl: ttl, maxRunning: maxRunning,
		store: answers.New[outcome](answers.Bounds{Entries: maxN, Bytes: maxBytes, Running: maxRunning}, now)}
}

// answerSize is the bytes an outcome holds.
func answerSize(out outcome) int64 {
	n := int64(len(out.stack))
	if r := out.resp; r != nil {
		n += int64(len(r.CallID) + len(r.Value) + 64)
		n += extSize(r.Ext)
		if e := r.Error; e != nil {
			n += int64(len(e.Message)+len(e.DeveloperMessage)+len(e.AdditionalPromptContent)+64) + extSize(e.Ext)
		}
	}
	return n
}

func extSize(x Extensions) int64 {
	var n int64
	for k, v := range x {
		n += int64(len(k) + len(v) + 32)
	}
	return n
}

// fingerprint identifies what a call asks: the resolved tool, its input
// (compacted) and its context (tokens, secrets, user id, in a canonical
// order). Each part is length-prefixed, so no two calls share a preimage.
func fingerprint(toolID string, input json.RawMessage, cc *CallContext) [32]byte {
	h := sha256.New()
	field := func(s []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write(s)
	}
	field([]byte(toolID))
	// The input as json.Compact would write it, read from the body's
	// bytes: the space between its tokens is left out of the hash, not
	// copied out of the input.
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(compactLen(input)))
	h.Write(n[:])
	eachCompact(input, func(seg []byte) { h.Write(seg) })
	writeContext(h, field, cc)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// eachCompact calls f with the pieces of the JSON text b that
// json.Compact keeps (it drops the white space between tokens), in order;
// text that is not JSON is cut the same way, outside its strings.
func eachCompact(b []byte, f func([]byte)) {
	from := 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			end := jsonscan.StringEnd(b, i)
			if end < 0 {
				i = len(b)
				continue
			}
			i = end - 1
		case jsonscan.IsSpace(c):
			if i > from {
				f(b[from:i])
			}
			from = jsonscan.SkipSpace(b, i)
			i = from - 1
		}
	}
	if from < len(b) {
		f(b[from:])
	}
}

// compactLen is the length of b as eachCompact gives it.
func compactLen(b []byte) int {
	n := 0
	eachCompact(b, func(seg []byte) { n += len(seg) })
	return n
}

// writeContext hashes a call's context in a canonical form: absent and
// empty are the same, tokens and secrets sorted by id then value.
func writeContext(h hash.Hash, field func([]byte), cc *CallContext) {
	if cc == nil {
		cc = &CallContext{}
	}
	// pairs hashes a labelled list of (id, value) pairs, sorted.
	pairs := func(label string, list [][2]string) {
		slices.SortFunc(list, func(a, b [2]string) int { return slices.Compare(a[:], b[:]) })
		field([]byte(label))
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(list)))
		h.Write(n[:])
		for _, p := range list {
			field([]byte(p[0]))
			field([]byte(p[1]))
		}
	}
	auth := make([][2]string, len(cc.Authorization))
	for i, a := range cc.Authorization {
		auth[i] = [2]string{a.ID, a.Token}
	}
	pairs("authorization", auth)
	secrets := make([][2]string, len(cc.Secrets))
	for i, s := range cc.Secrets {
		secrets[i] = [2]string{s.ID, s.Value}
	}
	pairs("secrets", secrets)
	field([]byte("user_id"))
	field([]byte(cc.UserID))
}

// CallIDReusedMessage is the message of the 400 that answers a repeat of
// a call_id whose call differs (a client may recognize it).
const CallIDReusedMessage = "This call_id was already used for a different call"

// errCallIDReused answers a repeat of a call_id whose call differs.
func errCallIDReused(callID string) *ServerErrorResponse {
	return &ServerErrorResponse{
		Message: CallIDReusedMessage,
		DeveloperMessage: "call_id " + callID + " is an idempotency key: send a new call_id for a different tool, input or context " +
			"(or from another caller)",
	}
}

// errTooManyRunning answers a call beyond the bound on running entries.
func errTooManyRunning(limit int) *ServerErrorResponse {
	return &ServerErrorResponse{
		Message:          "Tool server temporarily unavailable",
		DeveloperMessage: "too many calls with a call_id are running (limit " + strconv.Itoa(limit) + "); retry shortly",
		RetryAfter:       time.Second,
	}
}

// do answers a call with a caller-chosen call_id: the first answer when
// there is one, else by running it (once, however many repeats wait).
// retain says how long an outcome may be replayed (zero: not at all). A
// repeat that asks for another call, or a new call beyond the running
// bound, gets the 400 to answer.
func (c *idempotency) do(ctx context.Context, key idemKey, print [32]byte, run func() outcome, retain func(outcome) time.Duration) outcome {
	e, first, err := c.store.Begin(key.callID, key.caller, print)
	switch {
	case err != nil:
		return outcome{status: http.StatusBadRequest, failure: errTooManyRunning(c.maxRunning)}
	case first:
		out := run()
		c.store.Finish(e, out, answerSize(out), retain(out))
		return out
	case e.Principal() != key.caller || e.Print() != print:
		return outcome{status: http.StatusBadRequest, failure: errCallIDReused(key.callID)}
	}
	select {
	case <-e.Done():
	case <-ctx.Done():
		return outcome{status: http.StatusBadRequest, failure: &ServerErrorResponse{Message: "The call was cancelled", DeveloperMessage: ctx.Err().Error()}}
	}
	out := e.Value()
	out.replayed = true
	return out
}

// stats is the number of answers kept and the bytes of all entries.
func (c *idempotency) stats() (entries int, bytes int64) { return c.store.Stats() }
