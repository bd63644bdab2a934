package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge"
	"github.com/mcpotc/mcpotc/bridge/audit"
	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/bridge/state"
	"github.com/mcpotc/mcpotc/bridge/webhooks"
	"github.com/mcpotc/mcpotc/internal/httpguard"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/mcp/oauth"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/otcsample"
)

// mcpFrontConfig is the config file of serve-mcp.
type mcpFrontConfig struct {
	Upstreams []otcServerConfig `json:"upstreams"`
	// The operator controls (controls.go).
	Access     *[]accessRuleConfig `json:"access"`
	RateLimits *rateLimitsConfig   `json:"rate_limits"`
	// The webhook endpoints of task events (webhooks.go).
	Webhooks *[]webhookConfig `json:"webhooks"`
}

// otcServerConfig is one OTC tool server in the config file. Secrets are
// never written in the file: it names the environment variables that hold
// them.
type otcServerConfig struct {
	Name    string `json:"name"`
	URL     string `json:"url"`
	Dialect string `json:"dialect"`
	Prefix  string `json:"prefix"`
	// Transport credentials.
	APIKeyEnv    string `json:"api_key_env"`
	JWTSecretEnv string `json:"jwt_secret_env"`
	JWTAudience  string `json:"jwt_audience"`
	// What satisfies the tools' requirements.
	Secrets            map[string]string `json:"secrets"`       // secret id → env var
	Authorization      map[string]string `json:"authorization"` // provider id → env var
	ForwardCallerToken []string          `json:"forward_caller_token"`
	UserID             string            `json:"user_id"`
	UserIDFromToken    bool              `json:"user_id_from_token"`
	UserIDClaim        string            `json:"user_id_claim"`
	CallTimeout        Duration          `json:"call_timeout"`
	// Headers are sent with every request; ${VAR} in a value is read from
	// the environment.
	Headers map[string]string `json:"headers"`
	// AcceptForwardedContext uses the OTC context an mcpotc OTC front
	// forwards with a call (docs/mapping.md, Round trips).
	AcceptForwardedContext bool `json:"accept_forwarded_context"`
	// Tools override how some tools are shown, by their OTC name
	// (controls.go).
	Tools map[string]toolOverrideConfig `json:"tools"`
}

var mcpNamePrefix = regexp.MustCompile(`^[A-Za-z0-9_.-]*$`)

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// stdioHint is printed to stderr when serve-mcp's stdin is a terminal.
const stdioHint = "mcpotc serve-mcp speaks MCP (JSON-RPC) on stdin/stdout, for an MCP host that starts it (see README, MCP front); " +
	"to try it by hand, serve it over HTTP: mcpotc serve-mcp --transport http (then http://127.0.0.1:8090/mcp). Ctrl-D stops it."

// serveMCPFlags are serve-mcp's flags as the command line gives them:
// nothing is read from the environment or a file yet. A flag is added in
// parseServeMCP, checked in check (which turns the flags into an
// mcpFrontSetup), and used in readMCPFrontSetup or runMCPFront.
type serveMCPFlags struct {
	otcURLs              stringList
	headers              headerList
	otcKeyEnv            string
	configPath           string
	transport            string
	listen               string
	dialect              string
	callTimeout          time.Duration
	refresh              time.Duration
	inputErrors          string
	acceptContext        bool
	bearerEnv            string
	oauthIssuers         stringList
	oauthResource        string
	oauthScopes          stringList
	oauthForwarders      stringList
	introspectionURL     string
	oauthClientIDEnv     string
	oauthClientSecretEnv string
	oauthAllowNetworks   stringList
	oauthAllowUntyped    bool
	idleTTL              time.Duration
	maxSessions          int
	maxPerClient         int
	maxListens           int
	maxListensPerClient  int
	trustedProxies       prefixList
	stateless            bool
	sessionKeyEnv        string
	stateKeyEnv          string
	bodyTimeout          time.Duration
	allowedHosts         allowedHostList
	corsOrigins          corsOriginList
	startupWait          time.Duration
	taskAfter            time.Duration
	taskTTL              time.Duration
	drainDelay           time.Duration
	metricsListen        string
	stateURL             string
	statePasswordEnv     string
	audit                *auditFlags
	watchConfig          bool
	logger               func() (zerolog.Logger, error)
	set                  map[string]bool // the flags the command line gave
}

// mcpFrontSetup is what serve-mcp serves, built from its flags (check),
// then the environment and its config file (readMCPFrontSetup): the HTTP
// transports' options and the OTC upstreams, every secret read. It holds
// no listener and starts nothing, so the same flags build it again.
type mcpFrontSetup struct {
	http      *front.HTTPOptions  // the HTTP transports' options, but the bearer token, the resource and the probes
	dialect   otc.Dialect         // of the --otc upstreams
	resource  *front.ResourceAuth // --oauth-issuer; nil without
	bearer    string              // --bearer-token-env's token; "" without
	stateKeys [][]byte            // --request-state-key-env's keys, else --session-key-env's; nil without
	upstreams []bridge.OTCServer
	controls  *bridge.Controls    // the config file's access and rate_limits; nil without
	webhooks  []webhooks.Endpoint // the config file's webhooks; nil without
	shared    *state.Redis        // --state; nil: this process's memory
}

// close closes what the setup opened: the --state client.
func (s *mcpFrontSetup) close() {
	if s.shared != nil {
		_ = s.shared.Close()
	}
}

// serveMCP is serve-mcp: its flags (parseServeMCP, then check, which
// turns them into an mcpFrontSetup), what they name read into it
// (readMCPFrontSetup), then the front wired and served (runMCPFront).
func (m *Main) serveMCP(ctx context.Context, args []string) error {
	f, err := m.parseServeMCP(args)
	if err != nil {
		return err
	}
	log, err := f.logger()
	if err != nil {
		return err
	}
	s, err := f.check()
	if err != nil {
		return err
	}
	if err := m.readMCPFrontSetup(s, f, log); err != nil {
		s.close()
		return err
	}
	defer s.close()
	return m.runMCPFront(ctx, log, f, s)
}

// parseServeMCP defines serve-mcp's flags and parses args.
func (m *Main) parseServeMCP(args []string) (*serveMCPFlags, error) {
	fs := m.flags("serve-mcp", "[--otc URL]... [--config FILE] [--transport stdio|http|sse] [--listen ADDR] [flags]")
	f := &serveMCPFlags{}
	fs.Var(&f.otcURLs, "otc", "URL of an OTC tool server (repeatable); none and no --config: the built-in sample toolkit")
	fs.Var(&f.headers, "header", "header 'Name: value' sent to the one --otc server, ${VAR} read from the environment (repeatable)")
	fs.StringVar(&f.otcKeyEnv, "otc-api-key-env", "", "environment variable holding the API key of the one --otc server (sent in OXP-API-Key)")
	fs.StringVar(&f.configPath, "config", "", "JSON config file with OTC upstreams (see docs/mcp-front.md, Config file)")
	fs.StringVar(&f.transport, "transport", "stdio", "MCP transport: stdio, http (streamable HTTP at /mcp) or sse (legacy SSE at /sse)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8090", "address for the http and sse transports")
	fs.StringVar(&f.dialect, "otc-dialect", "auto", "OTC dialect of --otc upstreams: auto, otc-1.0, oxp-1.0 or oxp-flat")
	durationVar(fs, &f.callTimeout, "call-timeout", bridge.DefaultCallTimeout, "bound on each tool call (JSON-RPC -32001 when exceeded)")
	durationVar(fs, &f.refresh, "refresh", bridge.DefaultRefresh, "how often upstream catalogs are listed again")
	fs.StringVar(&f.inputErrors, "input-errors", "jsonrpc", "input validation failures as a JSON-RPC -32602 error (jsonrpc) or an isError result (result)")
	fs.BoolVar(&f.acceptContext, "accept-otc-context", false, "use the OTC context (tokens, secrets, user id) an mcpotc OTC front forwards with a call, for --otc upstreams (see docs/mapping.md, Round trips)")
	fs.StringVar(&f.bearerEnv, "bearer-token-env", "", "environment variable holding a bearer token that HTTP clients must send (http and sse transports)")
	fs.Var(&f.oauthIssuers, "oauth-issuer", "an authorization server whose tokens HTTP clients must send: serve-mcp is an OAuth 2.1 protected resource (repeatable; see docs/mcp-front.md)")
	fs.StringVar(&f.oauthResource, "oauth-resource", "", "the resource identifier tokens must be issued for (default: http://LISTEN/mcp)")
	fs.Var(&f.oauthScopes, "oauth-scope", "a scope every token must grant (repeatable)")
	fs.Var(&f.oauthForwarders, "oauth-forwarder", "an OAuth caller trusted to forward an OTC caller's context (accept_forwarded_context): its token's ISSUER#SUBJECT, or SUBJECT with one --oauth-issuer (repeatable; see docs/mapping.md, Forwarded context)")
	fs.StringVar(&f.introspectionURL, "oauth-introspection-url", "", "the authorization server's token introspection endpoint (RFC 7662), for opaque tokens (JWTs are checked against the issuers' keys)")
	fs.StringVar(&f.oauthClientIDEnv, "oauth-client-id-env", "", "environment variable holding the client id serve-mcp authenticates with at the introspection endpoint")
	fs.StringVar(&f.oauthClientSecretEnv, "oauth-client-secret-env", "", "environment variable holding that client's secret")
	fs.Var(&f.oauthAllowNetworks, "oauth-allow-network", "a network (CIDR) the JWKS and introspection fetches may reach though it is private, loopback or link-local; the issuers' and introspection URL's own hosts always may (repeatable)")
	fs.BoolVar(&f.oauthAllowUntyped, "oauth-allow-untyped-jwt", false, "accept JWT access tokens without typ at+jwt (RFC 9068), for issuers that omit it")
	durationVar(fs, &f.idleTTL, "session-idle-ttl", front.DefaultSessionIdleTTL, "end HTTP sessions idle that long (http and sse transports); 0: never")
	fs.IntVar(&f.maxSessions, "max-sessions", front.DefaultMaxSessions, "most HTTP sessions held at once; when full, the oldest session that never made a call is ended for a new one, and when all made calls initialize gets 503 (http and sse transports); 0: no bound")
	fs.IntVar(&f.maxPerClient, "max-sessions-per-client", front.DefaultMaxSessionsPerClient, "most HTTP sessions one client holds (with --oauth-issuer its token's issuer and subject, else its address); beyond it its initialize gets 503 (http and sse transports); 0: no bound")
	fs.IntVar(&f.maxListens, "max-listen-streams", front.DefaultMaxListenStreams, "most 2026-07-28 subscriptions/listen streams open at once; beyond it a listen gets 503 naming the bound (http transport); 0: no bound")
	fs.IntVar(&f.maxListensPerClient, "max-listen-streams-per-client", front.DefaultMaxListenStreamsPerClient, "most subscriptions/listen streams one client holds open (a client as for --max-sessions-per-client); beyond it its listen gets 503 naming the bound (http transport); 0: no bound")
	fs.Var(&f.trustedProxies, "trusted-proxy", trustedProxyUsage)
	fs.BoolVar(&f.stateless, "stateless", false, "serve streamable HTTP without sessions: no Mcp-Session-Id, no standalone GET stream (http transport)")
	fs.StringVar(&f.sessionKeyEnv, "session-key-env", "", "environment variable holding the key (32 bytes or more; several, comma-separated, to rotate: the first signs) that signs session ids, so that replicas sharing it serve each other's sessions (http transport)")
	fs.StringVar(&f.stateKeyEnv, "request-state-key-env", "", "environment variable holding the key (32 bytes or more; several, comma-separated, to rotate: the first seals) that seals the requestState of an authorization asked of a 2026-07-28 client, so that replicas sharing it continue each other's calls (default: --session-key-env's keys, else a random key per process)")
	durationVar(fs, &f.bodyTimeout, "body-timeout", front.DefaultBodyTimeout, "bound on receiving a request body; a slower one gets 408 (http and sse transports)")
	fs.Var(&f.allowedHosts, "allowed-host", allowedHostUsage)
	fs.Var(&f.corsOrigins, "cors-origin", corsOriginUsage)
	durationVar(fs, &f.taskAfter, "task-after", front.DefaultTaskAfter, "how long a tools/call may go unanswered before a host that declares MCP tasks is given a task handle (0: never, unless a tool's \"task\" override says so)")
	durationVar(fs, &f.taskTTL, "task-ttl", front.DefaultTaskTTL, "how long an MCP task and its result are kept (ttlMs)")
	durationVar(fs, &f.startupWait, "startup-wait", bridge.DefaultStartupWait, "at start, how long a call of a tool not served yet is answered \"starting, retry\" (-32007) rather than \"not found\" while an OTC server was never listed")
	durationVar(fs, &f.drainDelay, "drain-delay", 0, "at SIGTERM, how long GET /ready answers 503 before the server stops taking requests (http and sse transports)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", metricsUsage)
	fs.StringVar(&f.stateURL, "state", "", "redis:// (rediss:// for TLS) URL of the Redis that replicas share for the rate limits' buckets and the requestStates already answered (default: this process's memory)")
	fs.StringVar(&f.statePasswordEnv, "state-password-env", "", "environment variable holding the password of the --state Redis (instead of writing it in the URL)")
	f.audit = registerAuditFlags(fs)
	fs.BoolVar(&f.watchConfig, "watch-config", false, watchConfigUsage)
	f.logger = m.logFlags(fs)
	if err := m.parse(fs, args); err != nil {
		return nil, err
	}
	f.set = flagsSet(fs)
	return f, nil
}

// check refuses, as usage errors, the flags that are wrong in themselves
// or together, the first one met, and turns the others into the setup's
// options.
func (f *serveMCPFlags) check() (*mcpFrontSetup, error) {
	if err := f.checkValues(); err != nil {
		return nil, err
	}
	s := &mcpFrontSetup{}
	var err error
	if s.http, err = mcpHTTPOptions(f.transport, f.idleTTL, f.maxSessions, f.maxPerClient, f.stateless, f.bodyTimeout, f.allowedHosts); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if f.maxListens < 0 || f.maxListensPerClient < 0 {
		return nil, fmt.Errorf("%w: --max-listen-streams and --max-listen-streams-per-client must not be negative", errUsage)
	}
	s.http.MaxListenStreams, s.http.MaxListenStreamsPerClient = noBoundIfZero(f.maxListens), noBoundIfZero(f.maxListensPerClient)
	s.http.AllowedOrigins = f.corsOrigins
	s.http.TrustedProxies = f.trustedProxies
	if s.dialect, err = otc.ParseDialect(f.dialect); err != nil {
		return nil, fmt.Errorf("%w: --otc-dialect: %v", errUsage, err)
	}
	for _, u := range f.otcURLs {
		if reason := urlProblem(u); reason != "" {
			return nil, fmt.Errorf("%w: --otc %s", errUsage, reason)
		}
	}
	if s.resource, err = f.resourceAuth(s.http); err != nil {
		return nil, err
	}
	return s, nil
}

func (f *serveMCPFlags) checkValues() error {
	if err := oneOf("--transport", "", f.transport, "stdio", "http", "sse"); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := oneOf("--input-errors", "", f.inputErrors, "jsonrpc", "result"); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if f.callTimeout <= 0 || f.refresh <= 0 {
		return fmt.Errorf("%w: --call-timeout and --refresh must be positive", errUsage)
	}
	if f.drainDelay < 0 {
		return fmt.Errorf("%w: --drain-delay must not be negative", errUsage)
	}
	if f.startupWait <= 0 {
		return fmt.Errorf("%w: --startup-wait must be positive", errUsage)
	}
	if f.taskAfter < 0 || f.taskTTL <= 0 {
		return fmt.Errorf("%w: --task-after must not be negative and --task-ttl must be positive", errUsage)
	}
	for _, err := range []error{
		needs(f.set, f.transport != "stdio", "--transport http or sse (stdio serves on stdin/stdout)",
			"listen", "bearer-token-env", "session-idle-ttl", "max-sessions", "max-sessions-per-client", "max-listen-streams", "max-listen-streams-per-client", "trusted-proxy", "body-timeout", "allowed-host", "cors-origin", "oauth-issuer", "drain-delay"),
		needs(f.set, len(f.oauthIssuers) > 0, "--oauth-issuer (serve-mcp as an OAuth protected resource)",
			"oauth-resource", "oauth-scope", "oauth-introspection-url", "oauth-client-id-env", "oauth-client-secret-env",
			"oauth-allow-network", "oauth-allow-untyped-jwt", "oauth-forwarder"),
		needs(f.set, f.oauthClientIDEnv != "", "--oauth-client-id-env", "oauth-client-secret-env"),
		needs(f.set, f.transport == "http" && !f.stateless, "--transport http with sessions (signed session ids are streamable HTTP's; --stateless has none)", "session-key-env"),
		needs(f.set, len(f.otcURLs) > 0, "--otc URL (in a config file, set it per upstream: dialect, accept_forwarded_context, headers, api_key_env)",
			"otc-dialect", "accept-otc-context", "header", "otc-api-key-env"),
		needs(f.set, len(f.otcURLs) < 2, "exactly one --otc: for several servers, use a config file (headers and api_key_env per upstream)", "header", "otc-api-key-env"),
		needs(f.set, f.stateURL != "", "--state redis://…", "state-password-env"),
		needs(f.set, f.configPath != "", "--config FILE", "watch-config"),
		f.audit.check(f.set),
	} {
		if err != nil {
			return err
		}
	}
	if f.transport != "stdio" {
		if err := checkListen("--listen", f.listen); err != nil {
			return err
		}
	}
	if f.metricsListen != "" {
		return checkListen("--metrics-listen", f.metricsListen)
	}
	return nil
}

// resourceAuth is serve-mcp as an OAuth protected resource (--oauth-issuer;
// nil without), its token check still to be set; the forwarders go to
// httpOpts.
func (f *serveMCPFlags) resourceAuth(httpOpts *front.HTTPOptions) (*front.ResourceAuth, error) {
	if len(f.oauthIssuers) > 0 && f.bearerEnv != "" {
		return nil, fmt.Errorf("%w: --bearer-token-env and --oauth-issuer are exclusive: one static token for one user, or OAuth", errUsage)
	}
	if len(f.oauthIssuers) == 0 {
		return nil, nil
	}
	for _, u := range append(slices.Clone(f.oauthIssuers), f.introspectionURL, f.oauthResource) {
		if u != "" && urlProblem(u) != "" {
			return nil, fmt.Errorf("%w: %s: %s", errUsage, u, urlProblem(u))
		}
	}
	if _, err := networks(f.oauthAllowNetworks); err != nil {
		return nil, fmt.Errorf("%w: --oauth-allow-network %v", errUsage, err)
	}
	res := f.oauthResource
	if res == "" {
		res = "http://" + f.listen + front.StreamablePath
	}
	for _, name := range f.oauthForwarders {
		fw, err := forwarder(f.oauthIssuers, name)
		if err != nil {
			return nil, fmt.Errorf("%w: --oauth-forwarder %s", errUsage, err)
		}
		httpOpts.Forwarders = append(httpOpts.Forwarders, fw)
	}
	return &front.ResourceAuth{Resource: res, AuthorizationServers: f.oauthIssuers, Scopes: f.oauthScopes}, nil
}

// readMCPFrontSetup reads what the flags name — secrets in the
// environment, the config file — into s, and reports every problem in one
// error (docs/mcp-front.md, Config file).
func (m *Main) readMCPFrontSetup(s *mcpFrontSetup, f *serveMCPFlags, log zerolog.Logger) error {
	var p problems
	if f.bearerEnv != "" {
		s.bearer = p.env(m.Getenv, "--bearer-token-env", "", f.bearerEnv)
	}
	if f.sessionKeyEnv != "" {
		if v := p.env(m.Getenv, "--session-key-env", "", f.sessionKeyEnv); v != "" {
			s.http.SessionKeys = sessionKeys(&p, "--session-key-env", f.sessionKeyEnv, v)
		}
	}
	s.stateKeys = s.http.SessionKeys // the front derives its own key from them
	if f.stateKeyEnv != "" {
		if v := p.env(m.Getenv, "--request-state-key-env", "", f.stateKeyEnv); v != "" {
			s.stateKeys = sessionKeys(&p, "--request-state-key-env", f.stateKeyEnv, v)
		}
	}
	if s.resource != nil {
		s.resource.Verify = m.resourceVerifier(&p, f, log)
	}
	if f.stateURL != "" {
		s.shared = m.openState(&p, f.stateURL, f.statePasswordEnv, log)
	}
	m.readMCPFrontUpstreams(&p, f, s, log)
	if err := p.err(); err != nil {
		return err
	}
	return checkOTCUpstreams(log, f, s)
}

// readMCPFrontUpstreams reads what the configuration decides — the OTC servers
// of the config file and of --otc — into s.upstreams; problems go to p. It
// runs at the start and at each reload (docs/operations.md, Reload without restart).
func (m *Main) readMCPFrontUpstreams(p *problems, f *serveMCPFlags, s *mcpFrontSetup, log zerolog.Logger) {
	var cfg mcpFrontConfig
	if f.configPath != "" {
		if err := loadMCPFrontConfig(f.configPath, &cfg); err != nil {
			p.addErr(f.configPath, "", err)
		} else if len(cfg.Upstreams) == 0 {
			p.add(f.configPath, "upstreams", "lists no OTC server: add one ({\"url\": \"http://127.0.0.1:8081\"}), or run serve-mcp without --config for the built-in sample toolkit")
		}
		s.controls = controls(p, f.configPath, cfg.Access, cfg.RateLimits,
			controlsFront{issuers: f.oauthIssuers, tokens: len(f.oauthIssuers) > 0, tokenFlag: "--oauth-issuer"})
		s.webhooks = m.webhookEndpoints(p, f.configPath, cfg.Webhooks)
	}
	s.upstreams = m.otcServers(p, log, f.configPath, cfg.Upstreams, f.transport != "stdio")
	for _, u := range f.otcURLs {
		c := otcServerConfig{URL: u, Dialect: string(s.dialect), AcceptForwardedContext: f.acceptContext, APIKeyEnv: f.otcKeyEnv}
		if up, ok := m.otcServer(p, log, "--otc", "", c, false, f.headers.header(p, m.Getenv)); ok {
			s.upstreams = append(s.upstreams, up)
		}
	}
}

// checkOTCUpstreams checks what holds across s.upstreams, once each is
// read: names are unique; a warning names who may forward context.
func checkOTCUpstreams(log zerolog.Logger, f *serveMCPFlags, s *mcpFrontSetup) error {
	if err := uniqueNames(s.upstreams); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if slices.ContainsFunc(s.upstreams, func(u bridge.OTCServer) bool { return u.AcceptContext }) {
		warnForwarding(log, f.transport, f.listen, s.bearer != "", s.resource != nil, len(f.oauthForwarders))
	}
	return nil
}

// resourceVerifier reads the introspection client's secrets and returns
// the token check of --oauth-issuer; problems go to p.
func (m *Main) resourceVerifier(p *problems, f *serveMCPFlags, log zerolog.Logger) func(context.Context, string) (*front.Identity, error) {
	var id, secret string
	if f.oauthClientIDEnv != "" {
		id = p.env(m.Getenv, "--oauth-client-id-env", "", f.oauthClientIDEnv)
	}
	if f.oauthClientSecretEnv != "" {
		secret = p.env(m.Getenv, "--oauth-client-secret-env", "", f.oauthClientSecretEnv)
	}
	// One hardened client for the issuers' metadata and keys and the
	// introspection endpoint: their own hosts pass its dial guard.
	nets, _ := networks(f.oauthAllowNetworks)
	hc := oauth.NewHTTPClient(&oauth.FetchOptions{Hosts: append(slices.Clone(f.oauthIssuers), f.introspectionURL), AllowNetworks: nets})
	var intro *oauth.Introspector
	var introIssuer string
	if f.introspectionURL != "" {
		intro = oauth.NewIntrospector(f.introspectionURL, id, secret, hc)
		if introIssuer = introspectionIssuer(f.oauthIssuers, f.introspectionURL); introIssuer == "" {
			log.Warn().Str("url", f.introspectionURL).Msg("--oauth-introspection-url is under none of the --oauth-issuer URLs: an introspection answer must name its iss, else the token is refused")
		}
	}
	jwts := oauth.NewJWTVerifier(f.oauthIssuers, hc)
	if f.oauthAllowUntyped {
		jwts.AllowUntyped()
	}
	return tokenVerifier(jwts, intro, introIssuer)
}

// runMCPFront wires the running parts — the built-in sample toolkit when
// no upstream is named, the metrics listener, the tracer, the front and
// its catalog refresh — and serves s over the transport until ctx ends.
func (m *Main) runMCPFront(ctx context.Context, log zerolog.Logger, f *serveMCPFlags, s *mcpFrontSetup) error {
	upstreams := s.upstreams
	if len(upstreams) == 0 {
		stop, u, err := startSample(ctx, log)
		if err != nil {
			return err
		}
		defer stop()
		upstreams = []bridge.OTCServer{u}
	}
	var mt *metrics.Metrics
	if f.metricsListen != "" {
		mt = metrics.New()
		if err := m.serveMetrics(ctx, log, f.metricsListen, mt); err != nil {
			return err
		}
	}
	tracer, stopTracing, err := m.startTracing(ctx, log, "mcpotc serve-mcp")
	if err != nil {
		return err
	}
	defer stopTracing()
	al, err := f.audit.open(m, log, mt)
	if err != nil {
		return err
	}
	defer closeAudit(ctx, log, al)
	wh, stopWebhooks, err := startWebhooks(ctx, log, mt, s.webhooks)
	if err != nil {
		return err
	}
	defer stopWebhooks()
	mcpFront, err := bridge.NewMCPFront(ctx, upstreams, &bridge.MCPFrontOptions{
		CallTimeout:         f.callTimeout,
		Refresh:             f.refresh,
		InputErrorsAsResult: f.inputErrors == "result",
		Logger:              log,
		Version:             buildVersion(),
		Metrics:             mt,
		Tracer:              tracer,
		Controls:            s.controls,
		LimitStore:          limitStore(s.shared),
		Audit:               al,
		AuditArgNames:       f.audit.argNames,
		StartupWait:         f.startupWait,
		Tasks:               taskOptions(f.taskAfter, f.taskTTL),
		// A caller-identified front's list must not be shared across
		// authorization contexts (cacheScope "private").
		PrivateList: s.resource != nil || s.bearer != "",
		StateKeys:   s.stateKeys,
		UsedStates:  usedStates(s.shared),
		Webhooks:    wh,
	})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go mcpFront.Run(rctx)
	m.reloads(rctx, log, f.configPath, f.watchConfig, mt, metrics.FrontMCP, func(ctx context.Context) error {
		return m.reloadMCPFront(ctx, log, f, s, mcpFront)
	})
	if f.transport == "stdio" {
		return m.serveMCPStdio(ctx, log, mcpFront, len(upstreams))
	}
	return m.serveMCPHTTP(ctx, log, f, s, mcpFront, mt, al)
}

// reloadMCPFront reads the config file again and has the front serve it
// (docs/operations.md, Reload without restart): its problems are those of the start.
func (m *Main) reloadMCPFront(ctx context.Context, log zerolog.Logger, f *serveMCPFlags, s *mcpFrontSetup, front *bridge.MCPFront) error {
	next := &mcpFrontSetup{dialect: s.dialect, resource: s.resource, bearer: s.bearer}
	var p problems
	m.readMCPFrontUpstreams(&p, f, next, log)
	if err := p.err(); err != nil {
		return err
	}
	if err := checkOTCUpstreams(log, f, next); err != nil {
		return err
	}
	warnWebhooksChanged(log, s.webhooks, next.webhooks)
	return front.Reload(ctx, bridge.MCPFrontConfig{Upstreams: next.upstreams, Controls: next.controls})
}

// serveMCPStdio serves MCP on stdin and stdout until either ends.
func (m *Main) serveMCPStdio(ctx context.Context, log zerolog.Logger, mcpFront *bridge.MCPFront, upstreams int) error {
	if m.terminal(m.Stdin) {
		// A person typed the command: stdin is meant for an MCP host.
		fmt.Fprintln(m.Stderr, stdioHint)
	}
	log.Info().Int("upstreams", upstreams).Msg("serving MCP over stdio")
	err := mcpFront.Server().ServeStdio(ctx, m.Stdin, m.Stdout)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// serveMCPHTTP serves MCP over streamable HTTP or legacy SSE on --listen
// until ctx ends, then drains.
func (m *Main) serveMCPHTTP(ctx context.Context, log zerolog.Logger, f *serveMCPFlags, s *mcpFrontSetup, mcpFront *bridge.MCPFront, mt *metrics.Metrics, al *audit.Log) error {
	httpOpts := *s.http
	httpOpts.BearerToken = s.bearer
	httpOpts.Resource = s.resource
	httpOpts.Health, httpOpts.Ready = mcpFront.Health, mcpFront.Ready
	h, sessions, what := mcpFront.Server().StreamableHTTPHandler(&httpOpts), "MCP sessions open (streamable HTTP).", "MCP over streamable HTTP at /mcp"
	if f.transport == "sse" {
		h, sessions, what = mcpFront.Server().SSEHandler(&httpOpts), "MCP sessions open (legacy SSE streams).", "MCP over SSE at /sse"
	}
	mt.GaugeFunc("mcpotc_mcp_sessions", sessions, func() float64 { return float64(h.Sessions()) })
	return m.serveHTTPWith(ctx, log, f.listen, bridge.CORS(f.corsOrigins, bridge.LogRefusals(log, bridge.AuditRefusals(al, metrics.FrontMCP, f.trustedProxies, h))), what,
		// The transport ends its calls itself at the grace's end, with
		// the same answer (mcp/front, CodeShuttingDown).
		draining(log, f.drainDelay, mcpFront.Drain, func(ctx context.Context, srv *http.Server, _ func()) error { return h.Shutdown(ctx, srv) }))
}

// tokenVerifier is the MCP front's token check: a JWT against its
// issuer's keys, any other token by introspection (when configured). An
// introspected token's issuer is the answer's iss, else introIssuer (the
// issuer the endpoint belongs to; "" when not known); the front refuses a
// token whose issuer is not an --oauth-issuer.
func tokenVerifier(jwts *oauth.JWTVerifier, intro *oauth.Introspector, introIssuer string) func(context.Context, string) (*front.Identity, error) {
	return func(ctx context.Context, token string) (*front.Identity, error) {
		var info *oauth.TokenInfo
		var err error
		switch {
		case oauth.LooksLikeJWT(token):
			info, err = jwts.Verify(ctx, token)
		case intro != nil:
			info, err = intro.Introspect(ctx, token)
		default:
			return nil, fmt.Errorf("%w: an opaque token, and no --oauth-introspection-url", front.ErrInvalidToken)
		}
		if errors.Is(err, oauth.ErrTokenInactive) {
			return nil, fmt.Errorf("%w: %v", front.ErrInvalidToken, err)
		}
		if err != nil {
			return nil, err
		}
		iss := info.Issuer
		if iss == "" && !oauth.LooksLikeJWT(token) {
			if iss = introIssuer; iss == "" {
				return nil, fmt.Errorf("%w: the introspection answer names no issuer", front.ErrInvalidToken)
			}
		}
		return &front.Identity{Issuer: iss, Subject: info.Subject, ClientID: info.ClientID, Scopes: info.Scopes, Audience: info.Audience, Expiry: info.Expiry,
			Claims: info.Claims}, nil
	}
}

// introspectionIssuer is the issuer whose tokens the introspection
// endpoint answers for: the only --oauth-issuer, else the one the
// endpoint's URL is under (same scheme, host and port, and its path
// within the issuer's; the longest such), "" when none is.
func introspectionIssuer(issuers []string, endpoint string) string {
	if len(issuers) == 1 {
		return issuers[0]
	}
	e, err := url.Parse(endpoint)
	if err != nil {
		return ""
	}
	best := ""
	for _, iss := range issuers {
		u, err := url.Parse(iss)
		if err != nil || u.Scheme != e.Scheme || !strings.EqualFold(u.Host, e.Host) {
			continue
		}
		base := strings.TrimSuffix(u.Path, "/") + "/"
		if strings.HasPrefix(e.Path, base) && len(iss) > len(best) {
			best = iss
		}
	}
	return best
}

// forwarder reads an --oauth-forwarder: ISSUER#SUBJECT (the issuer with
// "%" and "#" percent-encoded, as user_id_from_token writes names), or
// SUBJECT alone when there is one issuer.
func forwarder(issuers []string, name string) (front.Identity, error) {
	if iss, sub, ok := strings.Cut(name, "#"); ok && sub != "" {
		if unescaped, err := url.PathUnescape(iss); err == nil {
			for _, i := range issuers {
				if strings.TrimSuffix(i, "/") == strings.TrimSuffix(unescaped, "/") {
					return front.Identity{Issuer: i, Subject: sub}, nil
				}
			}
		}
	}
	if len(issuers) == 1 && name != "" {
		return front.Identity{Issuer: issuers[0], Subject: name}, nil
	}
	return front.Identity{}, fmt.Errorf("%q: want ISSUER#SUBJECT with ISSUER one of --oauth-issuer (SUBJECT alone with a single --oauth-issuer)", name)
}

// warnForwarding says at start who may forward an OTC caller's context
// to the upstreams that accept it (docs/mapping.md, Forwarded context), when that
// is no one or anyone who can reach the listener.
func warnForwarding(log zerolog.Logger, transport, listen string, bearer, oauth bool, forwarders int) {
	switch {
	case transport == "stdio" || bearer:
	case oauth && forwarders == 0:
		log.Warn().Msg("accept_forwarded_context: no --oauth-forwarder is named, so no caller's forwarded OTC context is used")
	case !oauth && !loopbackListen(listen):
		log.Warn().Str("listen", listen).Msg("accept_forwarded_context: without --bearer-token-env or --oauth-issuer, forwarded OTC context is used only from loopback clients")
	}
}

// trustedProxyUsage is --trusted-proxy's help, the same on both fronts.
const trustedProxyUsage = "address or CIDR of a reverse proxy whose X-Forwarded-For names the client (repeatable; by default X-Forwarded-For is ignored); a forwarded address never makes a caller serve-mcp's chain peer, and nothing a trusted proxy relays is one"

// prefixList is --trusted-proxy: addresses or CIDR prefixes.
type prefixList []netip.Prefix

func (l *prefixList) String() string {
	var out []string
	for _, p := range *l {
		out = append(out, p.String())
	}
	return strings.Join(out, ",")
}

func (l *prefixList) Set(s string) error {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil {
			return errors.New("want an IP address or a CIDR prefix such as 10.0.0.0/8")
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	*l = append(*l, p.Masked())
	return nil
}

// mcpHTTPOptions checks the HTTP flags of serve-mcp (docs/mcp-front.md,
// MCP front) and turns them into the front's options.
func mcpHTTPOptions(transport string, idleTTL time.Duration, maxSessions, maxPerClient int, stateless bool, bodyTimeout time.Duration, allowedHosts []string) (*front.HTTPOptions, error) {
	switch {
	case idleTTL < 0:
		return nil, errors.New("--session-idle-ttl must not be negative")
	case maxSessions < 0:
		return nil, errors.New("--max-sessions must not be negative")
	case maxPerClient < 0:
		return nil, errors.New("--max-sessions-per-client must not be negative")
	case bodyTimeout <= 0:
		return nil, errors.New("--body-timeout must be positive")
	case stateless && transport != "http":
		return nil, errors.New("--stateless needs --transport http")
	}
	opts := &front.HTTPOptions{Stateless: stateless, SessionIdleTTL: idleTTL, MaxSessions: maxSessions, MaxSessionsPerClient: maxPerClient, BodyTimeout: bodyTimeout}
	if idleTTL == 0 {
		opts.SessionIdleTTL = -1 // never
	}
	if maxSessions == 0 {
		opts.MaxSessions = -1 // no bound
	}
	if maxPerClient == 0 {
		opts.MaxSessionsPerClient = -1 // no bound
	}
	opts.AllowedHosts = allowedHosts
	return opts, nil
}

// noBoundIfZero is a bound flag's value as the front's option: 0 (no
// bound) is -1 there, where 0 means the default.
func noBoundIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// minSessionKey is the shortest key --session-key-env accepts, in bytes.
const minSessionKey = 32

// sessionKeys splits the value of the variable name given to flag
// (--session-key-env, --request-state-key-env) into its comma-separated
// keys; problems go to p, without the value.
func sessionKeys(p *problems, flag, name, value string) [][]byte {
	var keys [][]byte
	for i, k := range strings.Split(value, ",") {
		k = strings.TrimSpace(k)
		if len(k) < minSessionKey {
			p.add(flag, "", fmt.Sprintf("key %d in %s is %d bytes: use %d or more, random (openssl rand -base64 32)", i+1, name, len(k), minSessionKey))
			continue
		}
		keys = append(keys, []byte(k))
	}
	return keys
}

// otcServers checks the configured upstreams and resolves their secrets
// from the environment; problems go to p.
func (m *Main) otcServers(p *problems, log zerolog.Logger, file string, cfgs []otcServerConfig, httpTransport bool) []bridge.OTCServer {
	var out []bridge.OTCServer
	names := map[string]bool{}
	for i, c := range cfgs {
		key := fmt.Sprintf("upstreams[%d].", i)
		up, ok := m.otcServer(p, log, file, key, c, httpTransport, nil)
		if !ok {
			continue
		}
		if names[up.Name] {
			p.add(file, key+"name", fmt.Sprintf("%q is used twice: give each upstream its own name", up.Name))
			continue
		}
		names[up.Name] = true
		out = append(out, up)
	}
	return out
}

// uniqueNames checks that no two upstreams share a name.
func uniqueNames(ups []bridge.OTCServer) error {
	seen := map[string]bool{}
	for _, u := range ups {
		if seen[u.Name] {
			return fmt.Errorf("two OTC servers are named %q: give one a name in the config file", u.Name)
		}
		seen[u.Name] = true
	}
	return nil
}

// otcServer checks one upstream (key is its config path with a trailing
// dot, "" for --otc) and resolves its secrets. Problems go to p; ok is false
// when there was one.
func (m *Main) otcServer(p *problems, log zerolog.Logger, file, key string, c otcServerConfig, httpTransport bool, extra http.Header) (bridge.OTCServer, bool) {
	before := len(p.list)
	where := func(k string) string { return strings.TrimSuffix(key+k, ".") }
	urlKey := where("url")
	if file == "--otc" {
		urlKey = ""
	}
	if reason := urlProblem(c.URL); reason != "" {
		p.add(file, urlKey, reason)
		return bridge.OTCServer{}, false
	}
	base, stripped := otcBaseURL(c.URL)
	if stripped != "" {
		log.Warn().Str("url", base).Msgf("%s ends in %s: using %s as the OTC server's base URL (the bridge appends /tools and /tools/call itself)", c.URL, stripped, base)
	}
	u, _ := url.Parse(base)
	name := c.Name
	if name == "" {
		name = u.Host
	}
	opts := &otc.ClientOptions{Dialect: checkOTCUpstreamValues(p, file, where, c), Header: chainHeader()}
	file, credentials := m.otcCredentials(p, file, where, c, opts, extra)
	tools := overrides(p, file, where("tools"), c.Tools, c.Prefix)
	up := bridge.OTCServer{Tools: tools, Name: name, Prefix: c.Prefix, UserID: c.UserID, UserIDFromToken: c.UserIDFromToken, UserIDClaim: c.UserIDClaim, CallTimeout: time.Duration(c.CallTimeout),
		Secrets: map[string]string{}, Tokens: map[string]string{}, AcceptContext: c.AcceptForwardedContext, Revision: revision(c)}
	for _, id := range sortedKeys(c.Secrets) {
		up.Secrets[id] = p.env(m.Getenv, file, where("secrets."+id), c.Secrets[id])
	}
	for _, id := range sortedKeys(c.Authorization) {
		up.Tokens[id] = p.env(m.Getenv, file, where("authorization."+id), c.Authorization[id])
	}
	if len(c.ForwardCallerToken) > 0 && !httpTransport {
		p.add(file, where("forward_caller_token"), "needs an HTTP transport (--transport http or sse): stdio callers have no bearer token")
	}
	up.CallerTokenProviders = c.ForwardCallerToken
	if len(p.list) > before {
		return bridge.OTCServer{}, false
	}
	client, err := otc.NewClient(base, opts)
	if err != nil {
		p.add(file, urlKey, err.Error())
		return bridge.OTCServer{}, false
	}
	up.Client, up.Credentials = client, credentials
	return up, true
}

// checkOTCUpstreamValues checks an upstream's values that are wrong in
// themselves (dialect, prefix, user_id_claim) and returns its dialect.
func checkOTCUpstreamValues(p *problems, file string, where func(string) string, c otcServerConfig) otc.Dialect {
	dialect, err := otc.ParseDialect(c.Dialect)
	if err != nil {
		p.add(file, where("dialect"), err.Error())
	}
	if !mcpNamePrefix.MatchString(c.Prefix) {
		p.add(file, where("prefix"), fmt.Sprintf("%q may hold only letters, digits, _, - and .", c.Prefix))
	}
	if c.UserIDClaim != "" && c.UserIDClaim != "sub" && c.UserIDClaim != "client_id" {
		p.add(file, where("user_id_claim"), fmt.Sprintf("%q is not sub or client_id", c.UserIDClaim))
	} else if c.UserIDClaim != "" && !c.UserIDFromToken {
		p.add(file, where("user_id_claim"), "goes with user_id_from_token: true")
	}
	return dialect
}

// otcCredentials reads an upstream's transport credentials into opts — the
// API key, the JWT secret, headers with their ${VAR}s, and extra (--header)
// — and returns the values to keep out of its answers. The file it returns
// names the problems met after it: --otc-api-key-env for an --otc upstream
// with an API key.
func (m *Main) otcCredentials(p *problems, file string, where func(string) string, c otcServerConfig, opts *otc.ClientOptions, extra http.Header) (string, []string) {
	var credentials []string
	if c.APIKeyEnv != "" {
		k := where("api_key_env")
		if file == "--otc" {
			file, k = "--otc-api-key-env", ""
		}
		if opts.APIKey = p.env(m.Getenv, file, k, c.APIKeyEnv); opts.APIKey != "" {
			credentials = append(credentials, opts.APIKey)
		}
	}
	if c.JWTSecretEnv != "" {
		if secret := p.env(m.Getenv, file, where("jwt_secret_env"), c.JWTSecretEnv); secret != "" {
			credentials = append(credentials, secret)
			opts.BearerTokenFunc = otc.NewJWTSource([]byte(secret), c.JWTAudience, 5*time.Minute, nil)
		}
	} else if c.JWTAudience != "" {
		p.add(file, where("jwt_audience"), "needs jwt_secret_env")
	}
	for _, h := range sortedKeys(c.Headers) {
		v, err := expandEnv(m.Getenv, file, where("headers."+h), c.Headers[h])
		if err != nil {
			p.addErr(file, where("headers."+h), err)
			continue
		}
		opts.Header.Set(h, v)
		if envRef.MatchString(c.Headers[h]) {
			credentials = append(credentials, v)
		}
	}
	for h, vs := range extra {
		opts.Header[h] = vs
		credentials = append(credentials, vs...)
	}
	return file, credentials
}

// startSample serves the sample OTC toolkit on a loopback port of its own,
// so that its authorization URLs open in a browser, and returns it as the
// only upstream.
func startSample(ctx context.Context, log zerolog.Logger) (stop func(), up bridge.OTCServer, err error) {
	h, err := otcsample.New(nil).Handler(nil)
	if err != nil {
		return nil, up, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, up, fmt.Errorf("starting the sample OTC toolkit: %w", err)
	}
	srv := &http.Server{Handler: httpguard.Handler(h), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	client, err := otc.NewClient(base, nil)
	if err != nil {
		_ = srv.Close()
		return nil, up, err
	}
	log.Info().Str("url", base).Msg("no upstream named: serving the built-in sample OTC toolkit")
	stop = func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
	return stop, bridge.OTCServer{Name: "sample", Client: client, UserID: sampleUserID, Configure: sampleConfigure}, nil
}

// sampleUserID is the context.user_id sent to the built-in sample toolkit:
// serve-mcp serves one local user, under whom the sample keeps the
// authorization that user completes (README, The sample OTC toolkit).
const sampleUserID = "local-user"
