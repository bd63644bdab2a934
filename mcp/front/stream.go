package front

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/mcp/internal/jsonscan"
)

// How coded errors reach the wire
//
// mcp-go answers every handler error with -32603 and offers no way to pick
// the code. The front does not replace any part of mcp-go; it watches it:
//
//  1. Each transport instance puts a streamBook in the context of the
//     requests it serves (one per stdio run, per legacy SSE session, per
//     streamable HTTP POST).
//  2. The OnError hook, which mcp-go runs before it returns the error
//     response, finds the handler's *RPCError and records its error object
//     in that stream under the request id.
//  3. The writer wrapped around the transport's output (stdout, the SSE
//     stream, the POST's JSON or SSE body) parses a frame only while its
//     stream has something recorded; when the frame is an error response
//     whose id has an entry, it takes the entry and splices the recorded
//     object over the frame's "error" value. Every other byte is kept.
//
// Recording happens before the frame exists, in the goroutine that goes on
// to write (or queue) it, so the entry is always there in time; an entry is
// used once; entries whose frame never comes (client gone) are bounded.

// coded is a coded error waiting for its response frame, or the encoded
// tools of a tools/list result (toolslist.go).
type coded struct {
	obj    []byte // the JSON-RPC error object to send
	code   int
	modern bool   // the request used protocol 2026-07-28: the HTTP status follows the code
	tools  []byte // instead: the JSON array to put over result.tools
}

// streamBook is the bookkeeping of one transport instance.
type streamBook struct {
	max int
	// trackOpen (legacy SSE) remembers tools/call requests until their
	// response is written, so that a shutdown can wait for them.
	trackOpen bool

	busy atomic.Int64 // len(pending) + len(opened): zero lets frames pass unparsed

	mu      sync.Mutex
	seq     uint64
	pending map[string]pendingEntry
	opened  map[string]uint64 // id → seq
}

type pendingEntry struct {
	coded
	seq uint64
}

func newFrontStream(max int, trackOpen bool) *streamBook {
	return &streamBook{max: max, trackOpen: trackOpen,
		pending: make(map[string]pendingEntry), opened: make(map[string]uint64)}
}

type streamKey struct{}

func streamFrom(ctx context.Context) *streamBook {
	st, _ := ctx.Value(streamKey{}).(*streamBook)
	return st
}

// idKey is the canonical form of a JSON-RPC id: the JSON of its Go
// value as mcp-go decodes it (float64 or string), so that the hook's id and
// the id read back from the frame agree.
func idKey(id any) string {
	b, err := json.Marshal(id)
	if err != nil {
		return ""
	}
	return string(b)
}

// put records c for the response to request key and reports whether the
// oldest entry had to be dropped to stay within max.
func (st *streamBook) put(key string, c coded) (evicted bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.seq++
	st.pending[key] = pendingEntry{c, st.seq}
	if len(st.pending) > st.max {
		oldest, min := "", ^uint64(0)
		for k, e := range st.pending {
			if e.seq < min {
				oldest, min = k, e.seq
			}
		}
		delete(st.pending, oldest)
		evicted = true
	}
	st.busy.Store(int64(len(st.pending) + len(st.opened)))
	return evicted
}

// open notes a request whose response has not been written yet.
func (st *streamBook) open(key string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.seq++
	st.opened[key] = st.seq
	if len(st.opened) > st.max {
		oldest, min := "", ^uint64(0)
		for k, s := range st.opened {
			if s < min {
				oldest, min = k, s
			}
		}
		delete(st.opened, oldest)
	}
	st.busy.Store(int64(len(st.pending) + len(st.opened)))
}

// openCount is the number of requests whose response was not written yet.
func (st *streamBook) openCount() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.opened)
}

// process returns the frame to write in place of frame and the coded error
// it applied, if any (then the result is a new slice).
func (st *streamBook) process(frame []byte) ([]byte, *coded) {
	p, c := st.pieces(frame)
	if c == nil {
		return frame, nil
	}
	out := make([]byte, 0, len(p[0])+len(p[1])+len(p[2]))
	return append(append(append(out, p[0]...), p[1]...), p[2]...), c
}

// pieces is process without the copy: the frame to write is p[0], p[1],
// p[2] one after the other (p[0] alone, the frame, when c is nil). A
// tools/list answer is written from them as they are, the encoded tools
// in place, not copied into one more buffer of their size.
func (st *streamBook) pieces(frame []byte) (p [3][]byte, c *coded) {
	p[0] = frame
	if st.busy.Load() == 0 {
		return p, nil
	}
	f, ok := parseFrame(frame)
	if !ok || !f.response {
		return p, nil
	}
	var id any
	if json.Unmarshal(f.id, &id) != nil {
		return p, nil
	}
	key := idKey(id)

	st.mu.Lock()
	delete(st.opened, key)
	e, ok := st.pending[key]
	delete(st.pending, key) // this id's response is written now, whatever it is
	st.busy.Store(int64(len(st.pending) + len(st.opened)))
	st.mu.Unlock()
	if !ok {
		return p, nil
	}
	from, to, with := f.errStart, f.errEnd, e.obj
	if e.tools != nil {
		from, to = toolsValue(frame, f)
		with = e.tools
	}
	if from < 0 {
		return p, nil
	}
	return [3][]byte{frame[:from], with, frame[to:]}, &e.coded
}

// frameInfo locates what the front needs in a JSON-RPC message.
type frameInfo struct {
	id               json.RawMessage
	response         bool // has an id and no method
	errStart, errEnd int  // the "error" value, or -1
	resStart, resEnd int  // the "result" value, or -1
}

// toolsValue locates the value of result.tools in frame, or -1, -1.
func toolsValue(frame []byte, f frameInfo) (start, end int) {
	if f.resStart < 0 {
		return -1, -1
	}
	members, ok := topMembers(frame[f.resStart:f.resEnd])
	if !ok {
		return -1, -1
	}
	m := lastMember(members, "tools")
	if m == nil {
		return -1, -1
	}
	return f.resStart + m.start, f.resStart + m.end
}

// parseFrame walks the top level of a JSON object without decoding
// its values. It reports false for anything else (batches included).
func parseFrame(b []byte) (frameInfo, bool) {
	f := frameInfo{errStart: -1, errEnd: -1, resStart: -1, resEnd: -1}
	members, ok := topMembers(b)
	if !ok {
		return f, false
	}
	hasMethod := false
	for _, m := range members {
		switch m.key {
		case "id":
			f.id = json.RawMessage(b[m.start:m.end])
		case "method":
			hasMethod = true
		case "error":
			f.errStart, f.errEnd = m.start, m.end
		case "result":
			f.resStart, f.resEnd = m.start, m.end
		}
	}
	f.response = f.id != nil && !hasMethod
	return f, true
}

// member is a member of a JSON object: its key, and where its value
// lies in the object's text.
type member struct {
	key        string
	start, end int
}

// topMembers returns the members of the JSON object b, in order, without
// decoding their values. It reports false for anything else (batches
// included) and for trailing data.
func topMembers(b []byte) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var members []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := t.(string)
		start := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		end := int(dec.InputOffset())
		for start < end && (b[start] == ':' || jsonscan.IsSpace(b[start])) {
			start++
		}
		members = append(members, member{key, start, end})
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // trailing data
	}
	return members, true
}

// processEvent applies process to the data of one server-sent event (its
// lines and the blank line ending it). A rewritten event keeps its other
// fields and carries the frame where its data lines were, a data line per
// line of the frame.
func (st *streamBook) processEvent(ev []byte) []byte {
	if st.busy.Load() == 0 {
		return ev
	}
	var data [][]byte
	for rest := ev; len(rest) > 0; {
		line, next := cutLine(rest)
		rest = next
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(v, []byte(" ")))
		}
	}
	if len(data) == 0 {
		return ev
	}
	frame, c := st.process(bytes.Join(data, []byte("\n")))
	if c == nil {
		return ev
	}
	out := make([]byte, 0, len(ev)+len(frame))
	written := false
	for rest := ev; len(rest) > 0; {
		line, next := cutLine(rest)
		term := rest[len(line) : len(rest)-len(next)]
		rest = next
		if bytes.HasPrefix(line, []byte("data:")) {
			if written {
				continue
			}
			written = true
			// One data line per line of the frame: the client joins them
			// with \n, which gives the frame back.
			for i, l := range bytes.Split(frame, []byte("\n")) {
				if i > 0 {
					out = append(out, term...)
				}
				out = append(out, "data: "...)
				out = append(out, l...)
			}
		} else {
			out = append(out, line...)
		}
		out = append(out, term...)
	}
	return out
}

// cutLine splits off the first line of b, without its \n or \r\n.
func cutLine(b []byte) (line, rest []byte) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil
	}
	return bytes.TrimSuffix(b[:i], []byte("\r")), b[i+1:]
}

// eventEnd returns the length of the first complete event in b (up to
// and including the blank line that ends it), or -1.
func eventEnd(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		line := bytes.TrimSuffix(b[i:i+j], []byte("\r"))
		i += j + 1
		if len(line) == 0 {
			return i
		}
	}
}

// lineWriter is stdout for ServeStdio: newline-delimited frames.
type lineWriter struct {
	w   io.Writer
	st  *streamBook
	mu  sync.Mutex
	buf []byte // an incomplete line
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if len(lw.buf) == 0 && lw.st.busy.Load() == 0 && bytes.HasSuffix(p, []byte("\n")) {
		return lw.w.Write(p)
	}
	lw.buf = append(lw.buf, p...)
	var out []byte
	for {
		i := bytes.IndexByte(lw.buf, '\n')
		if i < 0 {
			break
		}
		p, _ := lw.st.pieces(lw.buf[:i])
		out = append(append(append(append(out, p[0]...), p[1]...), p[2]...), '\n')
		lw.buf = lw.buf[i+1:]
	}
	lw.buf = append([]byte(nil), lw.buf...)
	if len(out) > 0 {
		if _, err := lw.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

type streamMode int

const (
	undecided streamMode = iota
	passthrough
	buffered // one JSON body, written by finish
	events   // text/event-stream, rewritten event by event
)

// responseWriter wraps the http.ResponseWriter of a streamable HTTP
// POST or of a legacy SSE stream. It implements http.Flusher, which mcp-go
// requires to stream; call finish once the handler has returned.
type responseWriter struct {
	w  http.ResponseWriter
	st *streamBook

	mu     sync.Mutex
	mode   streamMode
	status int
	body   bytes.Buffer // buffered: the body; events: an incomplete event
}

func newFrontResponseWriter(w http.ResponseWriter, st *streamBook) *responseWriter {
	return &responseWriter{w: w, st: st}
}

func (rw *responseWriter) Header() http.Header         { return rw.w.Header() }
func (rw *responseWriter) Unwrap() http.ResponseWriter { return rw.w }

func (rw *responseWriter) WriteHeader(code int) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.writeHeader(code)
}

// writeHeader picks the mode from the Content-Type. A JSON body is held
// back only when a coded error is pending: mcp-go records it before it
// writes the header of a JSON response.
func (rw *responseWriter) writeHeader(code int) {
	if rw.mode != undecided {
		return
	}
	if code < 200 {
		rw.w.WriteHeader(code) // informational
		return
	}
	mt, _, _ := mime.ParseMediaType(rw.w.Header().Get("Content-Type"))
	switch {
	case mt == "text/event-stream":
		rw.mode = events
	case mt == "application/json" && rw.st.busy.Load() > 0:
		rw.mode, rw.status = buffered, code
		return
	default:
		rw.mode = passthrough
	}
	rw.w.WriteHeader(code)
}

func (rw *responseWriter) Write(p []byte) (int, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.writeHeader(http.StatusOK)
	switch rw.mode {
	case buffered:
		return rw.body.Write(p)
	case events:
		rw.body.Write(p)
		var out []byte
		for {
			n := eventEnd(rw.body.Bytes())
			if n < 0 {
				break
			}
			out = append(out, rw.st.processEvent(rw.body.Next(n))...)
		}
		if len(out) > 0 {
			if _, err := rw.w.Write(out); err != nil {
				return 0, err
			}
		}
		return len(p), nil
	default:
		return rw.w.Write(p)
	}
}

func (rw *responseWriter) Flush() {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.writeHeader(http.StatusOK)
	if rw.mode != buffered {
		_ = http.NewResponseController(rw.w).Flush()
	}
}

// finish writes what is held back: the JSON body (rewritten when its
// response has a coded error; for a 2026-07-28 request the HTTP status then
// follows the new code, as mcp-go does) or an unterminated last event.
func (rw *responseWriter) finish() {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	switch rw.mode {
	case buffered:
		body := rw.body.Bytes()
		frame := bytes.TrimRight(body, "\r\n")
		p, c := rw.st.pieces(frame)
		if c != nil && c.modern {
			rw.status = httpStatus(c.code)
		}
		pieces := [...][]byte{p[0], p[1], p[2], body[len(frame):]}
		n := 0
		for _, b := range pieces {
			n += len(b)
		}
		rw.w.Header().Set("Content-Length", strconv.Itoa(n))
		rw.w.WriteHeader(rw.status)
		for _, b := range pieces {
			if _, err := rw.w.Write(b); err != nil {
				break
			}
		}
	case events:
		if rw.body.Len() > 0 {
			_, _ = rw.w.Write(rw.body.Bytes())
		}
	}
	rw.body.Reset()
}

// httpStatus is mcp-go's mapping of a JSON-RPC error code to the HTTP
// status of a 2026-07-28 JSON response (streamable_http_modern.go).
func httpStatus(code int) int {
	switch code {
	case mcpgo.METHOD_NOT_FOUND:
		return http.StatusNotFound
	case mcpgo.HEADER_MISMATCH, mcpgo.MISSING_REQUIRED_CLIENT_CAPABILITY,
		mcpgo.UNSUPPORTED_PROTOCOL_VERSION, mcpgo.INVALID_REQUEST,
		mcpgo.INVALID_PARAMS, mcpgo.PARSE_ERROR:
		return http.StatusBadRequest
	default:
		return http.StatusOK
	}
}
