package otc

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// idempotency remembers the answers of calls by call_id, bounded in count,
// bytes and time.
type idempotency struct {
	ttl      time.Duration
	maxN     int
	maxBytes int64
	now      func() time.Time

	mu    sync.Mutex
	byID  map[string]*idemEntry
	order *list.List // of *idemEntry, oldest first
	bytes int64
}

type idemEntry struct {
	callID  string
	print   [32]byte
	done    chan struct{} // closed when the first run ended
	out     outcome       // valid once done is closed and keep is true
	keep    bool          // false: the first run's answer is not reusable
	size    int64
	expires time.Time
	el      *list.Element
}

func newIdempotency(ttl time.Duration, maxN int, maxBytes int64, now func() time.Time) *idempotency {
	if maxN <= 0 {
		maxN = 10_000
	}
	if maxBytes <= 0 {
		maxBytes = 64 << 20
	}
	return &idempotency{ttl: ttl, maxN: maxN, maxBytes: maxBytes, now: now, byID: map[string]*idemEntry{}, order: list.New()}
}

// fingerprintBufs are the buffers fingerprint compacts input into.
var fingerprintBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// fingerprint identifies what a call asks: the resolved tool and its input.
func fingerprint(toolID string, input json.RawMessage) [32]byte {
	buf := fingerprintBufs.Get().(*bytes.Buffer)
	buf.Reset()
	buf.WriteString(toolID)
	buf.WriteByte(0)
	if json.Compact(buf, input) != nil {
		buf.Truncate(len(toolID) + 1)
		buf.Write(input)
	}
	sum := sha256.Sum256(buf.Bytes())
	if buf.Cap() <= 64<<10 {
		fingerprintBufs.Put(buf)
	}
	return sum
}

// do answers a call with a caller-chosen call_id: the first answer when
// there is one, else by running it (once, however many repeats wait).
func (c *idempotency) do(ctx context.Context, callID string, print [32]byte, run func() outcome) outcome {
	for {
		c.mu.Lock()
		c.expire()
		e, ok := c.byID[callID]
		if !ok {
			e = &idemEntry{callID: callID, print: print, done: make(chan struct{})}
			e.el = c.order.PushBack(e)
			c.byID[callID] = e
			c.mu.Unlock()
			return c.runFirst(ctx, e, run)
		}
		c.mu.Unlock()
		if e.print != print {
			return outcome{status: http.StatusBadRequest, failure: &ServerErrorResponse{
				Message:          "This call_id was already used for a different call",
				DeveloperMessage: "call_id " + callID + " is an idempotency key: send a new call_id for a different tool or input",
			}}
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return outcome{status: http.StatusBadRequest, failure: &ServerErrorResponse{Message: "The call was cancelled", DeveloperMessage: ctx.Err().Error()}}
		}
		if e.keep {
			out := e.out
			out.replayed = true
			return out
		}
		// The first run's answer is not reusable (its client went away, or
		// the tool did not run): try to become the one that runs it.
	}
}

// runFirst runs the call and keeps its answer when the tool ran (200) and
// its client was still there to see it.
func (c *idempotency) runFirst(ctx context.Context, e *idemEntry, run func() outcome) outcome {
	out := run()
	c.mu.Lock()
	defer c.mu.Unlock()
	size := int64(256)
	if out.resp != nil {
		size += int64(len(out.resp.Value))
		if out.resp.Error != nil {
			size += int64(len(out.resp.Error.Message) + len(out.resp.Error.DeveloperMessage) + len(out.resp.Error.AdditionalPromptContent))
		}
	}
	e.keep = out.status == http.StatusOK && ctx.Err() == nil && size <= c.maxBytes/10
	if e.keep {
		e.out, e.size, e.expires = out, size, c.now().Add(c.ttl)
		c.bytes += size
		for c.order.Len() > c.maxN || c.bytes > c.maxBytes {
			c.remove(c.order.Front().Value.(*idemEntry))
		}
	} else {
		c.remove(e)
	}
	close(e.done)
	return out
}

// expire drops answers past their TTL (oldest first). Entries still running
// have no expiry yet and stay.
func (c *idempotency) expire() {
	now := c.now()
	for el := c.order.Front(); el != nil; {
		e := el.Value.(*idemEntry)
		next := el.Next()
		if !e.expires.IsZero() {
			if !now.After(e.expires) {
				break // answers are kept in about the order they expire
			}
			c.remove(e)
		}
		el = next
	}
}

func (c *idempotency) remove(e *idemEntry) {
	if c.byID[e.callID] != e {
		return
	}
	delete(c.byID, e.callID)
	c.order.Remove(e.el)
	c.bytes -= e.size
}
