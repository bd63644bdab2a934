package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults used when the matching Config field is zero.
const (
	DefaultCallTimeout       = 60 * time.Second
	DefaultInitTimeout       = 60 * time.Second
	DefaultRestartBackoffMin = 250 * time.Millisecond
	DefaultRestartBackoffMax = 30 * time.Second
	DefaultStableAfter       = time.Second
	DefaultKillGrace         = 2 * time.Second
	DefaultDrainTimeout      = 5 * time.Second
	DefaultPingInterval      = 30 * time.Second
	DefaultMaxToolPages      = 100
	DefaultMaxTools          = 10000
	DefaultStderrLineMax     = 4096
)

// Error classes of a failed Upstream.CallTool, for errors.Is. A JSON-RPC
// error answered by the upstream is an *Error instead.
//
//	class                     the call                          typical cause
//	ErrUnavailable            was NOT sent: safe to retry       not connected, restarting, unreachable, closing
//	ErrLost                   was sent, outcome unknown         the child died, the connection broke, the call timed out
//	ErrUnauthorized   was refused before the tool ran   HTTP 401/403 from the upstream
//	ErrTooLarge               was answered, answer dropped      the answer exceeded MaxMessageBytes (*TooLargeError)
//
// A call ended by the caller's own context returns an error wrapping
// ctx.Err() (context.Canceled or context.DeadlineExceeded) and none of these.
var (
	ErrUnavailable  error = &failure{"unavailable", "mcp: upstream unavailable"}
	ErrLost         error = &failure{"lost", "mcp: upstream call lost"}
	ErrUnauthorized error = &failure{"unauthorized", "mcp: upstream rejected the credentials"}
)

// failure is one of the errors above: its Failure method names its kind,
// for code that reads errors by their methods (the mapping to OTC).
type failure struct{ kind, text string }

func (f *failure) Error() string { return f.text }

// Failure is "unavailable", "lost" or "unauthorized".
func (f *failure) Failure() string { return f.kind }

// Error is a JSON-RPC error answered by an upstream MCP server to a
// request of the bridge.
//
// Data is the error's data re-encoded from what mcp-go's transport decoded:
// the same JSON value, but object keys come out sorted and numbers beyond
// float64 precision are rounded. Nil when the error had no data.
type Error struct {
	Code    int
	Message string
	Data    json.RawMessage
}

// RPCError is the error's code, message and data.
func (e *Error) RPCError() (int, string, json.RawMessage) { return e.Code, e.Message, e.Data }

// Error is the code and message; never the data.
func (e *Error) Error() string {
	return fmt.Sprintf("mcp: upstream error %d: %s", e.Code, e.Message)
}

// Config describes one upstream MCP server: exactly one of Command
// (a stdio child), URL (streamable HTTP or legacy SSE) and InProcess. A nil
// *Config is invalid.
type Config struct {
	// Name identifies the upstream in logs, errors and health. Zero: the
	// serverInfo.name the server answers to initialize (until it has
	// answered, its URL without credentials, or "mcp-server" for a command),
	// never anything taken from its command line.
	Name string

	// Command is the program of a stdio child, looked up in PATH when it has
	// no slash. Zero: not a stdio upstream.
	Command string
	// Args are the child's arguments. Zero: none.
	Args []string
	// Env holds KEY=VALUE entries added to the bridge's own environment for
	// the child (an entry here wins over the inherited one). Zero: the
	// bridge's environment as is.
	Env []string
	// Unsetenv names variables of the bridge's environment the child must
	// not inherit (the bridge's own credentials). Zero: it inherits all.
	Unsetenv []string
	// Dir is the child's working directory. Zero: the bridge's.
	Dir string

	// URL is the endpoint of an HTTP upstream: streamable HTTP, or legacy
	// HTTP+SSE when its path ends in /sse or SSE is set. Zero: not an HTTP
	// upstream.
	URL string
	// SSE forces the legacy HTTP+SSE transport. Zero: decided by the URL path.
	SSE bool
	// Protocol chooses the MCP protocol era (era.go): ProtocolAuto probes
	// with server/discover and falls back to initialize; ProtocolModern
	// (2026-07-28) and ProtocolLegacy (2025-11-25, initialize) pin one.
	// Legacy SSE and in-process upstreams speak 2025-11-25: ProtocolModern
	// is an error for them. Zero: ProtocolAuto.
	Protocol string
	// Headers are sent with every HTTP request (several values of one name
	// are joined with ", "). Values are never logged. Protocol headers
	// (Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version,
	// Mcp-Method, Mcp-Name, Mcp-Param-*, Host, Content-Length,
	// Last-Event-ID) are ignored. Zero: none.
	Headers http.Header
	// Auth authorizes the HTTP requests (OAuth: package mcp/oauth): it
	// gives each request its Authorization header and handles the
	// upstream's 401 and 403 answers. Its errors fail the request as they
	// are (wrapped): a call fails with ErrUnauthorized, and an error with an
	// AuthorizationURL() string method puts that URL in Status. Zero: only
	// Headers.
	Auth Authorizer
	// HTTPClient sends the HTTP requests; its Timeout must be zero (streams
	// are long-lived). Zero: a client with pooled connections made for this
	// upstream.
	HTTPClient *http.Client

	// InProcess is an MCP server in this process (the built-in sample
	// server, tests): a client transport is made with it for each
	// connection (see InProcess, Piped). Zero: not in-process.
	InProcess InProcess

	// CallTimeout bounds one tools/call; when it passes, the call is
	// cancelled upstream and fails with ErrLost. Zero: DefaultCallTimeout.
	// Negative: only the caller's context bounds a call.
	CallTimeout time.Duration
	// InitTimeout bounds starting the child or reaching the URL plus the
	// initialize handshake, and one tools/list walk. Zero: DefaultInitTimeout.
	InitTimeout time.Duration
	// RestartBackoffMin and RestartBackoffMax bound the wait before each
	// restart or reconnection attempt: it doubles from Min up to Max, with
	// jitter (each wait is between half and all of the nominal one). Zero:
	// DefaultRestartBackoffMin / DefaultRestartBackoffMax.
	RestartBackoffMin, RestartBackoffMax time.Duration
	// StableAfter is how long a connection must have stayed ready for its
	// loss to count as the end of a good run rather than a crash at start:
	// then the child is restarted (or the URL reconnected) at once and the
	// backoff starts again from RestartBackoffMin. A connection lost sooner
	// waits the growing backoff first. Zero: DefaultStableAfter.
	StableAfter time.Duration
	// KillGrace is how long a stdio child gets to exit after its stdin is
	// closed, and again after SIGTERM, before its process group is killed.
	// Zero: DefaultKillGrace.
	KillGrace time.Duration
	// DrainTimeout is how long Close lets in-flight calls finish before
	// abandoning them (they fail with ErrLost). Zero: DefaultDrainTimeout.
	DrainTimeout time.Duration
	// PingInterval is how often an idle HTTP upstream is pinged, so that
	// health notices a server that went away. Zero: DefaultPingInterval.
	// Negative: never. Stdio children are watched through their process.
	PingInterval time.Duration
	// MaxToolPages and MaxTools bound one tools/list walk; a longer list is
	// truncated with a warning. Zero: DefaultMaxToolPages / DefaultMaxTools.
	MaxToolPages, MaxTools int
	// MaxMessageBytes bounds one message read from the upstream: a line of
	// a stdio child's stdout, an HTTP JSON body, one event of an event
	// stream. A longer answer is dropped as it arrives and fails its call
	// with a *TooLargeError (ErrTooLarge); other calls go on (see lineBounder).
	// Zero: DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// StderrLineMax bounds one logged line of a stdio child's stderr; the
	// rest of a longer line is dropped. Zero: DefaultStderrLineMax.
	StderrLineMax int
}

// Authorizer gives an HTTP upstream's requests their credentials (see
// Config.Auth). Both methods get the request's context, which carries the
// call's own values (the user, for a per-user authorizer).
type Authorizer interface {
	// Authorization returns the Authorization header of a request, "" for
	// none.
	Authorization(ctx context.Context) (string, error)
	// Unauthorized is given a 401 or 403 answer to a request sent with the
	// Authorization sent. retry: send the request again (once), with a new
	// Authorization. A non-nil error fails the request; nil and no retry
	// leaves the answer as it is.
	Unauthorized(ctx context.Context, sent string, resp *http.Response) (retry bool, err error)
}

// authorizationURL returns the URL a user must open for err, if any.
func authorizationURL(err error) string {
	var a interface{ AuthorizationURL() string }
	if errors.As(err, &a) {
		return a.AuthorizationURL()
	}
	return ""
}

// Options wire an Upstream into the program. A nil *Options
// is the zero value.
type Options struct {
	// Logger receives the upstream's own log lines, a stdio child's stderr
	// lines and mcp-go's transport logs (at debug level). Arguments, results,
	// tokens and header values are never logged. Nil: nothing is logged.
	Logger *slog.Logger
	// ClientName and ClientVersion are sent as clientInfo in initialize, and
	// in the _meta of every request to a 2026-07-28 server. Zero: "mcpotc"
	// and "0.0.0".
	ClientName, ClientVersion string
	// OnToolsChanged is called with the complete raw tool list after each
	// (re)connection and after each notifications/tools/list_changed, once
	// the list has been read again. Calls never overlap; the slice must not
	// be modified. Nil: not called (see Upstream.Tools).
	OnToolsChanged func(tools []json.RawMessage)
	// OnListFailed is told of each tools/list that failed and will be
	// tried again: the connection failed, or the list needs an
	// authorization. A server's JSON-RPC error is not a failure: it is an
	// empty list, given to OnToolsChanged. Called from the goroutine that
	// calls OnToolsChanged; err carries no secret. Nil: not called.
	OnListFailed func(err error)
	// OnElicitation is told about each elicitation/create the upstream
	// sends, once it is answered (Elicitation.Action): by the call's
	// ElicitationFunc (WithElicitation), else "cancel" for URL mode and
	// "decline" for form mode. Must not block. Nil: the request is only
	// logged (URL mode with its url when nobody decided).
	OnElicitation func(Elicitation)
	// Diagnose, when set, is asked what answers near an HTTP upstream's URL
	// when its initialize POST got an HTTP 4xx other than 401/403 (a wrong
	// path, an OTC server, a legacy SSE server): its answer, if any, is
	// added to the upstream's reason. It is asked once per status, and its
	// context ends after InitTimeout. Nil: not asked.
	Diagnose func(ctx context.Context, url string, status int) string
	// waited, when set, is told about each backoff wait the upstream
	// chooses before it waits: "restart" (before reconnecting) or
	// "tools/list" (before listing again), the 0-based attempt and the wait
	// (tests record the schedule with it).
	waited func(what string, attempt int, d time.Duration)
	// listRefresh, when set, replaces listRefreshMin and listRefreshMax
	// (tests).
	listRefresh *[2]time.Duration
	// probeWait, when positive, replaces discoverProbeWait (tests).
	probeWait time.Duration

	// OnNotification receives the upstream's notifications other than
	// notifications/tools/list_changed (notifications/progress,
	// notifications/message, …) in the order they arrive, with their params
	// re-encoded. Must not block. Nil: they are dropped.
	OnNotification func(method string, params json.RawMessage)
}

// Elicitation is one elicitation/create request of an upstream and
// the answer the bridge gave.
type Elicitation struct {
	Upstream      string // Config.Name
	Mode          string // "url" or "form"
	ElicitationID string // URL mode
	URL           string // URL mode: what a user would have to open
	Message       string
	Action        string // the answer sent: "accept", "decline" or "cancel"
}

// ServerInfo is the serverInfo an upstream answered to initialize.
type ServerInfo struct {
	Name    string
	Version string
	Title   string
}

// Status is a snapshot of an upstream's health.
type Status struct {
	Ready bool
	// Reason says why the upstream is not ready: "starting", "restarting
	// after exit status 3 (restart 2)", "unreachable: …", "closed"…; empty
	// when Ready.
	Reason string
	// Server and ProtocolVersion come from the latest successful
	// initialize or server/discover (2026-07-28 and later: a modern
	// server); zero before the first one.
	Server          ServerInfo
	ProtocolVersion string
	// Restarts counts how often a connection was lost and the upstream
	// restarted (stdio) or reconnected (HTTP).
	Restarts int
	// AuthorizationURL is set while the upstream waits for a user to
	// authorize the bridge (Config.Auth): the URL to open.
	AuthorizationURL string
	// Starting is set while the upstream was never ready and may still
	// become so soon: its first connection attempt runs, or the server
	// could not be reached yet (HTTP: no connection; it may be starting
	// beside the bridge), within InitTimeout of Start. Meanwhile a
	// reconnection waits at most startRetryMax. Any other failure (the
	// server answered wrongly, a child exited, credentials, an
	// authorization to wait for) ends it.
	Starting bool
}

// startRetryMax bounds the wait between connection attempts while the
// upstream is Starting, so that a server that comes up beside the bridge
// is connected within about a second of listening.
const startRetryMax = time.Second

type connKind int

const (
	kindStdio connKind = iota
	kindStreamable
	kindSSE
	kindInProcess
)

func (k connKind) isHTTP() bool { return k == kindStreamable || k == kindSSE }

// Upstream is one MCP server the bridge calls as an MCP client, with the
// lifecycle of its connection: started by Start (or New, then Connect),
// restarted or reconnected with backoff when it goes away, stopped by
// Close. It is safe for concurrent use.
//
// The protocol era is negotiated on each connection as Config.Protocol
// says (era.go): the stateless revision 2026-07-28 when the server speaks
// it, else revision 2025-11-25 with the initialize handshake (servers
// answering an older revision are accepted).
type Upstream struct {
	diagMu     sync.Mutex
	diagFor    int                    // the HTTP status diag answers
	diag       string                 // Options.Diagnose's answer for diagFor
	name       string                 // Config.Name
	serverName atomic.Pointer[string] // serverInfo.name of the latest initialize
	cfg        Config                 // defaults applied
	opts       Options
	log        *slog.Logger
	kind       connKind
	// nonce marks the bridge's own synthetic answers (tooLargeAnswer).
	nonce string

	httpClient *http.Client      // HTTP kinds
	headers    map[string]string // static headers, HTTP kinds

	ctx          context.Context // the supervisor's life
	stop         context.CancelFunc
	callsCtx     context.Context // ends when in-flight calls are abandoned
	abandonCalls context.CancelFunc
	hurry        chan struct{} // closed when Close's context ends: no more grace
	hurryOnce    sync.Once
	done         chan struct{} // closed when the background goroutines are gone
	wg           sync.WaitGroup
	unwatch      func() bool // stops watching Connect's context; guarded by mu

	relist chan struct{} // one slot: re-read the tool list
	retry  chan struct{} // one slot: end the current backoff wait (Retry)

	mu        sync.Mutex
	conn      *connection // the ready connection, nil when not ready
	reason    string
	authErr   error // the Authorizer's error of the latest failed connection, if it gives an AuthorizationURL
	server    ServerInfo
	protocol  string
	restarts  int
	started   time.Time // Connect
	starting  bool      // Status.Starting, before its InitTimeout bound
	closing   bool
	connected bool // Connect ran: ctx, stop and the goroutines exist
	inflight  int
	drained   chan struct{} // made by Close; closed once closing and inflight == 0
	changed   chan struct{} // closed and replaced on every state change

	tools atomic.Pointer[[]json.RawMessage]

	elicitMu  sync.Mutex
	elicitors map[*elicitor]struct{} // calls in flight made WithElicitation (elicit.go)
}

// Start returns at once an Upstream that connects in the background:
// an upstream that is down at start does not fail the bridge (see Ready and
// Status). It fails only for an invalid configuration. Cancelling ctx closes
// the upstream as Close does, without waiting; call Close to wait. It is
// New, then Connect.
func Start(ctx context.Context, cfg *Config, opts *Options) (*Upstream, error) {
	u, err := New(cfg, opts)
	if err != nil {
		return nil, err
	}
	u.Connect(ctx)
	return u, nil
}

// New checks cfg and returns an Upstream that does not connect until
// Connect: until then no callback of opts runs, so that whoever keeps the
// Upstream can record it before the first callback (OnToolsChanged may
// run before Connect returns). Its calls fail as those of an upstream not
// ready yet. It fails only for an invalid configuration.
func New(cfg *Config, opts *Options) (*Upstream, error) {
	if cfg == nil {
		return nil, errors.New("mcp: upstream config is nil")
	}
	c := *cfg
	var o Options
	if opts != nil {
		o = *opts
	}
	u := &Upstream{
		name:    c.Name,
		opts:    o,
		reason:  "starting",
		relist:  make(chan struct{}, 1),
		retry:   make(chan struct{}, 1),
		done:    make(chan struct{}),
		hurry:   make(chan struct{}),
		changed: make(chan struct{}),
		nonce:   newNonce(),
	}
	if o.Logger != nil {
		u.log = o.Logger.With("upstream", liveName{u})
	} else {
		u.log = slog.New(slog.DiscardHandler)
	}

	set := 0
	if c.Command != "" {
		set++
		u.kind = kindStdio
	}
	if c.URL != "" {
		set++
		parsed, err := url.Parse(c.URL)
		switch {
		case err != nil:
			return nil, fmt.Errorf("mcp: upstream %q: URL is not valid", c.Name)
		case parsed.Scheme != "http" && parsed.Scheme != "https":
			return nil, fmt.Errorf("mcp: upstream %q: URL %s: scheme must be http or https", c.Name, redactURL(parsed))
		case parsed.Host == "":
			return nil, fmt.Errorf("mcp: upstream %q: URL %s has no host", c.Name, redactURL(parsed))
		}
		u.kind = kindStreamable
		if c.SSE || strings.HasSuffix(strings.TrimSuffix(parsed.Path, "/"), "/sse") {
			u.kind = kindSSE
		}
	}
	if c.InProcess != nil {
		set++
		u.kind = kindInProcess
	}
	if set != 1 {
		return nil, fmt.Errorf("mcp: upstream %q: set exactly one of Command, URL and InProcess", c.Name)
	}
	if c.HTTPClient != nil && c.HTTPClient.Timeout != 0 {
		return nil, fmt.Errorf("mcp: upstream %q: HTTPClient.Timeout must be zero (use CallTimeout)", c.Name)
	}
	protocol, err := normalProtocol(c.Protocol)
	if err != nil {
		return nil, fmt.Errorf("mcp: upstream %q: %w", c.Name, err)
	}
	if protocol == ProtocolModern && (u.kind == kindSSE || u.kind == kindInProcess) {
		return nil, fmt.Errorf("mcp: upstream %q: protocol %s needs a stdio or streamable HTTP server (legacy SSE and in-process servers speak %s)", c.Name, ProtocolModern, ProtocolLegacy)
	}
	c.Protocol = protocol

	setDefault(&c.CallTimeout, DefaultCallTimeout)
	setDefault(&c.InitTimeout, DefaultInitTimeout)
	setDefault(&c.RestartBackoffMin, DefaultRestartBackoffMin)
	setDefault(&c.RestartBackoffMax, DefaultRestartBackoffMax)
	setDefault(&c.StableAfter, DefaultStableAfter)
	setDefault(&c.KillGrace, DefaultKillGrace)
	setDefault(&c.DrainTimeout, DefaultDrainTimeout)
	setDefault(&c.PingInterval, DefaultPingInterval)
	if c.RestartBackoffMax < c.RestartBackoffMin {
		c.RestartBackoffMax = c.RestartBackoffMin
	}
	if c.MaxToolPages <= 0 {
		c.MaxToolPages = DefaultMaxToolPages
	}
	if c.MaxTools <= 0 {
		c.MaxTools = DefaultMaxTools
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.StderrLineMax <= 0 {
		c.StderrLineMax = DefaultStderrLineMax
	}
	if o.ClientName == "" {
		u.opts.ClientName = "mcpotc"
	}
	if o.ClientVersion == "" {
		u.opts.ClientVersion = "0.0.0"
	}
	u.cfg = c
	if u.kind.isHTTP() {
		u.httpClient = newHTTPClient(c.HTTPClient, u, u.kind == kindSSE)
		u.headers = u.staticHeaders(c.Headers)
	}

	u.callsCtx, u.abandonCalls = context.WithCancel(context.Background())
	return u, nil
}

// Connect starts connecting in the background (see Start), with the
// restarts and tool-list reads that follow; the callbacks of Options run
// from now on. Cancelling ctx closes the upstream as Close does, without
// waiting. Only the first call does anything, and none after Close.
func (u *Upstream) Connect(ctx context.Context) {
	u.mu.Lock()
	if u.connected || u.closing {
		u.mu.Unlock()
		return
	}
	u.connected = true
	u.started, u.starting = time.Now(), true
	u.ctx, u.stop = context.WithCancel(context.WithoutCancel(ctx))
	u.mu.Unlock()
	c := u.cfg
	u.wg.Add(2)
	go u.supervise()
	go u.catalog()
	go func() {
		u.wg.Wait()
		if u.httpClient != nil {
			u.httpClient.CloseIdleConnections()
		}
		close(u.done)
	}()
	unwatch := context.AfterFunc(ctx, func() {
		cctx, cancel := context.WithTimeout(context.Background(), c.DrainTimeout+2*c.KillGrace+5*time.Second)
		defer cancel()
		_ = u.Close(cctx)
	})
	u.mu.Lock()
	u.unwatch = unwatch
	u.mu.Unlock()
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// Name is Config.Name or, when that is empty, the serverInfo.name of
// the server's latest initialize ("mcp-server" before the first one).
func (u *Upstream) Name() string {
	if u.name != "" {
		return u.name
	}
	if n := u.serverName.Load(); n != nil && *n != "" {
		return *n
	}
	if u.cfg.URL != "" {
		return redactURLString(u.cfg.URL)
	}
	return "mcp-server"
}

// diagnosis is Options.Diagnose's answer for an initialize that got
// HTTP status, asked once per status.
func (u *Upstream) diagnosis(status int) string {
	if u.opts.Diagnose == nil {
		return ""
	}
	u.diagMu.Lock()
	defer u.diagMu.Unlock()
	if u.diagFor != status {
		ctx, cancel := context.WithTimeout(u.ctx, u.cfg.InitTimeout)
		u.diagFor, u.diag = status, u.opts.Diagnose(ctx, u.cfg.URL, status)
		cancel()
	}
	return u.diag
}

// liveName logs an upstream's name as it is when the line is written.
type liveName struct{ u *Upstream }

func (n liveName) LogValue() slog.Value { return slog.StringValue(n.u.Name()) }

// Ready reports whether calls can be sent now.
func (u *Upstream) Ready() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.conn != nil && !u.closing
}

// Status returns a snapshot of the upstream's health.
func (u *Upstream) Status() Status {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := Status{
		Ready:           u.conn != nil && !u.closing,
		Server:          u.server,
		ProtocolVersion: u.protocol,
		Restarts:        u.restarts,
	}
	if !s.Ready {
		s.Reason = u.reason
	}
	s.AuthorizationURL = authorizationURL(u.authErr)
	s.Starting = u.startingLocked()
	return s
}

// startingLocked is Status.Starting. u.mu must be held.
func (u *Upstream) startingLocked() bool {
	return u.starting && u.conn == nil && !u.closing && time.Since(u.started) < u.cfg.InitTimeout
}

// ServerInfo is the serverInfo of the latest successful initialize; zero
// before the first one. It is kept while the upstream restarts.
func (u *Upstream) ServerInfo() ServerInfo {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.server
}

// Tools returns the latest complete tool list, each tool the raw JSON
// object exactly as the upstream sent it. It is nil before the first
// listing and kept while the upstream restarts. The elements must not be
// modified.
func (u *Upstream) Tools() []json.RawMessage {
	p := u.tools.Load()
	if p == nil {
		return nil
	}
	return append([]json.RawMessage(nil), (*p)...)
}

// WaitReady waits until the upstream is ready, ctx ends (its error is
// returned) or the upstream is closed (ErrUnavailable).
func (u *Upstream) WaitReady(ctx context.Context) error {
	for {
		u.mu.Lock()
		ready, closing, changed := u.conn != nil, u.closing, u.changed
		u.mu.Unlock()
		switch {
		case closing:
			return fmt.Errorf("%w: upstream %q is closed", ErrUnavailable, u.Name())
		case ready:
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// changedLocked wakes WaitReady. u.mu must be held.
func (u *Upstream) changedLocked() {
	close(u.changed)
	u.changed = make(chan struct{})
}

// Close stops sending new calls, lets in-flight ones finish for at most
// DrainTimeout (or until ctx ends), then closes the connection: a stdio
// child gets its stdin closed, SIGTERM after KillGrace and SIGKILL of its
// whole process group after another KillGrace. When ctx ends first the
// grace periods are skipped. Close never waits much past ctx or those
// bounds; it returns ctx.Err() when ctx ended before everything stopped.
// It may be called more than once.
func (u *Upstream) Close(ctx context.Context) error {
	u.mu.Lock()
	if !u.closing {
		u.closing = true
		u.reason = "closed"
		u.drained = make(chan struct{})
		if u.inflight == 0 {
			close(u.drained)
		}
		u.changedLocked()
	}
	drained, unwatch, connected := u.drained, u.unwatch, u.connected
	u.mu.Unlock()
	if !connected {
		u.abandonCalls()
		return nil // New without Connect: nothing runs
	}
	if unwatch != nil {
		unwatch()
	}

	stopHurry := context.AfterFunc(ctx, u.hurryUp)
	defer stopHurry()

	drain := time.NewTimer(u.cfg.DrainTimeout)
	select {
	case <-drained:
	case <-drain.C:
		u.log.Warn("in-flight calls abandoned at close")
	case <-ctx.Done():
	}
	drain.Stop()
	u.abandonCalls()
	u.stop()

	select {
	case <-u.done:
		return nil
	case <-ctx.Done():
	}
	// Grace periods are skipped now; the process group is being killed.
	// Wait a little for that so that Close leaves no child behind.
	last := time.NewTimer(killWait + time.Second)
	defer last.Stop()
	select {
	case <-u.done:
	case <-last.C:
		u.log.Error("upstream did not stop in time")
	}
	return ctx.Err()
}

func (u *Upstream) hurryUp() {
	u.hurryOnce.Do(func() { close(u.hurry) })
}

// current returns the ready connection, or nil.
func (u *Upstream) current() *connection {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closing {
		return nil
	}
	return u.conn
}

// acquire returns the ready connection and counts a call in flight, to be
// ended with release; or an ErrUnavailable error.
func (u *Upstream) acquire() (*connection, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.closing:
		return nil, u.unavailable("closed")
	case u.conn == nil && u.authErr != nil:
		// Waiting for an authorization: the caller gets its URL.
		return nil, &callError{class: ErrUnavailable, extra: u.authErr, msg: fmt.Sprintf("upstream %q unavailable: %s", u.Name(), u.reason)}
	case u.conn == nil:
		return nil, u.unavailable(u.reason)
	}
	u.inflight++
	return u.conn, nil
}

func (u *Upstream) release() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.inflight--
	if u.closing && u.inflight == 0 {
		select {
		case <-u.drained:
		default:
			close(u.drained)
		}
	}
}

func (u *Upstream) unavailable(reason string) error {
	return &callError{class: ErrUnavailable, msg: fmt.Sprintf("upstream %q unavailable: %s", u.Name(), reason)}
}

// triggerRelist asks the catalog goroutine to read the tool list again.
func (u *Upstream) triggerRelist() {
	select {
	case u.relist <- struct{}{}:
	default:
	}
}

// backoff returns the wait before reconnection attempt n (0-based).
func (u *Upstream) backoff(n int) time.Duration {
	d := u.cfg.RestartBackoffMin
	for i := 0; i < n && d < u.cfg.RestartBackoffMax; i++ {
		d *= 2
	}
	d = min(d, u.cfg.RestartBackoffMax)
	half := d / 2
	return half + rand.N(d-half+1)
}

// sleep waits d or until the upstream is stopped; it reports whether it
// slept the whole time.
func (u *Upstream) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-u.retry:
		return true
	case <-u.ctx.Done():
		return false
	}
}

// Retry cuts short the wait before the next connection attempt, if the
// upstream is waiting, and reads the tool list again: for example once a
// user authorized the bridge.
func (u *Upstream) Retry() {
	select {
	case u.retry <- struct{}{}:
	default:
	}
	u.triggerRelist()
}

// AuthorizationError is the Authorizer's error that keeps the upstream
// from serving (it gives Status.AuthorizationURL), nil when there is none.
func (u *Upstream) AuthorizationError() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.authErr
}

// setAuthErr records (or clears, nil) the Authorizer's error that keeps the
// upstream from serving: Status.AuthorizationURL.
func (u *Upstream) setAuthErr(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.authErr != err {
		u.authErr = err
		u.changedLocked()
	}
}

// supervise connects, watches the connection, and reconnects until the
// upstream is stopped. A connection that fails before it is ready, or is
// lost less than StableAfter after, waits a growing backoff first (a child
// that crashes at start is not restarted in a tight loop); one lost after a
// longer run is replaced at once, and the backoff starts over.
func (u *Upstream) supervise() {
	defer u.wg.Done()
	attempt := 0
	lastFailure := ""
	for {
		if u.ctx.Err() != nil {
			return
		}
		conn, reason, err := u.connect()
		if err != nil {
			if u.ctx.Err() != nil {
				return
			}
			u.mu.Lock()
			if !u.closing {
				u.reason = reason
				u.authErr = nil
				if authorizationURL(err) != "" {
					u.authErr = err
				}
			}
			// Not there yet is still starting; anything else is an answer.
			u.starting = u.starting && strings.HasPrefix(reason, "unreachable: ")
			u.changedLocked()
			u.mu.Unlock()
			if reason != lastFailure {
				u.log.Warn("upstream not connected", "reason", reason)
				lastFailure = reason
			} else {
				u.log.Debug("upstream still not connected", "reason", reason)
			}
			if !u.wait("restart", attempt) {
				return
			}
			attempt++
			continue
		}
		lastFailure = ""
		connectedAt := time.Now()
		u.publish(conn)
		if conn.isModern() && conn.listChanged.Load() {
			u.wg.Add(1)
			go conn.listen() // era.go
		}

		why := conn.watch(u.ctx, u.cfg.PingInterval)

		u.mu.Lock()
		if u.conn == conn {
			u.conn = nil
		}
		stopping := u.ctx.Err() != nil
		if !stopping {
			u.restarts++
		}
		if !stopping && !u.closing {
			if u.kind == kindStdio {
				u.reason = fmt.Sprintf("restarting after %s (restart %d)", why, u.restarts)
			} else {
				u.reason = fmt.Sprintf("reconnecting after %s (attempt %d)", why, u.restarts)
			}
		}
		u.changedLocked()
		u.mu.Unlock()
		stable := time.Since(connectedAt) >= u.cfg.StableAfter
		if !stopping {
			u.log.Warn("upstream connection lost", "cause", why, "restart_at_once", stable)
		}
		conn.teardown(u.hurry)
		if stopping {
			return
		}
		if stable {
			attempt = 0
			continue
		}
		if !u.wait("restart", attempt) {
			return
		}
		attempt++
	}
}

// wait sleeps the backoff of attempt, telling Options.waited; it
// reports whether it slept the whole time (false: the upstream stopped).
func (u *Upstream) wait(what string, attempt int) bool {
	d := u.backoff(attempt)
	u.mu.Lock()
	if u.startingLocked() {
		d = min(d, startRetryMax)
	}
	u.mu.Unlock()
	if u.opts.waited != nil {
		u.opts.waited(what, attempt, d)
	}
	u.log.Debug("waiting before trying again", "what", what, "attempt", attempt+1, "wait", d.Round(time.Millisecond).String())
	return u.sleep(d)
}

// publish makes conn the ready connection.
func (u *Upstream) publish(conn *connection) {
	u.mu.Lock()
	server, protocol := conn.info()
	u.conn = conn
	u.starting = false
	if !u.closing {
		u.reason = ""
		u.authErr = nil
	}
	u.server = server
	u.serverName.Store(&server.Name)
	u.protocol = protocol
	u.changedLocked()
	u.mu.Unlock()
	u.log.Info("upstream connected", "server", server.Name, "version", server.Version, "protocol", protocol)
	u.triggerRelist()
}

// setProtocol records the protocol version conn moved to.
func (u *Upstream) setProtocol(conn *connection, version string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn == conn {
		u.protocol = version
	}
}

// setServer records the serverInfo of a re-initialization.
func (u *Upstream) setServer(conn *connection) {
	server, protocol := conn.info()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn == conn {
		u.server = server
		u.serverName.Store(&server.Name)
		u.protocol = protocol
	}
}

// catalog reads the tool list when asked to (after each connection and
// notifications/tools/list_changed) and reports it. A listing that fails
// without an answer (unreachable, HTTP 401, a malformed or too large
// result) is tried again after the restart backoff, growing with each
// failure in a row and starting over after a success. A modern upstream
// without an acknowledged subscriptions/listen stream (era.go) has its
// list read again after the list's ttlMs, bounded (listRefresh).
func (u *Upstream) catalog() {
	defer u.wg.Done()
	retry := time.NewTimer(0)
	retry.Stop()
	defer retry.Stop()
	refresh := time.NewTimer(0)
	refresh.Stop()
	defer refresh.Stop()
	lo, hi := listRefreshMin, listRefreshMax
	if b := u.opts.listRefresh; b != nil {
		lo, hi = b[0], b[1]
	}
	failures := 0
	for {
		ttlDue := false
		select {
		case <-u.ctx.Done():
			return
		case <-u.relist:
		case <-retry.C:
		case <-refresh.C:
			ttlDue = true
		}
		conn := u.current()
		if conn == nil {
			continue // the next connection asks again
		}
		if ttlDue && conn.listening.Load() {
			continue // the subscriptions/listen stream tells of changes
		}
		retry.Stop()
		refresh.Stop()
		epoch := conn.epoch.Load()
		ctx, cancel := context.WithTimeout(u.ctx, u.cfg.InitTimeout)
		tools, err := conn.listTools(ctx)
		cancel()
		if err != nil {
			if u.ctx.Err() != nil {
				return
			}
			var ue *Error
			switch {
			case errors.As(err, &ue):
				// The server answered: it has no tools to give (for
				// example -32601 without the tools capability).
				u.log.Warn("tools/list failed; the upstream has no tools", "code", ue.Code, "message", ue.Message)
				tools = []json.RawMessage{}
			case errors.Is(err, errSessionGone):
				ctx, cancel := context.WithTimeout(u.ctx, u.cfg.InitTimeout)
				_ = conn.reinitialize(ctx, epoch) // lists again when it succeeds
				cancel()
				continue
			case authorizationURL(err) != "":
				// Connected, but the tool list needs an authorization: wait
				// for it (Retry lists again), asking now and then.
				u.setAuthErr(err)
				u.listFailed(err)
				d := u.backoff(failures)
				u.log.Info("tools/list needs an authorization; waiting for it", "retry_in", d.String())
				failures++
				retry.Reset(d)
				continue
			default:
				d := u.backoff(failures)
				if u.opts.waited != nil {
					u.opts.waited("tools/list", failures, d)
				}
				u.log.Warn("tools/list failed; will retry", "error", err, "retry_in", d.String(), "failures", failures+1)
				u.listFailed(err)
				failures++
				conn.suspect()
				retry.Reset(d)
				continue
			}
		}
		failures = 0
		u.setAuthErr(nil)
		u.tools.Store(&tools)
		u.log.Debug("tool list read", "tools", len(tools))
		if conn.isModern() && !conn.listening.Load() {
			d := listRefresh(conn.ttl.Load(), lo, hi)
			if u.opts.waited != nil {
				u.opts.waited("ttl", 0, d)
			}
			refresh.Reset(d)
		}
		if cb := u.opts.OnToolsChanged; cb != nil {
			cb(tools)
		}
	}
}

// listFailed tells Options.OnListFailed of a failed tools/list.
func (u *Upstream) listFailed(err error) {
	if cb := u.opts.OnListFailed; cb != nil {
		cb(err)
	}
}

// callError is an error of this package with a class (ErrUnavailable,
// ErrLost…) and/or a context error, whose text carries no secret.
type callError struct {
	class error
	extra error // context.Canceled, context.DeadlineExceeded, the Authorizer's error, or nil
	msg   string
}

func (e *callError) Error() string { return "mcp: " + e.msg }

func (e *callError) Unwrap() []error {
	errs := make([]error, 0, 2)
	for _, err := range []error{e.class, e.extra} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
