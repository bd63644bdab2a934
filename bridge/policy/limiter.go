package policy

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Bucket is one token bucket a Store holds.
type Bucket struct {
	// Key names the bucket. It holds hashes only (never a principal or
	// a tool in clear); its principal part is in braces, so that a store
	// that shards by "{…}" (Redis Cluster) keeps a principal's buckets
	// together.
	Key string
	// Capacity is how many tokens it holds full (a new bucket is full).
	Capacity float64
	// PerSecond is how many tokens it gains a second, up to Capacity.
	PerSecond float64
}

// Store holds token buckets, shared by the replicas of a front (package
// bridge/state keeps them in Redis) or in this process (Memory).
type Store interface {
	// Take takes one token from every bucket if each holds one, and
	// answers 0 and -1; otherwise it takes none, and answers how long
	// until the longest-waiting of those that hold none has one again, and
	// its index. The decision is atomic: two replicas never take the same
	// token.
	Take(ctx context.Context, buckets []Bucket) (wait time.Duration, refused int, err error)
}

// Limits of a Limiter's bookkeeping.
const (
	// DefaultMemoryBuckets bounds Memory's buckets; past it the bucket
	// used least recently goes (it is most likely full again: dropping
	// it loses nothing).
	DefaultMemoryBuckets = 100_000
	// maxRefusals bounds the refusals a Limiter remembers (see Admit).
	maxRefusals = 10_000
	// StoreTimeout bounds the shared store's decision on one call. The
	// store is asked under a context of the Limiter's own, detached from
	// the caller's: a caller that hangs up cannot make the store's answer
	// fail (and the call be counted in this replica's buckets alone). A
	// store that does not decide within it is a store that cannot be
	// reached.
	StoreTimeout = 3 * time.Second
)

// Memory is a Store in this process's memory, for one replica (or while
// the shared one cannot be reached).
type Memory struct {
	mu  sync.Mutex
	max int
	now func() time.Time
	m   map[string]*list.Element // of *memBucket
	lru list.List                // front: used most recently
}

type memBucket struct {
	key    string
	tokens float64
	at     time.Time
}

// NewMemory returns a Memory of at most max buckets (zero:
// DefaultMemoryBuckets).
func NewMemory(max int) *Memory {
	if max <= 0 {
		max = DefaultMemoryBuckets
	}
	return &Memory{max: max, now: time.Now, m: map[string]*list.Element{}}
}

// Take implements Store.
func (s *Memory) Take(_ context.Context, buckets []Bucket) (time.Duration, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	found := make([]*memBucket, len(buckets))
	var wait time.Duration
	refused := -1
	for i, b := range buckets {
		mb := s.bucket(b, now)
		found[i] = mb
		if mb.tokens < 1 {
			if w := waitFor(mb.tokens, b.PerSecond); w > wait {
				wait, refused = w, i
			}
		}
	}
	if refused >= 0 {
		return wait, refused, nil
	}
	for _, mb := range found {
		mb.tokens--
	}
	return 0, -1, nil
}

// bucket is b, refilled up to now, created full when it is not known.
func (s *Memory) bucket(b Bucket, now time.Time) *memBucket {
	if e, ok := s.m[b.Key]; ok {
		s.lru.MoveToFront(e)
		mb := e.Value.(*memBucket)
		if d := now.Sub(mb.at); d > 0 {
			mb.tokens = math.Min(b.Capacity, mb.tokens+d.Seconds()*b.PerSecond)
			mb.at = now
		}
		mb.tokens = math.Min(b.Capacity, mb.tokens) // a capacity lowered since
		return mb
	}
	for len(s.m) >= s.max {
		old := s.lru.Back()
		delete(s.m, old.Value.(*memBucket).key)
		s.lru.Remove(old)
	}
	mb := &memBucket{key: b.Key, tokens: b.Capacity, at: now}
	s.m[b.Key] = s.lru.PushFront(mb)
	return mb
}

// Len is how many buckets s holds.
func (s *Memory) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// waitFor is how long a bucket holding tokens (< 1) takes to hold one.
func waitFor(tokens, perSecond float64) time.Duration {
	return time.Duration(math.Ceil((1 - tokens) / perSecond * float64(time.Second)))
}

// Limiter decides which calls the Limits admit.
type Limiter struct {
	limits *Limits
	shared Store // nil: local only
	local  *Memory
	onDown func(error)
	now    func() time.Time
	down   atomic.Bool // the shared store failed last time

	mu       sync.Mutex
	refusals map[string]time.Time // bucket key → until when it holds no token
}

// NewLimiter returns the limiter of limits: its buckets in shared (nil:
// in local only); while shared fails, in local. onDown, when set, is told
// when shared starts failing (its error) and when it answers again (nil).
func NewLimiter(limits *Limits, shared Store, local *Memory, onDown func(error)) *Limiter {
	if local == nil {
		local = NewMemory(0)
	}
	return &Limiter{limits: limits, shared: shared, local: local, onDown: onDown, now: time.Now, refusals: map[string]time.Time{}}
}

// Limit names which bucket refused a call (Decision.Limit).
const (
	LimitPrincipal = "principal"
	LimitTool      = "tool"
)

// Decision is a Limiter's answer for one call.
type Decision struct {
	// Wait, when positive, refuses the call: the caller may call again
	// after it.
	Wait time.Duration
	// Limit and Rate say which limit refused it.
	Limit string
	Rate  Rate
	// Gone, with a zero Wait, says the caller went away (its context
	// ended) before the call was admitted: the call must not start. Its
	// token, when one was taken, stays taken.
	Gone bool
}

// Admit takes a token for a call of tool (of upstream) by principal, from
// its principal's bucket and its tool's (when limits set them), or
// refuses it with the wait. A refusal is remembered until its wait ends:
// repeats within it are refused here, without asking the store (a client
// that retries at once does not load it). A nil Limiter admits every call.
//
// ctx is the caller's: its end is read as the caller gone (Decision.Gone),
// never as the store failing. The store is asked under a context of the
// Limiter's own, bounded by StoreTimeout, that the caller's end does not
// cancel: a caller cannot turn the shared count into a local one by
// hanging up.
func (l *Limiter) Admit(ctx context.Context, principal, upstream, tool string) Decision {
	if l == nil || l.limits == nil {
		return Decision{}
	}
	if ctx.Err() != nil {
		return Decision{Gone: true}
	}
	var buckets [2]Bucket
	var rates [2]*Rate
	var limits [2]string
	n := 0
	ph := hash(principal)
	if r := l.limits.Principal; r != nil {
		buckets[n], rates[n], limits[n] = Bucket{Key: "{" + ph + "}:p", Capacity: r.capacity(), PerSecond: r.perSecond()}, r, LimitPrincipal
		n++
	}
	if r := l.limits.toolRate(tool); r != nil {
		buckets[n], rates[n], limits[n] = Bucket{Key: "{" + ph + "}:t:" + hash(upstream+"\x00"+tool), Capacity: r.capacity(), PerSecond: r.perSecond()}, r, LimitTool
		n++
	}
	if n == 0 {
		return Decision{}
	}
	now := l.now()
	if d, refused := l.remembered(buckets[:n], now); refused >= 0 {
		return Decision{Wait: d, Limit: limits[refused], Rate: *rates[refused]}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StoreTimeout)
	wait, refused, err := l.take(sctx, buckets[:n])
	cancel()
	switch {
	case err == nil && refused >= 0:
	case ctx.Err() != nil:
		// Gone while the store decided: not started (the token taken,
		// if any, is spent).
		return Decision{Gone: true}
	default:
		// Admitted; or nothing decided (err: even the local store
		// failed), and the call is admitted, as a store that cannot
		// answer must not stop every call.
		return Decision{}
	}
	l.remember(buckets[refused].Key, now.Add(wait))
	return Decision{Wait: wait, Limit: limits[refused], Rate: *rates[refused]}
}

// take asks the shared store, else (none, or it fails) the local one. ctx
// is the Limiter's own (Admit): an error here, its deadline included, is
// the store's.
func (l *Limiter) take(ctx context.Context, buckets []Bucket) (time.Duration, int, error) {
	if l.shared != nil {
		wait, refused, err := l.shared.Take(ctx, buckets)
		if err == nil {
			if l.down.Swap(false) && l.onDown != nil {
				l.onDown(nil)
			}
			return wait, refused, nil
		}
		if !l.down.Swap(true) && l.onDown != nil {
			l.onDown(err)
		}
	}
	return l.local.Take(ctx, buckets)
}

// remembered is the remaining wait of a remembered refusal of one of
// buckets, and its index (-1: none).
func (l *Limiter) remembered(buckets []Bucket, now time.Time) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, b := range buckets {
		if until, ok := l.refusals[b.Key]; ok {
			if now.Before(until) {
				return until.Sub(now), i
			}
			delete(l.refusals, b.Key)
		}
	}
	return 0, -1
}

// remember records that key holds no token until until. When full, the
// refusals that ended go; if none did, this one is not remembered (the
// store decides its repeats).
func (l *Limiter) remember(key string, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.refusals) >= maxRefusals {
		now := l.now()
		for k, u := range l.refusals {
			if !now.Before(u) {
				delete(l.refusals, k)
			}
		}
		if len(l.refusals) >= maxRefusals {
			return
		}
	}
	l.refusals[key] = until
}

// hash is the first 16 bytes of s's SHA-256, in hex: bucket keys hold
// no principal or tool in clear.
func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}
