package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Kinds of line (the "audit" member).
const (
	KindCall          = "call"          // a tool call, answered
	KindAuthorization = "authorization" // a request's credentials refused, or an OAuth flow's step
)

// Outcomes of an authorization line, besides a call's outcomes (the
// metrics' outcome label: ok, tool_error, …).
const (
	// OutcomeRefused: a request's credentials were refused (a missing or
	// bad API key, JWT or OAuth token; a token without a scope). Status
	// says 401 or 403, Detail the reason the answer gave.
	OutcomeRefused = "refused"
	// The steps of an OAuth flow of serve-otc as an OAuth client (package
	// mcp/oauth): a challenge (a new authorization URL), an authorization
	// completed or failed, a token refreshed or not.
	OutcomeChallenge           = "challenge"
	OutcomeAuthorized          = "authorized"
	OutcomeAuthorizationFailed = "authorization_failed"
	OutcomeRefresh             = "refresh"
	OutcomeRefreshFailed       = "refresh_failed"
)

// Record is one line of the audit log. Every string is cut to its bound
// when the line is encoded (see the fields); none may hold a token, a
// secret or an argument value.
type Record struct {
	// Time is when it ended. Zero: when Write is called.
	Time time.Time
	// Kind is KindCall or KindAuthorization.
	Kind string
	// Front is "mcp" (serve-mcp) or "otc" (serve-otc).
	Front string
	// Principal is who called, as the front's transport authentication
	// established it (docs/observability.md, Audit log). Cut to 512 bytes.
	Principal string
	// UserID is the user the call acted for, when there is one. Cut to
	// 256 bytes.
	UserID string
	// Upstream is the configured name of the tool server. Cut to 256
	// bytes.
	Upstream string
	// Tool is the tool as the catalog names it (the name asked for, when
	// the catalog holds none such). Cut to 256 bytes.
	Tool string
	// Outcome is a call's outcome (ok, tool_error, invalid_input, …) or
	// one of the authorization outcomes above. Cut to 64 bytes.
	Outcome string
	// Status is the HTTP status answered, when there is one (serve-otc's
	// calls, refusals). Zero: none.
	Status int
	// Duration is the call's time. Written for calls only.
	Duration time.Duration
	// CallID and TraceID tie the line to the call's log line and trace.
	// Cut to 64 bytes.
	CallID, TraceID string
	// Args are the names of the call's arguments (never their values),
	// when the operator asks for them. At most 32 names of 64 bytes.
	Args []string
	// Detail says more, in the front's own fixed words (a refusal's
	// reason, a failed authorization's): never an upstream's or a
	// caller's text. Cut to 256 bytes.
	Detail string
}

// MaxLineBytes bounds one encoded line, its newline included: the cuts of
// Record's fields keep every line under it (a line that would not be is
// dropped and counted).
const MaxLineBytes = 8 << 10

// Defaults and bounds of Options.
const (
	DefaultMaxBytes = 100 << 20
	// MinMaxBytes is the least MaxBytes: a smaller one is raised to it,
	// so that a file always holds a line.
	MinMaxBytes   = 16 << 10
	DefaultKeep   = 5
	DefaultBuffer = 4096
	// reportEvery bounds how often Options.Warn is called.
	reportEvery = 10 * time.Second
)

// Options configure a Log. A nil *Options is the zero value.
type Options struct {
	// MaxBytes bounds the file: before a line would take it past
	// MaxBytes, it is rotated. Zero: DefaultMaxBytes; at least
	// MinMaxBytes. Not used with New (a stream is not rotated).
	MaxBytes int64
	// Keep is how many rotated files are kept (PATH.1 … PATH.Keep). Zero:
	// DefaultKeep.
	Keep int
	// Buffer bounds the lines waiting for the writer; a line written when
	// it is full is dropped and counted. Zero: DefaultBuffer.
	Buffer int
	// PerPrincipal bounds the lines of one Record.Principal waiting for
	// the writer, so that one caller's flood of calls cannot fill the
	// buffer and have everyone else's lines dropped: beyond it that
	// principal's lines are dropped and counted. Zero: Buffer / 8 (at
	// least 1).
	PerPrincipal int
	// Warn is told, from the writer goroutine and at most every 10
	// seconds, how many lines were dropped so far and, when one did, the
	// error a write or a rotation met. Nil: nobody is told (Dropped still
	// counts).
	Warn func(dropped int64, err error)
}

// Log is an audit log. Safe for concurrent use; a nil *Log writes nothing.
type Log struct {
	ch      chan entry
	qmu     sync.Mutex
	queued  map[string]int // lines waiting per principal
	done    chan struct{}
	mu      sync.RWMutex // Write holds it shared; Close exclusively
	closed  bool
	dropped atomic.Int64
	written atomic.Int64

	// The writer goroutine's own.
	opts     Options
	path     string   // "" for a stream
	f        *os.File // the file (nil: a stream, or reopening failed)
	stream   io.Writer
	buf      *bufio.Writer
	size     int64 // bytes in the file
	pending  int   // lines in buf
	reported int64
	lastWarn time.Time
	warnErr  error
}

// Open opens (creating it, mode 0600) the file at path for appending, and
// returns its Log.
func Open(path string, opts *Options) (*Log, error) {
	l := newLog(opts)
	l.path = path
	if err := l.open(); err != nil {
		return nil, err
	}
	go l.run()
	return l, nil
}

// New returns a Log that writes to w, one Write a line (the standard
// error, shared with the process's log lines: a line is never split), and
// never rotates.
func New(w io.Writer, opts *Options) *Log {
	l := newLog(opts)
	l.stream = w
	go l.run()
	return l
}

func newLog(opts *Options) *Log {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	o.MaxBytes = max(o.MaxBytes, MinMaxBytes)
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	if o.PerPrincipal <= 0 {
		o.PerPrincipal = max(o.Buffer/8, 1)
	}
	return &Log{opts: o, ch: make(chan entry, o.Buffer), queued: map[string]int{}, done: make(chan struct{})}
}

// entry is a line waiting for the writer, with whose it is.
type entry struct {
	line []byte
	who  string
}

// reserve counts a line of who as waiting; false when who already has
// Options.PerPrincipal lines waiting.
func (l *Log) reserve(who string) bool {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if l.queued[who] >= l.opts.PerPrincipal {
		return false
	}
	l.queued[who]++
	return true
}

// release counts a line of who as no longer waiting.
func (l *Log) release(who string) {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if l.queued[who] <= 1 {
		delete(l.queued, who)
		return
	}
	l.queued[who]--
}

// Dropped is how many lines were dropped: the buffer was full, or writing
// them failed.
func (l *Log) Dropped() int64 {
	if l == nil {
		return 0
	}
	return l.dropped.Load()
}

// Written is how many lines were written.
func (l *Log) Written() int64 {
	if l == nil {
		return 0
	}
	return l.written.Load()
}

// Write encodes r and hands the line to the writer. It never waits: when
// the buffer is full (the file or stream is slower than the calls), or
// holds Options.PerPrincipal lines of r.Principal already, the line is
// dropped and counted.
func (l *Log) Write(r *Record) {
	if l == nil {
		return
	}
	line, ok := Encode(r)
	if !ok {
		l.dropped.Add(1)
		return
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	who := cut(r.Principal, maxPrincipalKey)
	if l.closed || !l.reserve(who) {
		l.dropped.Add(1)
		return
	}
	select {
	case l.ch <- entry{line, who}:
	default:
		l.release(who)
		l.dropped.Add(1)
	}
}

// maxPrincipalKey bounds the principal a waiting line is counted under.
const maxPrincipalKey = 256

// Close writes the lines still buffered and closes the file; lines
// written after it are dropped. It waits for the writer at most until ctx
// ends.
func (l *Log) Close(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.ch)
	}
	l.mu.Unlock()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("audit log: %d lines not written: %w", len(l.ch), ctx.Err())
	}
}

// line is a Record as written.
type line struct {
	Audit      string   `json:"audit"`
	Time       string   `json:"time"`
	Front      string   `json:"front"`
	Principal  string   `json:"principal,omitempty"`
	UserID     string   `json:"user_id,omitempty"`
	Upstream   string   `json:"upstream,omitempty"`
	Tool       string   `json:"tool,omitempty"`
	Outcome    string   `json:"outcome"`
	Status     int      `json:"status,omitempty"`
	DurationMS *float64 `json:"duration_ms,omitempty"`
	CallID     string   `json:"call_id,omitempty"`
	TraceID    string   `json:"trace_id,omitempty"`
	Args       []string `json:"args,omitempty"`
	Detail     string   `json:"detail,omitempty"`
}

// Encode is r as one line, its newline included; false when it would be
// longer than MaxLineBytes even without its Args and Detail (the cuts
// make that impossible; a line is never written past the bound).
func Encode(r *Record) ([]byte, bool) {
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	ln := line{
		Audit: cut(r.Kind, 32), Time: t.UTC().Format(time.RFC3339Nano), Front: cut(r.Front, 16),
		Principal: cut(r.Principal, 512), UserID: cut(r.UserID, 256), Upstream: cut(r.Upstream, 256), Tool: cut(r.Tool, 256),
		Outcome: cut(r.Outcome, 64), Status: r.Status, CallID: cut(r.CallID, 64), TraceID: cut(r.TraceID, 64),
		Detail: cut(r.Detail, 256),
	}
	if r.Kind == KindCall {
		ms := float64(r.Duration.Microseconds()) / 1000
		ln.DurationMS = &ms
	}
	for i, a := range r.Args {
		if i == maxArgs {
			break
		}
		ln.Args = append(ln.Args, cut(a, 64))
	}
	b, ok := encode(&ln)
	if !ok {
		ln.Args, ln.Detail = nil, ""
		b, ok = encode(&ln)
	}
	return b, ok
}

// maxArgs bounds Record.Args.
const maxArgs = 32

func encode(ln *line) ([]byte, bool) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ln); err != nil {
		return nil, false
	}
	b := escapeRest(buf.Bytes())
	if len(b) > MaxLineBytes {
		return nil, false
	}
	return b, true
}

// cut is s cut so that it is at most n bytes as the line writes it: each
// character counted at its written width (escaped, see width), the cut on
// a character's boundary.
func cut(s string, n int) string {
	used := 0
	for i, r := range s {
		w := width(r)
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				w = 6 // a byte that is not UTF-8: written \ufffd
			}
		}
		if used+w > n {
			return s[:i]
		}
		used += w
	}
	return s
}

// width is how many bytes r takes in a line: JSON's own escapes of the
// quote and the backslash, six or twelve for a character written as a \u
// escape (escaped), else its UTF-8 length.
func width(r rune) int {
	switch {
	case r == '"' || r == '\\':
		return 2
	case !escaped(r):
		return utf8.RuneLen(r)
	case r > 0xffff:
		return 12 // a UTF-16 surrogate pair
	}
	return 6
}

// escaped reports a character that a line never holds as it is, only as
// a \u escape: a control (C0, DEL, C1), a line or paragraph separator,
// or an invisible formatting character (Unicode category Cf: the bidi
// embeddings, overrides, isolates and marks, zero-width characters, the
// BOM, tags). A caller chooses some fields (a user_id, a tool name): as
// they are, such characters make one line read as two, act on the
// operator's terminal, or reverse what the operator reads; escaped, the
// operator sees them, and a JSON reader still gets the field as it was.
func escaped(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x2028 || r == 0x2029 || unicode.Is(unicode.Cf, r)
}

// escapeRest writes, in an encoded line, every escaped character that
// encoding/json leaves as it is (DEL, C1, Cf) as a \u escape (a surrogate
// pair beyond U+FFFF). Such characters occur only inside the line's
// strings, where a \u escape means the same character.
func escapeRest(b []byte) []byte {
	i := bytes.IndexFunc(b, func(r rune) bool { return r >= 0x7f && escaped(r) })
	if i < 0 {
		return b
	}
	out := make([]byte, 0, len(b)+64)
	out = append(out, b[:i]...)
	for len(b[i:]) > 0 {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r < 0x7f || !escaped(r) || (r == utf8.RuneError && size == 1):
			out = append(out, b[i:i+size]...)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}

// ArgNames are the names of the members of a call's arguments object (at
// most 32, in their order), never their values; nil when args is not an
// object.
func ArgNames(args []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(args))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var names []string
	for dec.More() && len(names) < maxArgs {
		tok, err := dec.Token()
		if err != nil {
			return names
		}
		name, _ := tok.(string)
		names = append(names, name)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return names
		}
	}
	return names
}

// --- the writer goroutine ---------------------------------------------------

const fileFlags = os.O_WRONLY | os.O_APPEND | os.O_CREATE

// open opens the file and learns its size.
func (l *Log) open() error {
	f, err := os.OpenFile(l.path, fileFlags, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("audit log: %w", err)
	}
	l.f, l.size = f, st.Size()
	if l.buf == nil {
		l.buf = bufio.NewWriterSize(f, 64<<10)
	} else {
		l.buf.Reset(f)
	}
	return nil
}

func (l *Log) run() {
	defer close(l.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case e, ok := <-l.ch:
			if !ok {
				l.finish()
				return
			}
			l.release(e.who)
			l.put(e.line)
			// Everything waiting goes in the same flush.
			for more := true; more; {
				select {
				case e, ok := <-l.ch:
					if !ok {
						l.finish()
						return
					}
					l.release(e.who)
					l.put(e.line)
				default:
					more = false
				}
			}
			l.flush()
			l.report(false)
		case <-tick.C:
			l.report(false)
		}
	}
}

// put writes one line: to the stream at once, to the file's buffer after
// rotating the file when the line would take it past MaxBytes.
func (l *Log) put(ln []byte) {
	if l.stream != nil {
		if _, err := l.stream.Write(ln); err != nil {
			l.fail(1, err)
			return
		}
		l.written.Add(1)
		return
	}
	if l.f == nil {
		// A rotation could not open the new file: try again.
		if err := l.open(); err != nil {
			l.fail(1, err)
			return
		}
	}
	if l.size > 0 && l.size+int64(len(ln)) > l.opts.MaxBytes {
		if err := l.rotate(); err != nil {
			l.fail(1, err)
			return
		}
	}
	_, _ = l.buf.Write(ln) // an error surfaces at flush
	l.size += int64(len(ln))
	l.pending++
}

// flush writes the file's buffer; on failure its lines are counted as
// dropped.
func (l *Log) flush() {
	if l.buf == nil || l.f == nil {
		return
	}
	n := l.pending
	l.pending = 0
	if err := l.buf.Flush(); err != nil {
		l.buf.Reset(l.f) // a bufio.Writer keeps its first error: start over
		l.fail(n, err)
		return
	}
	l.written.Add(int64(n))
}

// rotate renames PATH.i to PATH.i+1 (PATH.Keep is replaced), PATH to
// PATH.1, and opens a new PATH.
func (l *Log) rotate() error {
	l.flush()
	if err := l.f.Close(); err != nil {
		l.fail(0, err)
	}
	l.f = nil
	for i := l.opts.Keep - 1; i >= 1; i-- {
		if err := os.Rename(fmt.Sprintf("%s.%d", l.path, i), fmt.Sprintf("%s.%d", l.path, i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("audit log: rotating: %w", err)
		}
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("audit log: rotating: %w", err)
	}
	return l.open()
}

func (l *Log) finish() {
	l.flush()
	if l.f != nil {
		if err := l.f.Sync(); err != nil {
			l.fail(0, err)
		}
		_ = l.f.Close()
		l.f = nil
	}
	l.report(true)
}

// fail counts n lines dropped for err and reports it.
func (l *Log) fail(n int, err error) {
	l.dropped.Add(int64(n))
	l.warnErr = err
	l.report(false)
}

// report tells Options.Warn of new drops or an error, at most every
// reportEvery (always when final).
func (l *Log) report(final bool) {
	if l.opts.Warn == nil {
		return
	}
	d := l.dropped.Load()
	if d == l.reported && l.warnErr == nil {
		return
	}
	if !final && !l.lastWarn.IsZero() && time.Since(l.lastWarn) < reportEvery {
		return
	}
	l.opts.Warn(d, l.warnErr)
	l.reported, l.warnErr, l.lastWarn = d, nil, time.Now()
}
