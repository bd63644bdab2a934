package bridge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/internal/answers"
	"github.com/mcpotc/mcpotc/internal/callid"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/otc"
)

// An MCP host makes its retries safe the way MCP gateways document it: an
// idempotency_key inside a tool's arguments (docs/mcp-front.md, What MCP hosts see).
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

// Defaults and bounds of the MCP front's idempotency store (an
// answers.Store, the bounded store serve-otc's call_id uses too).
const (
	// DefaultIdempotencyTTL is how long an answer is kept when
	// MCPFrontOptions.IdempotencyTTL is zero.
	DefaultIdempotencyTTL = 10 * time.Minute
	// idemMaxEntries, idemMaxBytes bound the answers kept for everyone;
	// idemMaxPerPrincipal, idemMaxBytesPerPrincipal those of one caller
	// (past them, its own oldest go; never another caller's).
	idemMaxEntries           = answers.DefaultEntries
	idemMaxBytes             = answers.DefaultBytes
	idemMaxPerPrincipal      = idemMaxEntries / 10
	idemMaxBytesPerPrincipal = idemMaxBytes / 8
	// idemMaxRunning, idemMaxRunningPerPrincipal bound the calls with a
	// key that run at once, for everyone and for one caller.
	idemMaxRunning             = answers.DefaultRunning
	idemMaxRunningPerPrincipal = 100
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
// by scoped key, in an answers.Store: bounded in count, bytes and time, in
// all and per caller (8 MiB and 1,000 answers of one caller; past them its
// own oldest answers go, never another caller's). A running call's
// repeats wait for its answer; calls that did not reach the tool (an
// error) and answers marked can_retry are not kept.
type idemStore struct {
	ttl   time.Duration
	store *answers.Store[*otc.CallToolResponse]
}

func newIdemStore(ttl time.Duration, now func() time.Time) *idemStore {
	return &idemStore{ttl: ttl, store: answers.New[*otc.CallToolResponse](answers.Bounds{
		Entries: idemMaxEntries, PrincipalEntries: idemMaxPerPrincipal,
		Bytes: idemMaxBytes, PrincipalBytes: idemMaxBytesPerPrincipal,
		Running: idemMaxRunning, PrincipalRunning: idemMaxRunningPerPrincipal,
	}, now)}
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
	e, first, err := s.store.Begin(key, principal, print)
	switch {
	case err != nil:
		return nil, false, errIdemBusy
	case first:
		resp, err = run()
		// Kept when the tool answered (success, or a tool error that does
		// not ask for a retry); else dropped.
		if err == nil && resp != nil && (resp.Success || resp.Error == nil || !resp.Error.CanRetry) {
			s.store.Finish(e, resp, idemAnswerSize(resp), s.ttl)
		} else {
			s.store.Finish(e, nil, 0, 0)
		}
		return resp, false, err
	case e.Print() != print:
		return nil, false, errIdemKeyReused
	}
	select {
	case <-e.Done():
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	if e.Value() == nil {
		// The first run did not reach an answer to keep: run this one.
		return s.do(ctx, key, principal, print, run)
	}
	return e.Value(), true, nil
}

// idemAnswerSize is the bytes an answer holds.
func idemAnswerSize(resp *otc.CallToolResponse) int64 {
	size := int64(len(resp.CallID) + len(resp.Value) + 64)
	if resp.Error != nil {
		size += int64(len(resp.Error.Message) + len(resp.Error.DeveloperMessage) + len(resp.Error.AdditionalPromptContent) + 64)
	}
	for k, v := range resp.Ext {
		size += int64(len(k) + len(v))
	}
	return size
}

// kept is the number of answers kept and their bytes (tests).
func (s *idemStore) kept() (int, int64) { return s.store.Stats() }

// idemPrincipal names the caller of ctx for the per-caller bounds: the
// prefix front.ScopedCallID gives its call_ids ("" for the sole chain
// peer, whose call_ids go as they are).
func idemPrincipal(ctx context.Context) string {
	return front.ScopedCallID(ctx, "")
}
