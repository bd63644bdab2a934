package otc

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"
)

// IdempotencyStore shares the call_id idempotency of Options.IdempotencyTTL
// among the replicas of one server (a database they all reach). The
// handler encodes what it keeps; a store holds opaque values under opaque
// keys, each with an expiry, and must make Claim and Settle atomic.
type IdempotencyStore interface {
	// Claim stores claim under key for lease+remember, its lease live for
	// lease, unless key holds a value. It returns that value (nil when the
	// claim was stored) and whether its lease is still live: a claim whose
	// lease ran out was left by a replica that stopped before settling it.
	Claim(ctx context.Context, key string, claim []byte, lease, remember time.Duration) (held []byte, live bool, err error)
	// Settle replaces the value of key, if it is still exactly claim, with
	// answer for ttl, or deletes it when answer is nil; the lease ends. It
	// reports false when key no longer holds claim.
	Settle(ctx context.Context, key string, claim, answer []byte, ttl time.Duration) (bool, error)
}

// Bounds of the shared idempotency.
const (
	// sharedLeaseMargin is how much longer than the call timeout a claim
	// lives: a replica that dies mid-call leaves a claim that expires
	// after CallTimeout + sharedLeaseMargin.
	sharedLeaseMargin = 5 * time.Second
	// sharedPollMin and sharedPollMax bound the wait between two looks at
	// a call that runs on another replica.
	sharedPollMin = 10 * time.Millisecond
	sharedPollMax = 200 * time.Millisecond
)

// sharedIdempotency is the call_id idempotency over an IdempotencyStore.
// Repeats that reach the same replica wait for its run without asking
// the store; the others poll the store until the answer is there, the
// claim's lease ends or their wait ends.
//
// A call_id runs at most once. A replica that dies mid-call leaves its
// claim, whose lease ends: the tool may or may not have run (the MCP
// server may have finished a run whose answer died with the replica), so
// the claim is kept, as an answer would be, and its repeats get
// errOutcomeUnknown instead of a second run.
type sharedIdempotency struct {
	store       IdempotencyStore
	remember    time.Duration // how long an answer, or a dead claim, is kept
	callTimeout time.Duration
	maxRunning  int
	maxAnswer   int           // bytes of the largest answer kept
	leaseMargin time.Duration // sharedLeaseMargin; tests shorten it

	mu      sync.Mutex
	running map[string]*sharedRun // by call_id, on this replica
}

// sharedRun is a call running on this replica, joined by local repeats.
type sharedRun struct {
	caller string
	print  [32]byte
	done   chan struct{}
	out    outcome
}

// sharedRecord is what the store keeps under a call_id: a claim (Claim
// set: the run's random token) or an answer. Caller is a hash: the store
// never sees who called.
type sharedRecord struct {
	V      int             `json:"v"`
	Caller string          `json:"caller"`
	Print  string          `json:"print"`
	Claim  string          `json:"claim,omitempty"`
	Answer json.RawMessage `json:"answer,omitempty"`
}

func newSharedIdempotency(store IdempotencyStore, remember, callTimeout time.Duration, maxRunning int, maxBytes int64) *sharedIdempotency {
	if maxRunning <= 0 {
		maxRunning = DefaultIdempotencyMaxRunning
	}
	if maxBytes <= 0 {
		maxBytes = DefaultIdempotencyMaxBytes
	}
	return &sharedIdempotency{store: store, remember: remember, callTimeout: callTimeout, maxRunning: maxRunning, maxAnswer: int(maxBytes / 10),
		leaseMargin: sharedLeaseMargin, running: map[string]*sharedRun{}}
}

// sharedKey is the store key of a call_id: a hash, so that ids of any
// bytes make keys of one shape.
func sharedKey(callID string) string {
	sum := sha256.Sum256([]byte(callID))
	return "idem:" + hex.EncodeToString(sum[:])
}

func callerHash(caller string) string {
	sum := sha256.Sum256([]byte("otc caller\x00" + caller))
	return hex.EncodeToString(sum[:16])
}

// errStoreDown answers a call with a call_id when the store cannot be
// reached: running it might run it twice.
func errStoreDown() *ServerErrorResponse {
	return &ServerErrorResponse{
		Message:          "Tool server temporarily unavailable",
		DeveloperMessage: "the shared idempotency store cannot be reached, so a call with a call_id cannot run safely; retry shortly (a call without call_id does not need it)",
		RetryAfter:       time.Second,
	}
}

// errStillRunning answers a repeat whose first run, on another replica,
// outlasted its wait.
func errStillRunning(callID string) *ServerErrorResponse {
	return &ServerErrorResponse{
		Message:          "This call is still running",
		DeveloperMessage: "call_id " + callID + " is running on another replica; retry with the same call_id to get its answer",
		RetryAfter:       time.Second,
	}
}

// errOutcomeUnknown answers a repeat of a call whose replica stopped
// before answering it: not to be repeated with this call_id.
func errOutcomeUnknown(callID string) *ServerErrorResponse {
	return &ServerErrorResponse{
		Message: "The outcome of this call is unknown",
		DeveloperMessage: "call_id " + callID + " was running on a replica that stopped before answering: the tool may or may not have run. " +
			"It is not run again under this call_id (a call_id runs at most once); call again with a new call_id to run it",
	}
}

// do answers a call with a caller's call_id as idempotency.do does, across
// replicas. The first request of a call_id on this replica starts its
// claim (or wait) detached: the requests of that call_id on this replica,
// the first included, wait for it and each stops waiting when its own
// client goes away.
func (s *sharedIdempotency) do(ctx context.Context, key idemKey, print [32]byte, run func() outcome, retain func(outcome) time.Duration) outcome {
	s.mu.Lock()
	r := s.running[key.callID]
	first := r == nil
	switch {
	case first && ctx.Err() != nil:
		// The caller went away before its call_id was claimed: it is not
		// claimed, nor run. (The claim itself runs detached from the
		// caller, bounded by its own wait: a hang-up never reads as the
		// store failing.)
		s.mu.Unlock()
		return cancelled(ctx)
	case first && len(s.running) >= s.maxRunning:
		s.mu.Unlock()
		return outcome{status: http.StatusBadRequest, failure: errTooManyRunning(s.maxRunning)}
	case first:
		r = &sharedRun{caller: key.caller, print: print, done: make(chan struct{})}
		s.running[key.callID] = r
		go func() {
			r.out = s.claimOrWait(context.WithoutCancel(ctx), key, print, run, retain)
			s.mu.Lock()
			delete(s.running, key.callID)
			s.mu.Unlock()
			close(r.done)
		}()
	case r.caller != key.caller || r.print != print:
		s.mu.Unlock()
		return outcome{status: http.StatusBadRequest, failure: errCallIDReused(key.callID)}
	}
	s.mu.Unlock()
	select {
	case <-r.done:
	case <-ctx.Done():
		return cancelled(ctx)
	}
	out := r.out
	if !first {
		out.replayed = true
	}
	return out
}

func cancelled(ctx context.Context) outcome {
	return outcome{status: http.StatusBadRequest, failure: &ServerErrorResponse{Message: "The call was cancelled", DeveloperMessage: ctx.Err().Error()}}
}

// claimOrWait runs the call if this replica claims its call_id, else waits
// for the answer of the replica that did.
func (s *sharedIdempotency) claimOrWait(ctx context.Context, key idemKey, print [32]byte, run func() outcome, retain func(outcome) time.Duration) outcome {
	caller, printHex := callerHash(key.caller), hex.EncodeToString(print[:])
	claim, err := json.Marshal(sharedRecord{V: 1, Caller: caller, Print: printHex, Claim: rand.Text()})
	if err != nil {
		return outcome{status: http.StatusBadRequest, failure: errStoreDown()}
	}
	storeKey := sharedKey(key.callID)
	lease := s.callTimeout + s.leaseMargin
	// A claim held when this wait starts is settled within lease, or its
	// lease ends with its dead replica: one more look after that finds
	// either.
	wait, stop := context.WithTimeout(ctx, lease+sharedPollMax+time.Second)
	defer stop()
	pause := sharedPollMin
	for {
		held, live, err := s.store.Claim(wait, storeKey, claim, lease, s.remember)
		switch {
		case err != nil && ctx.Err() != nil:
			return cancelled(ctx)
		case err != nil && wait.Err() != nil:
			return outcome{status: http.StatusBadRequest, failure: errStillRunning(key.callID)}
		case err != nil:
			return outcome{status: http.StatusBadRequest, failure: errStoreDown()}
		case held == nil:
			return s.run(storeKey, claim, run, retain)
		}
		var rec sharedRecord
		if json.Unmarshal(held, &rec) != nil || rec.V != 1 {
			return outcome{status: http.StatusBadRequest, failure: errStoreDown()}
		}
		if rec.Caller != caller || rec.Print != printHex {
			return outcome{status: http.StatusBadRequest, failure: errCallIDReused(key.callID)}
		}
		if rec.Claim == "" {
			resp, err := decodeKeptAnswer(rec.Answer)
			if err != nil {
				return outcome{status: http.StatusBadRequest, failure: errStoreDown()}
			}
			out := outcome{status: http.StatusOK, resp: resp, replayed: true}
			if resp.Error != nil {
				out.failure = resp.Error
			}
			return out
		}
		if !live {
			return outcome{status: http.StatusBadRequest, failure: errOutcomeUnknown(key.callID)}
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-wait.Done():
			t.Stop()
			if ctx.Err() != nil {
				return cancelled(ctx)
			}
			return outcome{status: http.StatusBadRequest, failure: errStillRunning(key.callID)}
		}
		pause = min(pause*2, sharedPollMax)
	}
}

// run runs a claimed call and settles its claim: the answer is kept for
// retain (when it fits in maxAnswer), or the claim is dropped so that a
// repeat runs it again. A store that fails here does not change the
// answer: the claim's lease ends, and repeats are told the outcome is
// unknown.
func (s *sharedIdempotency) run(storeKey string, claim []byte, run func() outcome, retain func(outcome) time.Duration) outcome {
	out := run()
	var answer []byte
	ttl := retain(out)
	if ttl > 0 {
		b, err := json.Marshal(out.resp)
		if err == nil {
			var rec sharedRecord
			_ = json.Unmarshal(claim, &rec)
			rec.Claim, rec.Answer = "", b
			answer, err = json.Marshal(rec)
		}
		if err != nil || len(answer) > s.maxAnswer {
			answer, ttl = nil, 0
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedSettleTimeout)
	defer cancel()
	_, _ = s.store.Settle(ctx, storeKey, claim, answer, ttl)
	return out
}

// sharedSettleTimeout bounds the store request that keeps an answer.
const sharedSettleTimeout = 5 * time.Second

// decodeKeptAnswer reads a kept CallToolResponse, its extensions included.
func decodeKeptAnswer(b []byte) (*CallToolResponse, error) {
	type plain CallToolResponse
	var resp CallToolResponse
	if err := unmarshalWith(b, (*plain)(&resp), &resp.Ext); err != nil {
		return nil, err
	}
	if resp.CallID == "" {
		return nil, errors.New("kept answer without call_id")
	}
	return &resp, nil
}
