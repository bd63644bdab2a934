package bridge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpotc/mcpotc/bridge/audit"
	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/bridge/policy"
	"github.com/mcpotc/mcpotc/bridge/tracing"
	"github.com/mcpotc/mcpotc/bridge/webhooks"
	"github.com/mcpotc/mcpotc/internal/callid"
	"github.com/mcpotc/mcpotc/mapping"
	"github.com/mcpotc/mcpotc/mcp/oauth"
	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
)

// MCPServer is one MCP server behind the OTC front: one OTC toolkit.
type MCPServer struct {
	// Config says how to reach it (stdio child, URL or in-process).
	Config upstream.Config
	// Toolkit is its OTC toolkit name. Empty: its serverInfo.name.
	Toolkit string
	// Version is its tools' OTC version. Empty: serverInfo.version when it
	// is x.y.z, else 1.0.0.
	Version string
	// Allow, when not empty, lists the only MCP tools exposed; Deny lists
	// tools never exposed. Both name MCP tools as the server does.
	Allow, Deny []string
	// Tools override how the front shows some of its tools (docs/operations.md,
	// Tool overrides), by the MCP name the server lists them under. Nil: none.
	Tools policy.Overrides
	// ForwardAuthorization sends the first token of a call's
	// context.authorization to an HTTP upstream as "Authorization: Bearer".
	// Zero: never.
	ForwardAuthorization bool
	// ForwardContext sends a call's whole context (tokens, secrets, user
	// id) in _meta[mapping.MetaOTCRequest] to an MCP front that restored
	// OTC tools, which uses it only when configured to accept it. Zero: never.
	ForwardContext bool
	// OAuth makes the bridge an OAuth client of this HTTP upstream
	// (package mcp/oauth); Upstream and ServerURL are filled in from
	// Config. Needs OTCFrontOptions.OAuth. Nil: Config.Headers only.
	OAuth *oauth.Config
}

// OTCFrontOptions configure an OTCFront. A nil *OTCFrontOptions is the zero value.
type OTCFrontOptions struct {
	// Server configures the OTC handler (transport auth, idempotency, body
	// limit). Its Health and Observe are set by the front.
	Server otc.Options
	// Logger receives call lines, catalog changes and the upstreams' own
	// logs (a stdio child's stderr prefixed with its name). Zero: no logs.
	Logger zerolog.Logger
	// Version is the clientInfo version sent to upstreams. Empty: "dev".
	Version string
	// OAuth configures the OAuth client of the upstreams that have
	// MCPServer.OAuth: its routes are served under /oauth/. Its Logger
	// and OnAuthorized are set by the front. Nil: no upstream may have
	// MCPServer.OAuth.
	OAuth *oauth.Options
	// Checks are what GET /ready needs besides the upstreams, by name
	// (the store the replicas share: "store"). Each answers nil when what
	// it checks is reachable; it gets ReadyCheckTimeout. Nil: none.
	Checks map[string]func(context.Context) error
	// Metrics records calls, upstreams and OAuth events. Nil: none.
	Metrics *metrics.Metrics
	// Tracer starts a span per call and per MCP request. Nil: no spans
	// (trace context still flows from the caller to the MCP server).
	Tracer trace.Tracer
	// TrustStatedUserIDs lets per-user upstreams take context.user_id from
	// callers that did not authenticate (transport auth off). Zero: a
	// per-user upstream needs Server.APIKey or Server.JWTSecret, because
	// context.user_id is the caller's assertion (docs/security.md, Security model);
	// cmd/mcpotc allows it on a loopback listener only.
	TrustStatedUserIDs bool
	// ResumeStore keeps the state of calls an MCP server stopped to have
	// its user open a URL, for the OTC client's retry (resume.go): the
	// store the replicas share. Nil: this process's memory.
	ResumeStore ResumeStore
	// ResumeTTL is how long such a state waits for its retry. Zero:
	// DefaultResumeTTL.
	ResumeTTL time.Duration
	// PublicURL is the bridge's base URL as OTC clients reach it, for the
	// check_url of those challenges. Empty: the scheme and Host each call
	// came with.
	PublicURL string
	// Controls are the access policy and rate limits (SetControls
	// replaces them). Nil: none.
	Controls *Controls
	// LimitStore keeps the rate limits' buckets where the replicas share
	// them (bridge/state). Nil: this process's memory.
	LimitStore policy.Store
	// Audit receives one line per answered call and per OAuth flow event
	// (docs/observability.md, Audit log). Nil: none.
	Audit *audit.Log
	// AuditArgNames adds the names of a call's arguments (never their
	// values) to its audit line. Zero: no names.
	AuditArgNames bool
	// StartupWait bounds how long GET /tools (and /ready) wait at start
	// for an MCP server that cannot be reached yet (docs/otc-front.md, Start-up):
	// past it the servers that are up are served, the missing one is
	// named in /health and the log, and its tools join when it connects.
	// Zero: DefaultStartupWait; it never exceeds a server's init timeout.
	StartupWait time.Duration
	// Webhooks delivers the signed webhooks of task events to the
	// operator's endpoints (bridge/webhooks; docs/long-running.md, Webhooks). Nil: none.
	Webhooks *webhooks.Sender
}

// ReadyCheckTimeout bounds each of OTCFrontOptions.Checks in one GET /ready.
const ReadyCheckTimeout = 2 * time.Second

// OTCFront serves the tools of MCP servers to OTC clients.
type OTCFront struct {
	log     zerolog.Logger
	handler *otc.Handler
	serve   http.Handler             // handler, and the /oauth/ routes with OTCFrontOptions.OAuth
	state   atomic.Pointer[otcState] // what the configuration decides (reload.go)
	oauth   *oauth.Manager           // nil without OTCFrontOptions.OAuth

	// Reloads (reload.go).
	ctx       context.Context // the upstreams' (NewOTCFront's)
	version   string          // OTCFrontOptions.Version
	authn     bool            // callers authenticate (an API key or JWTs)
	reload    sync.Mutex      // serializes Reload
	retired   sync.WaitGroup  // connections a reload replaced, until they are closed
	closing   chan struct{}   // closed by Close
	closeOnce sync.Once
	// The audit log (auditlog.go).
	audit  *audit.Log // OTCFrontOptions.Audit
	argsIn bool       // OTCFrontOptions.AuditArgNames

	checks   map[string]func(context.Context) error
	draining atomic.Bool // Drain was called: /ready is 503
	metrics  *metrics.Metrics
	owners   atomic.Pointer[map[string]string] // served tool id → its upstream, for the metrics' labels
	tracer   trace.Tracer
	// trustStated: OTCFrontOptions.TrustStatedUserIDs.
	trustStated bool
	resumes     *resumes
	started     time.Time
	startupWait time.Duration // OTCFrontOptions.StartupWait
	ctl         *controls     // access policy and rate limits

	mu    sync.Mutex   // serializes catalog rebuilds; guards what follows
	print catalogPrint // the served catalog's fingerprint
	notes onceNotes    // catalog problems already logged
}

// mcpServerEntry is one MCP server as one configuration has it: a reload
// that keeps its connection (upstream.Config and OAuth unchanged) makes a
// new mcpServerEntry around the same upConn.
type mcpServerEntry struct {
	MCPServer
	*upConn
}

// upConn is the connection to an MCP server and what it listed.
type upConn struct {
	up     *upstream.Upstream // set before it connects; never changes after
	mu     sync.Mutex
	tools  []json.RawMessage // the latest raw tools/list
	served bool              // its tools are in the served catalog
	// listed is closed at its first tool list.
	listed     chan struct{}
	listedOnce sync.Once
	// calls counts the front's calls in flight on it: a reload that
	// replaced it closes it once they are done.
	calls atomic.Int64
	// initial: connected when the front started (GET /tools waits for
	// those only: listNotReady).
	initial bool
}

// NewOTCFront starts every upstream (in the background: one that is down
// does not fail the start) and serves their tools as they arrive. It fails
// for an invalid configuration or two upstreams with the same name or
// configured toolkit.
func NewOTCFront(ctx context.Context, upstreams []MCPServer, opts *OTCFrontOptions) (*OTCFront, error) {
	var o OTCFrontOptions
	if opts != nil {
		o = *opts
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	f := &OTCFront{log: o.Logger, checks: o.Checks, metrics: o.Metrics, tracer: o.Tracer, trustStated: o.TrustStatedUserIDs,
		resumes: newResumes(o.ResumeStore, o.ResumeTTL, 0, 0, o.PublicURL), started: time.Now(),
		ctx: ctx, version: o.Version, authn: o.Server.APIKey != "" || len(o.Server.JWTSecret) > 0, closing: make(chan struct{}),
		audit: o.Audit, argsIn: o.AuditArgNames}
	if f.tracer == nil {
		f.tracer = tracing.Tracer(nil)
	}
	f.startupWait = o.StartupWait
	if f.startupWait <= 0 {
		f.startupWait = DefaultStartupWait
	}
	f.owners.Store(&map[string]string{})
	f.state.Store(&otcState{})
	cfg := OTCFrontConfig{Upstreams: upstreams}
	if err := f.check(cfg); err != nil {
		return nil, err
	}
	server := o.Server
	server.Health = f.health
	server.Ready = f.ready
	logCall := LogOTCCalls(f.log)
	server.Observe = func(rec *otc.CallRecord) {
		logCall(rec)
		f.measure(rec)
		f.auditCall(rec)
	}
	server.Unknown = f.unknown
	f.ctl = newControls(metrics.FrontOTC, o.Controls, o.LimitStore, f.log, f.metrics)
	// The first (empty) catalog's policy; each catalog the front
	// publishes (rebuild) carries its own.
	first := f.ctl.load()
	server.Access, server.Admit = first.otcAccess, f.admitWith(first, map[string]string{})
	server.StartCall = f.startCall
	server.ListNotReady = f.listNotReady
	h, err := otc.NewHandler(nil, &server)
	if err != nil {
		return nil, err
	}
	f.handler = h
	mux := http.NewServeMux()
	mux.Handle("GET /elicitation/check/{id}", h.Guard(http.HandlerFunc(f.resumes.serveCheck)))
	mux.Handle("/", h)
	f.serve = mux
	f.metrics.GaugeFunc("mcpotc_idempotency_entries", "serve-otc: call_id answers kept in this process.", func() float64 {
		n, _ := h.IdempotencyStats()
		return float64(n)
	})
	f.metrics.GaugeFunc("mcpotc_idempotency_bytes", "serve-otc: bytes of the call_id answers kept in this process.", func() float64 {
		_, b := h.IdempotencyStats()
		return float64(b)
	})
	if o.OAuth != nil {
		oo := *o.OAuth
		oo.Logger = slogLogger(f.log)
		oo.OnAuthorized = f.authorized
		oo.OnEvent = f.metrics.OAuth
		oo.OnFlowEvent = f.auditFlow
		if f.oauth, err = oauth.NewManager(&oo); err != nil {
			return nil, err
		}
		mux.Handle("/oauth/", h.Guard(f.oauth))
		mux.Handle("POST /oauth/confirm", h.Guard(http.HandlerFunc(f.confirm)))
	}
	// Every upstream is built and recorded before any connects: its
	// callbacks (a tool list can arrive before Connect returns) find the
	// front whole, and u.up never changes after.
	next, fresh, err := f.prepare(cfg)
	if err != nil {
		return nil, err
	}
	for _, c := range fresh {
		c.initial = true
	}
	f.state.Store(next)
	f.metrics.Watch(metrics.FrontOTC, f.upstreamMetrics)
	for _, c := range fresh {
		c.up.Connect(ctx)
	}
	go f.endStartup(ctx)
	return f, nil
}

// startupOver reports whether the start-up wait has passed.
func (f *OTCFront) startupOver() bool { return time.Since(f.started) >= f.startupWait }

// endStartup logs, when the start-up wait ends, the MCP servers it ended
// without: the catalog is served without their tools from then on, and
// they join it when they connect.
func (f *OTCFront) endStartup(ctx context.Context) {
	t := time.NewTimer(time.Until(f.started.Add(f.startupWait)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.closing:
		return
	case <-ctx.Done():
		return
	}
	var missing []string
	for _, u := range f.upstreams() {
		u.mu.Lock()
		served := u.served
		u.mu.Unlock()
		if u.initial && !served {
			missing = append(missing, fmt.Sprintf("%s (%s)", u.name(), u.up.Status().Reason))
		}
	}
	if len(missing) == 0 {
		return
	}
	slices.Sort(missing)
	f.log.Warn().Dur("startup_wait", f.startupWait).Strs("missing", missing).
		Msg("start-up wait over: serving the tools of the MCP servers that are up; the missing ones are named in /health, and their tools join when they connect")
}

// newUpstream builds u's connection, not started yet, with the callbacks
// that feed the catalog.
func (f *OTCFront) newUpstream(u *mcpServerEntry, version string) (*upstream.Upstream, error) {
	cfg := u.Config
	if u.OAuth != nil {
		if f.oauth == nil || cfg.URL == "" {
			return nil, fmt.Errorf("MCP server %s: OAuth needs an HTTP server and the bridge's OAuth options", cfg.Name)
		}
		oc := *u.OAuth
		oc.Upstream, oc.ServerURL = cfg.Name, cfg.URL
		client, err := f.oauth.Client(oc)
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: %w", cfg.Name, err)
		}
		cfg.Auth = client
	}
	up, err := upstream.New(&cfg, &upstream.Options{
		Logger:        slogLogger(f.log),
		ClientName:    "mcpotc",
		ClientVersion: version,
		OnToolsChanged: func(tools []json.RawMessage) {
			f.metrics.Refreshed(metrics.FrontOTC, u.name(), nil)
			f.toolsChanged(u, tools)
			u.listedOnce.Do(func() { close(u.listed) })
		},
		OnListFailed: func(err error) {
			f.metrics.Refreshed(metrics.FrontOTC, u.name(), err)
		},
		Diagnose: diagnoseMCPURL,
		OnElicitation: func(e upstream.Elicitation) {
			f.log.Info().Str("upstream", e.Upstream).Str("mode", e.Mode).Str("url", e.URL).Str("answer", e.Action).
				Msg("upstream's elicitation during a call answered")
		},
		OnNotification: func(method string, params json.RawMessage) {
			if method != string(mcpgo.MethodNotificationElicitationComplete) {
				return
			}
			// The user finished a URL the bridge challenged a caller
			// with: its check_url says so.
			if check := f.resumes.completedCheck(u.name(), params); check != "" {
				go func() {
					if err := f.resumes.setStatus(context.Background(), check, checkCompleted, ""); err != nil {
						f.log.Warn().Err(err).Msg("a challenge's completion cannot be recorded")
					}
				}()
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("MCP server %s: %w", cfg.Name, err)
	}
	return up, nil
}

// Handler serves OTC, and the /oauth/ routes with OTCFrontOptions.OAuth.
func (f *OTCFront) Handler() http.Handler { return f.serve }

// SetControls replaces the access policy and rate limits (nil: none), for
// the calls and lists that start from now on: the catalog is published
// again with them, as one value (rebuild).
func (f *OTCFront) SetControls(c *Controls) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ctl.set(c)
	f.rebuildLocked()
}

// admitWith is the otc.Policy.Admit of a catalog published with the
// controls a and the tool owners ids: the rate limits of the caller, and
// of its calls of the tool (labelled, as in the metrics, by its upstream
// and its id without version).
func (f *OTCFront) admitWith(a *activeControls, ids map[string]string) func(context.Context, otc.Caller, *otc.ToolDefinition) *otc.ServerErrorResponse {
	if !a.limited() {
		return nil
	}
	return func(ctx context.Context, caller otc.Caller, def *otc.ToolDefinition) *otc.ServerErrorResponse {
		up := metrics.Other
		if u, ok := ids[def.ID]; ok {
			up = u
		}
		tool := def.ID
		if id, err := otc.ParseToolID(def.ID); err == nil {
			tool = id.Key()
		}
		d := a.admit(ctx, func() string { return otcPrincipal(caller).Key }, up, tool)
		if d.Wait <= 0 {
			return nil // admitted, or d.Gone: the handler starts no call for a caller gone
		}
		return otcRefusal(tool, d)
	}
}

// authorized reconnects an upstream at once when the bridge's own
// identity (user "") was authorized for it: its connection waited for
// that. A user's own authorization (per-user mode) leaves the connection,
// which is the operator's, alone.
func (f *OTCFront) authorized(name, user string) {
	if user != "" {
		return
	}
	for _, u := range f.upstreams() {
		if u.Config.Name == name {
			u.up.Retry()
		}
	}
}

// Close stops every upstream: calls held for a retry are answered
// "cancel", in-flight calls get a bound, then stdio children are stopped
// (process groups killed when they do not exit).
func (f *OTCFront) Close(ctx context.Context) error {
	// Calls held for a retry that will not come here: let them go now
	// rather than at the end of the drain.
	f.resumes.releaseAll()
	// Upstreams a reload replaced stop now too, their calls bounded by ctx;
	// a reload under way ends first (its wait is bounded), and none starts.
	f.reload.Lock()
	f.closeOnce.Do(func() { close(f.closing) })
	f.reload.Unlock()
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Go(func() {
		if err := waitGroupCtx(ctx, &f.retired); err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("MCP servers a reload replaced: %w", err))
			mu.Unlock()
		}
	})
	for _, u := range f.upstreams() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := u.up.Close(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", u.name(), err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// name is the upstream's name in logs and health: the configured one, else
// the server's serverInfo.name (upstream.Config.Name).
func (u *mcpServerEntry) name() string { return u.up.Name() }

// health answers GET /health: 200 when every upstream is ready, else 503
// naming the ones that are not and why.
func (f *OTCFront) health(context.Context) (bool, any) {
	st := f.upstreamStates()
	switch {
	case st.ready:
		return true, map[string]any{"status": "ok", "upstreams": st.status}
	case len(st.authz) > 0:
		// The operator has something to do: open the URL in the log. The
		// URL itself is never on an open endpoint: whoever opened it first
		// would bind every caller to their own account.
		return false, map[string]any{"status": "authorization_required", "upstreams": st.status}
	}
	return false, map[string]any{"status": "unavailable", "upstreams": st.status}
}

// upstreamStates is where the upstreams are, for /health and /ready.
type upstreamStates struct {
	status  map[string]string // upstream → "ready" or what it waits for
	authz   map[string]string // upstream → the URL the operator must open (for the log; never served)
	ready   bool              // every upstream's tools are served
	serving bool              // every upstream's tools are served or wait for an authorization
	some    bool              // some upstream's tools are served
}

func (f *OTCFront) upstreamStates() upstreamStates {
	st := upstreamStates{status: map[string]string{}, authz: map[string]string{}, ready: true, serving: true}
	for _, u := range f.upstreams() {
		name := u.name()
		for i := 2; st.status[name] != ""; i++ { // two servers that call themselves alike
			name = fmt.Sprintf("%s#%d", u.name(), i)
		}
		s := u.up.Status()
		u.mu.Lock()
		listed := u.served
		u.mu.Unlock()
		switch {
		case s.Ready && listed:
			st.some = true
			st.status[name] = "ready"
		case s.Ready && s.AuthorizationURL != "":
			st.ready = false
			st.status[name] = "waiting for the operator to authorize the bridge (OAuth) to list the tools: the URL is in the bridge's log"
			st.authz[name] = s.AuthorizationURL
		case s.Ready:
			st.ready, st.serving = false, false
			st.status[name] = "reading the tool list"
		default:
			st.ready = false
			st.status[name] = s.Reason
			if s.AuthorizationURL != "" {
				st.status[name] = "waiting for the operator to authorize the bridge (OAuth): the URL is in the bridge's log"
				st.authz[name] = s.AuthorizationURL
			} else {
				st.serving = false
			}
		}
	}
	return st
}

// Drain makes GET /ready answer 503 "draining" from now on, so that load
// balancers stop sending new requests; the server keeps serving them until
// it is shut down (cmd/mcpotc: at SIGTERM, then --drain-delay, then the
// shutdown that lets in-flight calls end).
func (f *OTCFront) Drain() { f.draining.Store(true) }

// ready answers GET /ready, a load balancer's readiness probe: 200 when this
// replica can serve — every upstream listed its tools or waits for a user
// to authorize the bridge (through this replica's /oauth/ routes, which a
// replica out of rotation could not offer), or — past the start-up wait —
// some upstream's tools are served (a missing one is named), and every
// check passes; 503 when draining, still starting, no upstream serves, or
// a check fails.
func (f *OTCFront) ready(ctx context.Context) (bool, any) {
	if f.draining.Load() {
		return false, map[string]any{"status": "draining"}
	}
	st := f.upstreamStates()
	// Past the start-up wait, a replica that serves some server's tools
	// is ready without the missing ones (they are named under upstreams
	// and in /health): a dead server never keeps the others from callers.
	ok := st.serving || (f.startupOver() && st.some)
	body := map[string]any{"upstreams": st.status}
	if nr := f.listNotReady(ctx); nr != nil {
		// Not ready before the tools are served (docs/otc-front.md, Start-up): a
		// balancer would send calls this replica answers "not served".
		ok = false
		body["catalog"] = nr.Message
	}
	if len(f.checks) > 0 {
		checks := map[string]string{}
		for _, name := range slices.Sorted(maps.Keys(f.checks)) {
			cctx, cancel := context.WithTimeout(ctx, ReadyCheckTimeout)
			err := f.checks[name](cctx)
			cancel()
			checks[name] = "ok"
			if err != nil {
				ok, checks[name] = false, err.Error()
			}
		}
		body["checks"] = checks
	}
	body["status"] = "ok"
	if !ok {
		body["status"] = "unavailable"
	}
	return ok, body
}

// ListRetryAfter is the Retry-After of GET /tools while MCP servers are
// still connecting.
const ListRetryAfter = time.Second

// DefaultStartupWait is OTCFrontOptions.StartupWait and
// MCPFrontOptions.StartupWait when zero: how long, at most, the catalog
// waits at start for a server that cannot be reached yet (docs/otc-front.md,
// Start-up).
const DefaultStartupWait = 10 * time.Second

// listNotReady makes GET /tools answer 503 while the catalog is not
// complete yet: some MCP server was never listed, and is still
// connecting — its first attempt runs, or it could not be reached yet but
// may be starting beside the bridge (upstream.Status.Starting: within its
// init timeout), or it is connected and its list is being read (for at
// most its init timeout after the front started) — and the start-up
// wait (OTCFrontOptions.StartupWait) has not passed: after it the servers
// that are up are served, and a missing one joins when it connects
// (endStartup logs which). Every other upstream
// does not hold the list: one that failed otherwise (it answered wrongly,
// its child exited, it refused the credentials) or waits for an OAuth
// authorization (the operator's, or a list that needs one) is served
// without its tools, which come when it is ready.
func (f *OTCFront) listNotReady(context.Context) *otc.ServerErrorResponse {
	var connecting []string
	for _, u := range f.upstreams() {
		if !u.initial {
			continue // added by a reload: the catalog was complete before it
		}
		u.mu.Lock()
		listed := u.served // its tools are in the served catalog
		u.mu.Unlock()
		if listed {
			continue
		}
		s := u.up.Status()
		wait := u.Config.InitTimeout
		if wait <= 0 {
			wait = upstream.DefaultInitTimeout
		}
		switch {
		case s.AuthorizationURL != "":
		case f.startupOver():
			// The start-up wait is over (endStartup logged it): the
			// servers that are up are served; this one joins later.
		case s.Ready && time.Since(f.started) < wait:
			connecting = append(connecting, u.name()+" (reading the tool list)")
		case s.Starting:
			connecting = append(connecting, fmt.Sprintf("%s (%s)", u.name(), s.Reason))
		}
	}
	if len(connecting) == 0 {
		return nil
	}
	slices.Sort(connecting)
	return &otc.ServerErrorResponse{
		Message:          fmt.Sprintf("The tool list is not complete yet: %d MCP server(s) still connecting", len(connecting)),
		DeveloperMessage: "still connecting: " + strings.Join(connecting, "; "),
		RetryAfter:       ListRetryAfter,
	}
}

// unknown explains a call to a toolkit whose MCP server is not ready yet:
// the tool may well exist once it is.
func (f *OTCFront) unknown(id otc.ToolID) *otc.ServerErrorResponse {
	for _, u := range f.upstreams() {
		if u.up.Ready() {
			continue
		}
		s := u.up.Status()
		if id.Toolkit == mapping.Toolkit(u.Toolkit, s.Server.Name) {
			if err := u.up.AuthorizationError(); err != nil {
				// Waiting for an authorization: the caller gets the challenge.
				var se *otc.ServerErrorResponse
				if errors.As(mapping.OTCError(err), &se) {
					return se
				}
			}
			return &otc.ServerErrorResponse{
				Message:          "Tool server temporarily unavailable",
				DeveloperMessage: fmt.Sprintf("MCP server %s (toolkit %s) is not ready: %s", u.name(), id.Toolkit, s.Reason),
				RetryAfter:       mapping.UnavailableRetryAfter,
			}
		}
	}
	return nil
}

// toolsChanged records an upstream's new tool list and rebuilds the
// catalog (validators are compiled there, once per change).
func (f *OTCFront) toolsChanged(u *mcpServerEntry, tools []json.RawMessage) {
	u.mu.Lock()
	u.tools = tools
	u.mu.Unlock()
	f.rebuild()
}

func (f *OTCFront) rebuild() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rebuildLocked()
}

// rebuildLocked publishes the catalog of the served configuration's
// upstreams with the front's controls, as one value (otc.Handler's
// SetCatalog). f.mu must be held.
func (f *OTCFront) rebuildLocked() {
	var all []otc.Tool
	var included []*mcpServerEntry
	toolkits := map[string]string{} // toolkit → upstream, for clashes
	ids := map[string]string{}      // tool id → upstream
	for _, u := range f.upstreams() {
		u.mu.Lock()
		raw := u.tools
		u.mu.Unlock()
		if raw == nil {
			continue
		}
		info := u.up.ServerInfo()
		toolkit := mapping.Toolkit(u.Toolkit, info.Name)
		if other, ok := toolkits[toolkit]; ok && f.notes.fresh("toolkit "+u.name()+" "+toolkit+" "+other) {
			f.log.Error().Str("upstream", u.name()).Str("toolkit", toolkit).Str("other", other).
				Msg("two MCP servers map to the same toolkit name; this one's tools are withheld (set a toolkit name in the config)")
		}
		if _, ok := toolkits[toolkit]; ok {
			continue
		}
		toolkits[toolkit] = u.name()
		for _, t := range f.otcTools(u, toolkit, mapping.OTCVersion(u.Version, info.Version), raw) {
			// Restored OTC ids are an upstream's own: two may meet.
			if other, dup := ids[t.Definition.ID]; dup {
				if f.notes.fresh("dup " + u.name() + " " + t.Definition.ID + " " + other) {
					f.log.Error().Str("upstream", u.name()).Str("tool_id", t.Definition.ID).Str("other", other).
						Msg("tool id exposed twice; this one is withheld")
				}
				continue
			}
			ids[t.Definition.ID] = u.name()
			all = append(all, t)
		}
		included = append(included, u)
	}
	f.notes.round()
	a := f.ctl.load()
	if err := f.handler.SetCatalog(all, &otc.Policy{Access: a.otcAccess, Admit: f.admitWith(a, ids)}); err != nil {
		f.log.Error().Err(err).Msg("catalog not updated")
		return
	}
	for _, u := range included {
		u.mu.Lock()
		u.served = true
		u.mu.Unlock()
	}
	f.owners.Store(&ids)
	next := catalogPrint{}
	for _, t := range all {
		next.add(t.Definition.ID, t.Definition)
	}
	logCatalogChange(f.log, f.print, next)
	f.print = next
}

// otcTools maps one upstream's raw tools to OTC tools.
func (f *OTCFront) otcTools(u *mcpServerEntry, toolkit, version string, raw []json.RawMessage) []otc.Tool {
	var names []string
	byName := map[string]json.RawMessage{}
	original := map[string]string{} // shown name → the server's, for the calls
	listed := map[string]bool{}
	for _, r := range raw {
		name, err := mapping.MCPToolName(r)
		if err != nil {
			if f.notes.fresh("name " + u.name() + " " + err.Error()) {
				f.log.Warn().Str("upstream", u.name()).Err(err).Msg("tool skipped")
			}
			continue
		}
		listed[name] = true
		if !u.exposes(name) || u.Tools[name].Hidden {
			continue
		}
		shown, r := f.overridden(u, name, r)
		if _, dup := byName[shown]; dup {
			if shown != name && f.notes.fresh("override clash "+u.name()+" "+name) {
				f.log.Error().Str("upstream", u.name()).Str("tool", name).Str("name", shown).
					Msg("tool override: another tool of the server has this name; the overridden tool is withheld")
			}
			continue
		}
		byName[shown], original[shown] = r, name
		names = append(names, shown)
	}
	for _, name := range slices.Sorted(maps.Keys(u.Tools)) {
		if !listed[name] && f.notes.fresh("override missing "+u.name()+" "+name) {
			f.log.Warn().Str("upstream", u.name()).Str("tool", name).
				Msg("tool override: the upstream does not list this tool (any more); the override waits for it")
		}
	}
	sort.Strings(names)
	var out []otc.Tool
	for _, id := range mapping.OTCIdentities(toolkit, version, names) {
		tools, notes, err := mapping.OTCToolsFromMCP(byName[id.MCPName], id, version)
		if err != nil {
			if f.notes.fresh("map " + u.name() + " " + id.MCPName + " " + err.Error()) {
				f.log.Warn().Str("upstream", u.name()).Str("tool", id.MCPName).Err(err).Msg("tool skipped")
			}
			continue
		}
		if len(notes.CutRefs) > 0 && f.notes.fresh("refs "+u.name()+" "+id.MCPName) {
			f.log.Info().Str("upstream", u.name()).Str("tool", id.MCPName).Strs("refs", notes.CutRefs).
				Msg("recursive or remote $refs replaced by {} in the OTC schema")
		}
		for _, t := range tools {
			// The x-mcp-tool carrier is listed only to callers that read
			// it (an MCP front: docs/mapping.md, Round trips).
			var carriers otc.Extensions
			t.Def.InputSchema, carriers = mapping.SchemaCarriers(t.Def.InputSchema)
			// One tool whose schema cannot be compiled must not withhold the rest.
			if err := f.handler.CheckInputSchema(t.Def.ID, t.Def.InputSchema); err != nil {
				if f.notes.fresh("schema " + u.name() + " " + t.Def.ID + " " + err.Error()) {
					f.log.Warn().Str("upstream", u.name()).Str("tool", id.MCPName).Err(err).Msg("tool skipped")
				}
				continue
			}
			tool := otc.Tool{Definition: t.Def, Func: f.call(u, original[id.MCPName], t), DeferRequirements: t.Restored, SchemaCarriers: carriers}
			if u.perUser() {
				// Each user's own authorization: the tool says so, and its
				// function checks (the vault may hold the user's token).
				tool.Definition.Requirements = perUserRequirements(tool.Definition.Requirements, u.Config.Name, u.OAuth.Scopes)
				tool.DeferRequirements = true
			}
			out = append(out, tool)
		}
	}
	return out
}

// perUser reports whether each OTC user reaches the upstream with a token
// of their own (oauth per_user).
func (u *mcpServerEntry) perUser() bool { return u.OAuth != nil && u.OAuth.PerUser }

// perUserRequirements adds to a tool's requirements the user id and an
// authorization named after the upstream (the id of its challenges).
func perUserRequirements(r *otc.Requirements, upstream string, scopes []string) *otc.Requirements {
	var out otc.Requirements
	if r != nil {
		out = *r
		out.Authorization = slices.Clone(r.Authorization)
	}
	out.UserID = true
	out.Authorization = append(out.Authorization, otc.AuthorizationRequirement{ID: upstream, OAuth2: &otc.OAuth2Details{Scopes: scopes}})
	return &out
}

// overridden is an MCP tool as its override (docs/operations.md, Tool overrides)
// shows it: its name, and the raw tool with the override's name, title and
// description; as it is without one (or when it does not read as an
// object).
func (f *OTCFront) overridden(u *mcpServerEntry, name string, raw json.RawMessage) (string, json.RawMessage) {
	o, ok := u.Tools[name]
	if !ok {
		return name, raw
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil || members == nil {
		return name, raw
	}
	for key, v := range map[string]string{"name": o.Name, "title": o.Title, "description": o.Description} {
		if v != "" {
			members[key], _ = json.Marshal(v)
		}
	}
	b, err := json.Marshal(members)
	if err != nil {
		return name, raw
	}
	return cmp.Or(o.Name, name), b
}

func (u *mcpServerEntry) exposes(name string) bool {
	if len(u.Allow) > 0 && !slices.Contains(u.Allow, name) {
		return false
	}
	return !slices.Contains(u.Deny, name)
}

// call is the OTC tool function of one MCP tool: the original name, the
// exact arguments, and the outcome mapped by the OTC-front table. The OTC
// identity of the call (the exact id, the caller's call_id and, when the
// server is configured to take it, the context) goes along in
// _meta[MetaOTCRequest] for an MCP front that restored OTC tools.
func (f *OTCFront) call(u *mcpServerEntry, mcpName string, t mapping.OTCTool) otc.ToolFunc {
	// Worked out once per tool version, when the catalog changes.
	shape := mapping.ResultShapeOf(t.Def.OutputSchema)
	return func(ctx context.Context, c *otc.Call) (json.RawMessage, error) {
		// A reload that replaced the upstream closes it once this is done.
		u.calls.Add(1)
		defer u.calls.Add(-1)
		// The MCP request's span; its traceparent goes in
		// _meta.traceparent and, to an HTTP server, the traceparent header.
		ctx, span := f.tracer.Start(ctx, "tools/call "+mcpName, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(tracing.KeyMCPMethod.String("tools/call"), tracing.KeyToolName.String(mcpName),
				tracing.KeyOperation.String(tracing.OperationExecuteTool), tracing.KeyUpstream.String(u.name())))
		defer span.End()
		meta := map[string]any{}
		var header http.Header
		if tp := tracing.Traceparent(ctx); tp != "" {
			meta["traceparent"] = tp
			header = http.Header{"Traceparent": {tp}}
		}
		if t.Restored {
			// The call_id goes on scoped to this front's caller (when
			// callers are told apart: JWTs), so that two callers' keys
			// never meet at the OTC server behind the MCP front, which
			// sees one caller (docs/security.md, Security model); one that goes on
			// unscoped never equals a scoped one (callid.Pass), so that
			// no caller can send another caller's.
			callID := callid.Pass(c.Request.CallID)
			if c.Caller.Authenticated && c.Caller.ID != otc.CallerAPIKey {
				callID = callid.Scope(c.Caller.ID, c.Request.CallID)
			}
			req := mapping.OTCRequestMeta{ToolID: c.Tool.ID, CallID: callID}
			if u.ForwardContext {
				req.Context = c.Request.Context
			}
			meta[mapping.MetaOTCRequest] = req
		}
		if u.ForwardAuthorization && c.Request.Context != nil && len(c.Request.Context.Authorization) > 0 {
			if header == nil {
				header = http.Header{}
			}
			header.Set("Authorization", "Bearer "+c.Request.Context.Authorization[0].Token)
		}
		user := ""
		if cc := c.Request.Context; cc != nil {
			user = cc.UserID
		}
		if u.perUser() {
			// The caller's own token for this upstream, as it is; else the
			// token of the user the caller's authentication binds, from the
			// vault, or that user's challenge (bound to the caller).
			cc := c.Request.Context
			if tok := cc.Token(u.Config.Name); tok != "" {
				ctx = oauth.WithToken(ctx, tok)
			} else {
				bound, failure := f.boundUser(c.Caller, cc, c.Tool.ID)
				if failure != nil {
					return nil, failure
				}
				user = bound
				ctx = oauth.WithCaller(oauth.WithUser(ctx, user), c.Caller.Principal())
			}
		}
		ctx = upstream.WithRequestIDs(ctx, func(id int64) { span.SetAttributes(tracing.KeyRequestID.Int64(id)) })
		// A retry of a call the server stopped to have the user open a
		// URL takes what it kept, when it is the same caller's, for the
		// same user, tool, input and call_id (resume.go).
		callID := ""
		if c.CallIDGiven {
			callID = c.Request.CallID
		}
		site := &callSite{f: f, u: u, c: c, mcpName: mcpName, principal: c.Caller.Principal(), meta: meta, header: header,
			key: callKey(c.Caller.Principal(), user, u.name(), c.Tool.ID, callID, c.Request.Input)}
		raw, err := site.run(ctx)
		if err != nil {
			err := otcError(err)
			failed(span, classifyToolErr(err))
			return nil, err
		}
		// The x-mcp-result carrier (a second copy of the result) only
		// for a caller that reads it.
		mapResult := mapping.OTCResultPlain
		if c.ReadsCarriers(mapping.CarriersFamily) {
			mapResult = mapping.OTCResultFor
		}
		out, err := mapResult(raw, shape)
		switch {
		case err != nil:
			return nil, &otc.ToolError{Message: "The tool server sent an unreadable result", DeveloperMessage: err.Error()}
		case out.Error != nil:
			return nil, out.Error
		}
		c.Ext = out.Ext
		return out.Value, nil
	}
}

// otcError is mapping.OTCError, for an error not already mapped.
func otcError(err error) error {
	var se *otc.ServerErrorResponse
	var ve *otc.ValidationErrorResponse
	var te *otc.ToolError
	if errors.As(err, &se) || errors.As(err, &ve) || errors.As(err, &te) {
		return err
	}
	return mapping.OTCError(err)
}

// boundUser is the user a per-user call acts for (docs/security.md, Security model):
// a JWT caller is the user its token names (context.user_id, when given,
// must be the same); the API key's holder names the user in
// context.user_id; a caller that did not authenticate only with
// OTCFrontOptions.TrustStatedUserIDs. Otherwise a 400 that says what is
// missing.
func (f *OTCFront) boundUser(caller otc.Caller, cc *otc.CallContext, toolID string) (string, *otc.ServerErrorResponse) {
	stated := ""
	if cc != nil {
		stated = cc.UserID
	}
	switch {
	case caller.Authenticated && caller.ID != otc.CallerAPIKey && caller.User == "":
		return "", &otc.ServerErrorResponse{
			Message:          "The caller's token names no user",
			DeveloperMessage: fmt.Sprintf("%s acts for each user with their own authorization: the caller's JWT must name the user (serve-otc --jwt-user-claim)", toolID),
		}
	case caller.Authenticated && caller.ID != otc.CallerAPIKey:
		if stated != "" && stated != caller.User {
			return "", &otc.ServerErrorResponse{
				Message:          "context.user_id is not the authenticated user",
				DeveloperMessage: "the caller's JWT names another user than context.user_id: a caller acts for the user its token names",
			}
		}
		return caller.User, nil
	case !caller.Authenticated && !f.trustStated:
		return "", &otc.ServerErrorResponse{
			Message:          "The tool needs an authenticated caller",
			DeveloperMessage: fmt.Sprintf("%s acts for each user with their own authorization: context.user_id is taken only from authenticated callers", toolID),
		}
	case stated == "":
		return "", &otc.ServerErrorResponse{
			Message:             "The tool needs user_id in the call's context",
			DeveloperMessage:    fmt.Sprintf("%s acts for each user with their own authorization: context.user_id is required", toolID),
			MissingRequirements: &otc.MissingRequirements{UserID: true},
		}
	}
	return stated, nil
}

// confirm serves POST /oauth/confirm: the OTC application's confirmation of
// a user_verification "verifier" flow, {"flow_id", "user_id"}, with the
// caller's OTC credentials. The user is bound as for a call (a JWT caller
// confirms for the user its token names); the flow must have been issued
// to the same caller and user. 200 {"status":"completed","next_uri"} sends
// the browser on; any refusal is 4xx {"status":"failed","error"}.
func (f *OTCFront) confirm(w http.ResponseWriter, r *http.Request) {
	answer := func(status int, body map[string]string) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}
	caller, reason := f.handler.Authenticate(r)
	if reason != "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="otc"`)
		answer(http.StatusUnauthorized, map[string]string{"status": "failed", "error": "Unauthorized: " + reason})
		return
	}
	var req struct {
		FlowID string `json:"flow_id"`
		UserID string `json:"user_id"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10)).Decode(&req); err != nil || req.FlowID == "" {
		answer(http.StatusBadRequest, map[string]string{"status": "failed", "error": `send {"flow_id": …, "user_id": …} as JSON`})
		return
	}
	user, failure := f.boundUser(caller, &otc.CallContext{UserID: req.UserID}, "the confirmation")
	if failure != nil {
		answer(http.StatusForbidden, map[string]string{"status": "failed", "error": failure.Message})
		return
	}
	next, err := f.oauth.Confirm(r.Context(), caller.Principal(), req.FlowID, user)
	switch {
	case errors.Is(err, oauth.ErrConfirm):
		answer(http.StatusForbidden, map[string]string{"status": "failed", "error": strings.TrimPrefix(err.Error(), oauth.ErrConfirm.Error()+": ")})
	case err != nil:
		answer(http.StatusServiceUnavailable, map[string]string{"status": "failed", "error": "the token could not be kept; the user must authorize again"})
	default:
		answer(http.StatusOK, map[string]string{"status": "completed", "next_uri": next})
	}
}

// callSpanKey holds, in a call's context, the span startCall started.
type callSpanKey struct{}

// startCall starts the call's span, continuing the caller's trace: the
// HTTP traceparent header, else a trace_id that is a traceparent.
func (f *OTCFront) startCall(ctx context.Context, r *http.Request, req *otc.CallToolRequest) context.Context {
	tp, ts := r.Header.Get("traceparent"), r.Header.Get("tracestate")
	if !otc.IsTraceparent(tp) {
		tp, ts = "", ""
		if otc.IsTraceparent(req.TraceID) {
			tp = req.TraceID
		}
	}
	ctx, span := f.tracer.Start(tracing.Continue(ctx, tp, ts), "execute_tool "+req.ToolID, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.KeyToolName.String(req.ToolID), tracing.KeyOperation.String(tracing.OperationExecuteTool),
			tracing.KeyToolCallID.String(req.CallID)))
	return context.WithValue(ctx, callSpanKey{}, span)
}

// classifyToolErr is the outcome of a tool function's error, for its span.
func classifyToolErr(err error) string {
	var te *otc.ToolError
	var se *otc.ServerErrorResponse
	switch {
	case errors.As(err, &te) && te.TimedOut:
		return metrics.Timeout
	case errors.As(err, &te):
		return metrics.ToolError
	case errors.As(err, &se) && se.MissingRequirements != nil:
		return metrics.AuthRequired
	case errors.As(err, &se) && se.RetryAfter > 0:
		return metrics.Unavailable
	}
	return metrics.InvalidInput
}

// measure records an answered call in the metrics: the tool's labels are
// its upstream's name and its id without version, when the catalog holds
// it, else metrics.Other.
func (f *OTCFront) measure(rec *otc.CallRecord) {
	if rec.Context == nil {
		rec.Context = context.Background()
	}
	if span, ok := rec.Context.Value(callSpanKey{}).(trace.Span); ok {
		if rec.Resolved != "" {
			span.SetAttributes(tracing.KeyToolName.String(rec.Resolved))
		}
		failed(span, rec.Outcome)
		span.End()
	}
	if f.metrics == nil {
		return
	}
	up, tool := metrics.Other, metrics.Other
	if u, ok := (*f.owners.Load())[rec.Resolved]; ok {
		up, tool = u, rec.Resolved
		if id, err := otc.ParseToolID(rec.Resolved); err == nil {
			tool = id.Key()
		}
	}
	f.metrics.Call(metrics.FrontOTC, up, tool, rec.Outcome, rec.Duration)
	if rec.Replayed {
		f.metrics.Replayed(metrics.FrontOTC)
	}
}

// upstreamMetrics is the state of every upstream, for a scrape.
func (f *OTCFront) upstreamMetrics() []metrics.UpstreamState {
	ups := f.upstreams()
	out := make([]metrics.UpstreamState, 0, len(ups))
	for _, u := range ups {
		s := u.up.Status()
		u.mu.Lock()
		st := metrics.UpstreamState{Name: u.name(), Up: s.Ready && u.served, Tools: len(u.tools), Restarts: int64(s.Restarts)}
		u.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// traceIDOf is the trace id of a call: its span's, else its trace_id (cut
// to 64 bytes).
func traceIDOf(rec *otc.CallRecord) string {
	if rec.Context != nil {
		if id := tracing.TraceID(rec.Context); id != "" {
			return id
		}
	}
	return cutID(rec.TraceID)
}

// LogOTCCalls logs every answered OTC call: call id, tool, outcome,
// duration. Context (tokens, secrets) is never part of the record;
// call_id and trace_id are cut to 64 bytes.
func LogOTCCalls(log zerolog.Logger) func(*otc.CallRecord) {
	return func(rec *otc.CallRecord) {
		ev := log.Info()
		if rec.PanicStack != "" || rec.Status >= 500 {
			ev = log.Error().Str("stack", rec.PanicStack)
		}
		ev = ev.Str("call_id", cutID(rec.CallID)).Str("tool_id", rec.ToolID).Int("status", rec.Status).
			Bool("success", rec.Success).Dur("duration", rec.Duration)
		if rec.Resolved != "" && rec.Resolved != rec.ToolID {
			ev = ev.Str("resolved", rec.Resolved)
		}
		if id := traceIDOf(rec); id != "" {
			ev = ev.Str("trace_id", id)
		}
		if rec.Replayed {
			ev = ev.Bool("replayed", true)
		}
		if rec.DeveloperMessage != "" {
			ev = ev.Str("developer_message", rec.DeveloperMessage)
		}
		ev.Msg("call")
	}
}
