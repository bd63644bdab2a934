package otc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"reflect"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpotc/mcpotc/internal/httpguard"
	"github.com/mcpotc/mcpotc/internal/jsonscan"
	"github.com/mcpotc/mcpotc/internal/shutdown"
)

// StatusClientClosed is the status a CallRecord reports for a call whose
// client went away before the answer (nginx's 499): nothing was sent.
const StatusClientClosed = 499

// DefaultMaxBodyBytes bounds a call's request body when Options.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 4 << 20

// ToolFunc runs one call of a tool. The input has been validated against
// the tool's input schema and its requirements checked.
//
// It returns the value as raw JSON (nil: no value; "null": JSON null), or an
// error: a *ToolError becomes 200 success:false as it is; a
// *ServerErrorResponse becomes a 400 and a *ValidationErrorResponse a 422
// (for tools that learn only when running that the call could not reach
// them); any other error becomes 200 success:false with a generic message
// and the error in developer_message.
type ToolFunc func(ctx context.Context, call *Call) (json.RawMessage, error)

// Call is what a ToolFunc receives.
type Call struct {
	// Tool is the definition of the version the tool id resolved to.
	Tool *ToolDefinition
	// Request is the caller's request; Request.CallID is always set (the
	// caller's or a generated UUID) and Request.Input is never empty ({}
	// when absent).
	Request *CallToolRequest
	// HTTP is the incoming request, for its headers; its body has been read.
	HTTP *http.Request
	// Caller is who the request's transport authentication established.
	Caller Caller
	// CallIDGiven is set when the caller sent Request.CallID (it was not
	// generated).
	CallIDGiven bool
	// Ext, set by the tool function, adds "x-" members (carriers) to a
	// 200 answer.
	Ext Extensions
}

// ChallengeFunc makes the authorization challenge for a provider a call has
// no token for, or returns nil when the tool offers none.
type ChallengeFunc func(r *http.Request, tool *ToolDefinition, providerID string) *ToolAuthorizationChallenge

// Tool is one version of one tool served by a Handler.
type Tool struct {
	Definition ToolDefinition
	Func       ToolFunc
	// Challenge, when set, offers the client a challenge (URL and check URL)
	// for each missing authorization; nil: the 400 only names the provider.
	Challenge ChallengeFunc
	// DeferRequirements leaves the requirements to the tool function (a
	// bridge whose upstream checks them and answers with its own
	// challenges). Zero: the handler checks them before the tool runs.
	DeferRequirements bool
	// SchemaCarriers are "x-" keywords added to the top of the tool's
	// input_schema in a GET /tools answer to a caller that reads their
	// family (CarriersHeader); the definition's InputSchema, which calls
	// are validated against and every other caller is shown, has none of
	// them. Nil: none.
	SchemaCarriers Extensions
}

// Options configure a Handler. A nil *Options is the zero value.
type Options struct {
	// MaxBodyBytes bounds a request body; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// APIKey, when set, is accepted in OXP-API-Key (or the older
	// OTC-API-Key / X-API-Key headers) or as a bearer token, compared in
	// constant time. Empty: no static key.
	APIKey string
	// JWTSecret, when set, accepts HS256 bearer JWTs signed with it, with
	// exp required. Empty: no JWTs. When APIKey and JWTSecret are both
	// empty, transport auth is off and Authorization headers are ignored.
	JWTSecret []byte
	// JWTUserClaim is the JWT claim that names the end user of a call
	// (Caller.User). Zero: "sub".
	JWTUserClaim string
	// JWTAudiences is the allow-list for the aud claim: a token with aud
	// is accepted only when one of its audiences is listed. Empty: tokens
	// that carry aud are refused (the spec requires aud to be checked).
	JWTAudiences []string
	// Health reports readiness for GET /health: ok false answers 503.
	// body (any JSON value) is sent as the answer. Nil: always 200 {"status":"ok"}.
	Health func(ctx context.Context) (ok bool, body any)
	// Ready reports readiness for GET /ready, the load balancer's probe:
	// ok false answers 503 and takes this replica out of rotation. Nil:
	// Health's answer.
	Ready func(ctx context.Context) (ok bool, body any)
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Observe, when set, is told about every call that named a tool once it
	// has been answered (for logs and metrics; it must not block).
	Observe func(*CallRecord)
	// StartCall, when set, is called with each call once its body is
	// decoded, before anything else is done with it; the context it
	// returns is the call's (its tool function's, CallRecord.Context): a
	// tracer starts the call's span there, Observe ends it.
	StartCall func(ctx context.Context, r *http.Request, req *CallToolRequest) context.Context
	// ListNotReady, when set, is asked before GET /tools is answered: a
	// non-nil answer means the catalog is not complete yet (its tool
	// servers are still starting), and GET /tools answers 503 with that
	// body (and Retry-After from its RetryAfter) instead of a partial
	// list. A call of a tool the catalog does not hold (or the caller may
	// not see) gets the same 503 meanwhile, never "not found": the tool
	// may be served once the catalog is complete. Nil: GET /tools always
	// answers the catalog.
	ListNotReady func(ctx context.Context) *ServerErrorResponse
	// Access, when set, is the tools a caller may see and call (see
	// ToolFilter): GET /tools lists only those, and a call of any other is
	// answered as a call of a tool nobody serves. A nil *ToolFilter
	// allows every tool. Nil: every caller sees every tool. It is the
	// first catalog's Policy.Access (SetCatalog replaces it).
	Access func(ctx context.Context, caller Caller) *ToolFilter
	// Admit, when set, is asked before a call runs its tool (once the
	// tool is resolved, the caller allowed it, and its input and
	// requirements are checked): a non-nil answer refuses the call with
	// 429 Too Many Requests, that body, and Retry-After (whole seconds,
	// at least 1) from its RetryAfter. Nil: every call runs. It is the
	// first catalog's Policy.Admit (SetCatalog replaces it).
	Admit func(ctx context.Context, caller Caller, tool *ToolDefinition) *ServerErrorResponse
	// Unknown, when set, may explain a call to a tool id the catalog does
	// not hold (for example: its server is still starting) with its own
	// 400 body; nil from it, or a nil Unknown, answers "was not found".
	Unknown func(id ToolID) *ServerErrorResponse
	// IdempotencyTTL, when positive, makes a caller's call_id an
	// idempotency key: a repeat of a call that ran (HTTP 200) within the TTL
	// gets the first answer without running the tool again, and a repeat
	// while the first runs waits for it. A call_id reused for another tool
	// or input is a 400. Zero: off.
	//
	// The key is (caller, call_id): the caller is who transport auth
	// identified (the API key, a JWT's sub; everyone is one caller when
	// auth is off). A call_id held by another caller is a 400, and a
	// repeat must also ask for the same tool, input and context (tokens,
	// secrets, user id), else it is a 400 too, never a replay. A call with a caller's call_id runs detached from its
	// request (a client that goes away does not cancel it; CallTimeout
	// bounds it) so that a retry gets its answer. Answers kept: a 200
	// whose tool ran, for the TTL; a failure whose outcome is unknown
	// (can_retry) for its retry_after_ms at most; never a 400 / 422 or a
	// ToolError marked NotRun.
	IdempotencyTTL time.Duration
	// IdempotencyMaxEntries bounds the entries; zero means
	// DefaultIdempotencyMaxEntries (10,000). IdempotencyMaxBytes bounds the
	// bytes they hold, keys included; zero means DefaultIdempotencyMaxBytes
	// (64 MiB). One caller's answers hold at most a tenth of the entries
	// (1,000) and an eighth of the bytes (8 MiB): a caller past its share
	// loses its own oldest answers, never another caller's; past the
	// bounds of all, the oldest answer of the caller holding the most goes
	// (package internal/answers, which serve-mcp's idempotency_key uses
	// too). An answer larger than a tenth of IdempotencyMaxBytes is not
	// kept. Running calls are never dropped: IdempotencyMaxRunning
	// bounds them (zero: DefaultIdempotencyMaxRunning); beyond it a call
	// gets a 400 "temporarily unavailable" with Retry-After.
	IdempotencyMaxEntries int
	IdempotencyMaxBytes   int64
	IdempotencyMaxRunning int
	// IdempotencyStore, when set with IdempotencyTTL, keeps the call_id
	// answers in a store shared by the replicas of this server instead of
	// this process's memory (IdempotencyMaxEntries does not apply: the
	// store's own bounds do; an answer larger than a tenth of
	// IdempotencyMaxBytes is not kept). One replica claims a
	// call_id for CallTimeout plus a margin and runs it; the others wait
	// for its answer, or claim it once the claim expires (its replica
	// died). A store that cannot be reached makes calls with a call_id a
	// 400 "temporarily unavailable" with Retry-After; calls without one
	// do not use it.
	IdempotencyStore IdempotencyStore
	// CallTimeout bounds a call that runs detached from its request (see
	// IdempotencyTTL). Zero means DefaultCallTimeout.
	CallTimeout time.Duration
	// BodyReadTimeout bounds reading a call's body once its headers are
	// in: a body that trickles in longer gets 408 and the connection is
	// closed. Zero means DefaultBodyReadTimeout. (It needs a ResponseWriter
	// that supports read deadlines; others read without this bound.)
	BodyReadTimeout time.Duration
	// AllowedHosts are host names (or host:port) admitted in Host and
	// Origin besides the loopback ones, on a request that arrived on a
	// loopback address (a reverse proxy's name). See
	// DisableLocalhostProtection.
	AllowedHosts []string
	// AllowedOrigins are browser origins ("https://app.example.com", or
	// "*" for any) that the DNS-rebinding protection accepts in Origin:
	// those a CORS setting admits (scheme, host and port, compared
	// case-insensitively; a trailing slash ignored). The CORS headers
	// themselves are not this handler's.
	AllowedOrigins []string
	// TrustedProxies are the addresses of reverse proxies whose
	// X-Forwarded-For names the client: a caller that did not
	// authenticate is then known by that client's address (Caller.Addr:
	// its rate limit, its pending authorizations), not the proxy's. From
	// any other peer X-Forwarded-For is ignored (httpguard.ClientAddr).
	TrustedProxies []netip.Prefix
	// DisableLocalhostProtection turns off DNS-rebinding protection. By
	// default a request that arrived on a loopback address must name a
	// loopback host (localhost, 127.0.0.0/8, [::1], any port) or an
	// AllowedHosts name in Host and, when it sends Origin, in Origin;
	// others get 403. Requests that arrived on other addresses are not
	// checked.
	DisableLocalhostProtection bool
}

// Defaults of Options.
const (
	DefaultCallTimeout     = 60 * time.Second
	DefaultBodyReadTimeout = 10 * time.Second
)

// CallRecord describes one answered call for Options.Observe. It never
// carries context secrets or tokens.
type CallRecord struct {
	// Context is the call's context: the request's, or what
	// Options.StartCall made of it.
	Context  context.Context
	CallID   string
	TraceID  string
	ToolID   string // as requested
	Resolved string // the exact id it resolved to, if it did
	Status   int
	Success  bool
	Duration time.Duration
	// DeveloperMessage of a failure, for the log.
	DeveloperMessage string
	// PanicStack is the stack of a tool that panicked, else "".
	PanicStack string
	// Replayed: the answer is the first answer to this call_id (idempotency).
	Replayed bool
	// Outcome classifies the answer, for metrics: one of the Outcome
	// constants.
	Outcome string
	// Caller is who the transport authentication established.
	Caller Caller
	// UserID is the request's context.user_id ("" when it names none).
	UserID string
	// Input is the request's input as sent. It may hold secrets: never
	// log it (an audit log takes its member names at most).
	Input json.RawMessage
}

// recordCallerKey holds, in a call's context, the Caller for its CallRecord.
type recordCallerKey struct{}

// Outcomes of a call (CallRecord.Outcome): the label values of the
// bridge's metrics (docs/observability.md, Metrics).
const (
	OutcomeOK           = "ok"            // the tool ran and succeeded
	OutcomeToolError    = "tool_error"    // the tool ran and failed
	OutcomeInvalidInput = "invalid_input" // the request or its input was refused (422, 400, 413, 415)
	OutcomeUnknownTool  = "unknown_tool"  // no such tool
	OutcomeAuthRequired = "auth_required" // requirements missing (authorization, secrets, user id) or credentials refused
	OutcomeUnavailable  = "unavailable"   // refused for now (Retry-After), or never reached the tool (NotRun)
	OutcomeTimeout      = "timeout"       // the call timeout ran out
	OutcomeCancelled    = "cancelled"     // the client went away before the answer
	OutcomeInternal     = "internal"      // a panic or a 5xx
	OutcomeRateLimited  = "rate_limited"  // refused by Options.Admit (429)
)

// classify is the Outcome of an answer.
func classify(status int, success bool, failure any) string {
	switch {
	case status == http.StatusOK && success:
		return OutcomeOK
	case status == http.StatusOK:
		if te, ok := failure.(*ToolError); ok && te != nil && te.NotRun {
			return OutcomeUnavailable
		} else if ok && te != nil && te.TimedOut {
			return OutcomeTimeout
		}
		return OutcomeToolError
	case status == http.StatusUnprocessableEntity:
		return OutcomeInvalidInput
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return OutcomeAuthRequired
	case status == tooManyRequests:
		return OutcomeRateLimited
	case status == http.StatusServiceUnavailable:
		return OutcomeUnavailable // ended by a shutdown, Retry-After
	case status >= 500:
		return OutcomeInternal
	}
	if se, ok := failure.(*ServerErrorResponse); ok && se != nil {
		switch {
		case se.MissingRequirements != nil:
			return OutcomeAuthRequired
		case se.RetryAfter > 0:
			return OutcomeUnavailable
		}
	}
	return OutcomeInvalidInput
}

// IdempotencyStats is what the call_id idempotency of this process holds:
// the answers kept and their bytes (zero when it is off, or shared through
// Options.IdempotencyStore, which keeps them in the store).
func (h *Handler) IdempotencyStats() (entries int, bytes int64) {
	if h.idem == nil {
		return 0, 0
	}
	return h.idem.stats()
}

// Handler serves OTC over HTTP: GET /health, GET /ready, GET /tools, POST /tools/call
// (and POST /call, the docs' alias). It is safe for concurrent use; SetTools
// may replace the catalog at any time.
type Handler struct {
	opts        Options
	maxBody     int64
	callTimeout time.Duration
	bodyTimeout time.Duration
	rebinding   *httpguard.Rebinding // Options.AllowedHosts and AllowedOrigins
	idem        *idempotency         // nil when off or shared
	shared      *sharedIdempotency   // nil unless IdempotencyStore
	catalog     atomic.Pointer[catalog]
	mux         *http.ServeMux

	setMu     sync.Mutex // serializes SetTools
	checkedMu sync.Mutex
	checked   map[validatorKey]*inputValidator // compiled by CheckInputSchema, for the next SetTools
}

// catalog is an immutable snapshot of the served tools, built by SetTools.
type catalog struct {
	byKey map[string]*toolVersions // Toolkit.Tool → versions
	// The ToolDefinition array, encoded once per input-schema style: plain
	// JSON Schemas for OXP callers, the {"parameters": …} wrapper for
	// otc-1.0 callers (each spec requires its own).
	toolsPlain, toolsWrapped json.RawMessage
	// The same with every tool's SchemaCarriers, for callers that read
	// all of them (nil when no tool has any); carrierKeys are their names.
	toolsPlainCarried, toolsWrappedCarried json.RawMessage
	carrierKeys                            []string
	// suggest offers served ids for a call to one nobody serves.
	suggest suggestIndex
	// What a caller that reads some of the carriers only, or whose
	// Options.Access filter hides tools, is answered from, encoded for it;
	// keys are the defs' Toolkit.Tool.
	defs     []ToolDefinition
	plains   []json.RawMessage
	carriers []Extensions
	keys     []string
	filtered filteredListings
	// policy is who may see and call these tools, and how often: published
	// with them (SetCatalog), read with them once per request.
	policy Policy
}

type toolVersions struct {
	versions []string // sorted ascending
	byVer    map[string]*servedTool
	// Resolved at SetTools, not per call: what ResolveVersion answers for
	// no version (the latest), and for x / x.y.z (the first version of
	// versions equal to it as numbers).
	latest   string
	bySemver map[semver]string
}

// resolve is ResolveVersion(requested, tv.versions), from what SetTools
// worked out.
func (tv *toolVersions) resolve(requested string) (string, bool) {
	if requested == "" {
		return tv.latest, len(tv.versions) > 0
	}
	if !strings.Contains(requested, ".") {
		requested += ".0.0"
	}
	want, valid := parseSemver(requested)
	if !valid {
		return "", false
	}
	v, ok := tv.bySemver[want]
	return v, ok
}

type servedTool struct {
	Tool
	validator *inputValidator
}

// NewHandler serves tools. It fails when a tool's definition is not valid
// (id, name, version, input schema) or two tools share an id.
func NewHandler(tools []Tool, opts *Options) (*Handler, error) {
	h := &Handler{}
	if opts != nil {
		h.opts = *opts
	}
	h.maxBody = h.opts.MaxBodyBytes
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.opts.Now == nil {
		h.opts.Now = time.Now
	}
	h.callTimeout = h.opts.CallTimeout
	if h.callTimeout <= 0 {
		h.callTimeout = DefaultCallTimeout
	}
	h.bodyTimeout = h.opts.BodyReadTimeout
	if h.bodyTimeout <= 0 {
		h.bodyTimeout = DefaultBodyReadTimeout
	}
	h.rebinding = httpguard.NewRebinding(h.opts.AllowedHosts, h.opts.AllowedOrigins)
	switch {
	case h.opts.IdempotencyTTL > 0 && h.opts.IdempotencyStore != nil:
		h.shared = newSharedIdempotency(h.opts.IdempotencyStore, h.opts.IdempotencyTTL, h.callTimeout, h.opts.IdempotencyMaxRunning, h.opts.IdempotencyMaxBytes)
	case h.opts.IdempotencyTTL > 0:
		h.idem = newIdempotency(h.opts.IdempotencyTTL, h.opts.IdempotencyMaxEntries, h.opts.IdempotencyMaxBytes,
			h.opts.IdempotencyMaxRunning, h.opts.Now)
	}
	if err := h.SetTools(tools); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", h.serveHealth)
	mux.HandleFunc("GET /ready", h.serveReady)
	mux.HandleFunc("GET /tools", h.serveTools)
	mux.HandleFunc("POST /tools/call", h.serveCall)
	mux.HandleFunc("POST /call", h.serveCall)
	for path, allow := range map[string]string{"/health": "GET", "/ready": "GET", "/tools": "GET", "/tools/call": "POST", "/call": "POST"} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"message": r.Method + " is not allowed on " + path + "; use " + allow})
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "not found: " + r.Method + " " + r.URL.Path + " (OTC serves GET /health, GET /ready, GET /tools, POST /tools/call)"})
	})
	h.mux = mux
	return h, nil
}

// Policy is who may see and call a catalog's tools, and how often
// (Options.Access and Options.Admit). It is published with the tools
// (SetCatalog): a request reads the catalog once, and the policy that
// came with it decides, so a catalog is never served under another
// catalog's policy, not even for the instant between two stores.
type Policy struct {
	// Access is as Options.Access. Nil: every caller sees every tool.
	Access func(ctx context.Context, caller Caller) *ToolFilter
	// Admit is as Options.Admit. Nil: every call runs.
	Admit func(ctx context.Context, caller Caller, tool *ToolDefinition) *ServerErrorResponse
}

// SetTools replaces the catalog, under the policy of the one it replaces
// (see SetCatalog).
func (h *Handler) SetTools(tools []Tool) error {
	return h.SetCatalog(tools, nil)
}

// SetCatalog replaces the catalog and its policy in one store (nil p:
// the policy of the catalog it replaces; Options.Access and Options.Admit
// at first). Input schemas are compiled here, once per tool version,
// never per call. On error the old catalog and policy stay.
//
// A tool whose id and input schema are those of a tool already served, or
// of a schema checked with the handler's CheckInputSchema since the last
// SetTools, keeps that compiled validator: a catalog change compiles only
// the schemas that changed.
func (h *Handler) SetCatalog(tools []Tool, p *Policy) error {
	h.setMu.Lock()
	defer h.setMu.Unlock()
	old := h.catalog.Load()
	checked := h.takeChecked()
	c := &catalog{byKey: map[string]*toolVersions{}}
	switch {
	case p != nil:
		c.policy = *p
	case old != nil:
		c.policy = old.policy
	default:
		c.policy = Policy{Access: h.opts.Access, Admit: h.opts.Admit}
	}
	defs := make([]ToolDefinition, 0, len(tools))
	plains := make([]json.RawMessage, 0, len(tools)) // PlainInputSchema of each, from its validator
	carriers := make([]Extensions, 0, len(tools))
	keys := map[string]bool{}
	for i := range tools {
		t := tools[i]
		d := &t.Definition
		id, err := ParseToolID(d.ID)
		if err != nil {
			return fmt.Errorf("tool %d: %w", i, err)
		}
		if d.Version == "" {
			d.Version = id.Version
		}
		if !ValidVersion(d.Version) || (id.Version != "" && id.Version != d.Version) {
			return fmt.Errorf("tool %s: version %q must be x.y.z and match the id", d.ID, d.Version)
		}
		if !ValidToolName(d.Name) {
			return fmt.Errorf("tool %s: name %q does not match [A-Za-z0-9_-]{1,64}", d.ID, d.Name)
		}
		if t.Func == nil {
			return fmt.Errorf("tool %s: no function", d.ID)
		}
		v := old.validator(id.Key(), d)
		if v == nil {
			v = checked[validatorKey{d.ID, string(d.InputSchema)}]
		}
		if v == nil {
			if v, err = compileInputSchema(d.ID, d.InputSchema); err != nil {
				return err
			}
		}
		tv := c.byKey[id.Key()]
		if tv == nil {
			tv = &toolVersions{byVer: map[string]*servedTool{}}
			c.byKey[id.Key()] = tv
		}
		if _, dup := tv.byVer[d.Version]; dup {
			return fmt.Errorf("tool %s@%s is defined twice", id.Key(), d.Version)
		}
		tv.byVer[d.Version] = &servedTool{Tool: t, validator: v}
		tv.versions = append(tv.versions, d.Version)
		defs = append(defs, *d)
		c.keys = append(c.keys, id.Key())
		plains = append(plains, v.plain)
		for k := range t.SchemaCarriers {
			if !strings.HasPrefix(k, "x-") {
				return fmt.Errorf("tool %s: schema carrier %q does not start with x-", d.ID, k)
			}
			keys[k] = true
		}
		carriers = append(carriers, t.SchemaCarriers)
	}
	c.resolveVersions()
	served := make([]string, 0, len(c.byKey))
	for k := range c.byKey {
		served = append(served, k)
	}
	c.suggest = newSuggestIndex(served)
	var err error
	if c.toolsPlain, err = marshal(withInputSchemas(defs, plains, nil, false)); err != nil {
		return err
	}
	if c.toolsWrapped, err = marshal(withInputSchemas(defs, plains, nil, true)); err != nil {
		return err
	}
	// Kept for as long as the catalog: no spare capacity.
	c.toolsPlain, c.toolsWrapped = bytes.Clone(c.toolsPlain), bytes.Clone(c.toolsWrapped)
	if len(keys) > 0 {
		if c.toolsPlainCarried, err = marshal(withInputSchemas(defs, plains, carriers, false)); err != nil {
			return err
		}
		if c.toolsWrappedCarried, err = marshal(withInputSchemas(defs, plains, carriers, true)); err != nil {
			return err
		}
		c.toolsPlainCarried, c.toolsWrappedCarried = bytes.Clone(c.toolsPlainCarried), bytes.Clone(c.toolsWrappedCarried)
		for k := range keys {
			c.carrierKeys = append(c.carrierKeys, k)
		}
		c.carriers = carriers
	}
	c.defs, c.plains = defs, plains
	h.catalog.Store(c)
	return nil
}

// listing is the encoded ToolDefinition array a caller that reads the
// carrier families gets (see CarriersHeader).
func (c *catalog) listing(families []string, wrapped bool) json.RawMessage {
	read := 0
	for _, k := range c.carrierKeys {
		if inFamilies(k, families) {
			read++
		}
	}
	switch {
	case read == 0 && wrapped:
		return c.toolsWrapped
	case read == 0:
		return c.toolsPlain
	case read == len(c.carrierKeys) && wrapped:
		return c.toolsWrappedCarried
	case read == len(c.carrierKeys):
		return c.toolsPlainCarried
	}
	some := make([]Extensions, len(c.carriers))
	for i, ext := range c.carriers {
		some[i] = ext.only(families)
	}
	b, err := marshal(withInputSchemas(c.defs, c.plains, some, wrapped))
	if err != nil {
		return c.toolsPlain
	}
	return b
}

// resolveVersions sorts each tool's versions and works out what calls
// without a version, and with x or x.y.z, resolve to.
func (c *catalog) resolveVersions() {
	for _, tv := range c.byKey {
		sort.Slice(tv.versions, func(i, j int) bool { return CompareVersions(tv.versions[i], tv.versions[j]) < 0 })
		tv.latest, _ = ResolveVersion("", tv.versions)
		tv.bySemver = make(map[semver]string, len(tv.versions))
		for _, v := range tv.versions {
			if sv, ok := parseSemver(v); ok {
				if _, seen := tv.bySemver[sv]; !seen {
					tv.bySemver[sv] = v
				}
			}
		}
	}
}

// validator returns the compiled input validator of the served tool with
// d's id and input schema (nil when there is none).
func (c *catalog) validator(key string, d *ToolDefinition) *inputValidator {
	if c == nil {
		return nil
	}
	tv := c.byKey[key]
	if tv == nil {
		return nil
	}
	st := tv.byVer[d.Version]
	if st == nil || st.Definition.ID != d.ID || !bytes.Equal(st.Definition.InputSchema, d.InputSchema) {
		return nil
	}
	return st.validator
}

// validatorKey names a compiled input schema: the tool id (in its URL)
// and the schema as given.
type validatorKey struct{ id, schema string }

// maxChecked bounds the validators CheckInputSchema keeps for the next
// SetTools; past it they are dropped (SetTools then compiles them again).
const maxChecked = 50_000

// CheckInputSchema is the package's CheckInputSchema for a tool this
// handler is about to serve: a schema the handler already serves for that
// tool id is not compiled again, and a compiled one is kept for the next
// SetTools, which then does not compile it a second time.
func (h *Handler) CheckInputSchema(toolID string, raw json.RawMessage) error {
	key := validatorKey{toolID, string(raw)}
	if id, err := ParseToolID(toolID); err == nil {
		if c := h.catalog.Load(); c != nil {
			if tv := c.byKey[id.Key()]; tv != nil {
				for _, st := range tv.byVer {
					if st.Definition.ID == toolID && bytes.Equal(st.Definition.InputSchema, raw) {
						return nil
					}
				}
			}
		}
	}
	h.checkedMu.Lock()
	_, done := h.checked[key]
	h.checkedMu.Unlock()
	if done {
		return nil
	}
	v, err := compileInputSchema(toolID, raw)
	if err != nil {
		return err
	}
	h.checkedMu.Lock()
	defer h.checkedMu.Unlock()
	if h.checked == nil || len(h.checked) >= maxChecked {
		h.checked = map[validatorKey]*inputValidator{}
	}
	h.checked[key] = v
	return nil
}

// takeChecked returns the validators CheckInputSchema kept, and forgets them.
func (h *Handler) takeChecked() map[validatorKey]*inputValidator {
	h.checkedMu.Lock()
	defer h.checkedMu.Unlock()
	checked := h.checked
	h.checked = nil
	return checked
}

// ServeHTTP implements http.Handler.
// A request that arrived on a loopback address and names a host that is
// not local gets 403 first (see Options.DisableLocalhostProtection).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.opts.DisableLocalhostProtection && h.rejectRebinding(w, r) {
		return
	}
	h.mux.ServeHTTP(w, r)
}

// Guard is next behind the handler's browser protection (the Host and
// Origin checks of Options.AllowedHosts and DisableLocalhostProtection),
// for routes served beside it on the same listener.
func (h *Handler) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.opts.DisableLocalhostProtection && h.rejectRebinding(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (h *Handler) serveHealth(w http.ResponseWriter, r *http.Request) {
	h.serveProbe(w, r, h.opts.Health)
}

func (h *Handler) serveReady(w http.ResponseWriter, r *http.Request) {
	if h.opts.Ready != nil {
		h.serveProbe(w, r, h.opts.Ready)
		return
	}
	h.serveProbe(w, r, h.opts.Health)
}

func (h *Handler) serveProbe(w http.ResponseWriter, r *http.Request, probe func(context.Context) (bool, any)) {
	if probe == nil {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return
	}
	ok, body := probe(r.Context())
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, body)
}

// reply is how one request is answered: its dialect decides the shape.
type reply struct {
	w      http.ResponseWriter
	r      *http.Request
	flat   bool   // oxp-flat: bare bodies
	schema string // envelope $schema
	header string // OXP-Version answered (1.0) when the caller sent one
	// carriers are the families of "x-" members the caller reads
	// (CarriersHeader); the others are left out of the answer.
	carriers []string
}

func (h *Handler) newReply(w http.ResponseWriter, r *http.Request) (*reply, bool) {
	rp := &reply{w: w, r: r, schema: SchemaOXP10, carriers: carrierFamilies(r.Header)}
	if vals := r.Header.Values(VersionHeader); len(vals) > 0 {
		rp.header = HeaderVersion10
		rp.flat = true
		if !validVersionHeader(vals[0]) {
			rp.error(http.StatusBadRequest, &ServerErrorResponse{
				Message:          "Unsupported OXP version",
				DeveloperMessage: fmt.Sprintf("OXP-Version %q is not supported; this server speaks 1.0", vals[0]),
			})
			return nil, false
		}
	}
	return rp, true
}

func (rp *reply) headers() {
	if rp.header != "" {
		rp.w.Header().Set(VersionHeader, rp.header)
	}
}

// error writes a 400 / 422 body in the caller's dialect.
func (rp *reply) error(status int, body any) {
	rp.headers()
	if b, ok := body.(*ServerErrorResponse); ok && b.RetryAfter > 0 {
		setRetryHeaders(rp.w.Header(), b.RetryAfter)
	}
	body = errorForCaller(body, rp.carriers)
	if !rp.flat {
		switch b := body.(type) {
		case *ServerErrorResponse:
			c := *b
			c.Schema = rp.schema
			body = &c
		case *ValidationErrorResponse:
			c := *b
			c.Schema = rp.schema
			body = &c
		}
	}
	writeJSON(rp.w, status, body)
}

// result writes a 200 answer in the caller's dialect: the response's own
// encoding (in the envelope), the bytes encoding/json would write for it
// (its MarshalJSON gives them compact), without a second pass over them,
// which costs as much as the first for a large value.
func (rp *reply) result(resp *CallToolResponse) {
	rp.headers()
	resp = resp.forCaller(rp.carriers)
	body, err := resp.MarshalJSON()
	if err != nil {
		writeJSON(rp.w, http.StatusOK, resp) // answers 500, as for any answer that does not encode
		return
	}
	if !rp.flat {
		schema := quoteSchema(rp.schema)
		env := make([]byte, 0, len(body)+len(schema)+len(`{"$schema":,"result":}`)+1)
		env = append(append(append(env, `{"$schema":`...), schema...), `,"result":`...)
		body = append(append(env, body...), '}')
	}
	writeRaw(rp.w, http.StatusOK, body)
}

func (h *Handler) serveTools(w http.ResponseWriter, r *http.Request) {
	rp, ok := h.newReply(w, r)
	if !ok {
		return
	}
	caller, ok := h.authorized(rp)
	if !ok {
		return
	}
	// A list request may carry {"$schema": …} in its body (OTC 1.0).
	if r.ContentLength != 0 && r.Body != nil {
		var body struct {
			Schema string `json:"$schema"`
		}
		lift := httpguard.ReadDeadline(w, h.bodyTimeout)
		data, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if isTimeout(err) {
			w.Header().Set("Connection", "close")
			rp.error(http.StatusRequestTimeout, &ServerErrorResponse{
				Message:          "Request body was not received in time",
				DeveloperMessage: fmt.Sprintf("the body did not arrive within %s", h.bodyTimeout),
			})
			return
		}
		lift()
		if len(bytes.TrimSpace(data)) > 0 && json.Unmarshal(data, &body) == nil && body.Schema != "" {
			if _, known := dialectOfSchema(body.Schema); !known {
				rp.error(http.StatusBadRequest, &ServerErrorResponse{Message: "Unsupported OTC version", DeveloperMessage: fmt.Sprintf("$schema %q is not supported", body.Schema)})
				return
			}
			rp.schema = body.Schema
		}
	}
	if failure := h.starting(r.Context()); failure != nil {
		rp.error(http.StatusServiceUnavailable, failure)
		return
	}
	c := h.catalog.Load() // the tools and their policy: one generation
	wrapped := false
	if d, _ := dialectOfSchema(rp.schema); d == DialectOTC10 {
		wrapped = true
	}
	tools := c.listingFor(c.filter(r.Context(), caller), rp.carriers, wrapped)
	rp.headers()
	// The catalog was encoded by SetTools (compact, as writeJSON writes
	// it): its bytes are written as they are, in place, not encoded again.
	if rp.flat {
		writePieces(w, http.StatusOK, []byte(`{"items":`), tools, []byte("}\n"))
		return
	}
	head := append(append([]byte(`{"$schema":`), quoteSchema(rp.schema)...), `,"tools":`...)
	writePieces(w, http.StatusOK, head, tools, []byte(`,"items":`), tools, []byte("}\n"))
}

func (h *Handler) serveCall(w http.ResponseWriter, r *http.Request) {
	rp, ok := h.newReply(w, r)
	if !ok {
		return
	}
	caller, ok := h.authorized(rp)
	if !ok {
		return
	}
	// Its CallRecord names the caller.
	r = r.WithContext(context.WithValue(r.Context(), recordCallerKey{}, caller))
	if failure := checkContentType(r); failure != nil {
		rp.error(http.StatusUnsupportedMediaType, failure)
		h.observe(r.Context(), nil, "", http.StatusUnsupportedMediaType, false, h.opts.Now(), failure)
		return
	}
	req, status, failure := h.decodeCall(rp, r)
	// Durations start once the body is in: a slow upload is not the tool's time.
	start := h.opts.Now()
	if failure != nil {
		if status == http.StatusRequestTimeout {
			w.Header().Set("Connection", "close")
		}
		rp.error(status, failure)
		h.observe(r.Context(), req, "", status, false, start, failure)
		return
	}
	if h.opts.StartCall != nil {
		r = r.WithContext(h.opts.StartCall(r.Context(), r, req))
	}
	h.call(rp, r, req, caller, start)
}

// maxEncodedID is the longest JSON encoding of a MaxIDBytes string (every
// byte escaped as \u00XX, and the quotes).
const maxEncodedID = 6*MaxIDBytes + 2

// checkContentType answers a call whose Content-Type is missing or not
// JSON (application/json or any +json type): a browser can send a
// cross-origin text/plain or form POST without a preflight, never a JSON one.
func checkContentType(r *http.Request) *ServerErrorResponse {
	ct := r.Header.Get("Content-Type")
	if ct == contentTypeJSON {
		return nil
	}
	if ct == "" {
		return &ServerErrorResponse{Message: "Request body must be JSON", DeveloperMessage: "Content-Type is missing; send Content-Type: application/json"}
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != contentTypeJSON && !strings.HasSuffix(mt, "+json")) {
		return &ServerErrorResponse{Message: "Request body must be JSON", DeveloperMessage: fmt.Sprintf("Content-Type %q is not application/json", ct)}
	}
	return nil
}

// readBody reads a call's body within the body read timeout (when the
// ResponseWriter supports read deadlines) and the body limit, then lifts
// the deadline so that the server's watch for a closed connection is not
// cut by it.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return httpguard.ReadBody(w, r, h.maxBody, h.bodyTimeout)
}

// isTimeout reports whether err is a read deadline that passed.
var isTimeout = httpguard.TimedOut

// decodeCall reads and checks the request body. On failure it returns the
// status and body to answer with; the request (possibly partial) is returned
// for the record.
func (h *Handler) decodeCall(rp *reply, r *http.Request) (*CallToolRequest, int, any) {
	bad := func(msg, dev string) (*CallToolRequest, int, any) {
		return nil, http.StatusBadRequest, &ServerErrorResponse{Message: msg, DeveloperMessage: dev}
	}
	data, err := h.readBody(rp.w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return bad("Request body is too large", fmt.Sprintf("the body exceeds the limit of %d bytes", tooBig.Limit))
		}
		if isTimeout(err) {
			return nil, http.StatusRequestTimeout, &ServerErrorResponse{
				Message:          "Request body was not received in time",
				DeveloperMessage: fmt.Sprintf("the body did not arrive within %s", h.bodyTimeout),
			}
		}
		return bad("Request body could not be read", err.Error())
	}
	return parseCall(rp, data)
}

// parseCall reads a call from its body: the dialect, the envelope and the
// fields. On failure it returns the status and body to answer with; the
// request (possibly partial) is returned for the record. Its Input is a
// slice of data.
func parseCall(rp *reply, data []byte) (*CallToolRequest, int, any) {
	bad := func(msg, dev string) (*CallToolRequest, int, any) {
		return nil, http.StatusBadRequest, &ServerErrorResponse{Message: msg, DeveloperMessage: dev}
	}
	// One pass (README "OTC front"): json.Valid checks the body without
	// allocating, then a walk of its top level (and of the envelope's
	// request) finds the members, whose values stay slices of the body:
	// the input is not decoded here, nor copied.
	if i := jsonscan.SkipSpace(data, 0); !json.Valid(data) || i == len(data) || data[i] != '{' {
		return bad(refusedBody(data))
	}
	var room [8]jsonscan.Member
	top, _ := jsonscan.ObjectMembers(room[:0], data)
	var fields callFields
	var schemaRaw, requestRaw []byte
	for _, m := range top {
		v := data[m.Start:m.End]
		switch string(m.Key) {
		case "$schema":
			schemaRaw = v
		case "request":
			requestRaw = v
		default:
			fields.set(m.Key, v)
		}
	}
	if schemaRaw != nil {
		schema, ok := stringOrNull(schemaRaw)
		if !ok {
			return bad("Request body is malformed", "$schema must be a string")
		}
		if _, known := dialectOfSchema(schema); !known {
			return bad("Unsupported OTC version", fmt.Sprintf("$schema %q is not supported; use %q or %q", schema, SchemaOTC10, SchemaOXP10))
		}
		rp.schema = schema
	}
	prefix := ""
	if requestRaw != nil {
		// Envelope: the body shape decides the answer's shape.
		rp.flat = false
		prefix = "request."
		inner, ok := jsonscan.ObjectMembers(room[:0], requestRaw)
		if !ok {
			return bad("Request body is malformed", "request must be an object")
		}
		fields = callFields{}
		for _, m := range inner {
			fields.set(m.Key, requestRaw[m.Start:m.End])
		}
	} else if fields.toolID != nil && rp.header == "" {
		// A bare CallToolRequest without OXP-Version: answer flat, and say so.
		rp.flat = true
		rp.header = HeaderVersion10
	} else if rp.header == "" {
		return bad("Request body is malformed", `expected {"$schema": …, "request": {"tool_id": …}} or a bare CallToolRequest with the OXP-Version header`)
	}
	req, dev := decodeCallFields(&fields, prefix)
	if dev != "" {
		return req, http.StatusBadRequest, &ServerErrorResponse{Message: "Request body is malformed", DeveloperMessage: dev}
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"call_id", &req.CallID}, {"trace_id", &req.TraceID}} {
		if len(*f.v) > MaxIDBytes {
			*f.v = (*f.v)[:MaxIDBytes] // the record keeps a bounded prefix
			return req, http.StatusBadRequest, &ServerErrorResponse{
				Message:          "Request body is malformed",
				DeveloperMessage: fmt.Sprintf("%s%s is longer than %d bytes; at most %d are accepted", prefix, f.name, MaxIDBytes, MaxIDBytes),
			}
		}
	}
	return req, 0, nil
}

// callFields are the members of a CallToolRequest, each the value's bytes
// as sent (nil when absent; the last of a key counts, as encoding/json
// decides).
type callFields struct {
	toolID, callID, traceID, input, inputs, context []byte
}

func (f *callFields) set(key, v []byte) {
	switch string(key) {
	case "tool_id":
		f.toolID = v
	case "call_id":
		f.callID = v
	case "trace_id":
		f.traceID = v
	case "input":
		f.input = v
	case "inputs":
		f.inputs = v
	case "context":
		f.context = v
	}
}

// refusedBody is the answer to a body that is not a JSON object, as
// encoding/json describes the problem (the slow path: only a refused body
// is decoded for it).
func refusedBody(data []byte) (string, string) {
	var top map[string]json.RawMessage
	err := strictUnmarshal(data, &top)
	var notObject *json.UnmarshalTypeError
	switch {
	case err == nil && top == nil:
		return "Request body must be a JSON object", "the body is null"
	case err == nil:
		return "Request body is not valid JSON", "invalid JSON"
	case errors.As(err, &notObject):
		return "Request body must be a JSON object", describeJSONError(data, err)
	}
	return "Request body is not valid JSON", describeJSONError(data, err)
}

// stringOrNull decodes a JSON string as json.Unmarshal into a string
// does: null leaves it empty.
func stringOrNull(v []byte) (string, bool) {
	if string(v) == "null" {
		return "", true
	}
	if len(v) >= 2 && v[0] == '"' {
		for _, known := range [...]string{SchemaOXP10, SchemaOTC10} {
			if string(v[1:len(v)-1]) == known {
				return known, true // not copied
			}
		}
	}
	return jsonscan.Unquote(v)
}

// decodeCallFields reads a CallToolRequest from its members, checking each
// member's type and accepting "inputs" as an alias of "input".
func decodeCallFields(body *callFields, prefix string) (*CallToolRequest, string) {
	req := &CallToolRequest{}
	str := func(key string, raw []byte, dst *string) string {
		if raw == nil || isJSONNull(raw) {
			return ""
		}
		if (key == "call_id" || key == "trace_id") && len(raw) > maxEncodedID {
			// Too long however it is escaped: refused without decoding it.
			return fmt.Sprintf("%s%s is longer than %d bytes; at most %d are accepted", prefix, key, MaxIDBytes, MaxIDBytes)
		}
		s, ok := jsonscan.Unquote(raw)
		if !ok {
			return prefix + key + " must be a string"
		}
		*dst = s
		return ""
	}
	for _, f := range []struct {
		key string
		raw []byte
		dst *string
	}{{"tool_id", body.toolID, &req.ToolID}, {"call_id", body.callID, &req.CallID}, {"trace_id", body.traceID, &req.TraceID}} {
		if msg := str(f.key, f.raw, f.dst); msg != "" {
			return req, msg
		}
	}
	if req.ToolID == "" {
		return req, prefix + "tool_id is required"
	}
	input := body.input
	switch {
	case body.input != nil && body.inputs != nil:
		return req, prefix + "input and inputs are both present; send one"
	case body.inputs != nil:
		input = body.inputs
	}
	if len(input) > 0 && !isJSONNull(input) {
		req.Input = input
	}
	if raw := body.context; raw != nil && !isJSONNull(raw) {
		req.Context = &CallContext{}
		if err := json.Unmarshal(raw, req.Context); err != nil {
			return req, prefix + "context is malformed: " + err.Error()
		}
	}
	return req, ""
}

// call resolves the tool, checks requirements and input, runs it and answers.
func (h *Handler) call(rp *reply, r *http.Request, req *CallToolRequest, caller Caller, start time.Time) {
	callerCallID := req.CallID != ""
	if !callerCallID {
		req.CallID = newUUID()
	}
	c := h.catalog.Load() // the tools and their policy: one generation, for the whole call
	filter := c.filter(r.Context(), caller)
	id, err := ParseToolID(req.ToolID)
	if err != nil {
		failure := notFound(c, filter, req.ToolID, err.Error())
		rp.error(http.StatusBadRequest, failure)
		h.observeUnknown(r.Context(), req, start, failure)
		return
	}
	// Toolkit.Tool is the id up to its version: looked up without building it.
	key := req.ToolID[:len(id.Toolkit)+1+len(id.Tool)]
	if !filter.allows(key) {
		if h.answerStarting(rp, r, req, start) {
			return // as for a tool nobody serves yet
		}
		// As if nobody served it: no version, no Unknown, no suggestion
		// the caller may not see.
		failure := notFound(c, filter, req.ToolID, fmt.Sprintf("no tool %s is served", id.Key()))
		rp.error(http.StatusBadRequest, failure)
		h.observeUnknown(r.Context(), req, start, failure)
		return
	}
	tv := c.byKey[key]
	var st *servedTool
	if tv != nil {
		if v, ok := tv.resolve(id.Version); ok {
			st = tv.byVer[v]
		}
	}
	if st == nil && h.answerStarting(rp, r, req, start) {
		return
	}
	if st == nil && h.opts.Unknown != nil {
		if failure := h.opts.Unknown(id); failure != nil {
			rp.error(http.StatusBadRequest, failure)
			h.observeUnknown(r.Context(), req, start, failure)
			return
		}
	}
	if st == nil {
		failure := notFound(c, filter, req.ToolID, fmt.Sprintf("no tool %s is served", id.Key()))
		if tv != nil {
			failure = &ServerErrorResponse{Message: fmt.Sprintf("Tool '%s' was not found", req.ToolID),
				DeveloperMessage: fmt.Sprintf("%s is not available; available versions of %s: %s", id, id.Key(), strings.Join(tv.versions, ", "))}
		}
		rp.error(http.StatusBadRequest, failure)
		h.observeUnknown(r.Context(), req, start, failure)
		return
	}
	def := &st.Definition
	if perrs := st.validator.validateRead(req.Input, true); perrs != nil {
		failure := &ValidationErrorResponse{Message: validationMessage(perrs), ParameterErrors: perrs}
		rp.error(http.StatusUnprocessableEntity, failure)
		h.observe(r.Context(), req, def.ID, http.StatusUnprocessableEntity, false, start, failure)
		return
	}
	if failure := missingRequirements(r, &st.Tool, req.Context); failure != nil && !st.DeferRequirements {
		rp.error(http.StatusBadRequest, failure)
		h.observe(r.Context(), req, def.ID, http.StatusBadRequest, false, start, failure)
		return
	}
	if c.policy.Admit != nil {
		if failure := c.policy.Admit(r.Context(), caller, def); failure != nil {
			rp.error(tooManyRequests, failure)
			h.observe(r.Context(), req, def.ID, tooManyRequests, false, start, failure)
			return
		}
	}
	if err := r.Context().Err(); err != nil {
		// The caller went away before its call started: it is not started
		// (a call with a call_id runs detached from its caller once
		// started: started now, it would run for nobody).
		failure := &ServerErrorResponse{Message: "The call was cancelled", DeveloperMessage: err.Error()}
		if rec := h.record(r.Context(), req, def.ID, StatusClientClosed, false, start, failure); rec != nil {
			rec.Outcome = OutcomeCancelled
			h.opts.Observe(rec)
		}
		return
	}
	if len(req.Input) == 0 {
		req.Input = json.RawMessage("{}")
	}
	var out outcome
	if (h.idem != nil || h.shared != nil) && callerCallID {
		// Others may join this call by its call_id: it runs to its end
		// (bounded by the call timeout) even if this client goes away.
		// The timeout starts when the call runs: with a shared store, a
		// repeat may first wait for another replica's claim to expire.
		run := func() outcome {
			// A shutdown ends it all the same (internal/shutdown).
			detached, release := shutdown.Detach(r.Context())
			defer release()
			ctx, cancel := context.WithTimeout(detached, h.callTimeout)
			defer cancel()
			return h.execute(ctx, r, st, req, caller, callerCallID)
		}
		key, print := idemKey{caller: caller.Principal(), callID: req.CallID}, fingerprint(def.ID, req.Input, req.Context)
		if h.shared != nil {
			out = h.shared.do(r.Context(), key, print, run, h.retain)
		} else {
			out = h.idem.do(r.Context(), key, print, run, h.retain)
		}
	} else {
		out = h.execute(r.Context(), r, st, req, caller, callerCallID)
	}
	stopping := shutdown.Is(r.Context())
	if stopping {
		// The shutdown's grace ran out before the call ended
		// (internal/shutdown): the caller learns it, and when to retry.
		out = outcome{status: http.StatusServiceUnavailable, failure: &ServerErrorResponse{Message: shutdown.Message, RetryAfter: shutdown.RetryAfter}}
	}
	if out.status == http.StatusOK {
		rp.result(out.resp)
	} else {
		rp.error(out.status, out.failure)
	}
	rec := h.record(r.Context(), req, def.ID, out.status, out.status == http.StatusOK && out.resp.Success, start, out.failure)
	if rec != nil && r.Context().Err() != nil && !stopping {
		rec.Status = StatusClientClosed // nobody received the answer
		rec.Outcome = OutcomeCancelled
	}
	if rec != nil {
		rec.PanicStack = out.stack
		rec.Replayed = out.replayed
		switch {
		case out.stack != "":
			rec.Outcome = OutcomeInternal
		case out.timedOut && rec.Outcome != OutcomeCancelled:
			rec.Outcome = OutcomeTimeout
		}
		h.opts.Observe(rec)
	}
}

// outcome is the answer to one call that reached its tool's function.
type outcome struct {
	status   int               // 200, or 400 / 422 from the tool function
	resp     *CallToolResponse // when 200
	failure  any               // the 400 / 422 body otherwise; for 200, the *ToolError if any
	stack    string            // a panic's stack, for the log
	replayed bool              // answered from the idempotency cache
	timedOut bool              // the call timeout ran out while the tool ran
}

// execute runs the tool's function and classifies what it returned.
func (h *Handler) execute(ctx context.Context, r *http.Request, st *servedTool, req *CallToolRequest, caller Caller, callIDGiven bool) outcome {
	call := &Call{Tool: &st.Definition, Request: req, HTTP: r, Caller: caller, CallIDGiven: callIDGiven}
	start := h.opts.Now()
	value, stack, err := runTool(ctx, st.Func, call)
	resp := &CallToolResponse{CallID: req.CallID, Ext: call.Ext}
	var sErr *ServerErrorResponse
	var vErr *ValidationErrorResponse
	var tErr *ToolError
	switch {
	case err == nil:
		resp.Success = true
		resp.Value = value
	case errors.As(err, &sErr):
		return outcome{status: http.StatusBadRequest, failure: sErr}
	case errors.As(err, &vErr):
		return outcome{status: http.StatusUnprocessableEntity, failure: vErr}
	case errors.As(err, &tErr):
		resp.Error = tErr
	case stack != "":
		resp.Error = &ToolError{Message: "The tool failed unexpectedly", DeveloperMessage: err.Error()}
	default:
		// A plain Go error: the text may hold internals, so it goes to
		// developer_message only.
		resp.Error = &ToolError{Message: "The tool failed", DeveloperMessage: err.Error()}
	}
	resp.Duration = millis(h.opts.Now().Sub(start))
	out := outcome{status: http.StatusOK, resp: resp, stack: stack, timedOut: errors.Is(ctx.Err(), context.DeadlineExceeded)}
	if resp.Error != nil {
		out.failure = resp.Error
	}
	return out
}

// retain is how long an outcome may be replayed to a repeat of its
// call_id: a 200 whose tool ran, the TTL; a failure whose outcome is
// unknown (can_retry), its retry_after_ms — the time the upstream may still
// be running it — within the TTL (none: not kept); nothing for a 400 / 422
// or a ToolError marked NotRun (the tool never ran: a repeat runs it).
func (h *Handler) retain(out outcome) time.Duration {
	if out.status != http.StatusOK || out.resp == nil {
		return 0
	}
	ttl := h.opts.IdempotencyTTL
	e := out.resp.Error
	switch {
	case out.resp.Success || e == nil:
		return ttl
	case e.NotRun:
		return 0
	case e.CanRetry:
		if e.RetryAfterMS == nil || *e.RetryAfterMS <= 0 {
			return 0
		}
		return min(time.Duration(*e.RetryAfterMS)*time.Millisecond, ttl)
	}
	return ttl
}

// setRetryHeaders marks a temporary refusal: Retry-After in whole seconds
// (RFC 9110 §10.2.3, at least 1) and x-should-retry: true, which the OXP
// SDK clients retry on.
func setRetryHeaders(hdr http.Header, after time.Duration) {
	secs := int64((after + time.Second - 1) / time.Second)
	hdr.Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	hdr.Set("x-should-retry", "true")
}

// runTool calls f, turning a panic into an error; the stack is returned
// apart, for the log only (a client never sees it).
func runTool(ctx context.Context, f ToolFunc, call *Call) (value json.RawMessage, stack string, err error) {
	defer func() {
		if p := recover(); p != nil {
			value, stack, err = nil, string(debug.Stack()), fmt.Errorf("panic: %v", p)
		}
	}()
	value, err = f(ctx, call)
	return value, "", err
}

// missingRequirements checks the call's context against the tool's
// requirements and returns the 400 body when anything is missing.
func missingRequirements(r *http.Request, t *Tool, cc *CallContext) *ServerErrorResponse {
	req := t.Definition.Requirements
	if req == nil {
		return nil
	}
	var missing MissingRequirements
	var named []string
	for _, a := range req.Authorization {
		if cc.Token(a.ID) != "" {
			continue
		}
		named = append(named, "authorization '"+a.ID+"'")
		if t.Challenge != nil {
			if ch := t.Challenge(r, &t.Definition, a.ID); ch != nil {
				missing.Authorization = append(missing.Authorization, *ch)
			}
		}
	}
	for _, s := range req.Secrets {
		if _, ok := cc.Secret(s.ID); !ok {
			named = append(named, "secret '"+s.ID+"'")
			missing.Secrets = append(missing.Secrets, s)
		}
	}
	if req.UserID && (cc == nil || cc.UserID == "") {
		named = append(named, "user_id")
		missing.UserID = true
	}
	if len(named) == 0 {
		return nil
	}
	msg := "The tool needs " + strings.Join(named, ", ") + " in the call's context"
	if len(missing.Authorization) > 0 {
		msg = "Authorization is required: open the authorization URL, then call the tool again"
	}
	return &ServerErrorResponse{
		Message:             msg,
		DeveloperMessage:    fmt.Sprintf("%s requires %s; context lacks it", t.Definition.ID, strings.Join(named, ", ")),
		MissingRequirements: &missing,
	}
}

func validationMessage(perrs map[string]string) string {
	keys := make([]string, 0, len(perrs))
	for k := range perrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + perrs[k]
	}
	return "Some input parameters are invalid: " + strings.Join(parts, "; ")
}

func (h *Handler) record(ctx context.Context, req *CallToolRequest, resolved string, status int, success bool, start time.Time, failure any) *CallRecord {
	if h.opts.Observe == nil {
		return nil
	}
	rec := &CallRecord{Context: ctx, Resolved: resolved, Status: status, Success: success, Duration: h.opts.Now().Sub(start),
		Outcome: classify(status, success, failure)}
	if req != nil {
		rec.CallID, rec.TraceID, rec.ToolID, rec.Input = req.CallID, req.TraceID, req.ToolID, req.Input
		if req.Context != nil {
			rec.UserID = req.Context.UserID
		}
	}
	rec.Caller, _ = ctx.Value(recordCallerKey{}).(Caller)
	switch f := failure.(type) {
	case *ServerErrorResponse:
		rec.DeveloperMessage = f.DeveloperMessage
	case *ToolError:
		if f != nil {
			rec.DeveloperMessage = f.DeveloperMessage
		}
	case *ValidationErrorResponse:
		rec.DeveloperMessage = f.Message
	}
	return rec
}

// starting is Options.ListNotReady's answer: nil when the catalog is
// complete (or nobody says otherwise).
func (h *Handler) starting(ctx context.Context) *ServerErrorResponse {
	if h.opts.ListNotReady == nil {
		return nil
	}
	return h.opts.ListNotReady(ctx)
}

// answerStarting answers a call of a tool the catalog does not hold, or
// the caller may not see, while the catalog is not complete yet: the 503
// GET /tools answers then (Options.ListNotReady), not "not found", since
// the tool may be served in a moment. A hidden tool gets it as well as a
// missing one: nothing tells them apart. It reports whether it answered.
func (h *Handler) answerStarting(rp *reply, r *http.Request, req *CallToolRequest, start time.Time) bool {
	failure := h.starting(r.Context())
	if failure == nil {
		return false
	}
	rp.error(http.StatusServiceUnavailable, failure)
	if rec := h.record(r.Context(), req, "", http.StatusServiceUnavailable, false, start, failure); rec != nil {
		rec.Outcome = OutcomeUnavailable
		h.opts.Observe(rec)
	}
	return true
}

// observeUnknown observes the 400 to a call of a tool the catalog does not
// hold (unavailable when the failure says to retry: its server starts).
func (h *Handler) observeUnknown(ctx context.Context, req *CallToolRequest, start time.Time, failure *ServerErrorResponse) {
	if rec := h.record(ctx, req, "", http.StatusBadRequest, false, start, failure); rec != nil {
		if failure.RetryAfter <= 0 {
			rec.Outcome = OutcomeUnknownTool
		}
		h.opts.Observe(rec)
	}
}

func (h *Handler) observe(ctx context.Context, req *CallToolRequest, resolved string, status int, success bool, start time.Time, failure any) {
	if rec := h.record(ctx, req, resolved, status, success, start, failure); rec != nil {
		h.opts.Observe(rec)
	}
}

// millis is a duration in milliseconds, to the microsecond.
func millis(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return string(s[:])
}

// NewCallID returns a fresh call id (a random UUID).
func NewCallID() string { return newUUID() }

// marshal encodes v as JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// writeJSON writes v with status. Encoding errors cannot happen for the
// package's own types; if one does, the client gets a 500 with a message.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"message":"the response could not be encoded"}`)
	}
	w.Header().Set("Content-Type", contentTypeJSON)
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// The $schema values answered most, encoded.
var (
	quotedOXP10 = []byte(`"` + SchemaOXP10 + `"`)
	quotedOTC10 = []byte(`"` + SchemaOTC10 + `"`)
)

// quoteSchema encodes a $schema value as marshal does (the result must
// not be modified).
func quoteSchema(schema string) []byte {
	switch schema {
	case SchemaOXP10:
		return quotedOXP10
	case SchemaOTC10:
		return quotedOTC10
	}
	b, _ := marshal(schema) // a string always encodes
	return b
}

// writeRaw writes an encoded JSON answer (without its final newline) as
// writeJSON would.
func writeRaw(w http.ResponseWriter, status int, data []byte) {
	w.Header().Set("Content-Type", contentTypeJSON)
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// writePieces writes an answer given in pieces: the JSON writeJSON would
// write, newline included.
func writePieces(w http.ResponseWriter, status int, pieces ...[]byte) {
	w.Header().Set("Content-Type", contentTypeJSON)
	w.WriteHeader(status)
	for _, p := range pieces {
		if _, err := w.Write(p); err != nil {
			return
		}
	}
}

// strictUnmarshal decodes exactly one JSON value from data. A value that
// json.Unmarshal reads whole is read by it (it does not copy data into a
// decoder's buffer); anything else goes through the strict decoder, whose
// errors callers report.
func strictUnmarshal(data []byte, v any) error {
	if json.Unmarshal(data, v) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	return strictDecode(data, v)
}

// strictDecode decodes exactly one JSON value from data.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// describeJSONError says where the JSON went wrong.
func describeJSONError(data []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, err)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("expected a JSON object, got %s", te.Value)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return "the body is empty"
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "invalid JSON: the body ends too early"
	}
	return err.Error()
}

// withInputSchemas returns copies of defs whose input schemas are all plain
// JSON Schemas (plains[i] is PlainInputSchema of defs[i]), or all wrapped
// in {"parameters": …}; with carriers (nil: none), carriers[i] added to
// the top of plains[i].
func withInputSchemas(defs []ToolDefinition, plains []json.RawMessage, carriers []Extensions, wrapped bool) []ToolDefinition {
	out := make([]ToolDefinition, len(defs))
	for i, d := range defs {
		plain := plains[i]
		if carriers != nil && len(carriers[i]) > 0 && len(plain) > 0 && plain[0] == '{' {
			if with, err := withExtensions(plain, carriers[i]); err == nil {
				plain = with
			}
		}
		if wrapped {
			plain = append(append(json.RawMessage(`{"parameters":`), plain...), '}')
		}
		d.InputSchema = plain
		out[i] = d
	}
	return out
}
