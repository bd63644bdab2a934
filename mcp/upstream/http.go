package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
)

// probeKey marks the context of a request whose first HTTP exchange is
// observed by roundTripper.
type probeKey struct{}

// headerKey carries per-call HTTP headers to headerFunc.
type headerKey struct{}

// sendProbe records whether a request was written to the network and the
// status it got: a request that was never written did not reach the tool.
type sendProbe struct {
	first    atomic.Bool
	wrote    atomic.Bool
	status   atomic.Int32
	tooLarge atomic.Bool // a message of its responses was over the limit
	// errBody is the start (errBodyKeep bytes at most) of the body of an
	// HTTP error answer: mcp-go's streamable HTTP transport drops the body
	// of a 404, and of any 4xx to initialize (mcpgo_compat.go), where a
	// modern server's JSON-RPC error says which versions it speaks.
	errBody atomic.Pointer[[]byte]
	// resumes counts the GETs with Last-Event-ID that resumed the
	// request's response stream (see maxStreamResumes).
	resumes atomic.Int32
}

// maxStreamResumes bounds how many times one request's response stream is
// resumed. Before 2026-07-28 a server may end a response stream before the
// response once it sent an event id, and the client reconnects with GET
// and Last-Event-ID after the server's retry: delay (SEP-1699; mcp-go
// v1.2.1's StreamableHTTP does it, waiting at least 10 ms, but as often as
// the server ends the stream). The request's own deadline bounds the time
// (CallTimeout for a call); this bounds the attempts, so that a server
// ending every stream at once cannot have the bridge reconnect a hundred
// times a second for a minute.
const maxStreamResumes = 100

// errTooManyResumes fails a resumption past maxStreamResumes.
var errTooManyResumes = fmt.Errorf("the server ended the response stream %d times without the response", maxStreamResumes)

// roundTripper observes the first HTTP exchange of a probed request,
// bounds the messages of every response body (limitBody) and, for a
// legacy SSE upstream (sse set), filters the event stream.
type roundTripper struct {
	base http.RoundTripper
	u    *Upstream
	sse  bool
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	auth := rt.u.cfg.Auth
	if auth == nil {
		return rt.roundTrip(req)
	}
	// Config.Auth: the request carries the caller's token, and a 401 or
	// 403 goes to the Authorizer, which may get a token at once (then the
	// request is sent again, once) or return why it cannot.
	sent, err := auth.Authorization(req.Context())
	if err != nil {
		return nil, err
	}
	resp, err := rt.roundTrip(withAuthorization(req, sent))
	if err != nil || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
		return resp, err
	}
	retry, aerr := auth.Unauthorized(req.Context(), sent, resp)
	switch {
	case aerr != nil:
		drain(resp.Body)
		return nil, aerr
	case !retry || (req.Body != nil && req.GetBody == nil):
		return resp, nil
	}
	again, err := auth.Authorization(req.Context())
	if err != nil || again == "" || again == sent {
		return resp, nil
	}
	drain(resp.Body)
	req2 := withAuthorization(req, again)
	if req.GetBody != nil {
		if req2.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	resp, err = rt.roundTrip(req2)
	if p, _ := req.Context().Value(probeKey{}).(*sendProbe); p != nil && resp != nil {
		p.status.Store(int32(resp.StatusCode)) // the answer that counts
	}
	return resp, err
}

// withAuthorization is req with its Authorization header set to h (none
// when h is "").
func withAuthorization(req *http.Request, h string) *http.Request {
	if h == "" {
		return req
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", h)
	return r
}

// drain reads a little of an unused body, so that its connection can be
// reused, and closes it.
func drain(b io.ReadCloser) {
	if b == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, b, 64<<10)
	_ = b.Close()
}

func (rt *roundTripper) roundTrip(req *http.Request) (*http.Response, error) {
	var resp *http.Response
	var err error
	p, _ := req.Context().Value(probeKey{}).(*sendProbe)
	if p != nil && req.Method == http.MethodGet && req.Header.Get("Last-Event-ID") != "" {
		// mcp-go resuming this request's response stream.
		n := p.resumes.Add(1)
		if n > maxStreamResumes {
			return nil, errTooManyResumes
		}
		rt.u.log.Debug("the server ended the response stream before the response; resuming it", "attempt", n)
	}
	if p == nil || !p.first.CompareAndSwap(false, true) {
		resp, err = rt.base.RoundTrip(req)
	} else {
		trace := &httptrace.ClientTrace{
			// net/http sends a request again on a new connection when the
			// one it reused was closed by the server while idle (it judges
			// the request unread): each attempt starts with GetConn, and
			// only the last attempt's write counts. Otherwise a call to a
			// server that just went away (connection refused on the new
			// attempt) would count as sent, its outcome unknown.
			GetConn: func(string) { p.wrote.Store(false) },
			WroteRequest: func(i httptrace.WroteRequestInfo) {
				if i.Err == nil {
					p.wrote.Store(true)
				}
			},
		}
		resp, err = rt.base.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
		if resp != nil {
			p.wrote.Store(true)
			p.status.Store(int32(resp.StatusCode))
		}
	}
	if err != nil {
		return resp, err
	}
	if p != nil && resp.StatusCode >= 400 && resp.Body != nil && resp.Body != http.NoBody {
		keepErrBody(p, resp)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if rt.sse && req.Method == http.MethodGet && resp.StatusCode == http.StatusOK && mt == "text/event-stream" {
		resp.Body = &sseBody{u: rt.u, stream: req.URL, src: resp.Body, br: bufio.NewReader(resp.Body)}
	} else if resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = &limitBody{u: rt.u, src: resp.Body, max: rt.u.cfg.MaxMessageBytes, events: mt == "text/event-stream", probe: p}
	}
	return resp, err
}

// keepErrBody reads the start of an error answer's body into p.errBody;
// the body still reads whole.
func keepErrBody(p *sendProbe, resp *http.Response) {
	head := make([]byte, errBodyKeep)
	n, err := io.ReadFull(resp.Body, head)
	head = head[:n]
	p.errBody.Store(&head)
	rest := resp.Body
	if err != nil { // the whole body was read
		_ = rest.Close()
		resp.Body = io.NopCloser(bytes.NewReader(head))
		return
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), rest), rest}
}

// limitBody bounds the messages of an HTTP response body: the whole body
// (a JSON answer, an error page), or each event of an event stream. mcp-go
// v1.2.1's streamable HTTP transport decodes a JSON answer with
// json.Decoder (which buffers the whole value), reads an error body with
// io.ReadAll and an event stream with bufio.Reader.ReadString('\n')
// (StreamableHTTP.SendRequest, readSSEWithCursor): none is bounded. So the
// first passMax bytes of a message pass at once; the rest is held here
// (in pieces, without doubling copies) until the message ends within the
// limit, and then passed on: mcp-go never buffers more than passMax of a
// message over the limit.
//
// When a message passes the limit, the response of a request (probe set:
// a call, tools/list…) fails: the probe is marked, so that the request
// fails with ErrTooLarge, and the body returns an error, which ends mcp-go's
// read (closing the body drops the connection rather than reading the
// rest). Any other stream (the GET stream of notifications) drops that
// event and goes on: mcp-go gets its start ended by a blank line, which it
// cannot decode and skips.
type limitBody struct {
	u      *Upstream
	src    io.ReadCloser
	max    int64
	events bool
	probe  *sendProbe
	n      int64    // bytes of the current message
	line   int64    // events: bytes of the current line, '\r' and '\n' excluded
	skip   bool     // events: dropping the rest of an event over the limit
	held   [][]byte // bytes of the current message past passMax
	// q is what the reader gets next, in order: pieces of buf (valid until
	// the next read of src, which waits for q to be empty) and held pieces.
	q      [][]byte
	buf    []byte
	srcErr error
	err    error
}

var errUpTooLarge = errors.New("message over the limit")

func (b *limitBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	for len(b.q) == 0 {
		if b.srcErr != nil {
			return 0, b.srcErr
		}
		if b.buf == nil {
			b.buf = make([]byte, 32<<10)
		}
		n, err := b.src.Read(b.buf)
		ok := false
		if b.events {
			ok = b.filter(b.buf[:n])
		} else {
			ok = b.take(b.buf[:n])
		}
		if !ok {
			return b.fail()
		}
		if err != nil {
			b.srcErr = err
			b.flush() // the end of the body ends its message
		}
	}
	n := copy(p, b.q[0])
	if b.q[0] = b.q[0][n:]; len(b.q[0]) == 0 {
		b.q[0] = nil
		b.q = b.q[1:]
	}
	return n, nil
}

// take passes or holds seg, the next bytes of the current message; false
// when the message is over the limit.
func (b *limitBody) take(seg []byte) bool {
	pass := min(passMax, b.max)
	if b.n+int64(len(seg)) > b.max {
		return false
	}
	if b.n < pass {
		k := min(int64(len(seg)), pass-b.n)
		if k > 0 {
			b.q = append(b.q, seg[:k])
		}
		b.n += k
		seg = seg[k:]
	}
	b.n += int64(len(seg))
	b.held = holdCopy(b.held, seg)
	return true
}

// flush passes the held bytes on: their message ended within the limit.
func (b *limitBody) flush() {
	b.q = append(b.q, b.held...)
	b.held = nil
}

// filter takes bytes of an event stream, event by event; false when the
// request must fail.
func (b *limitBody) filter(p []byte) bool {
	for len(p) > 0 {
		j := bytes.IndexByte(p, '\n')
		seg := p
		if j >= 0 {
			seg = p[:j+1]
		}
		p = p[len(seg):]
		content := int64(len(bytes.TrimRight(seg, "\r\n")))
		if !b.skip && !b.take(seg) {
			if b.probe != nil {
				return false
			}
			b.u.log.Warn("upstream event over the message limit dropped", "limit", b.max)
			b.skip, b.held = true, nil
			b.q = append(b.q, []byte("\n\n"))
		}
		if j < 0 {
			b.line += content
			continue
		}
		if b.line == 0 && content == 0 { // a blank line ends the event
			b.flush()
			b.n, b.skip = 0, false
		}
		b.line = 0
	}
	return true
}

func (b *limitBody) fail() (int, error) {
	if b.probe != nil {
		b.probe.tooLarge.Store(true)
	}
	b.u.log.Warn("upstream answer over the message limit dropped; the request fails", "limit", b.max)
	b.err = errUpTooLarge
	return 0, b.err
}

func (b *limitBody) Close() error { return b.src.Close() }

func (rt *roundTripper) CloseIdleConnections() {
	if c, ok := rt.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// maxIdleConns bounds the connections the default client keeps open to an
// HTTP upstream between calls (each an idle socket and its buffers, closed
// after the transport's idle timeout). A pool smaller than the calls in
// flight closes the surplus when a burst ends and dials it again at the
// next; this one keeps a burst of a thousand calls' connections.
const maxIdleConns = 1024

// newHTTPClient returns the client of upstream u: base (or a pooled
// default) with its transport observed; sse tells a legacy SSE upstream.
func newHTTPClient(base *http.Client, u *Upstream, sse bool) *http.Client {
	var c http.Client
	var rt http.RoundTripper
	if base != nil {
		c = *base
		rt = base.Transport
	}
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns, t.MaxIdleConnsPerHost = maxIdleConns, maxIdleConns
		rt = t
	}
	c.Transport = &roundTripper{base: rt, u: u, sse: sse}
	return &c
}

// reservedHeader reports headers the transports or the protocol set
// themselves (2026-07-28: Mcp-Method, Mcp-Name and Mcp-Param-* mirror the
// request body, and a mismatch is refused).
func reservedHeader(canonical string) bool {
	switch canonical {
	case "Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Host",
		"Content-Length", "Last-Event-Id", "Connection", "Transfer-Encoding",
		"Mcp-Method", "Mcp-Name":
		return true
	}
	return strings.HasPrefix(canonical, "Mcp-Param-")
}

// staticHeaders flattens Config.Headers for mcp-go's header hooks.
func (u *Upstream) staticHeaders(h http.Header) map[string]string {
	m := make(map[string]string, len(h))
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		if reservedHeader(ck) {
			u.log.Warn("ignoring a configured header that the transport sets itself", "header", ck)
			continue
		}
		if len(vs) > 0 {
			m[ck] = strings.Join(vs, ", ")
		}
	}
	return m
}

// headerFunc gives mcp-go's HTTP transports the headers of a request: the
// static ones, overridden by the per-call ones carried in ctx. The
// transports apply them after their own, hence the reserved names.
func (u *Upstream) headerFunc(ctx context.Context) map[string]string {
	h, _ := ctx.Value(headerKey{}).(http.Header)
	if len(h) == 0 {
		return u.headers // read only
	}
	m := maps.Clone(u.headers)
	if m == nil {
		m = make(map[string]string, len(h))
	}
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		if reservedHeader(ck) || len(vs) == 0 {
			continue
		}
		m[ck] = strings.Join(vs, ", ")
	}
	return m
}

// safeError is the text of a transport error fit for logs, status and
// error messages: a URL in it loses its query and credentials, and the
// text is bounded (an HTTP error may quote the response body).
func safeError(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		s = ue.Op + " " + redactURLString(ue.URL) + ": " + ue.Err.Error()
	}
	const limit = 300
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "") + "…"
	}
	return s
}

func redactURLString(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(url)"
	}
	return redactURL(u)
}

// redactURL drops the credentials, query and fragment of u.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery, c.ForceQuery = "", false
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// sseBody is the event stream of a legacy SSE upstream as mcp-go's SSE
// transport reads it. That transport cannot answer server→client requests
// (it would take one for the response of a pending request with the same
// id, or drop it, and the server would wait): they are answered here and
// taken out of the stream. Every other event passes byte for byte.
//
// Events are bounded by MaxMessageBytes: mcp-go v1.2.1's SSE transport
// reads the stream with bufio.Reader.ReadString('\n') (SSE.readSSE), which
// holds a line however long it is. An event over the limit is dropped as
// it arrives, keeping the first and last bytes of its data to find its
// "id" (see lineBounder): an answer becomes a synthetic error event for its id
// (that call fails with ErrTooLarge), a server request is answered with a
// JSON-RPC error, a notification is dropped, and without an id the stream
// fails (the upstream reconnects).
type sseBody struct {
	u      *Upstream
	stream *url.URL // the GET's URL, against which the endpoint is resolved
	src    io.ReadCloser
	br     *bufio.Reader

	out      []byte // ready for the reader
	ev       []byte // the raw lines of the event being read
	event    string
	data     []byte
	line     []byte   // the line being read, when it comes in pieces
	size     int64    // bytes of the event so far
	over     *sseOver // the event is over the limit
	endpoint *url.URL // where messages are POSTed, from the endpoint event
	err      error
}

// sseOver is what is kept of an event over the limit.
type sseOver struct {
	head     []byte // the first bytes of its data
	tail     ring   // the last bytes of its data
	inLine   bool   // in the middle of a line
	dataLine bool   // that line is a data line
	dataSeen bool
}

func (o *sseOver) addData(p []byte) {
	if room := headKeep - len(o.head); room > 0 {
		o.head = append(o.head, p[:min(len(p), room)]...)
	}
	o.tail.write(p)
}

func (o *sseOver) startDataLine() {
	if o.dataSeen {
		o.addData([]byte("\n"))
	}
	o.dataSeen = true
}

func (b *sseBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		piece, err := b.br.ReadSlice('\n')
		if len(piece) > 0 {
			b.piece(piece)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if b.over == nil { // an unfinished event, as it came
				b.out = append(b.out, b.ev...)
				b.out = append(b.out, b.line...)
			}
			b.ev, b.line, b.data, b.over = nil, nil, nil, nil
			b.err = err
		}
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

func (b *sseBody) Close() error { return b.src.Close() }

// piece takes a piece of a line (ReadSlice's: valid until the next read).
func (b *sseBody) piece(piece []byte) {
	b.size += int64(len(piece))
	if b.over == nil && b.size > b.u.cfg.MaxMessageBytes {
		b.goOver()
	}
	if b.over != nil {
		b.overPiece(piece)
		return
	}
	if piece[len(piece)-1] != '\n' {
		b.line = append(b.line, piece...)
		return
	}
	if len(b.line) > 0 {
		b.line = append(b.line, piece...)
		piece = b.line
	}
	blank := b.lineDone(piece)
	b.line = b.line[:0]
	if blank {
		b.size = 0
	}
}

// lineDone takes one line of the stream, '\n' included, and reports
// whether it was blank (the end of an event).
func (b *sseBody) lineDone(line []byte) bool {
	b.ev = append(b.ev, line...)
	s := bytes.TrimRight(line, "\r\n")
	if len(s) != 0 {
		if v, ok := bytes.CutPrefix(s, []byte("event:")); ok {
			b.event = string(bytes.TrimSpace(v))
		} else if v, ok := bytes.CutPrefix(s, []byte("data:")); ok {
			v = bytes.TrimPrefix(v, []byte(" "))
			if len(b.data) > 0 {
				b.data = append(b.data, '\n')
			}
			b.data = append(b.data, v...)
		}
		return false
	}
	ev, event, data := b.ev, b.event, string(b.data)
	b.ev, b.event, b.data = nil, "", nil
	switch event {
	case "endpoint":
		if e, err := b.stream.Parse(data); err == nil && e.Host == b.stream.Host {
			b.endpoint = e
		}
	case "", "message":
		if b.serverRequest(data) {
			return true
		}
	}
	b.out = append(b.out, ev...)
	return true
}

// goOver starts dropping the event being read, keeping the ends of its data.
func (b *sseBody) goOver() {
	o := &sseOver{dataSeen: len(b.data) > 0}
	o.addData(b.data)
	if len(b.line) > 0 {
		o.inLine = true
		if v, ok := bytes.CutPrefix(b.line, []byte("data:")); ok {
			o.startDataLine()
			o.addData(bytes.TrimPrefix(v, []byte(" ")))
			o.dataLine = true
		}
	}
	b.over = o
	b.ev, b.line, b.data, b.event = nil, nil, nil, ""
}

// overPiece takes a piece of a line of an event over the limit.
func (b *sseBody) overPiece(piece []byte) {
	o := b.over
	complete := piece[len(piece)-1] == '\n'
	content := piece
	if complete {
		content = bytes.TrimRight(piece, "\r\n")
	}
	switch {
	case o.inLine:
		if o.dataLine {
			o.addData(content)
		}
	case complete && len(content) == 0:
		b.endOver()
		return
	default:
		o.dataLine = false
		if v, ok := bytes.CutPrefix(content, []byte("data:")); ok {
			o.startDataLine()
			o.addData(bytes.TrimPrefix(v, []byte(" ")))
			o.dataLine = true
		}
	}
	o.inLine = !complete
}

// endOver handles the end of an event over the limit.
func (b *sseBody) endOver() {
	var e msgEnds
	e.scanHead(b.over.head)
	e.scanTail(b.over.tail.bytes())
	size, limit := b.size, b.u.cfg.MaxMessageBytes
	b.over, b.size = nil, 0
	log := b.u.log.With("size", size, "limit", limit)
	switch {
	case e.id != nil && !e.method:
		log.Warn("upstream answer over the message limit dropped; the request it answers fails", "id", string(e.id))
		b.out = append(b.out, "event: message\ndata: "...)
		b.out = append(b.out, b.u.tooLargeAnswer(e.id, size)...)
		b.out = append(b.out, "\n\n"...)
	case e.id != nil:
		log.Warn("upstream request over the message limit dropped and refused", "id", string(e.id))
		if b.endpoint != nil {
			endpoint := *b.endpoint
			answer := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":%s}}`,
				e.id, strconv.Quote(fmt.Sprintf("request of %d bytes over the client's %d-byte message limit", size, limit)))
			go b.u.postOverSSE(&endpoint, answer, "")
		}
	case e.method:
		log.Warn("upstream notification over the message limit dropped")
	default:
		log.Error("upstream message over the message limit without a readable id; reconnecting")
		b.err = fmt.Errorf("mcp: an event of %d bytes over the %d-byte limit without a readable id", size, limit)
	}
}

// serverRequest answers data in the background when it is a server→client
// request, and reports whether it was one.
func (b *sseBody) serverRequest(data string) bool {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal([]byte(data), &m) != nil || m.Method == "" || len(m.ID) == 0 || string(m.ID) == "null" {
		return false
	}
	if b.endpoint == nil {
		return false
	}
	endpoint := *b.endpoint
	go b.u.answerOverSSE(&endpoint, m.ID, m.Method, m.Params)
	return true
}

// answerOverSSE POSTs the answer to a server→client request of a legacy
// SSE upstream.
func (u *Upstream) answerOverSSE(endpoint *url.URL, id json.RawMessage, method string, params json.RawMessage) {
	result, code, msg := u.answerServerRequest(context.Background(), method, params)
	answer := map[string]any{"jsonrpc": "2.0", "id": id}
	if code != 0 {
		answer["error"] = map[string]any{"code": code, "message": msg}
	} else {
		answer["result"] = result
	}
	body, err := json.Marshal(answer)
	if err != nil {
		return
	}
	u.postOverSSE(endpoint, body, method)
}

// postOverSSE POSTs the bridge's answer to a server→client request of a
// legacy SSE upstream; method names it in logs.
func (u *Upstream) postOverSSE(endpoint *url.URL, body []byte, method string) {
	ctx, cancel := context.WithTimeout(u.ctx, pingTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return
	}
	for k, v := range u.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := u.httpClient.Do(req)
	if err != nil {
		u.log.Debug("answer to a server request not sent", "method", method, "error", safeError(err))
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		u.log.Debug("answer to a server request refused", "method", method, "status", resp.StatusCode)
	}
}
