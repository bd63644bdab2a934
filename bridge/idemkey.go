package bridge

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/internal/callid"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/otc"
)

// An MCP host makes its retries safe the way MCP gateways document it: an
// idempotency_key inside a tool's arguments (README, What MCP hosts see).
// When the tool's input schema does not declare that argument, the MCP
// front takes it out of the input and sends it as the OTC call_id, scoped
// to the caller as forwarded call_ids are (front.ScopedCallID), so that
// two callers' keys never meet. A repeat with the same key and input gets
// the first answer; the same key with another call is an isError result
// the model reads. The front keeps the answers itself (idemStore), for OTC
// servers that keep no call_ids; one that does (serve-otc) answers repeats
// from its own store too, which replicas may share.

// IdempotencyKeyArg is the argument an MCP host may add to any call.
const IdempotencyKeyArg = "idempotency_key"

// Defaults and bounds of the MCP front's idempotency store.
const (
	// DefaultIdempotencyTTL is how long an answer is kept when
	// MCPFrontOptions.IdempotencyTTL is zero.
	DefaultIdempotencyTTL = 10 * time.Minute
	// idemMaxEntries, idemMaxBytes bound the answers kept for everyone;
	// idemMaxPerPrincipal those of one caller (its oldest go first).
	idemMaxEntries      = 10_000
	idemMaxBytes        = 64 << 20
	idemMaxPerPrincipal = 1_000
	// idemMaxRunning, idemMaxRunningPerPrincipal bound the calls with a
	// key that run at once, for everyone and for one caller.
	idemMaxRunning             = 1_000
	idemMaxRunningPerPrincipal = 100
	// idemEntryOverhead is what an entry costs besides its key and answer.
	idemEntryOverhead = 320
)

// declaresProperty reports whether an OTC input schema (plain or wrapped
// in "parameters") declares the top-level property name.
func declaresProperty(inputSchema json.RawMessage, name string) bool {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(otc.PlainInputSchema(inputSchema), &s) != nil {
		return false
	}
	_, ok := s.Properties[name]
	return ok
}

// takeIdempotencyKey takes the idempotency_key argument out of a call's
// input: ok when the input has one; problem, for the model, when it is not
// a string of 1 to callid.MaxBytes bytes; rest is the input without it
// (its other members as they were sent).
func takeIdempotencyKey(input json.RawMessage) (key string, rest json.RawMessage, problem string, ok bool) {
	if !bytes.Contains(input, []byte(`"`+IdempotencyKeyArg+`"`)) {
		return "", input, "", false
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(input, &args) != nil || args[IdempotencyKeyArg] == nil {
		return "", input, "", false
	}
	raw := args[IdempotencyKeyArg]
	if json.Unmarshal(raw, &key) != nil || key == "" || len(key) > callid.MaxBytes {
		return "", nil, fmt.Sprintf("%s must be a string of 1 to %d bytes (a new one for each distinct call, the same one when the call is retried)",
			IdempotencyKeyArg, callid.MaxBytes), true
	}
	delete(args, IdempotencyKeyArg)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(args) != nil {
		return "", input, "", false
	}
	return key, bytes.TrimRight(buf.Bytes(), "\n"), "", true
}

// idemKeyReused is the isError result of a key used for another call.
func idemKeyReused(key string, ttl time.Duration) *mcpgo.CallToolResult {
	return mcpgo.NewToolResultError(fmt.Sprintf("%s %q was already used for a different call (another tool or other arguments) "+
		"within the last %s: this call was not run. Use a new %s for a different call, and the same one only to retry the same call.",
		IdempotencyKeyArg, key, ttl, IdempotencyKeyArg))
}

// idemBusy is the isError result of a call beyond the running bounds.
func idemBusy() *mcpgo.CallToolResult {
	return mcpgo.NewToolResultError(fmt.Sprintf("Too many calls with an %s are running: this call was not run. Retry it in a few seconds with the same %s.",
		IdempotencyKeyArg, IdempotencyKeyArg))
}

// errIdemKeyReused and errIdemBusy are idemStore.do's refusals.
var (
	errIdemKeyReused = errors.New("idempotency key used for a different call")
	errIdemBusy      = errors.New("too many calls with an idempotency key running")
)

// idemStore keeps the OTC answers of calls made with an idempotency key,
// by scoped key, bounded in count, bytes and time, and per caller. A
// running call's repeats wait for its answer; calls that did not reach
// the tool (an error) and answers marked can_retry are not kept.
type idemStore struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	byKey   map[string]*idemEntry
	order   *list.List            // kept entries, oldest first (all with the same TTL: by expiry too)
	mine    map[string]*list.List // kept entries by principal, oldest first
	running map[string]int        // running entries by principal
	total   int                   // running entries
	bytes   int64
}

type idemEntry struct {
	key, principal string
	print          [32]byte
	done           chan struct{} // closed when the run ended
	resp           *otc.CallToolResponse
	err            error
	size           int64
	expires        time.Time
	el, mineEl     *list.Element // nil unless kept
}

func newIdemStore(ttl time.Duration, now func() time.Time) *idemStore {
	if now == nil {
		now = time.Now
	}
	return &idemStore{ttl: ttl, now: now, byKey: map[string]*idemEntry{}, order: list.New(), mine: map[string]*list.List{}, running: map[string]int{}}
}

// idemPrint identifies a call: the exact tool id, the input compacted and
// the context sent (user id, tokens, secrets: hashed, never kept).
func idemPrint(req *otc.CallToolRequest) [32]byte {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(req.ToolID))
	var in bytes.Buffer
	if json.Compact(&in, req.Input) != nil {
		in.Reset()
		in.Write(req.Input)
	}
	field(in.Bytes())
	cc, _ := json.Marshal(req.Context)
	field(cc)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// do answers a call made with the scoped key key, for principal: the kept
// answer of the same call, or run's (once, however many repeats wait). A
// key held by another call is errIdemKeyReused; a call beyond the running
// bounds errIdemBusy. replayed says the answer is a kept one.
func (s *idemStore) do(ctx context.Context, key, principal string, print [32]byte,
	run func() (*otc.CallToolResponse, error)) (resp *otc.CallToolResponse, replayed bool, err error) {
	s.mu.Lock()
	s.expire()
	if e, ok := s.byKey[key]; ok {
		s.mu.Unlock()
		if e.print != print {
			return nil, false, errIdemKeyReused
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		if e.resp == nil {
			// The first run did not reach an answer to keep: run this one.
			return s.do(ctx, key, principal, print, run)
		}
		return e.resp, true, nil
	}
	if s.total >= idemMaxRunning || s.running[principal] >= idemMaxRunningPerPrincipal {
		s.mu.Unlock()
		return nil, false, errIdemBusy
	}
	e := &idemEntry{key: key, principal: principal, print: print, done: make(chan struct{}), size: int64(idemEntryOverhead + len(key))}
	s.byKey[key] = e
	s.bytes += e.size
	s.total++
	s.running[principal]++
	s.mu.Unlock()

	resp, err = run()
	s.finish(e, resp, err)
	return resp, false, err
}

// finish records a run's answer: kept when the tool answered (success, or
// a tool error that does not ask for a retry) and it fits; else dropped.
func (s *idemStore) finish(e *idemEntry, resp *otc.CallToolResponse, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total--
	if s.running[e.principal]--; s.running[e.principal] == 0 {
		delete(s.running, e.principal)
	}
	keep := err == nil && resp != nil && (resp.Success || resp.Error == nil || !resp.Error.CanRetry)
	var size int64
	if keep {
		size = e.size + int64(len(resp.CallID)+len(resp.Value)+64)
		if resp.Error != nil {
			size += int64(len(resp.Error.Message) + len(resp.Error.DeveloperMessage) + len(resp.Error.AdditionalPromptContent) + 64)
		}
		for k, v := range resp.Ext {
			size += int64(len(k) + len(v))
		}
		keep = size <= idemMaxBytes/10
	}
	if !keep {
		s.remove(e)
		close(e.done)
		return
	}
	e.resp = resp
	s.bytes += size - e.size
	e.size = size
	e.expires = s.now().Add(s.ttl)
	e.el = s.order.PushBack(e)
	m := s.mine[e.principal]
	if m == nil {
		m = list.New()
		s.mine[e.principal] = m
	}
	e.mineEl = m.PushBack(e)
	close(e.done)
	for m.Len() > idemMaxPerPrincipal {
		s.remove(m.Front().Value.(*idemEntry))
	}
	for s.order.Len() > 0 && (len(s.byKey) > idemMaxEntries || s.bytes > idemMaxBytes) {
		s.remove(s.order.Front().Value.(*idemEntry))
	}
}

// expire drops the kept answers past their time (the oldest are first).
func (s *idemStore) expire() {
	now := s.now()
	for s.order.Len() > 0 {
		e := s.order.Front().Value.(*idemEntry)
		if !now.After(e.expires) {
			return
		}
		s.remove(e)
	}
}

// remove forgets e, running or kept.
func (s *idemStore) remove(e *idemEntry) {
	if s.byKey[e.key] != e {
		return
	}
	delete(s.byKey, e.key)
	s.bytes -= e.size
	if e.el != nil {
		s.order.Remove(e.el)
		e.el = nil
	}
	if e.mineEl != nil {
		m := s.mine[e.principal]
		m.Remove(e.mineEl)
		e.mineEl = nil
		if m.Len() == 0 {
			delete(s.mine, e.principal)
		}
	}
}

// kept is the number of answers kept and their bytes (tests).
func (s *idemStore) kept() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len(), s.bytes
}

// idemPrincipal names the caller of ctx for the per-caller bounds: the
// prefix front.ScopedCallID gives its call_ids ("" for the sole chain
// peer, whose call_ids go as they are).
func idemPrincipal(ctx context.Context) string {
	return front.ScopedCallID(ctx, "")
}
