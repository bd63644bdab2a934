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
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge"
	"github.com/mcpotc/mcpotc/mcp"
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
	CallTimeout        Duration          `json:"call_timeout"`
	// AcceptForwardedContext uses the OTC context an mcpotc OTC front
	// forwards with a call (README, Round trips).
	AcceptForwardedContext bool `json:"accept_forwarded_context"`
}

var mcpNamePrefix = regexp.MustCompile(`^[A-Za-z0-9_.-]*$`)

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func (m *Main) serveMCP(ctx context.Context, args []string) error {
	fs := m.flags("serve-mcp", "[--otc URL]... [--config FILE] [--transport stdio|http|sse] [--listen ADDR] [flags]")
	var otcURLs stringList
	fs.Var(&otcURLs, "otc", "URL of an OTC tool server (repeatable); none and no --config: the built-in sample toolkit")
	configPath := fs.String("config", "", "JSON config file with OTC upstreams (see README)")
	transport := fs.String("transport", "stdio", "MCP transport: stdio, http (streamable HTTP at /mcp) or sse (legacy SSE at /sse)")
	listen := fs.String("listen", "127.0.0.1:8090", "address for the http and sse transports")
	dialect := fs.String("otc-dialect", "auto", "OTC dialect of --otc upstreams: auto, otc-1.0, oxp-1.0 or oxp-flat")
	callTimeout := fs.Duration("call-timeout", bridge.DefaultCallTimeout, "bound on each tool call (JSON-RPC -32001 when exceeded)")
	refresh := fs.Duration("refresh", bridge.DefaultRefresh, "how often upstream catalogs are listed again")
	inputErrors := fs.String("input-errors", "jsonrpc", "input validation failures as a JSON-RPC -32602 error (jsonrpc) or an isError result (result)")
	acceptContext := fs.Bool("accept-otc-context", false, "use the OTC context (tokens, secrets, user id) an mcpotc OTC front forwards with a call, for --otc upstreams (see README, Round trips)")
	bearerEnv := fs.String("bearer-token-env", "", "environment variable holding a bearer token that HTTP clients must send (http and sse transports)")
	idleTTL := fs.Duration("session-idle-ttl", mcp.DefaultSessionIdleTTL, "end HTTP sessions idle that long (http and sse transports); 0: never")
	maxSessions := fs.Int("max-sessions", mcp.DefaultMaxSessions, "most HTTP sessions held at once; beyond it initialize gets 503 (http and sse transports); 0: no bound")
	stateless := fs.Bool("stateless", false, "serve streamable HTTP without sessions: no Mcp-Session-Id, no standalone GET stream (http transport)")
	bodyTimeout := fs.Duration("body-timeout", mcp.DefaultBodyTimeout, "bound on receiving a request body; a slower one gets 408 (http and sse transports)")
	var allowedHosts stringList
	fs.Var(&allowedHosts, "allowed-host", "host name (no port) a loopback listener also accepts in Host and Origin, such as a reverse proxy's (repeatable)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error (logs go to stderr)")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	log, err := m.logger(*level)
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
	httpOpts, err := mcpHTTPOptions(*transport, *idleTTL, *maxSessions, *stateless, *bodyTimeout, allowedHosts)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	d, err := otc.ParseDialect(*dialect)
	if err != nil {
		return fmt.Errorf("%w: --otc-dialect: %v", errUsage, err)
	}
	var requiredBearer string
	if *bearerEnv != "" {
		if requiredBearer, err = requireEnv(m.Getenv, "--bearer-token-env", "", *bearerEnv); err != nil {
			return err
		}
	}

	var cfg mcpFrontConfig
	if *configPath != "" {
		if err := loadConfig(*configPath, &cfg); err != nil {
			return err
		}
	}
	for _, u := range otcURLs {
		cfg.Upstreams = append(cfg.Upstreams, otcUpstreamConfig{URL: u, Dialect: string(d), AcceptForwardedContext: *acceptContext})
	}
	file := *configPath
	if file == "" {
		file = "--otc"
	}
	upstreams, err := m.otcUpstreams(file, cfg.Upstreams, *transport != "stdio")
	if err != nil {
		return err
	}
	if len(upstreams) == 0 {
		stop, u, err := startSample(ctx, log)
		if err != nil {
			return err
		}
		defer stop()
		upstreams = []bridge.OTCUpstream{u}
	}

	front, err := bridge.NewMCPFront(ctx, upstreams, &bridge.MCPFrontOptions{
		CallTimeout:         *callTimeout,
		Refresh:             *refresh,
		InputErrorsAsResult: *inputErrors == "result",
		Logger:              log,
		Version:             buildVersion(),
	})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go front.Run(rctx)

	switch *transport {
	case "stdio":
		log.Info().Int("upstreams", len(upstreams)).Msg("serving MCP over stdio")
		err := front.Front().ServeStdio(ctx, m.Stdin, m.Stdout)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	case "http":
		httpOpts.BearerToken = requiredBearer
		h := front.Front().StreamableHTTPHandler(httpOpts)
		return m.serveHTTPWith(ctx, log, *listen, bridge.LogRefusals(log, h), "MCP over streamable HTTP at /mcp", h.Shutdown)
	default:
		httpOpts.BearerToken = requiredBearer
		h := front.Front().SSEHandler(httpOpts)
		return m.serveHTTPWith(ctx, log, *listen, bridge.LogRefusals(log, h), "MCP over SSE at /sse", h.Shutdown)
	}
}

// mcpHTTPOptions checks the HTTP flags of serve-mcp (README, serve-mcp
// flags) and turns them into the front's options.
func mcpHTTPOptions(transport string, idleTTL time.Duration, maxSessions int, stateless bool, bodyTimeout time.Duration, allowedHosts []string) (*mcp.HTTPOptions, error) {
	switch {
	case idleTTL < 0:
		return nil, errors.New("--session-idle-ttl must not be negative")
	case maxSessions < 0:
		return nil, errors.New("--max-sessions must not be negative")
	case bodyTimeout <= 0:
		return nil, errors.New("--body-timeout must be positive")
	case stateless && transport != "http":
		return nil, errors.New("--stateless needs --transport http")
	}
	opts := &mcp.HTTPOptions{Stateless: stateless, SessionIdleTTL: idleTTL, MaxSessions: maxSessions, BodyTimeout: bodyTimeout}
	if idleTTL == 0 {
		opts.SessionIdleTTL = -1 // never
	}
	if maxSessions == 0 {
		opts.MaxSessions = -1 // no bound
	}
	for _, name := range allowedHosts {
		ok := name != "" && !strings.ContainsAny(name, "/:@[] \t")
		if inner, bracketed := strings.CutPrefix(name, "["); bracketed && strings.HasSuffix(inner, "]") {
			ip, err := netip.ParseAddr(strings.TrimSuffix(inner, "]"))
			ok = err == nil && ip.Is6()
		}
		if !ok {
			return nil, fmt.Errorf("--allowed-host %q: want a host name without scheme or port, such as mcp.example.com (an IPv6 address in brackets)", name)
		}
		opts.AllowedHosts = append(opts.AllowedHosts, name)
	}
	return opts, nil
}

// otcUpstreams checks the configured upstreams and resolves their secrets
// from the environment.
func (m *Main) otcUpstreams(file string, cfgs []otcUpstreamConfig, httpTransport bool) ([]bridge.OTCUpstream, error) {
	var out []bridge.OTCUpstream
	names := map[string]bool{}
	for i, c := range cfgs {
		key := fmt.Sprintf("upstreams[%d]", i)
		u, err := url.Parse(c.URL)
		if c.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, &configError{file, key + ".url", fmt.Sprintf("%q is not an http(s) URL", c.URL)}
		}
		if u.User != nil {
			return nil, &configError{file, key + ".url", "must not carry credentials: use api_key_env or jwt_secret_env"}
		}
		name := c.Name
		if name == "" {
			name = u.Host
		}
		if names[name] {
			return nil, &configError{file, key + ".name", fmt.Sprintf("%q is used twice", name)}
		}
		names[name] = true
		dialect, err := otc.ParseDialect(c.Dialect)
		if err != nil {
			return nil, &configError{file, key + ".dialect", err.Error()}
		}
		if !mcpNamePrefix.MatchString(c.Prefix) {
			return nil, &configError{file, key + ".prefix", fmt.Sprintf("%q may hold only letters, digits, _, - and .", c.Prefix)}
		}
		opts := &otc.ClientOptions{Dialect: dialect}
		var credentials []string
		if c.APIKeyEnv != "" {
			if opts.APIKey, err = requireEnv(m.Getenv, file, key+".api_key_env", c.APIKeyEnv); err != nil {
				return nil, err
			}
			credentials = append(credentials, opts.APIKey)
		}
		if c.JWTSecretEnv != "" {
			secret, err := requireEnv(m.Getenv, file, key+".jwt_secret_env", c.JWTSecretEnv)
			if err != nil {
				return nil, err
			}
			credentials = append(credentials, secret)
			opts.BearerTokenFunc = otc.NewJWTSource([]byte(secret), c.JWTAudience, 5*time.Minute, nil)
		} else if c.JWTAudience != "" {
			return nil, &configError{file, key + ".jwt_audience", "needs jwt_secret_env"}
		}
		client, err := otc.NewClient(c.URL, opts)
		if err != nil {
			return nil, &configError{file, key + ".url", err.Error()}
		}
		up := bridge.OTCUpstream{Name: name, Client: client, Prefix: c.Prefix, UserID: c.UserID, CallTimeout: time.Duration(c.CallTimeout),
			Secrets: map[string]string{}, Tokens: map[string]string{}, Credentials: credentials, AcceptContext: c.AcceptForwardedContext}
		for id, env := range c.Secrets {
			if up.Secrets[id], err = requireEnv(m.Getenv, file, key+".secrets."+id, env); err != nil {
				return nil, err
			}
		}
		for id, env := range c.Authorization {
			if up.Tokens[id], err = requireEnv(m.Getenv, file, key+".authorization."+id, env); err != nil {
				return nil, err
			}
		}
		if len(c.ForwardCallerToken) > 0 && !httpTransport {
			return nil, &configError{file, key + ".forward_caller_token", "needs an HTTP transport (--transport http or sse): stdio callers have no bearer token"}
		}
		up.CallerTokenProviders = c.ForwardCallerToken
		out = append(out, up)
	}
	return out, nil
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
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
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
	return stop, bridge.OTCUpstream{Name: "sample", Client: client, UserID: sampleUserID}, nil
}

// sampleUserID is the context.user_id sent to the built-in sample toolkit:
// serve-mcp serves one local user, under whom the sample keeps the
// authorization that user completes (README, The sample toolkit).
const sampleUserID = "local-user"
