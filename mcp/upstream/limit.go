package upstream

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/mcpotc/mcpotc/internal/jsonscan"
)

// DefaultMaxMessageBytes is Config.MaxMessageBytes when
// zero.
const DefaultMaxMessageBytes = 16 << 20

// ErrTooLarge is the class of a call whose answer was longer than
// Config.MaxMessageBytes: the upstream ran the tool, but its answer
// was dropped as it arrived, never held whole. The error is a
// *TooLargeError.
var ErrTooLarge = errors.New("mcp: upstream message too large")

// TooLargeError is a call (or tool listing) whose answer was over the
// message limit. errors.Is(err, ErrTooLarge) holds.
type TooLargeError struct {
	Upstream string // Config.Name
	Tool     string // the tool called; empty for other requests
	Limit    int64  // MaxMessageBytes
	Size     int64  // the answer's size in bytes when it was read to its end; 0 when not
}

// MessageLimit is the limit the answer was over (Limit).
func (e *TooLargeError) MessageLimit() int64 { return e.Limit }

func (e *TooLargeError) Error() string {
	what := "the answer"
	if e.Tool != "" {
		what = fmt.Sprintf("the answer to %q", e.Tool)
	}
	size := "is longer than"
	if e.Size > 0 {
		size = fmt.Sprintf("(%d bytes) is longer than", e.Size)
	}
	return fmt.Sprintf("mcp: %s of upstream %q %s the %d-byte message limit (MaxMessageBytes); it was dropped", what, e.Upstream, size, e.Limit)
}

// Is makes errors.Is(err, ErrTooLarge) hold.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// Bounds of what is kept of a message over the limit to find its top-level
// "id" and "method": its first and last bytes. The id of a response is at
// the start when the server writes it first ({"jsonrpc":"2.0","id":7,
// "result":…}, mcp-go, Python SDK), at the end when it writes the result
// first ({"result":…,"jsonrpc":"2.0","id":7}, TypeScript SDK).
const (
	headKeep = 16 << 10
	tailKeep = 16 << 10
	// passMax is how much of a line reaches mcp-go's reader before the
	// line ends; the rest is held here until the newline shows it within
	// the limit (then it is passed on) or the limit is passed (then it is
	// dropped, and mcp-go sees only this much of it).
	passMax = 1 << 20
)

// tooLargeKey marks the synthetic JSON-RPC error that stands for an
// answer over the limit; its value is the upstream's random nonce, so that
// a server cannot forge one.
const tooLargeKey = "mcpotc/too-large"

func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// tooLargeAnswer is the synthetic error response for request id (raw JSON).
func (u *Upstream) tooLargeAnswer(id []byte, size int64) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"answer over the message limit","data":{%q:%q,"size":%d}}}`,
		id, tooLargeKey, u.nonce, size)
}

// tooLargeFrom returns the *TooLargeError a synthetic answer stands for, or
// nil when resp is not one.
func (u *Upstream) tooLargeFrom(data any) *TooLargeError {
	m, ok := data.(map[string]any)
	if !ok || m[tooLargeKey] != u.nonce {
		return nil
	}
	size, _ := m["size"].(float64)
	return &TooLargeError{Upstream: u.Name(), Limit: u.cfg.MaxMessageBytes, Size: int64(size)}
}

// msgEnds is what could be read of a message's top-level members from
// its first and last bytes.
type msgEnds struct {
	id     []byte // raw JSON of "id" when it is a number or a string
	method bool   // a "method" member was seen: a request or a notification
}

func (e *msgEnds) member(key, val []byte) {
	switch string(key) {
	case "id":
		if e.id == nil && len(val) > 0 && (val[0] == '"' || val[0] == '-' || val[0] >= '0' && val[0] <= '9') {
			e.id = bytes.Clone(val)
		}
	case "method":
		e.method = true
	}
}

// scanHead reads the top-level members at the start of a message (b may
// end anywhere).
func (e *msgEnds) scanHead(b []byte) {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return
	}
	i++
	for {
		i = jsonscan.SkipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return
		}
		kEnd := jsonscan.StringEnd(b, i)
		if kEnd < 0 {
			return
		}
		key := b[i+1 : kEnd-1]
		i = jsonscan.SkipSpace(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return
		}
		i = jsonscan.SkipSpace(b, i+1)
		vEnd := jsonscan.ValueEnd(b, i)
		if vEnd < 0 {
			return
		}
		e.member(key, b[i:vEnd])
		i = jsonscan.SkipSpace(b, vEnd)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i++
	}
}

// quoteBack returns the index of the unescaped '"' that opens the string
// whose closing quote is b[end], or -1 when b starts first.
func quoteBack(b []byte, end int) int {
	for j := end - 1; j >= 0; j-- {
		if b[j] != '"' {
			continue
		}
		k := j
		for k > 0 && b[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j
		}
	}
	return -1
}

// scanTail reads the top-level members with scalar values at the end of a
// message (b may start anywhere), last first, up to the first member whose
// value is an object or an array.
func (e *msgEnds) scanTail(b []byte) {
	i := jsonscan.SkipSpaceBack(b, len(b))
	if i == 0 || b[i-1] != '}' {
		return
	}
	i--
	for {
		i = jsonscan.SkipSpaceBack(b, i)
		if i == 0 {
			return
		}
		var vStart int
		if b[i-1] == '"' {
			vStart = quoteBack(b, i-1)
		} else {
			vStart = i
			for vStart > 0 {
				c := b[vStart-1]
				if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '+' || c == '-') {
					break
				}
				vStart--
			}
			if vStart == i || vStart == 0 {
				return
			}
		}
		if vStart < 0 {
			return
		}
		val := b[vStart:i]
		i = jsonscan.SkipSpaceBack(b, vStart)
		if i == 0 || b[i-1] != ':' {
			return
		}
		i = jsonscan.SkipSpaceBack(b, i-1)
		if i == 0 || b[i-1] != '"' {
			return
		}
		kStart := quoteBack(b, i-1)
		if kStart < 0 {
			return
		}
		e.member(b[kStart+1:i-1], val)
		i = jsonscan.SkipSpaceBack(b, kStart)
		if i == 0 || b[i-1] != ',' {
			return // '{': that was the whole object
		}
		i--
	}
}

// ring keeps the last bytes written to it.
type ring struct {
	buf  []byte
	full bool
	pos  int
}

func (r *ring) reset() { r.buf, r.full, r.pos = r.buf[:0], false, 0 }

func (r *ring) write(p []byte) {
	if len(p) >= tailKeep {
		r.buf = append(r.buf[:0], p[len(p)-tailKeep:]...)
		r.full, r.pos = true, 0
		return
	}
	for len(p) > 0 {
		if !r.full {
			n := min(len(p), tailKeep-len(r.buf))
			r.buf = append(r.buf, p[:n]...)
			p = p[n:]
			if len(r.buf) == tailKeep {
				r.full, r.pos = true, 0
			}
			continue
		}
		n := copy(r.buf[r.pos:], p)
		p = p[n:]
		r.pos = (r.pos + n) % tailKeep
	}
}

// bytes returns the kept bytes in order.
func (r *ring) bytes() []byte {
	if !r.full {
		return r.buf
	}
	return append(bytes.Clone(r.buf[r.pos:]), r.buf[:r.pos]...)
}

// lineBounder bounds the lines of a stdio child's stdout, which mcp-go v1.2.1's
// stdio transport reads with bufio.Reader.ReadString('\n') (Stdio.
// readResponses), holding a whole line however long it is, then decoding
// it up to three times: a 200 MiB result took the bridge to 2 GiB. Lines
// within max pass unchanged. Of a longer line mcp-go sees at most
// passMax bytes, ended by an invalid byte so that it skips it; the rest is
// dropped here as it arrives, keeping only its first and last bytes to find
// its "id". Then:
//
//	an answer with an id          mcp-go gets a synthetic error answer for that id: only that call fails (ErrTooLarge)
//	a server request with an id   the server gets a JSON-RPC error answer (respond)
//	a notification                dropped
//	no id found                   the connection is failed (dead), so the child restarts
//
// The cut relies on mcp-go skipping a line it cannot decode
// (TestUpstreamCanaryMCPGoStdioSkipsUndecodableLine checks it does). lineBounder
// is not safe for concurrent use (mcp-go reads from one goroutine).
type lineBounder struct {
	u       *Upstream
	max     int64
	pass    int64
	respond func(answer []byte) // writes to the child's stdin
	dead    func(why string)    // fails the connection
	chunk   []byte              // read buffer
	// q is what the reader gets next, in order: pieces of chunk (valid
	// until the next read of the child, which waits for q to be empty),
	// held pieces and the bridge's own lines.
	q       [][]byte
	n       int64    // bytes of the current line so far ('\n' excluded)
	held    [][]byte // bytes of the current line past pass, not yet given out, in heldPiece pieces
	over    bool     // the current line is over max
	head    []byte   // its first bytes
	tail    ring     // its last bytes, once over
	readErr error
}

// heldPiece is the size of the pieces a held line is kept in: no
// doubling copies, and the pieces go to the reader as they are.
const heldPiece = 256 << 10

var lineEnd, lineCut = []byte("\n"), []byte("\x00\n")

func (u *Upstream) newLines(respond func([]byte), dead func(string)) *lineBounder {
	return &lineBounder{u: u, max: u.cfg.MaxMessageBytes, pass: min(passMax, u.cfg.MaxMessageBytes), respond: respond, dead: dead}
}

// read fills p from q, reading src when q is empty.
func (l *lineBounder) read(src io.Reader, p []byte) (int, error) {
	for len(l.q) == 0 {
		if l.readErr != nil {
			return 0, l.readErr
		}
		if l.chunk == nil {
			l.chunk = make([]byte, 32<<10)
		}
		n, err := src.Read(l.chunk)
		l.take(l.chunk[:n])
		if err != nil {
			l.readErr = err
		}
	}
	n := copy(p, l.q[0])
	if l.q[0] = l.q[0][n:]; len(l.q[0]) == 0 {
		l.q[0] = nil
		l.q = l.q[1:]
	}
	return n, nil
}

// take processes bytes read from the child.
func (l *lineBounder) take(c []byte) {
	for len(c) > 0 {
		i := bytes.IndexByte(c, '\n')
		seg := c
		if i >= 0 {
			seg = c[:i]
		}
		l.segment(seg)
		if i < 0 {
			return
		}
		l.endLine()
		c = c[i+1:]
	}
}

func (l *lineBounder) emit(b []byte) {
	if len(b) > 0 {
		l.q = append(l.q, b)
	}
}

// segment takes bytes of the current line.
func (l *lineBounder) segment(seg []byte) {
	if room := headKeep - len(l.head); room > 0 {
		l.head = append(l.head, seg[:min(len(seg), room)]...)
	}
	if l.over {
		l.tail.write(seg)
		l.n += int64(len(seg))
		return
	}
	if l.n < l.pass {
		k := min(int64(len(seg)), l.pass-l.n)
		l.emit(seg[:k])
		l.n += k
		seg = seg[k:]
	}
	if len(seg) == 0 {
		return
	}
	if l.n+int64(len(seg)) <= l.max {
		l.hold(seg)
		l.n += int64(len(seg))
		return
	}
	// Over the limit: end the part mcp-go has with a byte that makes it
	// invalid JSON (it skips lines it cannot decode), drop the rest.
	l.over = true
	l.tail.reset()
	for _, h := range l.held {
		l.tail.write(h)
	}
	l.tail.write(seg)
	l.held = nil
	l.n += int64(len(seg))
	l.emit(lineCut)
}

// hold keeps seg, copied, at the end of held.
func (l *lineBounder) hold(seg []byte) { l.held = holdCopy(l.held, seg) }

// holdCopy appends a copy of seg to held, filling its last piece before
// adding another of heldPiece bytes, and returns held.
func holdCopy(held [][]byte, seg []byte) [][]byte {
	for len(seg) > 0 {
		if k := len(held); k == 0 || len(held[k-1]) == cap(held[k-1]) {
			held = append(held, make([]byte, 0, heldPiece))
		}
		last := &held[len(held)-1]
		n := min(len(seg), cap(*last)-len(*last))
		*last = append(*last, seg[:n]...)
		seg = seg[n:]
	}
	return held
}

// endLine ends the current line at its '\n'.
func (l *lineBounder) endLine() {
	if l.over {
		l.tooLong()
	} else {
		for _, h := range l.held {
			l.emit(h)
		}
		l.emit(lineEnd)
	}
	l.n, l.held, l.over, l.head = 0, nil, false, l.head[:0]
	l.tail.reset()
}

// tooLong handles a line over the limit.
func (l *lineBounder) tooLong() {
	var e msgEnds
	e.scanHead(l.head)
	e.scanTail(l.tail.bytes())
	log := l.u.log.With("size", l.n, "limit", l.max)
	switch {
	case e.id != nil && !e.method:
		log.Warn("upstream answer over the message limit dropped; the request it answers fails", "id", string(e.id))
		l.emit(append(l.u.tooLargeAnswer(e.id, l.n), '\n'))
	case e.id != nil:
		log.Warn("upstream request over the message limit dropped and refused", "id", string(e.id))
		l.respond(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":%s}}`+"\n",
			e.id, strconv.Quote(fmt.Sprintf("request of %d bytes over the client's %d-byte message limit", l.n, l.max))))
	case e.method:
		log.Warn("upstream notification over the message limit dropped")
	default:
		log.Error("upstream message over the message limit without a readable id; restarting the connection")
		l.dead(fmt.Sprintf("a message of %d bytes over the %d-byte limit without a readable id", l.n, l.max))
	}
}
