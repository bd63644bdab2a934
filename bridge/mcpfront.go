package bridge

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpotc/mcpotc/bridge/audit"
	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/bridge/policy"
	"github.com/mcpotc/mcpotc/bridge/tracing"
	"github.com/mcpotc/mcpotc/bridge/webhooks"
	"github.com/mcpotc/mcpotc/mapping"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/otc"
)

// Defaults of MCPFrontOptions.
const (
	DefaultCallTimeout = 60 * time.Second
	DefaultRefresh     = 30 * time.Second
	// listTimeout bounds one GET /tools.
	listTimeout = 15 * time.Second
)

// OTCServer is one OTC tool server behind the MCP front, with what
// satisfies its tools' requirements. Values are resolved (secrets read from
// the environment) before they get here; none is ever logged.
type OTCServer struct {
	// Name identifies the upstream in logs and errors.
	Name string
	// Client calls it.
	Client *otc.Client
	// Prefix is put before each tool's name. Empty: none.
	Prefix string
	// Secrets maps secret ids to values sent in context.secrets.
	Secrets map[string]string
	// Tokens maps authorization provider ids to tokens sent in
	// context.authorization.
	Tokens map[string]string
	// CallerTokenProviders lists the providers for which the MCP caller's
	// own bearer token (HTTP transports) is sent, when the configuration has
	// no token for them. Empty: never.
	CallerTokenProviders []string
	// UserID is sent as context.user_id when a tool requires one. Empty: none.
	UserID string
	// UserIDFromToken sends the name of the MCP caller's OAuth token
	// (front.Identity.Name: its subject, qualified by its issuer when the
	// front trusts several) as context.user_id instead of UserID, so that
	// each user's own grants are used. No forwarded context overrides it.
	// Zero: UserID.
	UserIDFromToken bool
	// UserIDClaim names what of the token is the user id with
	// UserIDFromToken: "sub" (zero) or "client_id" (an authorization
	// server whose tokens name no user, one client per user).
	UserIDClaim string
	// CallTimeout bounds each call; zero means MCPFrontOptions.CallTimeout.
	CallTimeout time.Duration
	// AcceptContext uses the context (tokens, secrets, user id) an OTC front
	// forwards in mapping.MetaOTCRequest, before the configured one, when
	// the MCP caller is the chain peer (front.Forwarder); from any other
	// caller it is ignored. Zero: forwarded context is ignored.
	AcceptContext bool
	// Credentials are transport credential values (API key, JWT secret)
	// that must never reach a log line, should an upstream echo them;
	// Secrets and Tokens values are redacted too. Zero: only those.
	Credentials []string
	// Tools override how the front shows some of its tools (docs/operations.md,
	// Tool overrides), by the OTC name the upstream lists them under. Nil:
	// none.
	Tools policy.Overrides
	// Configure, when set, replaces "configure it for upstream NAME" in
	// the error of a call refused for a secret or user id this upstream
	// was not given: how it can be given one (the built-in sample, which
	// takes no configuration, says how to try such a tool). Zero: that.
	Configure string
	// Revision identifies the configuration the upstream was made from
	// (cmd/mcpotc: a digest of its config file entry): Reload keeps an
	// upstream of the same Name and Revision as it is, its catalog
	// included. Empty: Reload lists it afresh.
	Revision string
}

// MCPFrontOptions configure an MCPFront. A nil *MCPFrontOptions is the zero value.
type MCPFrontOptions struct {
	// CallTimeout bounds each call (-32001 when exceeded). Zero: DefaultCallTimeout.
	CallTimeout time.Duration
	// Refresh is how often every upstream's catalog is listed again. Zero: DefaultRefresh.
	Refresh time.Duration
	// InputErrorsAsResult answers input validation failures (OTC 422) with an
	// isError result instead of JSON-RPC -32602. Zero: -32602.
	InputErrorsAsResult bool
	// Logger receives one line per call and catalog change. Zero: no logs.
	Logger zerolog.Logger
	// Version is the server version announced to MCP clients. Empty: "dev".
	Version string
	// Metrics records calls and upstreams. Nil: none.
	Metrics *metrics.Metrics
	// Tracer starts a span per call and per OTC request. Nil: no spans
	// (trace context still flows from the host to the OTC server).
	Tracer trace.Tracer
	// IdempotencyTTL is how long the answer of a call made with an
	// idempotency_key argument is kept for its repeats (IdempotencyKeyArg),
	// in this process. Zero: DefaultIdempotencyTTL; negative: the argument
	// is an ordinary one, passed on as it is.
	IdempotencyTTL time.Duration
	// Controls are the access policy and rate limits (SetControls
	// replaces them). Nil: none.
	Controls *Controls
	// LimitStore keeps the rate limits' buckets where the replicas share
	// them (bridge/state). Nil: this process's memory.
	LimitStore policy.Store
	// Audit receives one line per answered tools/call (docs/observability.md,
	// Audit log). Nil: none.
	Audit *audit.Log
	// AuditArgNames adds the names of a call's arguments (never their
	// values) to its audit line. Zero: no names.
	AuditArgNames bool
	// PrivateList marks the tool list as one that must not be shared
	// across callers (cacheScope "private" for 2026-07-28 clients): set it
	// when callers are identified (OAuth, a bearer token). An upstream
	// with UserIDFromToken sets it too. Zero: "public".
	PrivateList bool
	// StateKeys seal the requestState of an authorization asked of a
	// 2026-07-28 client (front.Options.StateKeys): replicas that share
	// them continue each other's calls. Nil: a random key per process.
	StateKeys [][]byte
	// StartupWait bounds the start-up (docs/mcp-front.md, What MCP hosts see): while an OTC
	// server of the configuration the front started with was never
	// listed, within StartupWait of the start, a tools/call of a tool the
	// front does not serve is answered "starting, retry"
	// (front.CodeStarting), not "not found". Zero: DefaultStartupWait;
	// negative: no wait.
	StartupWait time.Duration
	// UsedStates records which requestStates were used, each answering
	// its input_required result once (front.Options.UsedStates): replicas
	// that share StateKeys must share it too (serve-mcp: the --state
	// Redis). Nil: this process's memory.
	UsedStates front.UsedStateStore
	// AuthorizationWait bounds the watch of a challenge's check_url after
	// the user accepted it (mcpfront_auth.go). Zero:
	// DefaultAuthorizationWait; negative: check_url is asked once.
	AuthorizationWait time.Duration
	// Webhooks delivers the signed webhooks of task events to the
	// operator's endpoints (bridge/webhooks; docs/long-running.md, Webhooks): a task's
	// change of state is Sent to it. Nil: none.
	Webhooks *webhooks.Sender
	// Tasks configure MCP tasks (mcptasks.go; docs/long-running.md). Zero: the defaults.
	Tasks TaskOptions
}

// MCPFront serves the tools of OTC upstreams to MCP clients.
type MCPFront struct {
	opts      MCPFrontOptions
	log       zerolog.Logger
	tracer    trace.Tracer
	records   bool // tracing.Records(tracer): spans are worth building
	upstreams []*otcServerEntry
	front     *front.Server

	started time.Time // NewMCPFront
	// connecting names the OTC servers the front started with that were
	// never listed (install; read by starting without f.mu).
	connecting atomic.Pointer[[]string]
	draining   atomic.Bool // Drain was called: /ready is 503
	idem       *idemStore  // answers of calls with an idempotency_key; nil: off
	ctl        *controls   // access policy and rate limits
	checks     *authChecks // check_url watches of accepted challenges (mcpfront_auth.go)

	// lists serializes the listings and installs of refresh and Reload.
	lists sync.Mutex

	mu          sync.Mutex // guards upstreams, fingerprint and each upstream's tools on refresh
	fingerprint [32]byte
	print       catalogPrint // the served catalog, for the log of its changes
	served      []*frontTool // the served catalog, for SetControls
	// named is the served catalog by MCP name, stored by publish: for
	// the record of a call the front refused itself (toolNamed).
	named atomic.Pointer[map[string]*frontTool]
}

type otcServerEntry struct {
	OTCServer
	// tools is the upstream's last good catalog, keyed by MCP name.
	tools map[string]*frontTool
	// err is the last listing error (nil when the catalog is fresh).
	err error
	// listed identifies the listing tools were made from (zero when they
	// were not installed from a listing): a poll that finds it again
	// leaves the catalog as it is without decoding or mapping it.
	listed otc.CatalogDigest
	// explained is the last listing error with what to do about it, for
	// the error message explainedFor (the probes run once per message).
	explainedFor string
	explained    error
	// overrideNotes are the Tools overrides naming a tool the upstream no
	// longer lists, logged once.
	overrideNotes onceNotes
	// initial: of the configuration the front started with; everListed:
	// a listing of it was installed once (starting).
	initial, everListed bool
}

// explain adds what to do to a listing error (see explainOTCListing).
func (u *otcServerEntry) explain(ctx context.Context, err error) error {
	if msg := err.Error(); msg != u.explainedFor {
		u.explainedFor, u.explained = msg, explainOTCListing(ctx, u.Client.BaseURL(), err)
	}
	return u.explained
}

// frontTool is one MCP tool and where its calls go.
type frontTool struct {
	mapping.MCPTool
	up  *otcServerEntry
	def *otc.ToolDefinition
	// versions maps every listed version's exact id to its definition:
	// an OTC front further on may name one (mapping.MetaOTCRequest).
	versions map[string]*otc.ToolDefinition
	// ownIdemKey: the tool's input schema declares IdempotencyKeyArg, an
	// argument of its own then, passed on as it is.
	ownIdemKey bool
	// task is when its calls become MCP tasks (mcptasks.go).
	task front.TaskPolicy
}

// NewMCPFront lists every upstream once and fails when two of them expose
// the same tool name (naming both). An upstream that cannot be listed does
// not fail it: its tools appear when a later refresh reaches it.
func NewMCPFront(ctx context.Context, upstreams []OTCServer, opts *MCPFrontOptions) (*MCPFront, error) {
	f := &MCPFront{}
	if opts != nil {
		f.opts = *opts
	}
	if f.opts.CallTimeout <= 0 {
		f.opts.CallTimeout = DefaultCallTimeout
	}
	if f.opts.Refresh <= 0 {
		f.opts.Refresh = DefaultRefresh
	}
	switch {
	case f.opts.IdempotencyTTL == 0:
		f.idem = newIdemStore(DefaultIdempotencyTTL, nil)
	case f.opts.IdempotencyTTL > 0:
		f.idem = newIdemStore(f.opts.IdempotencyTTL, nil)
	}
	f.tracer = f.opts.Tracer
	if f.tracer == nil {
		f.tracer = tracing.Tracer(nil)
	}
	f.records = tracing.Records(f.tracer)
	if f.opts.Version == "" {
		f.opts.Version = "dev"
	}
	f.log = f.opts.Logger
	seen := map[string]bool{}
	for _, u := range upstreams {
		if seen[u.Name] {
			return nil, fmt.Errorf("two upstreams are named %q", u.Name)
		}
		seen[u.Name] = true
		f.upstreams = append(f.upstreams, &otcServerEntry{OTCServer: u, tools: map[string]*frontTool{}, initial: true})
	}
	f.started = time.Now()
	if f.opts.StartupWait == 0 {
		f.opts.StartupWait = DefaultStartupWait
	}
	f.ctl = newControls(metrics.FrontMCP, f.opts.Controls, f.opts.LimitStore, f.log, f.opts.Metrics)
	f.checks = newAuthChecks(upstreams, f.opts.AuthorizationWait)
	// An access policy makes every list private too (the front says so
	// where a Visibility filter applies).
	private := f.opts.PrivateList || slices.ContainsFunc(upstreams, func(u OTCServer) bool { return u.UserIDFromToken })
	f.front = front.New("mcpotc", f.opts.Version, &front.Options{Logger: slogLogger(f.log), OnCallRefused: f.frontRefused, Visibility: f.ctl.load().mcpVisibility,
		Starting: f.starting, ListTTL: f.opts.Refresh, PrivateList: private, StateKeys: f.opts.StateKeys, UsedStates: f.opts.UsedStates})
	f.setTasks()
	f.opts.Metrics.Watch(metrics.FrontMCP, f.upstreamMetrics)
	if err := f.refresh(ctx, true); err != nil {
		return nil, err
	}
	return f, nil
}

// Health answers GET /health on the HTTP transports
// (front.HTTPOptions.Health), in the OTC front's shape: 200 and
// {"status":"ok","upstreams":{name:"ready"}} when every upstream's last
// listing succeeded, else 503 and "unavailable" with each failing
// upstream's error (its old tools are still served meanwhile).
func (f *MCPFront) Health(context.Context) (bool, any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ready := true
	status := make(map[string]string, len(f.upstreams))
	for _, u := range f.upstreams {
		if u.err != nil {
			ready = false
			status[u.Name] = u.err.Error()
			continue
		}
		status[u.Name] = "ready"
	}
	if ready {
		return true, map[string]any{"status": "ok", "upstreams": status}
	}
	return false, map[string]any{"status": "unavailable", "upstreams": status}
}

// Ready answers GET /ready on the HTTP transports
// (front.HTTPOptions.Ready), a load balancer's readiness probe: Health's
// answer, or 503 {"status":"draining"} once Drain was called.
func (f *MCPFront) Ready(ctx context.Context) (bool, any) {
	if f.draining.Load() {
		return false, map[string]any{"status": "draining"}
	}
	return f.Health(ctx)
}

// Drain makes GET /ready answer 503 "draining" from now on, so that load
// balancers stop sending new requests; they are still served until the
// transport shuts down (cmd/mcpotc: at SIGTERM, then --drain-delay).
func (f *MCPFront) Drain() { f.draining.Store(true) }

// Server is the MCP server, for its transports.
func (f *MCPFront) Server() *front.Server { return f.front }

// SetControls replaces the access policy and rate limits (nil: none), for
// the calls that start from now on; clients are told that the tool list
// changed (what each may see may have).
func (f *MCPFront) SetControls(c *Controls) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ctl.set(c)
	f.publish()
}

// publish serves f.served with the front's controls, as one catalog: the
// tools' handlers admit calls under the controls the visibility comes
// with (f.mu held).
func (f *MCPFront) publish() {
	a := f.ctl.load()
	server := make([]front.Tool, len(f.served))
	named := make(map[string]*frontTool, len(f.served))
	for i, t := range f.served {
		server[i] = front.Tool{Tool: t.Tool, Handler: f.handler(t, a)}
		named[t.Tool.Name] = t
	}
	f.named.Store(&named)
	f.front.SetCatalog(a.mcpVisibility, server...)
}

// starting is the front's front.Options.Starting: "starting, retry"
// while an OTC server the front started with was never listed, within
// StartupWait of the start (docs/mcp-front.md, What MCP hosts see); nil after, or once every
// one was listed.
func (f *MCPFront) starting(context.Context) *front.RPCError {
	if time.Since(f.started) >= f.opts.StartupWait {
		return nil
	}
	connecting := f.connecting.Load()
	if connecting == nil || len(*connecting) == 0 {
		return nil
	}
	return startingError(fmt.Sprintf("%d OTC server(s) still connecting: %s", len(*connecting), strings.Join(*connecting, ", ")), *connecting)
}

// startingError is the MCP front's answer to a call that came before the
// catalog was complete (front.CodeStarting): what GET /tools answers
// serve-otc's callers then, as a JSON-RPC error.
func startingError(what string, connecting []string) *front.RPCError {
	return &front.RPCError{Code: front.CodeStarting,
		Message: "The bridge is starting: the tool list is not complete yet (" + what + "); retry in 1 second",
		Data:    map[string]any{"retry_after_ms": front.StartingRetryAfterSeconds * 1000, "connecting": connecting}}
}

// The first listings (Run): an OTC server started beside this one answers
// 503 (or an empty list) until its own tool servers are up, so an
// upstream whose listing failed or was empty is listed again sooner than
// Refresh: after firstListMin, doubling up to firstListMax, for at most
// firstListWindow after Run starts.
const (
	firstListMin    = 100 * time.Millisecond
	firstListMax    = time.Second
	firstListWindow = 5 * time.Minute
)

// Run refreshes the catalogs every Refresh until ctx ends, and sooner at
// first while an upstream's listing failed or was empty (see
// firstListWindow).
func (f *MCPFront) Run(ctx context.Context) {
	t := time.NewTicker(f.opts.Refresh)
	defer t.Stop()
	start := time.Now()
	wait := firstListMin
	soon := time.NewTimer(wait)
	defer soon.Stop()
	for {
		var early <-chan time.Time
		if f.incomplete() && time.Since(start) < firstListWindow {
			early = soon.C
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-early:
			f.log.Debug().Dur("after", wait).Msg("an upstream's first listing failed or was empty: listing again")
			wait = min(2*wait, firstListMax)
			soon.Reset(wait)
		}
		if err := f.refresh(ctx, false); err != nil {
			f.log.Error().Err(err).Msg("catalog not updated")
		}
	}
}

// incomplete reports whether an upstream's latest listing failed or gave
// no tools.
func (f *MCPFront) incomplete() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range f.upstreams {
		if u.err != nil || len(u.tools) == 0 {
			return true
		}
	}
	return false
}

// refresh lists every upstream (concurrently) and installs the new catalog
// when it changed, which notifies clients (tools/list_changed). At start a
// name clash is an error; later it keeps the clashing upstream's old tools.
func (f *MCPFront) refresh(ctx context.Context, atStart bool) error {
	f.lists.Lock()
	defer f.lists.Unlock()
	f.mu.Lock()
	ups := f.upstreams
	f.mu.Unlock()
	return f.install(ups, f.list(ctx, ups), atStart, nil)
}

// listing is what listing one upstream gave.
type listing struct {
	tools     map[string]*frontTool
	err       error // the listing failed, or
	clash     error // it names two tools alike
	digest    otc.CatalogDigest
	unchanged bool     // the listing its tools were made from
	missing   []string // overrides of tools it does not list
}

// list lists ups concurrently (f.lists held).
func (f *MCPFront) list(ctx context.Context, ups []*otcServerEntry) []listing {
	results := make([]listing, len(ups))
	prev := make([]otc.CatalogDigest, len(ups))
	f.mu.Lock()
	for i, u := range ups {
		prev[i] = u.listed
	}
	f.mu.Unlock()
	var wg sync.WaitGroup
	for i, u := range ups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lctx, cancel := context.WithTimeout(ctx, listTimeout)
			defer cancel()
			start := time.Now()
			defs, digest, unchanged, err := u.Client.ListToolsChanged(lctx, prev[i])
			f.opts.Metrics.Refreshed(metrics.FrontMCP, u.Name, err)
			f.log.Debug().Str("upstream", u.Name).Dur("took", time.Since(start)).Int("tools", len(defs)).Bool("unchanged", unchanged).
				AnErr("error", err).Msg("GET /tools")
			if err != nil {
				results[i].err = u.explain(lctx, err)
				return
			}
			results[i].digest, results[i].unchanged = digest, unchanged
			if !unchanged {
				results[i].tools, results[i].clash = latestTools(u, defs)
				results[i].missing = missingOverrides(u.Tools, defs)
			}
		}()
	}
	wg.Wait()
	return results
}

// install makes ups, listed as results, the served upstreams and their
// tools the catalog (f.lists held).
//
// controls, when not nil, are a reload's: they replace the front's and
// are published with the catalog, as one value.
func (f *MCPFront) install(ups []*otcServerEntry, results []listing, atStart bool, controls **Controls) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upstreams = ups
	if !atStart && !slices.ContainsFunc(results, func(r listing) bool { return !r.unchanged }) {
		f.log.Debug().Msg("catalog unchanged: every upstream listed what its tools were made from")
		return nil
	}
	owner := map[string]toolOwner{}
	var all []*frontTool
	for i, u := range f.upstreams {
		r := results[i]
		if r.unchanged {
			r.tools = u.tools
		}
		if r.clash != nil {
			if atStart {
				return r.clash
			}
			r.err = r.clash
		}
		switch {
		case r.err != nil && u.err == nil && len(u.tools) == 0:
			// Nothing to keep: the host sees no tool of it, and this
			// line is the only place that says why.
			f.log.Error().Str("upstream", u.Name).Str("url", redactURL(u.Client.BaseURL())).Err(r.err).
				Msgf("upstream catalog unavailable: none of its tools is served until it answers GET /tools (asked again every %s)", f.opts.Refresh)
		case r.err != nil && u.err == nil:
			f.log.Warn().Str("upstream", u.Name).Err(r.err).Msg("upstream catalog unavailable; keeping its last tools")
		case r.err == nil && u.err != nil:
			f.log.Info().Str("upstream", u.Name).Int("tools", len(r.tools)).Msg("upstream catalog available again")
		}
		u.err = r.err
		u.everListed = u.everListed || r.err == nil
		if r.err == nil && !r.unchanged {
			for _, name := range r.missing {
				if u.overrideNotes.fresh(name) {
					f.log.Warn().Str("upstream", u.Name).Str("tool", name).
						Msg("tool override: the upstream does not list this tool (any more); the override waits for it")
				}
			}
			u.overrideNotes.round()
		}
		if r.err == nil {
			if clash := clashes(owner, u.Name, r.tools); clash == nil {
				u.tools, u.listed = r.tools, r.digest
			} else if atStart {
				return clash
			} else {
				// Keep the old tools; they held their names before.
				f.log.Error().Str("upstream", u.Name).Err(clash).Msg("catalog change refused")
				r.err = clash
			}
		}
		if r.err != nil {
			u.listed = otc.CatalogDigest{} // the next listing is mapped again
			if clash := clashes(owner, u.Name, u.tools); clash != nil {
				f.log.Error().Str("upstream", u.Name).Err(clash).Msg("tools withheld")
				u.tools = map[string]*frontTool{}
			}
		}
		tools := u.tools
		for _, t := range tools {
			all = append(all, t)
		}
	}
	var connecting []string
	for _, u := range f.upstreams {
		if u.initial && !u.everListed {
			connecting = append(connecting, u.Name)
		}
	}
	slices.Sort(connecting)
	f.connecting.Store(&connecting)
	sort.Slice(all, func(i, j int) bool { return all[i].Tool.Name < all[j].Tool.Name })
	h := sha256.New()
	for _, t := range all {
		b, _ := json.Marshal(t.Tool)
		h.Write(b)
		h.Write([]byte(t.OTCID))
	}
	var fp [32]byte
	copy(fp[:], h.Sum(nil))
	if controls != nil {
		// A reload's: published with its catalog, as one value.
		f.ctl.set(*controls)
		reloadHook()
	}
	if fp != f.fingerprint || atStart || controls != nil {
		f.fingerprint = fp
		f.served = all
		f.publish()
		next := catalogPrint{}
		for _, t := range all {
			next.add(t.Tool.Name, t.Tool)
		}
		logCatalogChange(f.log, f.print, next)
		f.print = next
	} else {
		f.log.Debug().Int("tools", len(all)).Msg("catalog unchanged")
	}
	return nil
}

// latestTools maps an upstream's definitions to MCP tools: one per OTC name,
// bound to the latest version.
func latestTools(u *otcServerEntry, defs []otc.ToolDefinition) (map[string]*frontTool, error) {
	byKey := map[string][]*otc.ToolDefinition{} // Toolkit.Tool → its versions
	for i := range defs {
		d := &defs[i]
		id, err := otc.ParseToolID(d.ID)
		if err != nil {
			continue // a tool we could not call: not listed
		}
		byKey[id.Key()] = append(byKey[id.Key()], d)
	}
	tools := map[string]*frontTool{}
	for _, versions := range byKey {
		sort.SliceStable(versions, func(i, j int) bool { return otc.CompareVersions(versions[i].Version, versions[j].Version) > 0 })
		d := versions[0] // the latest
		// An override (docs/operations.md, Tool overrides) changes how the tool is
		// shown, never the id its calls are sent with.
		o, overridden := u.Tools[d.Name]
		if o.Hidden {
			continue
		}
		shown := d
		if overridden {
			c := *d
			c.Name, c.Description = cmp.Or(o.Name, d.Name), cmp.Or(o.Description, d.Description)
			shown = &c
		}
		name := u.Prefix + shown.Name
		if prev, ok := tools[name]; ok {
			return nil, fmt.Errorf("upstream %s lists two tools named %q: %s and %s", u.Name, name, prev.def.ID, d.ID)
		}
		ft := &frontTool{MCPTool: mapping.MCPToolFromOTC(shown, name, u.Prefix, versions), up: u, def: d, versions: map[string]*otc.ToolDefinition{},
			ownIdemKey: declaresProperty(d.InputSchema, IdempotencyKeyArg)}
		if overridden {
			ft.Tool.Name = name // a tool restored from an OTC front is named by its carrier otherwise
			ft.Tool.Title = cmp.Or(o.Title, ft.Tool.Title)
			ft.setTaskPolicy(o.Task)
		}
		for _, v := range versions {
			ft.versions[exactID(v)] = v
		}
		ft.OTCID = exactID(d) // always call the exact version listed
		tools[ft.Tool.Name] = ft
	}
	return tools, nil
}

// missingOverrides are the names of overrides whose tool defs do not
// list, sorted.
func missingOverrides(overrides policy.Overrides, defs []otc.ToolDefinition) []string {
	if len(overrides) == 0 {
		return nil
	}
	listed := map[string]bool{}
	for i := range defs {
		listed[defs[i].Name] = true
	}
	var missing []string
	for name := range overrides {
		if !listed[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	return missing
}

// exactID is a definition's id with its version: Toolkit.Tool@x.y.z.
func exactID(d *otc.ToolDefinition) string {
	if id, _ := otc.ParseToolID(d.ID); id.Version == "" && otc.ValidVersion(d.Version) {
		return id.Key() + "@" + d.Version
	}
	return d.ID
}

// toolOwner says which upstream's tool holds an MCP name.
type toolOwner struct{ upstream, id string }

// clashes reports a tool name that another upstream already holds in
// owner, else records the tools' names there.
func clashes(owner map[string]toolOwner, upstream string, tools map[string]*frontTool) error {
	for name, t := range tools {
		if prev, ok := owner[name]; ok {
			return fmt.Errorf("tool name %q is exposed twice: by upstream %s (%s) and by upstream %s (%s); set a prefix for one of them", name, prev.upstream, prev.id, upstream, t.OTCID)
		}
	}
	for name, t := range tools {
		owner[name] = toolOwner{upstream, t.OTCID}
	}
	return nil
}

// handler calls the OTC tool behind one MCP tool, under a: the controls
// published with the catalog the call found its tool in. Every way a call
// ends goes through its record (mcpCall.finish): one log line, one metric,
// one audit line and its span, whatever the answer.
func (f *MCPFront) handler(t *frontTool, a *activeControls) front.ToolHandler {
	return func(ctx context.Context, req mcpgo.CallToolRequest) (res *mcpgo.CallToolResult, err error) {
		c := f.beginCall(ctx, t, t.Tool.Name, req)
		defer func() { c.finish(res, err) }()
		ctx = c.ctx
		if a.limited() {
			d := a.admit(ctx, mcpKey(ctx), t.up.Name, t.Tool.Name)
			if d.Wait > 0 {
				c.refused(metrics.RateLimited, "rate limited ("+d.Limit+")")
				return rateLimited(t.Tool.Name, d), nil
			}
			if d.Gone {
				// The caller went away before admission: not started.
				c.refused(metrics.Cancelled, "the caller went away before the call was admitted")
				return nil, ctx.Err()
			}
		}
		callReq := &otc.CallToolRequest{
			ToolID: t.OTCID,
			CallID: otc.NewCallID(),
			Input:  arguments(req),
		}
		c.req = callReq
		// An idempotency_key the tool does not take is the host's: it
		// becomes the call_id (docs/mcp-front.md, What MCP hosts see).
		idemKey := ""
		if f.idem != nil && !t.ownIdemKey {
			if key, rest, problem, ok := takeIdempotencyKey(callReq.Input); ok {
				if problem != "" {
					c.refused(metrics.InvalidInput, "malformed idempotency_key")
					return mcpgo.NewToolResultError(problem), nil
				}
				idemKey, callReq.Input = key, rest
			}
		}
		def := t.def
		var forwarded *otc.CallContext
		var carrier mapping.OTCRequestMeta
		if mapping.MetaField(req.Params.Meta, mapping.MetaOTCRequest, &carrier) {
			// From an OTC front: the exact version (one the upstream
			// lists, whoever asks), the caller's call_id (scoped by the
			// MCP caller, so that two callers' keys never meet upstream),
			// and the context when this upstream accepts it and the MCP
			// caller is the chain peer (docs/mapping.md, Forwarded context).
			if v, ok := t.versions[carrier.ToolID]; ok {
				def, callReq.ToolID = v, carrier.ToolID
			}
			if carrier.CallID != "" && len(carrier.CallID) <= 256 {
				callReq.CallID = front.ScopedCallID(ctx, carrier.CallID)
			}
			switch {
			case carrier.Context == nil || !t.up.AcceptContext:
			case front.Forwarder(ctx):
				forwarded = carrier.Context
			default:
				f.log.Warn().Str("call_id", cutID(callReq.CallID)).Str("tool", t.Tool.Name).Str("upstream", t.up.Name).
					Msg("forwarded OTC context ignored: the MCP caller is not the chain peer")
			}
		}
		if msg := t.up.conflict(ctx, forwarded); msg != "" {
			// The forwarded user is not the one the caller's token names:
			// refused, as a result the model reads.
			c.refused(metrics.AuthRequired, "refused: the forwarded user_id differs from the caller's token")
			return mcpgo.NewToolResultError(msg), nil
		}
		if idemKey != "" && carrier.CallID == "" {
			callReq.CallID = front.ScopedCallID(ctx, idemKey)
		}
		callReq.Context = t.up.callContext(ctx, def.Requirements, forwarded)
		// An OTC front deferred the requirements to this side: the
		// upstream's own answer (a 400 naming what is missing) goes back.
		if missing := t.up.unconfigured(ctx, def.Requirements, forwarded); missing != "" && carrier.ToolID == "" {
			// Calling would only earn a 400: say what to configure now.
			c.refused(metrics.AuthRequired, "refused: requirement not configured")
			c.said += ": " + missing // the upstream's names: the log line's, not the audit line's
			how := "configure it for upstream " + t.up.Name
			if t.up.Configure != "" {
				how = t.up.Configure
			}
			return nil, &front.RPCError{Code: mapping.CodeInternal, Message: fmt.Sprintf("the OTC tool %s needs %s: %s", t.OTCID, missing, how)}
		}
		if r, ok := front.Resumed(ctx); ok {
			// The user's answer to this call's authorization challenge
			// (mcpfront_auth.go): it may end the call here.
			if o := f.resumeAuthorization(ctx, t, r, carrier.ToolID != ""); o != nil {
				c.refused(metrics.AuthRequired, o.outcome)
				c.round = r.Round
				return o.res, o.err
			}
		}
		timeout := t.up.CallTimeout
		if timeout <= 0 {
			timeout = f.opts.CallTimeout
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		// The OTC request's span; its traceparent goes as the OTC trace_id
		// and the HTTP traceparent header.
		if f.records {
			cctx, c.cspan = f.tracer.Start(cctx, "execute_tool "+callReq.ToolID, trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(tracing.KeyToolName.String(callReq.ToolID), tracing.KeyOperation.String(tracing.OperationExecuteTool),
					tracing.KeyToolCallID.String(callReq.CallID), tracing.KeyUpstream.String(t.up.Name)))
		}
		if tp := tracing.Traceparent(cctx); tp != "" {
			callReq.TraceID = tp
		}
		f.log.Debug().Str("call_id", cutID(callReq.CallID)).Str("tool_id", callReq.ToolID).Str("upstream", t.up.Name).
			Str("dialect", string(t.up.Client.Dialect())).Dur("timeout", timeout).Msg("POST /tools/call")
		var resp *otc.CallToolResponse
		if idemKey != "" {
			resp, c.replayed, err = f.idem.do(cctx, callReq.CallID, idemPrincipal(ctx), idemPrint(callReq), func() (*otc.CallToolResponse, error) {
				return t.up.Client.Call(cctx, callReq)
			})
		} else {
			resp, err = t.up.Client.Call(cctx, callReq)
		}
		if err == nil {
			c.outcome, c.success = callOutcome(resp, nil), &resp.Success
			if !resp.Success && resp.Error != nil && resp.Error.DeveloperMessage != "" {
				c.developer = t.up.redact(resp.Error.DeveloperMessage, forwarded)
			}
			return mapping.MCPResultOf(resp, &t.MCPTool)
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			err = ctx.Err() // the host's own deadline or cancellation, not ours
		}
		c.outcome = callOutcome(nil, err)
		var reused *otc.StatusError
		switch {
		case idemKey == "":
		case errors.Is(err, errIdemKeyReused),
			errors.As(err, &reused) && reused.StatusCode == 400 && reused.Message == otc.CallIDReusedMessage:
			// Here, or at an OTC server that keeps call_ids (another replica
			// of this front may have run the first call).
			c.said = "idempotency_key used for another call"
			return idemKeyReused(idemKey, f.idem.ttl), nil
		case errors.Is(err, errIdemBusy):
			c.said = "too many calls with an idempotency_key running"
			return idemBusy(), nil
		}
		if errors.Is(err, context.Canceled) {
			c.said = "cancelled by the client"
		} else {
			c.said, c.errText = "error", t.up.redact(err.Error(), forwarded)
			var se *otc.StatusError
			if errors.As(err, &se) && se.DeveloperMessage != "" {
				c.developer = t.up.redact(se.DeveloperMessage, forwarded)
			}
		}
		return f.authError(ctx, t, err, carrier.ToolID != "")
	}
}

// failed marks span as failed with error.type outcome, unless outcome is
// metrics.OK.
func failed(span trace.Span, outcome string) {
	if outcome != metrics.OK {
		span.SetAttributes(tracing.KeyErrorType.String(outcome))
		span.SetStatus(codes.Error, outcome)
	}
}

// callOutcome classifies a call's answer for the metrics (see
// metrics.OK and the others).
func callOutcome(resp *otc.CallToolResponse, err error) string {
	var se *otc.StatusError
	switch {
	case err == nil && resp.Success:
		return metrics.OK
	case err == nil:
		return metrics.ToolError
	case errors.Is(err, context.Canceled):
		return metrics.Cancelled
	case errors.Is(err, context.DeadlineExceeded):
		return metrics.Timeout
	case errors.Is(err, errIdemKeyReused):
		return metrics.InvalidInput
	case errors.Is(err, errIdemBusy):
		return metrics.Unavailable
	case !errors.As(err, &se):
		return metrics.Unavailable // unreachable, or an unreadable answer
	case errors.Is(se, otc.ErrValidation), errors.Is(se, otc.ErrBadRequest) && len(se.ParameterErrors) > 0:
		return metrics.InvalidInput
	case errors.Is(se, otc.ErrUnauthorized), se.MissingRequirements != nil:
		return metrics.AuthRequired
	case errors.Is(se, otc.ErrServerFailure):
		return metrics.Unavailable
	case mapping.UnknownToolError(se):
		return metrics.UnknownTool
	case errors.Is(se, otc.ErrBadRequest):
		return metrics.InvalidInput
	}
	return metrics.Internal
}

// upstreamMetrics is the state of every upstream, for a scrape: up when
// its last listing succeeded.
func (f *MCPFront) upstreamMetrics() []metrics.UpstreamState {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]metrics.UpstreamState, 0, len(f.upstreams))
	for _, u := range f.upstreams {
		out = append(out, metrics.UpstreamState{Name: u.Name, Up: u.err == nil, Tools: len(u.tools)})
	}
	return out
}

// requestIDString is a JSON-RPC id as a span attribute: a string id's
// string, a number's digits.
func requestIDString(id json.RawMessage) string {
	var s string
	if json.Unmarshal(id, &s) == nil {
		return s
	}
	return string(id)
}

// arguments are the call's arguments as sent, byte for byte ({} when absent).
func arguments(req mcpgo.CallToolRequest) json.RawMessage {
	if raw := req.Params.RawArguments; len(raw) > 0 && string(raw) != "null" {
		return raw
	}
	if req.Params.Arguments != nil {
		if b, err := json.Marshal(req.Params.Arguments); err == nil {
			return b
		}
	}
	return json.RawMessage("{}")
}

// traceparent is the W3C traceparent in the request's _meta, if any.
func traceparent(req mcpgo.CallToolRequest) string {
	if req.Params.Meta == nil {
		return ""
	}
	tp, _ := req.Params.Meta.AdditionalFields["traceparent"].(string)
	if !otc.IsTraceparent(tp) {
		return ""
	}
	return tp
}

// callContext satisfies a tool's requirements: from a forwarded context
// first (when accepted), then the configuration, then (for opted-in
// providers) the MCP caller's own bearer token.
func (u *otcServerEntry) callContext(ctx context.Context, req *otc.Requirements, fwd *otc.CallContext) *otc.CallContext {
	if req == nil {
		return nil
	}
	cc := &otc.CallContext{}
	for _, a := range req.Authorization {
		token := fwd.Token(a.ID)
		if token == "" {
			token = u.Tokens[a.ID]
		}
		if token == "" && slices.Contains(u.CallerTokenProviders, a.ID) {
			token, _ = front.CallerBearerToken(ctx)
		}
		if token != "" {
			cc.Authorization = append(cc.Authorization, otc.AuthorizationToken{ID: a.ID, Token: token})
		}
	}
	for _, s := range req.Secrets {
		if v, ok := fwd.Secret(s.ID); ok {
			cc.Secrets = append(cc.Secrets, otc.Secret{ID: s.ID, Value: v})
		} else if v, ok := u.Secrets[s.ID]; ok {
			cc.Secrets = append(cc.Secrets, otc.Secret{ID: s.ID, Value: v})
		}
	}
	// A tool that needs authorization gets the user id too when one is
	// configured: its server keeps the grants a user completed under it
	// (README, The sample OTC toolkit).
	if req.UserID || len(req.Authorization) > 0 {
		cc.UserID = u.userID(ctx, fwd)
	}
	return cc
}

// userID is the context.user_id of a call: the caller's token's name
// (UserIDFromToken), else the forwarded one, else the configured one.
func (u *otcServerEntry) userID(ctx context.Context, fwd *otc.CallContext) string {
	if user := u.tokenUserID(ctx); user != "" {
		return user
	}
	if fwd != nil && fwd.UserID != "" {
		return fwd.UserID
	}
	return u.UserID
}

// tokenUserID is the user id the caller's OAuth token names
// (UserIDFromToken), "" when there is none.
func (u *otcServerEntry) tokenUserID(ctx context.Context) string {
	if !u.UserIDFromToken {
		return ""
	}
	id, ok := front.CallerIdentity(ctx)
	if !ok {
		return ""
	}
	return id.Name(u.UserIDClaim)
}

// conflict is the refusal of a call whose forwarded context names another
// user than the caller's own token (UserIDFromToken), "" when there is no
// conflict: a forwarded user_id never overrides the token's.
func (u *otcServerEntry) conflict(ctx context.Context, fwd *otc.CallContext) string {
	if fwd == nil || fwd.UserID == "" {
		return ""
	}
	if user := u.tokenUserID(ctx); user != "" && user != fwd.UserID {
		return "The call was refused: the forwarded OTC context names a user_id that differs from the user of the MCP caller's own token " +
			"(user_id_from_token). The token's user is the one the call runs as; send no user_id in the forwarded context, or the token's."
	}
	return ""
}

// unconfigured names the secrets and user id a tool requires that the
// configuration does not provide ("" when none). Authorization is not
// checked here: without a token the upstream answers with a challenge
// the client can act on.
func (u *otcServerEntry) unconfigured(ctx context.Context, req *otc.Requirements, fwd *otc.CallContext) string {
	if req == nil {
		return ""
	}
	var missing []string
	for _, s := range req.Secrets {
		_, forwarded := fwd.Secret(s.ID)
		if _, ok := u.Secrets[s.ID]; !ok && !forwarded {
			missing = append(missing, fmt.Sprintf("secret %q (config: secrets.%s)", s.ID, s.ID))
		}
	}
	if req.UserID && u.userID(ctx, fwd) == "" {
		if u.UserIDFromToken {
			missing = append(missing, "a user id (the caller's token has no subject; config: user_id)")
		} else {
			missing = append(missing, "a user id (config: user_id)")
		}
	}
	return strings.Join(missing, " and ")
}

// redact removes credential, secret and token values — the upstream's and
// those forwarded with the call — from a text bound for the log (an
// upstream may echo what it was sent).
func (u *otcServerEntry) redact(s string, fwd *otc.CallContext) string {
	values := append([]string(nil), u.Credentials...)
	for _, v := range u.Secrets {
		values = append(values, v)
	}
	for _, v := range u.Tokens {
		values = append(values, v)
	}
	if fwd != nil {
		for _, a := range fwd.Authorization {
			values = append(values, a.Token)
		}
		for _, sec := range fwd.Secrets {
			values = append(values, sec.Value)
		}
	}
	for _, v := range values {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}
