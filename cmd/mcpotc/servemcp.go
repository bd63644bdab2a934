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
	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/internal/httpguard"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/mcp/oauth"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/mcpotc/mcpotc/otc/sample"
)

// mcpFrontConfig is the config file of serve-mcp.
type mcpFrontConfig struct {
	Upstreams []otcUpstreamConfig `json:"upstreams"`
}

// otcUpstreamConfig is one OTC tool server in the config file. Secrets are
// never written in the file: it names the environment variables that hold
// them.
type otcUpstreamConfig struct {
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
	// forwards with a call (README, Round trips).
	AcceptForwardedContext bool `json:"accept_forwarded_context"`
}

var mcpNamePrefix = regexp.MustCompile(`^[A-Za-z0-9_.-]*$`)

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// stdioHint is printed to stderr when serve-mcp's stdin is a terminal.
const stdioHint = "mcpotc serve-mcp speaks MCP (JSON-RPC) on stdin/stdout, for an MCP host that starts it (see README, Claude Desktop); " +
	"to try it by hand, serve it over HTTP: mcpotc serve-mcp --transport http (then http://127.0.0.1:8090/mcp). Ctrl-D stops it."

func (m *Main) serveMCP(ctx context.Context, args []string) error {
	fs := m.flags("serve-mcp", "[--otc URL]... [--config FILE] [--transport stdio|http|sse] [--listen ADDR] [flags]")
	var otcURLs stringList
	fs.Var(&otcURLs, "otc", "URL of an OTC tool server (repeatable); none and no --config: the built-in sample toolkit")
	var headers headerList
	fs.Var(&headers, "header", "header 'Name: value' sent to the one --otc server, ${VAR} read from the environment (repeatable)")
	otcKeyEnv := fs.String("otc-api-key-env", "", "environment variable holding the API key of the one --otc server (sent in OXP-API-Key)")
	configPath := fs.String("config", "", "JSON config file with OTC upstreams (see README)")
	transport := fs.String("transport", "stdio", "MCP transport: stdio, http (streamable HTTP at /mcp) or sse (legacy SSE at /sse)")
	listen := fs.String("listen", "127.0.0.1:8090", "address for the http and sse transports")
	dialect := fs.String("otc-dialect", "auto", "OTC dialect of --otc upstreams: auto, otc-1.0, oxp-1.0 or oxp-flat")
	callTimeout := durationFlag(fs, "call-timeout", bridge.DefaultCallTimeout, "bound on each tool call (JSON-RPC -32001 when exceeded)")
	refresh := durationFlag(fs, "refresh", bridge.DefaultRefresh, "how often upstream catalogs are listed again")
	inputErrors := fs.String("input-errors", "jsonrpc", "input validation failures as a JSON-RPC -32602 error (jsonrpc) or an isError result (result)")
	acceptContext := fs.Bool("accept-otc-context", false, "use the OTC context (tokens, secrets, user id) an mcpotc OTC front forwards with a call, for --otc upstreams (see README, Round trips)")
	bearerEnv := fs.String("bearer-token-env", "", "environment variable holding a bearer token that HTTP clients must send (http and sse transports)")
	var oauthIssuers, oauthScopes stringList
	fs.Var(&oauthIssuers, "oauth-issuer", "an authorization server whose tokens HTTP clients must send: serve-mcp is an OAuth 2.1 protected resource (repeatable; see README)")
	oauthResource := fs.String("oauth-resource", "", "the resource identifier tokens must be issued for (default: http://LISTEN/mcp)")
	fs.Var(&oauthScopes, "oauth-scope", "a scope every token must grant (repeatable)")
	var oauthForwarders stringList
	fs.Var(&oauthForwarders, "oauth-forwarder", "an OAuth caller trusted to forward an OTC caller's context (accept_forwarded_context): its token's ISSUER#SUBJECT, or SUBJECT with one --oauth-issuer (repeatable; see README, Forwarded context)")
	introspectionURL := fs.String("oauth-introspection-url", "", "the authorization server's token introspection endpoint (RFC 7662), for opaque tokens (JWTs are checked against the issuers' keys)")
	oauthClientIDEnv := fs.String("oauth-client-id-env", "", "environment variable holding the client id serve-mcp authenticates with at the introspection endpoint")
	oauthClientSecretEnv := fs.String("oauth-client-secret-env", "", "environment variable holding that client's secret")
	var oauthAllowNetworks stringList
	fs.Var(&oauthAllowNetworks, "oauth-allow-network", "a network (CIDR) the JWKS and introspection fetches may reach though it is private, loopback or link-local; the issuers' and introspection URL's own hosts always may (repeatable)")
	oauthAllowUntyped := fs.Bool("oauth-allow-untyped-jwt", false, "accept JWT access tokens without typ at+jwt (RFC 9068), for issuers that omit it")
	idleTTL := durationFlag(fs, "session-idle-ttl", front.DefaultSessionIdleTTL, "end HTTP sessions idle that long (http and sse transports); 0: never")
	maxSessions := fs.Int("max-sessions", front.DefaultMaxSessions, "most HTTP sessions held at once; when full, the oldest session that never made a call is ended for a new one, and when all made calls initialize gets 503 (http and sse transports); 0: no bound")
	maxPerClient := fs.Int("max-sessions-per-client", front.DefaultMaxSessionsPerClient, "most HTTP sessions one client holds (with --oauth-issuer its token's issuer and subject, else its address); beyond it its initialize gets 503 (http and sse transports); 0: no bound")
	var trustedProxies prefixList
	fs.Var(&trustedProxies, "trusted-proxy", "address or CIDR of a reverse proxy whose X-Forwarded-For names the client (repeatable; by default X-Forwarded-For is ignored)")
	stateless := fs.Bool("stateless", false, "serve streamable HTTP without sessions: no Mcp-Session-Id, no standalone GET stream (http transport)")
	sessionKeyEnv := fs.String("session-key-env", "", "environment variable holding the key (32 bytes or more; several, comma-separated, to rotate: the first signs) that signs session ids, so that replicas sharing it serve each other's sessions (http transport)")
	bodyTimeout := durationFlag(fs, "body-timeout", front.DefaultBodyTimeout, "bound on receiving a request body; a slower one gets 408 (http and sse transports)")
	var allowedHosts allowedHostList
	fs.Var(&allowedHosts, "allowed-host", allowedHostUsage)
	var corsOrigins corsOriginList
	fs.Var(&corsOrigins, "cors-origin", corsOriginUsage)
	drainDelay := durationFlag(fs, "drain-delay", 0, "at SIGTERM, how long GET /ready answers 503 before the server stops taking requests (http and sse transports)")
	metricsListen := fs.String("metrics-listen", "", metricsUsage)
	logOpts := m.logFlags(fs)
	if err := m.parse(fs, args); err != nil {
		return err
	}
	log, err := logOpts()
	if err != nil {
		return err
	}
	if err := oneOf("--transport", "", *transport, "stdio", "http", "sse"); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := oneOf("--input-errors", "", *inputErrors, "jsonrpc", "result"); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *callTimeout <= 0 || *refresh <= 0 {
		return fmt.Errorf("%w: --call-timeout and --refresh must be positive", errUsage)
	}
	if *drainDelay < 0 {
		return fmt.Errorf("%w: --drain-delay must not be negative", errUsage)
	}
	set := flagsSet(fs)
	for _, err := range []error{
		needs(set, *transport != "stdio", "--transport http or sse (stdio serves on stdin/stdout)",
			"listen", "bearer-token-env", "session-idle-ttl", "max-sessions", "max-sessions-per-client", "trusted-proxy", "body-timeout", "allowed-host", "cors-origin", "oauth-issuer", "drain-delay"),
		needs(set, len(oauthIssuers) > 0, "--oauth-issuer (serve-mcp as an OAuth protected resource)",
			"oauth-resource", "oauth-scope", "oauth-introspection-url", "oauth-client-id-env", "oauth-client-secret-env",
			"oauth-allow-network", "oauth-allow-untyped-jwt", "oauth-forwarder"),
		needs(set, *oauthClientIDEnv != "", "--oauth-client-id-env", "oauth-client-secret-env"),
		needs(set, *transport == "http" && !*stateless, "--transport http with sessions (signed session ids are streamable HTTP's; --stateless has none)", "session-key-env"),
		needs(set, len(otcURLs) > 0, "--otc URL (in a config file, set it per upstream: dialect, accept_forwarded_context, headers, api_key_env)",
			"otc-dialect", "accept-otc-context", "header", "otc-api-key-env"),
		needs(set, len(otcURLs) < 2, "exactly one --otc: for several servers, use a config file (headers and api_key_env per upstream)", "header", "otc-api-key-env"),
	} {
		if err != nil {
			return err
		}
	}
	if *transport != "stdio" {
		if err := checkListen("--listen", *listen); err != nil {
			return err
		}
	}
	if *metricsListen != "" {
		if err := checkListen("--metrics-listen", *metricsListen); err != nil {
			return err
		}
	}
	httpOpts, err := mcpHTTPOptions(*transport, *idleTTL, *maxSessions, *maxPerClient, *stateless, *bodyTimeout, allowedHosts)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	httpOpts.AllowedOrigins = corsOrigins
	httpOpts.TrustedProxies = trustedProxies
	d, err := otc.ParseDialect(*dialect)
	if err != nil {
		return fmt.Errorf("%w: --otc-dialect: %v", errUsage, err)
	}
	for _, u := range otcURLs {
		if reason := urlProblem(u); reason != "" {
			return fmt.Errorf("%w: --otc %s", errUsage, reason)
		}
	}

	var resource *front.ResourceAuth
	if len(oauthIssuers) > 0 && *bearerEnv != "" {
		return fmt.Errorf("%w: --bearer-token-env and --oauth-issuer are exclusive: one static token for one user, or OAuth", errUsage)
	}
	if len(oauthIssuers) > 0 {
		for _, u := range append(slices.Clone(oauthIssuers), *introspectionURL, *oauthResource) {
			if u != "" && urlProblem(u) != "" {
				return fmt.Errorf("%w: %s: %s", errUsage, u, urlProblem(u))
			}
		}
		if _, err := networks(oauthAllowNetworks); err != nil {
			return fmt.Errorf("%w: --oauth-allow-network %v", errUsage, err)
		}
		res := *oauthResource
		if res == "" {
			res = "http://" + *listen + front.StreamablePath
		}
		resource = &front.ResourceAuth{Resource: res, AuthorizationServers: oauthIssuers, Scopes: oauthScopes}
		for _, name := range oauthForwarders {
			fw, err := forwarder(oauthIssuers, name)
			if err != nil {
				return fmt.Errorf("%w: --oauth-forwarder %s", errUsage, err)
			}
			httpOpts.Forwarders = append(httpOpts.Forwarders, fw)
		}
	}

	// From here on every problem is collected and reported in one message.
	var p problems
	var requiredBearer string
	if *bearerEnv != "" {
		requiredBearer = p.env(m.Getenv, "--bearer-token-env", "", *bearerEnv)
	}
	if *sessionKeyEnv != "" {
		if v := p.env(m.Getenv, "--session-key-env", "", *sessionKeyEnv); v != "" {
			httpOpts.SessionKeys = sessionKeys(&p, *sessionKeyEnv, v)
		}
	}
	if resource != nil {
		var id, secret string
		if *oauthClientIDEnv != "" {
			id = p.env(m.Getenv, "--oauth-client-id-env", "", *oauthClientIDEnv)
		}
		if *oauthClientSecretEnv != "" {
			secret = p.env(m.Getenv, "--oauth-client-secret-env", "", *oauthClientSecretEnv)
		}
		// One hardened client for the issuers' metadata and keys and the
		// introspection endpoint: their own hosts pass its dial guard.
		nets, _ := networks(oauthAllowNetworks)
		hc := oauth.NewHTTPClient(&oauth.FetchOptions{Hosts: append(slices.Clone(oauthIssuers), *introspectionURL), AllowNetworks: nets})
		var intro *oauth.Introspector
		var introIssuer string
		if *introspectionURL != "" {
			intro = oauth.NewIntrospector(*introspectionURL, id, secret, hc)
			if introIssuer = introspectionIssuer(oauthIssuers, *introspectionURL); introIssuer == "" {
				log.Warn().Str("url", *introspectionURL).Msg("--oauth-introspection-url is under none of the --oauth-issuer URLs: an introspection answer must name its iss, else the token is refused")
			}
		}
		jwts := oauth.NewJWTVerifier(oauthIssuers, hc)
		if *oauthAllowUntyped {
			jwts.AllowUntyped()
		}
		resource.Verify = tokenVerifier(jwts, intro, introIssuer)
	}
	var cfg mcpFrontConfig
	if *configPath != "" {
		if err := loadMCPFrontConfig(*configPath, &cfg); err != nil {
			p.addErr(*configPath, "", err)
		} else if len(cfg.Upstreams) == 0 {
			p.add(*configPath, "upstreams", "lists no OTC server: add one ({\"url\": \"http://127.0.0.1:8081\"}), or run serve-mcp without --config for the built-in sample toolkit")
		}
	}
	upstreams := m.otcUpstreams(&p, log, *configPath, cfg.Upstreams, *transport != "stdio")
	for _, u := range otcURLs {
		c := otcUpstreamConfig{URL: u, Dialect: string(d), AcceptForwardedContext: *acceptContext, APIKeyEnv: *otcKeyEnv}
		up, ok := m.otcUpstream(&p, log, "--otc", "", c, false, headers.header(&p, m.Getenv))
		if ok {
			upstreams = append(upstreams, up)
		}
	}
	if err := p.err(); err != nil {
		return err
	}
	if err := uniqueNames(upstreams); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if slices.ContainsFunc(upstreams, func(u bridge.OTCUpstream) bool { return u.AcceptContext }) {
		warnForwarding(log, *transport, *listen, requiredBearer != "", resource != nil, len(oauthForwarders))
	}
	if len(upstreams) == 0 {
		stop, u, err := startSample(ctx, log)
		if err != nil {
			return err
		}
		defer stop()
		upstreams = []bridge.OTCUpstream{u}
	}

	var mt *metrics.Metrics
	if *metricsListen != "" {
		mt = metrics.New()
		if err := m.serveMetrics(ctx, log, *metricsListen, mt); err != nil {
			return err
		}
	}
	tracer, stopTracing, err := m.startTracing(ctx, log, "mcpotc serve-mcp")
	if err != nil {
		return err
	}
	defer stopTracing()
	front, err := bridge.NewMCPFront(ctx, upstreams, &bridge.MCPFrontOptions{
		CallTimeout:         *callTimeout,
		Refresh:             *refresh,
		InputErrorsAsResult: *inputErrors == "result",
		Logger:              log,
		Version:             buildVersion(),
		Metrics:             mt,
		Tracer:              tracer,
	})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go front.Run(rctx)

	if *transport == "stdio" {
		if m.terminal(m.Stdin) {
			// A person typed the command: stdin is meant for an MCP host.
			fmt.Fprintln(m.Stderr, stdioHint)
		}
		log.Info().Int("upstreams", len(upstreams)).Msg("serving MCP over stdio")
		err := front.Front().ServeStdio(ctx, m.Stdin, m.Stdout)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	httpOpts.BearerToken = requiredBearer
	httpOpts.Resource = resource
	httpOpts.Health, httpOpts.Ready = front.Health, front.Ready
	h, sessions, what := front.Front().StreamableHTTPHandler(httpOpts), "MCP sessions open (streamable HTTP).", "MCP over streamable HTTP at /mcp"
	if *transport == "sse" {
		h, sessions, what = front.Front().SSEHandler(httpOpts), "MCP sessions open (legacy SSE streams).", "MCP over SSE at /sse"
	}
	mt.GaugeFunc("mcpotc_mcp_sessions", sessions, func() float64 { return float64(h.Sessions()) })
	return m.serveHTTPWith(ctx, log, *listen, bridge.CORS(corsOrigins, bridge.LogRefusals(log, h)), what,
		draining(log, *drainDelay, front.Drain, h.Shutdown))
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
		return &front.Identity{Issuer: iss, Subject: info.Subject, ClientID: info.ClientID, Scopes: info.Scopes, Audience: info.Audience, Expiry: info.Expiry}, nil
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
// to the upstreams that accept it (README, Forwarded context), when that
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

// mcpHTTPOptions checks the HTTP flags of serve-mcp (README, serve-mcp
// flags) and turns them into the front's options.
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

// minSessionKey is the shortest key --session-key-env accepts, in bytes.
const minSessionKey = 32

// sessionKeys splits the value of --session-key-env (variable name) into
// its comma-separated keys; problems go to p, without the value.
func sessionKeys(p *problems, name, value string) [][]byte {
	var keys [][]byte
	for i, k := range strings.Split(value, ",") {
		k = strings.TrimSpace(k)
		if len(k) < minSessionKey {
			p.add("--session-key-env", "", fmt.Sprintf("key %d in %s is %d bytes: use %d or more, random (openssl rand -base64 32)", i+1, name, len(k), minSessionKey))
			continue
		}
		keys = append(keys, []byte(k))
	}
	return keys
}

// otcUpstreams checks the configured upstreams and resolves their secrets
// from the environment; problems go to p.
func (m *Main) otcUpstreams(p *problems, log zerolog.Logger, file string, cfgs []otcUpstreamConfig, httpTransport bool) []bridge.OTCUpstream {
	var out []bridge.OTCUpstream
	names := map[string]bool{}
	for i, c := range cfgs {
		key := fmt.Sprintf("upstreams[%d].", i)
		up, ok := m.otcUpstream(p, log, file, key, c, httpTransport, nil)
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
func uniqueNames(ups []bridge.OTCUpstream) error {
	seen := map[string]bool{}
	for _, u := range ups {
		if seen[u.Name] {
			return fmt.Errorf("two OTC servers are named %q: give one a name in the config file", u.Name)
		}
		seen[u.Name] = true
	}
	return nil
}

// otcUpstream checks one upstream (key is its config path with a trailing
// dot, "" for --otc) and resolves its secrets. Problems go to p; ok is false
// when there was one.
func (m *Main) otcUpstream(p *problems, log zerolog.Logger, file, key string, c otcUpstreamConfig, httpTransport bool, extra http.Header) (bridge.OTCUpstream, bool) {
	before := len(p.list)
	where := func(k string) string { return strings.TrimSuffix(key+k, ".") }
	urlKey := where("url")
	if file == "--otc" {
		urlKey = ""
	}
	if reason := urlProblem(c.URL); reason != "" {
		p.add(file, urlKey, reason)
		return bridge.OTCUpstream{}, false
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
	opts := &otc.ClientOptions{Dialect: dialect, Header: chainHeader()}
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
	up := bridge.OTCUpstream{Name: name, Prefix: c.Prefix, UserID: c.UserID, UserIDFromToken: c.UserIDFromToken, UserIDClaim: c.UserIDClaim, CallTimeout: time.Duration(c.CallTimeout),
		Secrets: map[string]string{}, Tokens: map[string]string{}, AcceptContext: c.AcceptForwardedContext}
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
		return bridge.OTCUpstream{}, false
	}
	client, err := otc.NewClient(base, opts)
	if err != nil {
		p.add(file, urlKey, err.Error())
		return bridge.OTCUpstream{}, false
	}
	up.Client, up.Credentials = client, credentials
	return up, true
}

// startSample serves the sample OTC toolkit on a loopback port of its own,
// so that its authorization URLs open in a browser, and returns it as the
// only upstream.
func startSample(ctx context.Context, log zerolog.Logger) (stop func(), up bridge.OTCUpstream, err error) {
	h, err := sample.New(nil).Handler(nil)
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
	return stop, bridge.OTCUpstream{Name: "sample", Client: client, UserID: sampleUserID, Configure: sampleConfigure}, nil
}

// sampleUserID is the context.user_id sent to the built-in sample toolkit:
// serve-mcp serves one local user, under whom the sample keeps the
// authorization that user completes (README, The sample toolkit).
const sampleUserID = "local-user"
