package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Timings that are not worth a configuration field.
const (
	killWait        = 2 * time.Second  // after SIGKILL, for the child to be reaped
	transportClose  = 2 * time.Second  // for mcp-go's transport Close (an HTTP DELETE)
	pingTimeout     = 10 * time.Second // for one health ping
	cancelTimeout   = 5 * time.Second  // for sending notifications/cancelled
	exitReasonWait  = 500 * time.Millisecond
	sseResponseWait = 24 * time.Hour // mcp-go's SSE response timeout: calls are bounded by their context
)

// errSessionGone is returned by listTools when an HTTP upstream no longer
// knows the session (404): re-initialize, then list again.
var errSessionGone = errors.New("mcp: upstream session terminated")

// connection is one connection to the upstream: one child process, one HTTP
// session or one in-process session. Raw JSON-RPC requests are sent with
// mcp-go's transport (mcp-go's Client would decode results into typed
// structs that drop schema keywords and round numbers).
type connection struct {
	u      *Upstream
	kind   connKind
	t      mcptransport.Interface
	ctx    context.Context // this connection's life
	cancel context.CancelFunc

	proc  *process    // stdio
	stdin *childStdin // stdio

	nextID   atomic.Int64
	epoch    atomic.Int64 // bumped by each re-initialization
	reinitMu sync.Mutex

	deadOnce sync.Once
	dead     chan struct{} // closed when the connection is known broken
	deadMu   sync.Mutex
	deadWhy  string
	check    chan struct{} // one slot: ping now (HTTP)

	infoMu     sync.Mutex
	server     ServerInfo
	protocol   string
	modernMeta json.RawMessage // the _meta of every modern request; nil: legacy

	// The era (era.go): modern is set while the connection speaks 2026-07-28
	// or later; listChanged, when the server/discover result declared
	// tools.listChanged; listening, while a subscriptions/listen stream was
	// acknowledged for tools list changes; ttl, the ttlMs of the latest
	// tools/list (-1: none).
	modern      atomic.Bool
	listChanged atomic.Bool
	listening   atomic.Bool
	ttl         atomic.Int64

	headerMu    sync.Mutex
	headerTools map[string]*mcpgo.Tool // modern HTTP: tools with x-mcp-header parameters

	tasks taskState // task-augmented calls (tasks.go)
}

// connect makes a new connection and initializes it. On failure it returns
// a reason for Status.
func (u *Upstream) connect() (*connection, string, error) {
	ctx, cancel := context.WithCancel(u.ctx)
	c := &connection{
		u:      u,
		kind:   u.kind,
		ctx:    ctx,
		cancel: cancel,
		dead:   make(chan struct{}),
		check:  make(chan struct{}, 1),
	}
	c.ttl.Store(-1)
	var err error
	switch u.kind {
	case kindStdio:
		err = c.startStdio()
		if err != nil {
			c.teardown(u.hurry)
			return nil, "cannot start: " + safeError(err), err
		}
	case kindStreamable:
		err = c.startStreamable()
	case kindSSE:
		err = c.startSSE()
	case kindInProcess:
		err = c.startInProcess()
	}
	if err != nil {
		c.teardown(u.hurry)
		var authErr *mcptransport.AuthorizationRequiredError
		if authorizationURL(err) != "" {
			return nil, "waiting for a user to authorize the bridge (OAuth)", err
		}
		if errors.As(err, &authErr) {
			return nil, "the server refused the bridge's credentials (HTTP 401)", err
		}
		return nil, "unreachable: " + safeError(err), err
	}
	ictx, icancel := context.WithTimeout(ctx, u.cfg.InitTimeout)
	reason, err := c.negotiate(ictx)
	icancel()
	if err != nil {
		if c.proc != nil {
			t := time.NewTimer(exitReasonWait)
			select {
			case <-c.proc.exited:
				reason = "exited during initialize: " + c.proc.exitDesc()
			case <-t.C:
			}
			t.Stop()
		}
		c.teardown(u.hurry)
		return nil, reason, err
	}
	return c, "", nil
}

func (c *connection) startStdio() error {
	p, err := c.u.spawn()
	if err != nil {
		return err
	}
	c.proc = p
	c.stdin = &childStdin{f: p.stdin, pending: map[int64]*atomic.Bool{}}
	out := &childStdout{f: p.stdout, lines: c.u.newLines(c.stdin.respond, c.die), onEnd: func() { c.die("closed its stdout") }}
	t := mcptransport.NewIO(out, c.stdin, nil)
	t.SetRequestHandler(c.handleServerRequest)
	t.SetNotificationHandler(c.handleNotification)
	c.t = t
	if err := t.Start(c.ctx); err != nil {
		return err
	}
	go func() {
		select {
		case <-p.exited:
			c.die(p.exitDesc())
		case <-c.ctx.Done():
		}
	}()
	return nil
}

func (c *connection) startStreamable() error {
	t, err := mcptransport.NewStreamableHTTP(c.u.cfg.URL,
		mcptransport.WithHTTPBasicClient(c.u.httpClient),
		mcptransport.WithHTTPHeaderFunc(c.u.headerFunc),
		mcptransport.WithHTTPLogger(c.u.transportLogger()),
		// The GET stream brings notifications/tools/list_changed while no
		// call is in flight. mcp-go v1.2.1 deprecates the option, as
		// protocol version 2026-07-28 removed the stream; a connection with
		// it stays on an earlier version, where the stream exists.
		//lint:ignore SA1019 the standalone GET stream of protocol versions before 2026-07-28
		mcptransport.WithContinuousListening(),
	)
	if err != nil {
		return err
	}
	t.SetRequestHandler(c.handleServerRequest)
	t.SetNotificationHandler(c.handleNotification)
	c.t = t
	return t.Start(c.ctx)
}

func (c *connection) startSSE() error {
	t, err := mcptransport.NewSSE(c.u.cfg.URL,
		mcptransport.WithHTTPClient(c.u.httpClient),
		mcptransport.WithHeaderFunc(c.u.headerFunc),
		mcptransport.WithSSELogger(c.u.transportLogger()),
		mcptransport.WithEndpointTimeout(c.u.cfg.InitTimeout),
		mcptransport.WithResponseTimeout(sseResponseWait),
	)
	if err != nil {
		return err
	}
	// Server→client requests never reach this transport: sseBody
	// answers them (see roundTripper).
	t.SetNotificationHandler(c.handleNotification)
	t.SetConnectionLostHandler(func(err error) {
		c.die("connection lost: " + safeError(err))
	})
	c.t = t
	return t.Start(c.ctx)
}

func (c *connection) startInProcess() error {
	t := c.u.cfg.InProcess(ServerRequests{c.u})
	if t == nil {
		return errors.New("the in-process server made no transport")
	}
	if rt, ok := t.(interface {
		SetRequestHandler(mcptransport.RequestHandler)
	}); ok {
		// A transport that reads the server's requests itself (Piped)
		// answers them as a child's are answered.
		rt.SetRequestHandler(c.handleServerRequest)
	}
	t.SetNotificationHandler(c.handleNotification)
	c.t = t
	return t.Start(c.ctx)
}

// die marks the connection broken; the supervisor then replaces it.
func (c *connection) die(why string) {
	c.deadOnce.Do(func() {
		c.deadMu.Lock()
		c.deadWhy = why
		c.deadMu.Unlock()
		close(c.dead)
	})
}

// suspect asks the supervisor to ping an HTTP upstream now, after a request
// failed in a way that may mean the server is gone.
func (c *connection) suspect() {
	if c.kind.isHTTP() {
		select {
		case c.check <- struct{}{}:
		default:
		}
	}
}

// watch blocks until the connection breaks or ctx ends, pinging an HTTP
// upstream every ping (when positive) and when suspected. It returns what
// broke the connection.
func (c *connection) watch(ctx context.Context, ping time.Duration) string {
	var tick <-chan time.Time
	if c.kind.isHTTP() && ping > 0 {
		t := time.NewTicker(ping)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return "close"
		case <-c.dead:
			return c.deathReason()
		case <-tick:
			c.probe(ctx)
		case <-c.check:
			c.probe(ctx)
		}
	}
}

func (c *connection) deathReason() string {
	if c.proc != nil {
		// Standard output usually ends a moment before the exit is seen:
		// the exit status says more.
		t := time.NewTimer(exitReasonWait)
		defer t.Stop()
		select {
		case <-c.proc.exited:
			return c.proc.exitDesc()
		case <-t.C:
		}
	}
	c.deadMu.Lock()
	defer c.deadMu.Unlock()
	return c.deadWhy
}

// probe pings the upstream. Any JSON-RPC answer, an error included, means
// it is there; a lost session is re-initialized; anything else breaks the
// connection.
func (c *connection) probe(ctx context.Context) {
	epoch := c.epoch.Load()
	pctx, cancel := context.WithTimeout(ctx, min(pingTimeout, c.u.cfg.InitTimeout))
	defer cancel()
	method := mcpgo.MethodPing
	if c.isModern() {
		method = mcpgo.MethodServerDiscover // 2026-07-28 has no ping
	}
	r := c.send(pctx, string(method), nil, nil)
	var authErr *mcptransport.AuthorizationRequiredError
	if e := answeredError(r); e != nil && c.isModern() && e.Code == codeUnsupportedVersion {
		c.renegotiate(e, r.version)
		return
	}
	switch {
	case r.err == nil, ctx.Err() != nil:
	case errors.As(r.err, &authErr), r.status == http.StatusUnauthorized, r.status == http.StatusForbidden:
		// Reachable; calls fail with ErrUnauthorized.
	case c.kind == kindStreamable && errors.Is(r.err, mcptransport.ErrSessionTerminated) && !c.isModern():
		_ = c.reinitialize(ctx, epoch)
	case answeredError(r) != nil:
		// An HTTP error status with a JSON-RPC error: the server is there.
	case pctx.Err() != nil:
		c.die("no answer to ping")
	default:
		c.die("unreachable: " + safeError(r.err))
	}
}

// teardown closes the connection and, for a stdio child, stops its process
// group. It never blocks much longer than the grace periods, and skips them
// once hurry is closed.
func (c *connection) teardown(hurry <-chan struct{}) {
	c.die("closed")
	c.cancel()
	if c.t != nil {
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			_ = c.t.Close() // stdio: closes the child's stdin
		}()
		t := time.NewTimer(transportClose)
		select {
		case <-closed:
		case <-t.C:
			c.u.log.Warn("closing the upstream transport timed out")
		}
		t.Stop()
	}
	if c.proc != nil {
		c.proc.stop(hurry, c.u.cfg.KillGrace, c.u.log)
	}
}

// initialize performs the initialize handshake. On failure it returns a
// reason for Status.
func (c *connection) initialize(ctx context.Context) (string, error) {
	params, err := json.Marshal(map[string]any{
		"protocolVersion": protocolVersion,
		// URL mode only: the bridge cannot show a form, but it can tell its
		// caller which URL to open (-32042 needs this declared).
		"capabilities": map[string]any{"elicitation": map[string]any{"url": map[string]any{}}},
		"clientInfo":   map[string]any{"name": c.u.opts.ClientName, "version": c.u.opts.ClientVersion},
	})
	if err != nil {
		return "initialize failed", err
	}
	r := c.send(ctx, string(mcpgo.MethodInitialize), params, nil)
	var authErr *mcptransport.AuthorizationRequiredError
	switch {
	case r.err == nil:
	case errors.Is(r.err, context.DeadlineExceeded), ctx.Err() != nil:
		return fmt.Sprintf("initialize timed out after %s", c.u.cfg.InitTimeout), r.err
	case authorizationURL(r.err) != "":
		return "waiting for a user to authorize the bridge (OAuth)", r.err
	case c.u.cfg.Auth != nil && (errors.As(r.err, &authErr) || r.status == http.StatusUnauthorized || r.status == http.StatusForbidden):
		return fmt.Sprintf("the server refused the bridge's credentials (HTTP %d): %s", max(r.status, http.StatusUnauthorized), safeError(r.err)), r.err
	case errors.As(r.err, &authErr), r.status == http.StatusUnauthorized, r.status == http.StatusForbidden:
		return fmt.Sprintf("the server refused the bridge's credentials (HTTP %d)", max(r.status, http.StatusUnauthorized)), r.err
	case modernOnly(answeredError(r)) != "":
		return c.modernOnlyReason(modernOnly(answeredError(r))), answeredError(r)
	case errors.Is(r.err, mcptransport.ErrLegacySSEServer):
		reason := fmt.Sprintf("POST %s answered initialize with HTTP %d", redactURLString(c.u.cfg.URL), r.status)
		if d := c.u.diagnosis(r.status); d != "" {
			reason += ": " + d
		}
		return reason, r.err
	case c.kind.isHTTP() && !r.sent:
		return "unreachable: " + safeError(r.err), r.err
	default:
		return "initialize failed: " + safeError(r.err), r.err
	}
	if r.resp.Error != nil {
		ue := upstreamError(r.resp.Error)
		if v := modernOnly(ue); v != "" {
			return c.modernOnlyReason(v), ue
		}
		return fmt.Sprintf("initialize rejected: %d %s", ue.Code, ue.Message), ue
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
		ServerInfo      struct {
			Name    string `json:"name"`
			Version string `json:"version"`
			Title   string `json:"title"`
		} `json:"serverInfo"`
	}
	if err := json.Unmarshal(r.resp.Result, &res); err != nil {
		return "initialize: malformed result", err
	}
	c.tasks.setCapable(r.resp.Result)
	if !mcpgo.IsValidProtocolVersion(res.ProtocolVersion) || mcpgo.IsModernProtocol(res.ProtocolVersion) {
		return fmt.Sprintf("initialize: unsupported protocol version %q", res.ProtocolVersion),
			fmt.Errorf("mcp: unsupported protocol version %q", res.ProtocolVersion)
	}
	if hc, ok := c.t.(mcptransport.HTTPConnection); ok {
		hc.SetProtocolVersion(res.ProtocolVersion)
	}
	n := mcpgo.JSONRPCNotification{
		JSONRPC:      mcpgo.JSONRPC_VERSION,
		Notification: mcpgo.Notification{Method: string(mcpgo.MethodNotificationInitialized)},
	}
	if err := c.t.SendNotification(ctx, n); err != nil {
		return "initialized notification failed: " + safeError(err), err
	}
	c.infoMu.Lock()
	c.server = ServerInfo{Name: res.ServerInfo.Name, Version: res.ServerInfo.Version, Title: res.ServerInfo.Title}
	c.protocol = res.ProtocolVersion
	c.infoMu.Unlock()
	return "", nil
}

func (c *connection) info() (ServerInfo, string) {
	c.infoMu.Lock()
	defer c.infoMu.Unlock()
	return c.server, c.protocol
}

// reinitialize starts a new session on a streamable HTTP connection whose
// session the server dropped (404), unless another caller already did since
// epoch seen. When it fails, the connection is broken.
func (c *connection) reinitialize(ctx context.Context, seen int64) error {
	c.reinitMu.Lock()
	defer c.reinitMu.Unlock()
	if c.epoch.Load() != seen {
		return nil
	}
	select {
	case <-c.dead:
		return errors.New("mcp: connection closed")
	default:
	}
	if c.isModern() {
		// No session to start again: the server forgot nothing.
		return nil
	}
	ictx, cancel := context.WithTimeout(ctx, c.u.cfg.InitTimeout)
	defer cancel()
	reason, err := c.initialize(ictx)
	if err != nil {
		if ctx.Err() == nil {
			c.die("session lost; " + reason)
		}
		return err
	}
	c.epoch.Add(1)
	c.u.setServer(c)
	c.u.log.Info("upstream session re-initialized after the server dropped it")
	c.u.triggerRelist()
	return nil
}

// sendResult is the outcome of one request.
type sendResult struct {
	resp   *mcptransport.JSONRPCResponse
	err    error
	id     int64
	sent   bool // the request was (or may have been) delivered
	status int  // HTTP status of the request's POST; 0 when none
	// errBody is the start of an HTTP error answer's body (see
	// sendProbe.errBody), for the JSON-RPC error mcp-go does not read.
	errBody []byte
	// version is the modern protocol version the request was sent as; ""
	// for a legacy one.
	version string
}

// send sends one raw JSON-RPC request. params are sent as they are (nil:
// none); header holds per-request HTTP headers (nil: none).
func (c *connection) send(ctx context.Context, method string, params json.RawMessage, header http.Header) sendResult {
	id := c.nextID.Add(1)
	req := mcptransport.JSONRPCRequest{
		JSONRPC: mcpgo.JSONRPC_VERSION,
		ID:      mcpgo.NewRequestId(id),
		Method:  method,
	}
	var version string
	if c.isModern() {
		// 2026-07-28: the version, capabilities and client info in every
		// request's _meta and, over HTTP, mirrored into headers.
		var meta json.RawMessage
		version, meta = c.version()
		p, err := withModernMeta(params, meta)
		if err != nil {
			return sendResult{id: id, err: err, version: version}
		}
		params = p
		if c.kind == kindStreamable {
			req.Header = c.protocolHeaders(version, method, params)
		}
	}
	if params != nil {
		req.Params = params
	}
	r := sendResult{id: id, version: version}
	switch c.kind {
	case kindStdio:
		wrote := c.stdin.track(id)
		r.resp, r.err = c.t.SendRequest(ctx, req)
		c.stdin.untrack(id)
		r.sent = r.err == nil || wrote.Load()
	case kindStreamable, kindSSE:
		probe := &sendProbe{}
		ctx = context.WithValue(ctx, probeKey{}, probe)
		if len(header) > 0 {
			ctx = context.WithValue(ctx, headerKey{}, header)
		}
		r.resp, r.err = c.t.SendRequest(ctx, req)
		r.sent = r.err == nil || probe.wrote.Load()
		r.status = int(probe.status.Load())
		if b := probe.errBody.Load(); b != nil {
			r.errBody = *b
		}
		if r.err != nil && probe.tooLarge.Load() {
			r.err = &TooLargeError{Upstream: c.u.Name(), Limit: c.u.cfg.MaxMessageBytes}
		}
	case kindInProcess:
		// The server runs the handler on this goroutine's behalf and may
		// ignore ctx: do not wait for it once ctx ends.
		type answer struct {
			resp *mcptransport.JSONRPCResponse
			err  error
		}
		ch := make(chan answer, 1)
		go func() {
			resp, err := c.t.SendRequest(ctx, req)
			ch <- answer{resp, err}
		}()
		select {
		case a := <-ch:
			r.resp, r.err = a.resp, a.err
		case <-ctx.Done():
			r.err = ctx.Err()
		}
		r.sent = true
	}
	if r.err == nil && r.resp == nil {
		r.err = errors.New("no response")
	}
	if r.err == nil && r.resp.Error != nil {
		if tl := c.u.tooLargeFrom(r.resp.Error.Data); tl != nil {
			r.resp, r.err = nil, tl
		}
	}
	return r
}

// cancelUpstream sends notifications/cancelled for request id, in the
// background and best effort, with the values of ctx (the call's: an
// Authorizer gives the notification the call's credentials) but not its
// end. A modern HTTP request is cancelled by closing its stream, which the
// call's end already did: nothing is sent (2026-07-28, cancellation).
func (c *connection) cancelUpstream(ctx context.Context, header http.Header, id int64, reason string) {
	if c.isModern() && c.kind.isHTTP() {
		return
	}
	n := mcpgo.JSONRPCNotification{
		JSONRPC: mcpgo.JSONRPC_VERSION,
		Notification: mcpgo.Notification{
			Method: string(mcpgo.MethodNotificationCancelled),
			Params: mcpgo.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": reason}},
		},
	}
	ctx = context.WithoutCancel(ctx)
	if len(header) > 0 {
		ctx = context.WithValue(ctx, headerKey{}, header)
	}
	go func() {
		ctx, cancel := context.WithTimeout(ctx, cancelTimeout)
		defer cancel()
		stop := context.AfterFunc(c.ctx, cancel)
		defer stop()
		if err := c.t.SendNotification(ctx, n); err != nil {
			c.u.log.Debug("notifications/cancelled not sent", "error", safeError(err))
		}
	}()
}

// listTools reads every page of tools/list, keeping each tool's raw JSON.
func (c *connection) listTools(ctx context.Context) ([]json.RawMessage, error) {
	cfg := &c.u.cfg
	log := c.u.log
	tools := []json.RawMessage{}
	names := map[string]bool{}
	required := map[string]bool{} // execution.taskSupport "required"
	modern, headers := c.isModern(), c.isModern() && c.kind == kindStreamable
	headerTools := map[string]*mcpgo.Tool{} // modern HTTP: x-mcp-header parameters
	ttl := int64(-1)                        // modern: the smallest ttlMs of the pages
	listed := func() ([]json.RawMessage, error) {
		c.tasks.setRequired(required)
		if modern {
			c.headerMu.Lock()
			c.headerTools = headerTools
			c.headerMu.Unlock()
			c.ttl.Store(ttl)
		}
		return tools, nil
	}
	cursors := map[string]bool{}
	var cursor *string
	renegotiated := false
	for page := 0; ; page++ {
		if page == cfg.MaxToolPages {
			log.Warn("tools/list has more pages than allowed; the list is truncated", "pages", page)
			return listed()
		}
		var params json.RawMessage
		if cursor != nil {
			params, _ = json.Marshal(map[string]string{"cursor": *cursor})
		}
		r := c.send(ctx, string(mcpgo.MethodToolsList), params, nil)
		if e := answeredError(r); modern && e != nil && e.Code == codeUnsupportedVersion {
			if !renegotiated && c.renegotiate(e, r.version) {
				renegotiated = true
				page--
				continue
			}
			return nil, fmt.Errorf("tools/list: %s", e.Error())
		}
		if modern && r.err != nil {
			if e := answeredError(r); e != nil {
				return nil, e // an HTTP error status with a JSON-RPC error
			}
		}
		if r.err != nil {
			if c.kind == kindStreamable && errors.Is(r.err, mcptransport.ErrSessionTerminated) && !modern {
				return nil, errSessionGone
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(r.err, ErrTooLarge) {
				return nil, r.err
			}
			if authorizationURL(r.err) != "" {
				return nil, &callError{class: ErrUnauthorized, extra: r.err, msg: "tools/list: " + safeError(r.err)}
			}
			return nil, errors.New(safeError(r.err))
		}
		if r.resp.Error != nil {
			return nil, upstreamError(r.resp.Error)
		}
		var res struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor *string           `json:"nextCursor"`
			ResultType string            `json:"resultType"`
			TTLMs      *float64          `json:"ttlMs"`
		}
		if err := json.Unmarshal(r.resp.Result, &res); err != nil {
			return nil, fmt.Errorf("malformed tools/list result: %w", err)
		}
		if modern {
			switch res.ResultType {
			case "", string(mcpgo.ResultTypeComplete):
			case string(mcpgo.ResultTypeInputRequired):
				return nil, errors.New("tools/list answered input_required: the server asks for input before it lists its tools")
			default:
				return nil, fmt.Errorf("tools/list answered resultType %q, which the bridge does not know", res.ResultType)
			}
			if res.TTLMs != nil && *res.TTLMs >= 0 && (ttl < 0 || int64(*res.TTLMs) < ttl) {
				ttl = int64(min(*res.TTLMs, float64(1<<53)))
			}
		}
		for i, raw := range res.Tools {
			var t struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
				Execution   struct {
					TaskSupport string `json:"taskSupport"`
				} `json:"execution"`
			}
			if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &t) != nil || t.Name == "" {
				log.Warn("tools/list: skipping a tool that is not an object with a name", "page", page, "index", i)
				continue
			}
			if names[t.Name] {
				log.Warn("tools/list: skipping a duplicate tool name", "tool", t.Name)
				continue
			}
			if len(tools) == cfg.MaxTools {
				log.Warn("tools/list has more tools than allowed; the list is truncated", "tools", len(tools))
				return listed()
			}
			if headers {
				// Streamable HTTP, 2026-07-28: a tool with an invalid
				// x-mcp-header annotation is left out of the list.
				ht, err := paramHeaderTool(t.Name, t.InputSchema)
				if err != nil {
					log.Warn("tools/list: skipping a tool with an invalid x-mcp-header annotation", "tool", t.Name, "reason", err.Error())
					continue
				}
				if ht != nil {
					headerTools[t.Name] = ht
				}
			}
			if t.Execution.TaskSupport == string(mcpgo.TaskSupportRequired) {
				if !c.tasks.toolCallTasks() {
					// Never callable: a plain call is refused, and a task may not
					// be asked of a server without the capability (tasks.go).
					log.Warn("tools/list: skipping a tool that requires tasks; the server does not declare tasks.requests.tools.call", "tool", t.Name)
					continue
				}
				required[t.Name] = true
			}
			names[t.Name] = true
			tools = append(tools, raw)
		}
		if res.NextCursor == nil || *res.NextCursor == "" {
			return listed()
		}
		if cursors[*res.NextCursor] {
			log.Warn("tools/list repeated a cursor; the list may be incomplete")
			return listed()
		}
		cursors[*res.NextCursor] = true
		cursor = res.NextCursor
	}
}

// handleServerRequest answers a server→client request (stdio and
// streamable HTTP transports).
func (c *connection) handleServerRequest(ctx context.Context, req mcptransport.JSONRPCRequest) (*mcptransport.JSONRPCResponse, error) {
	var params json.RawMessage
	if req.Params != nil {
		params, _ = json.Marshal(req.Params)
	}
	result, code, msg := c.u.answerServerRequest(ctx, req.Method, params)
	if code != 0 {
		return mcptransport.NewJSONRPCErrorResponse(req.ID, code, msg, nil), nil
	}
	return mcptransport.NewJSONRPCResultResponse(req.ID, result), nil
}

// answerServerRequest decides the answer to a server→client request: a
// result, or a JSON-RPC error code and message. ctx is the request's
// context as the transport gives it (nil: none). None may hang a call.
//
//	elicitation/create             the call's ElicitationFunc decides (elicit.go), bounded; else:
//	elicitation/create, URL mode   {"action":"cancel"}, reported to OnElicitation and logged with its url
//	elicitation/create, form mode  {"action":"decline"}, reported
//	sampling/createMessage         -32601: the bridge has no model (sampling is not declared)
//	roots/list                     {"roots":[]}
//	ping                           {}
//	anything else                  -32601
func (u *Upstream) answerServerRequest(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, int, string) {
	switch mcpgo.MCPMethod(method) {
	case mcpgo.MethodElicitationCreate:
		var p struct {
			Mode          string `json:"mode"`
			Message       string `json:"message"`
			ElicitationID string `json:"elicitationId"`
			URL           string `json:"url"`
		}
		_ = json.Unmarshal(params, &p)
		e := Elicitation{Upstream: u.Name(), Mode: p.Mode, ElicitationID: p.ElicitationID, URL: p.URL, Message: p.Message}
		if e.Mode == "" {
			e.Mode = mcpgo.ElicitationModeForm
		}
		e.Action = u.elicitAction(ctx, e)
		switch {
		case e.Mode == mcpgo.ElicitationModeURL && e.Action == "":
			e.Action = string(mcpgo.ElicitationResponseActionCancel)
			u.log.Info("upstream asked the user to open a URL; answered cancel", "url", e.URL, "elicitation_id", e.ElicitationID, "message", e.Message)
		case e.Mode == mcpgo.ElicitationModeURL:
			u.log.Info("upstream asked the user to open a URL; answered", "action", e.Action, "url", e.URL, "elicitation_id", e.ElicitationID)
		default:
			if e.Action == "" {
				e.Action = string(mcpgo.ElicitationResponseActionDecline)
			}
			u.log.Info("upstream asked for a form elicitation; answered", "action", e.Action, "mode", e.Mode, "message", e.Message)
		}
		if cb := u.opts.OnElicitation; cb != nil {
			cb(e)
		}
		return json.RawMessage(`{"action":"` + e.Action + `"}`), 0, ""
	case mcpgo.MethodSamplingCreateMessage:
		u.log.Info("upstream asked for sampling; refused")
		return nil, mcpgo.METHOD_NOT_FOUND, "sampling is not supported by this client (mcpotc bridge)"
	case mcpgo.MethodListRoots:
		return json.RawMessage(`{"roots":[]}`), 0, ""
	case mcpgo.MethodPing:
		return json.RawMessage(`{}`), 0, ""
	default:
		u.log.Debug("upstream sent an unsupported request", "method", method)
		return nil, mcpgo.METHOD_NOT_FOUND, "method not found: " + method
	}
}

// handleNotification routes a notification of the upstream. It runs on the
// transport's reading goroutine.
func (c *connection) handleNotification(n mcpgo.JSONRPCNotification) {
	if n.Method == mcpgo.MethodNotificationToolsListChanged {
		c.u.triggerRelist()
		return
	}
	if n.Method == mcpgo.MethodNotificationSubscriptionsAcknowledged {
		c.acknowledged(n) // era.go
		return
	}
	if n.Method == taskStatusNote {
		if params, err := json.Marshal(n.Params); err == nil {
			c.tasks.notified(params)
		}
	}
	if cb := c.u.opts.OnNotification; cb != nil {
		params, err := json.Marshal(n.Params)
		if err != nil {
			return
		}
		cb(n.Method, params)
	}
}

// ServerRequests answers the requests an in-process server sends its
// client (elicitation, sampling, roots) as those of any other server are
// answered (answerServerRequest). It is mcp-go's client-side elicitation,
// sampling and roots handler, for an InProcess whose transport takes them.
type ServerRequests struct{ u *Upstream }

// Elicit answers an elicitation/create.
func (h ServerRequests) Elicit(ctx context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
	params, err := json.Marshal(req.Params)
	if err != nil {
		return nil, err
	}
	result, code, msg := h.u.answerServerRequest(ctx, string(mcpgo.MethodElicitationCreate), params)
	if code != 0 {
		return nil, errors.New(msg)
	}
	var out mcpgo.ElicitationResult
	if err := json.Unmarshal(result, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateMessage answers a sampling/createMessage.
func (h ServerRequests) CreateMessage(_ context.Context, _ mcpgo.CreateMessageRequest) (*mcpgo.CreateMessageResult, error) {
	_, _, msg := h.u.answerServerRequest(context.Background(), string(mcpgo.MethodSamplingCreateMessage), nil)
	return nil, errors.New(msg)
}

// ListRoots answers a roots/list.
func (h ServerRequests) ListRoots(_ context.Context, _ mcpgo.ListRootsRequest) (*mcpgo.ListRootsResult, error) {
	return &mcpgo.ListRootsResult{Roots: []mcpgo.Root{}}, nil
}

// upstreamError converts the error of a JSON-RPC response.
func upstreamError(d *mcpgo.JSONRPCErrorDetails) *Error {
	e := &Error{Code: d.Code, Message: d.Message}
	if d.Data != nil {
		if raw, err := json.Marshal(d.Data); err == nil {
			e.Data = raw
		}
	}
	return e
}
