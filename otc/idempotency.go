package otc

import (
	"bytes"
	"container/heap"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Defaults of the idempotency bounds (Options).
const (
	DefaultIdempotencyMaxEntries = 10_000
	DefaultIdempotencyMaxBytes   = 64 << 20
	DefaultIdempotencyMaxRunning = 1_000
	// MaxIDBytes bounds call_id and trace_id: a longer one is a 400
	// before anything is stored.
	MaxIDBytes = 256
)

// idemEntryOverhead is what an entry costs besides its key and answer
// (the struct, its map slot, list element, heap slot and channel), counted
// in the byte bound.
const idemEntryOverhead = 320

// idemKey is an idempotency key: the caller's principal (Caller.Principal)
// and its call_id. Entries are found by call_id;
// a call_id held by another caller is refused (400), never replayed and
// never run a second time under the same id.
type idemKey struct{ caller, callID string }

// idempotency remembers the answers of calls by (caller, call_id), bounded
// in count, bytes and time. Running entries are never evicted; their number
// has a bound of its own.
//
// Every entry is in byKey (by call_id). A finished entry that is kept is also in order
// (oldest kept first, for eviction) and in expiry (a min-heap by expires).
// bytes is the sum of size over byKey, always: a running entry's size is
// that of its key, a kept entry's that of its key and answer.
type idempotency struct {
	ttl        time.Duration
	maxN       int
	maxBytes   int64
	maxRunning int
	now        func() time.Time

	mu      sync.Mutex
	byKey   map[string]*idemEntry
	order   *list.List // of *idemEntry: kept entries, oldest first
	expiry  idemHeap   // kept entries by expires
	bytes   int64
	running int
}

type idemEntry struct {
	key     idemKey
	print   [32]byte
	done    chan struct{} // closed when the run ended
	out     outcome       // valid once done is closed
	size    int64
	expires time.Time     // zero while running
	el      *list.Element // nil unless kept
	heapIdx int           // index in expiry; -1 unless kept
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
	return &idempotency{ttl: ttl, maxN: maxN, maxBytes: maxBytes, maxRunning: maxRunning, now: now,
		byKey: map[string]*idemEntry{}, order: list.New()}
}

// keySize is what an entry costs before it has an answer.
func keySize(k idemKey) int64 {
	return int64(idemEntryOverhead + len(k.caller) + len(k.callID))
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
	// Input without space has nothing to compact (json.Compact would copy
	// it as it is, as it does invalid JSON): a large input is not copied.
	compact := []byte(input)
	if bytes.ContainsAny(input, " \t\r\n") {
		buf := fingerprintBufs.Get().(*bytes.Buffer)
		buf.Reset()
		if json.Compact(buf, input) != nil {
			buf.Reset()
			buf.Write(input)
		}
		compact = buf.Bytes()
		if buf.Cap() <= 64<<10 {
			defer fingerprintBufs.Put(buf)
		}
	}
	field(compact)
	writeContext(h, field, cc)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// fingerprintBufs are the buffers fingerprint compacts input into.
var fingerprintBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

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
// retain says how long an outcome may be replayed (zero: not at all).
func (c *idempotency) do(ctx context.Context, key idemKey, print [32]byte, run func() outcome, retain func(outcome) time.Duration) outcome {
	e, first, failure := c.begin(key, print)
	if failure != nil {
		return outcome{status: http.StatusBadRequest, failure: failure}
	}
	if first {
		out := run()
		c.finish(e, out, retain(out))
		return out
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return outcome{status: http.StatusBadRequest, failure: &ServerErrorResponse{Message: "The call was cancelled", DeveloperMessage: ctx.Err().Error()}}
	}
	out := e.out
	out.replayed = true
	return out
}

// begin finds the entry of key, or makes a running one (first is true: the
// caller runs the call and must finish it). A repeat that asks for another
// call, or a new call beyond the running bound, gets the 400 to answer.
func (c *idempotency) begin(key idemKey, print [32]byte) (e *idemEntry, first bool, failure *ServerErrorResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire()
	if e, ok := c.byKey[key.callID]; ok {
		if e.key.caller != key.caller || e.print != print {
			return nil, false, errCallIDReused(key.callID)
		}
		return e, false, nil
	}
	if c.running >= c.maxRunning {
		return nil, false, errTooManyRunning(c.maxRunning)
	}
	e = &idemEntry{key: key, print: print, done: make(chan struct{}), size: keySize(key), heapIdx: -1}
	c.byKey[key.callID] = e
	c.bytes += e.size
	c.running++
	return e, true, nil
}

// finish records the outcome of a running entry, keeps it for retain
// (when positive and it fits) and wakes the repeats that wait for it.
func (c *idempotency) finish(e *idemEntry, out outcome, retain time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.out = out
	c.running--
	full := keySize(e.key) + answerSize(out)
	if retain <= 0 || full > c.maxBytes/10 {
		c.remove(e)
		close(e.done)
		return
	}
	c.bytes += full - e.size
	e.size = full
	e.expires = c.now().Add(retain)
	e.el = c.order.PushBack(e)
	heap.Push(&c.expiry, e)
	close(e.done)
	c.evict()
}

// evict drops the oldest kept answers while a bound is exceeded. Running
// entries are not in order and are never dropped: when they alone exceed
// a bound, the loop ends with order empty.
func (c *idempotency) evict() {
	for c.order.Len() > 0 && (len(c.byKey) > c.maxN || c.bytes > c.maxBytes) {
		c.remove(c.order.Front().Value.(*idemEntry))
	}
}

// expire drops kept answers past their time.
func (c *idempotency) expire() {
	now := c.now()
	for len(c.expiry) > 0 && now.After(c.expiry[0].expires) {
		c.remove(c.expiry[0])
	}
}

// remove forgets e (running or kept).
func (c *idempotency) remove(e *idemEntry) {
	if c.byKey[e.key.callID] != e {
		return
	}
	delete(c.byKey, e.key.callID)
	c.bytes -= e.size
	if e.el != nil {
		c.order.Remove(e.el)
		e.el = nil
	}
	if e.heapIdx >= 0 {
		heap.Remove(&c.expiry, e.heapIdx)
	}
}

// idemHeap is a min-heap of kept entries by expires (container/heap).
type idemHeap []*idemEntry

func (h idemHeap) Len() int           { return len(h) }
func (h idemHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h idemHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}
func (h *idemHeap) Push(x any) {
	e := x.(*idemEntry)
	e.heapIdx = len(*h)
	*h = append(*h, e)
}
func (h *idemHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.heapIdx = -1
	return e
}

// stats is the number of answers kept and their bytes.
func (c *idempotency) stats() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.bytes
}
