package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mcpotc/mcpotc/bridge"
	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/bridge/state"
	"github.com/mcpotc/mcpotc/bridge/webhooks"
	"github.com/mcpotc/mcpotc/mcp/mcpsample"
	"github.com/mcpotc/mcpotc/mcp/oauth"
	"github.com/mcpotc/mcpotc/mcp/oauth/vault"
	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// otcFrontConfig is the config file of serve-otc: the mcpServers object MCP
// hosts use, with a few keys of mcpotc's own per server.
type otcFrontConfig struct {
	MCPServers map[string]mcpServerConfig `json:"mcpServers"`
	// The operator controls (controls.go).
	Access     *[]accessRuleConfig `json:"access"`
	RateLimits *rateLimitsConfig   `json:"rate_limits"`
	// The webhook endpoints of task events (webhooks.go).
	Webhooks *[]webhookConfig `json:"webhooks"`
}

// hostServerKeys are keys MCP hosts write in a server entry that mcpotc has
// no use for: ignored with a warning (docs/otc-front.md, Config file). Any other
// unknown key is an error, so that a misspelt key is never silently lost.
var hostServerKeys = []string{"autoApprove", "alwaysAllow", "disabledTools", "timeout", "description", "envFile", "dev", "gallery"}

// loadOTCFrontConfig reads a serve-otc config file as MCP hosts write them:
// the mcpServers object (Claude Desktop, Cursor, …) or VS Code's servers
// object, or both; other top-level keys (globalShortcut, inputs, …) and the
// host-only keys of a server entry are ignored, named in one warning; a
// server with "disabled": true is skipped.
func loadOTCFrontConfig(path string) (cfg otcFrontConfig, warning string, err error) {
	data, err := readConfig(path)
	if err != nil {
		return cfg, "", err
	}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(data, &top) // readConfig checked it is an object
	var p problems
	var ignored []string
	cfg.MCPServers = map[string]mcpServerConfig{}
	found := false
	for _, key := range []string{"mcpServers", "servers"} {
		raw, ok := top[key]
		if !ok {
			continue
		}
		found = true
		var servers map[string]json.RawMessage
		if err := json.Unmarshal(raw, &servers); err != nil || servers == nil {
			p.add(path, key, "want an object: server name → {command, args, env} or {url, headers}")
			continue
		}
		for _, name := range sortedKeys(servers) {
			k := key + "." + name
			if _, dup := cfg.MCPServers[name]; dup {
				p.add(path, k, "is also in mcpServers: give each server once")
				continue
			}
			var entry map[string]json.RawMessage
			if err := json.Unmarshal(servers[name], &entry); err != nil || entry == nil {
				p.add(path, k, "want an object such as {\"command\": \"npx\", \"args\": [...]} or {\"url\": \"https://…/mcp\"}")
				continue
			}
			for _, hk := range hostServerKeys {
				if _, ok := entry[hk]; ok {
					ignored = append(ignored, k+"."+hk)
					delete(entry, hk)
				}
			}
			cleaned, _ := json.Marshal(entry)
			var c mcpServerConfig
			decodeStrict(&p, path, k, cleaned, reflect.ValueOf(&c).Elem())
			if c.Disabled {
				continue
			}
			c.key = k
			cfg.MCPServers[name] = c
		}
	}
	if raw, ok := top["access"]; ok {
		decodeStrict(&p, path, "access", raw, reflect.ValueOf(&cfg.Access).Elem())
	}
	if raw, ok := top["rate_limits"]; ok {
		decodeStrict(&p, path, "rate_limits", raw, reflect.ValueOf(&cfg.RateLimits).Elem())
	}
	if raw, ok := top["webhooks"]; ok {
		decodeStrict(&p, path, "webhooks", raw, reflect.ValueOf(&cfg.Webhooks).Elem())
	}
	for _, key := range sortedKeys(top) {
		if key != "mcpServers" && key != "servers" && key != "access" && key != "rate_limits" && key != "webhooks" {
			ignored = append(ignored, key)
		}
	}
	if !found {
		p.add(path, "", "has no mcpServers (or VS Code servers) object: add one, e.g. {\"mcpServers\": {\"everything\": {\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-everything\"]}}}")
	}
	if err := p.err(); err != nil {
		return cfg, "", err
	}
	if len(ignored) > 0 {
		warning = fmt.Sprintf("%s: ignoring keys that are for MCP hosts, not mcpotc: %s", path, strings.Join(ignored, ", "))
	}
	return cfg, warning, nil
}

// mcpServerConfig is one MCP server. Values of env and headers may name
// environment variables as ${VAR}, so that the file holds no secrets.
type mcpServerConfig struct {
	// As MCP hosts write it.
	Type    string            `json:"type"` // stdio, http, streamable-http, sse; empty: by command / url
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	Cwd     string            `json:"cwd"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	// mcpotc's own.
	Toolkit              string   `json:"toolkit"`
	Version              string   `json:"version"`
	Allow                []string `json:"allow"`
	Deny                 []string `json:"deny"`
	CallTimeout          Duration `json:"call_timeout"`
	MaxMessageBytes      int64    `json:"max_message_bytes"`
	ForwardAuthorization bool     `json:"forward_authorization"`
	ForwardContext       bool     `json:"forward_context"`
	// Protocol is the MCP protocol era: auto (default), 2026-07-28 or
	// 2025-11-25 (upstream.Config.Protocol).
	Protocol string `json:"protocol"`
	// OAuth makes the bridge an OAuth client of this url server (docs/otc-front.md,
	// OAuth-protected MCP servers).
	OAuth *oauthConfig `json:"oauth"`
	// Disabled skips the server, as MCP hosts do.
	Disabled bool `json:"disabled"`
	// Tools override how some tools are shown, by their MCP name
	// (controls.go).
	Tools map[string]toolOverrideConfig `json:"tools"`

	key string // where it is in the file: mcpServers.NAME or servers.NAME
}

// oauthConfig is a server's "oauth" entry: {} for discovery, dynamic
// registration and the authorization code grant; secrets are named by
// environment variable, never written in the file.
type oauthConfig struct {
	ClientID            string   `json:"client_id"`
	ClientSecretEnv     string   `json:"client_secret_env"`
	ClientPrivateKeyEnv string   `json:"client_private_key_env"`
	Scopes              []string `json:"scopes"`
	Grant               string   `json:"grant"`
	PerUser             bool     `json:"per_user"`
	UserVerification    string   `json:"user_verification"`
	ClientMetadataURL   string   `json:"client_metadata_url"`
	AllowNetworks       []string `json:"allow_networks"`
}

// envRef is a reference to an environment variable in a value: ${VAR}, or
// ${env:VAR} as VS Code writes it.
var envRef = regexp.MustCompile(`\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}`)

// hostInput is a VS Code prompt input, ${input:id}, which only VS Code can
// fill in.
var hostInput = regexp.MustCompile(`\$\{input:[^}]*\}`)

// expandEnv replaces ${VAR} and ${env:VAR} in s; every unset variable is a
// problem (all of them in one error).
func expandEnv(getenv func(string) string, file, key, s string) (string, error) {
	if in := hostInput.FindString(s); in != "" {
		return "", &configError{file, key, in + " is a VS Code prompt input, which only VS Code fills in: use ${VAR} and set VAR in the environment"}
	}
	var p problems
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		v := getenv(name)
		if v == "" && !slices.Contains(p.missing, name) {
			p.add(file, key, fmt.Sprintf("environment variable %s is not set", name))
			p.noteMissing(name)
		}
		return v
	})
	if err := p.err(); err != nil {
		return "", err
	}
	return out, nil
}

// serveOTCFlags are serve-otc's flags as the command line gives them:
// nothing is read from the environment or a file yet (otcFrontSetup does
// that). A flag is added in parseServeOTC, checked in check when its value
// alone can be wrong, and used in otcFrontSetup or runOTCFront.
type serveOTCFlags struct {
	listen, configPath string
	mcpURLs            stringList
	headers            headerList
	forceSSE           bool
	forwardContext     bool
	name               string
	callTimeout        time.Duration
	maxMessage         int64
	apiKeyEnv          string
	jwtSecretEnv       string
	jwtAudiences       string
	idemTTL            time.Duration
	idemRunning        int
	publicURL          string
	tokenStore         string
	tokenKeyEnv        string
	stateURL           string
	statePasswordEnv   string
	startupWait        time.Duration
	drainDelay         time.Duration
	metricsListen      string
	allowedHosts       allowedHostList
	corsOrigins        corsOriginList
	trustedProxies     prefixList
	identity           *identityFlags
	audit              *auditFlags
	watchConfig        bool
	logger             func() (zerolog.Logger, error)
	command            []string        // after --: the stdio MCP server to start
	set                map[string]bool // the flags the command line gave
}

// serveOTC is serve-otc: its flags (parseServeOTC, check), what they name
// read into an otcFrontSetup, then the front wired and served
// (runOTCFront).
func (m *Main) serveOTC(ctx context.Context, args []string) error {
	f, err := m.parseServeOTC(args)
	if err != nil {
		return err
	}
	log, err := f.logger()
	if err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	s, err := m.otcFrontSetup(f, log)
	if err != nil {
		return err
	}
	defer s.close()
	return m.runOTCFront(ctx, log, f, s)
}

// parseServeOTC defines serve-otc's flags and parses args: the command of
// a stdio MCP server comes after --.
func (m *Main) parseServeOTC(args []string) (*serveOTCFlags, error) {
	fs := m.flags("serve-otc", "[--listen 127.0.0.1:8080] [--config FILE] [--mcp URL]... [flags] [-- COMMAND [ARGS...]]")
	f := &serveOTCFlags{}
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to serve OTC on")
	fs.StringVar(&f.configPath, "config", "", "JSON config file with an mcpServers object (see docs/otc-front.md, Config file)")
	fs.Var(&f.mcpURLs, "mcp", "URL of an MCP server over streamable HTTP, or legacy SSE when the path ends in /sse (repeatable)")
	fs.Var(&f.headers, "header", "header 'Name: value' sent to the one --mcp server, ${VAR} read from the environment (repeatable)")
	fs.BoolVar(&f.forceSSE, "mcp-sse", false, "use the legacy SSE transport for every --mcp URL")
	fs.BoolVar(&f.forwardContext, "forward-context", false, "send each call's OTC context (tokens, secrets, user id) to --mcp servers that are mcpotc MCP fronts (see docs/mapping.md, Round trips)")
	fs.StringVar(&f.name, "name", "", "toolkit name of the '-- COMMAND' server (default: its serverInfo.name)")
	durationVar(fs, &f.callTimeout, "call-timeout", 60*time.Second, "bound on each tool call")
	fs.Int64Var(&f.maxMessage, "max-message-bytes", upstream.DefaultMaxMessageBytes, "bound on one message from an MCP server (a stdio line, an HTTP body or event); a longer answer fails its call")
	fs.StringVar(&f.apiKeyEnv, "api-key-env", "", "environment variable holding the API key OTC clients must send (OXP-API-Key or bearer)")
	fs.StringVar(&f.jwtSecretEnv, "jwt-secret-env", "", "environment variable holding the HS256 secret of the bearer JWTs OTC clients may send")
	fs.StringVar(&f.jwtAudiences, "jwt-audience", "", "comma-separated audiences a JWT's aud may name (tokens with aud need one)")
	durationVar(fs, &f.idemTTL, "idempotency-ttl", 10*time.Minute, "how long a call_id's answer is kept and replayed (0: off)")
	fs.IntVar(&f.idemRunning, "idempotency-max-running", otc.DefaultIdempotencyMaxRunning, "bound on calls with a call_id running at once (beyond it: 400 temporarily unavailable, Retry-After)")
	fs.StringVar(&f.publicURL, "public-url", "", "the bridge's base URL as a browser reaches it, for the OAuth authorization links and redirect (default: http://LISTEN), and as OTC clients reach it, for the check_url of an MCP server's URL challenges (default: the Host each call came with)")
	fs.StringVar(&f.tokenStore, "token-store", "memory", "where the OAuth tokens for MCP servers are kept: memory, or file:PATH (encrypted, survives restarts; needs --token-key-env)")
	fs.StringVar(&f.tokenKeyEnv, "token-key-env", "", "environment variable holding the 32-byte key (base64 or hex) that encrypts the OAuth tokens")
	fs.StringVar(&f.stateURL, "state", "", "redis:// (rediss:// for TLS) URL of the Redis that replicas share for call_id answers, OAuth tokens and the state of calls an MCP server stopped to have the user open a URL (default: this process's memory)")
	fs.StringVar(&f.statePasswordEnv, "state-password-env", "", "environment variable holding the password of the --state Redis (instead of writing it in the URL)")
	durationVar(fs, &f.startupWait, "startup-wait", bridge.DefaultStartupWait, "at start, how long GET /tools and /ready wait for an MCP server that cannot be reached yet; past it the servers that are up are served, the missing one is named in /health and the log, and joins when it connects (at most its init timeout)")
	durationVar(fs, &f.drainDelay, "drain-delay", 0, "at SIGTERM, how long GET /ready answers 503 before the server stops taking requests (a load balancer's check interval times its fall count)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", metricsUsage)
	fs.Var(&f.allowedHosts, "allowed-host", allowedHostUsage)
	fs.Var(&f.corsOrigins, "cors-origin", corsOriginUsage)
	fs.Var(&f.trustedProxies, "trusted-proxy", trustedProxyUsage)
	f.identity = registerIdentityFlags(fs)
	f.audit = registerAuditFlags(fs)
	fs.BoolVar(&f.watchConfig, "watch-config", false, watchConfigUsage)
	f.logger = m.logFlags(fs)
	if i := slices.Index(args, "--"); i >= 0 {
		if i == len(args)-1 {
			return nil, fmt.Errorf("%w: '--' must be followed by the MCP server's command, e.g. -- npx -y @modelcontextprotocol/server-everything", errUsage)
		}
		args, f.command = args[:i], args[i+1:]
	}
	if err := m.parse(fs, args); err != nil {
		return nil, err
	}
	f.set = flagsSet(fs)
	return f, nil
}

// check refuses, as usage errors, the flags that are wrong in themselves
// or together, the first one met: values, then combinations, then the
// token store.
func (f *serveOTCFlags) check() error {
	for _, check := range []func() error{f.checkValues, f.checkCombinations, f.checkTokenStore} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (f *serveOTCFlags) checkValues() error {
	if f.callTimeout <= 0 {
		return fmt.Errorf("%w: --call-timeout must be positive", errUsage)
	}
	if f.maxMessage <= 0 {
		return fmt.Errorf("%w: --max-message-bytes must be positive", errUsage)
	}
	if f.idemRunning <= 0 {
		return fmt.Errorf("%w: --idempotency-max-running must be positive", errUsage)
	}
	if err := checkListen("--listen", f.listen); err != nil {
		return err
	}
	if f.metricsListen != "" {
		return checkListen("--metrics-listen", f.metricsListen)
	}
	return nil
}

func (f *serveOTCFlags) checkCombinations() error {
	for _, err := range []error{
		needs(f.set, len(f.mcpURLs) > 0, "--mcp URL (in a config file, set type or headers per server)", "mcp-sse", "forward-context", "header"),
		needs(f.set, len(f.mcpURLs) < 2, "exactly one --mcp: for several servers, use a config file (headers per server)", "header"),
		needs(f.set, len(f.command) > 0, "an MCP server's command after --, e.g. --name Everything -- npx -y @modelcontextprotocol/server-everything", "name"),
		needs(f.set, f.jwtSecretEnv != "", "--jwt-secret-env", "jwt-audience"),
		needs(f.set, f.stateURL != "", "--state redis://…", "state-password-env"),
		needs(f.set, f.configPath != "", "--config FILE", "watch-config"),
		f.audit.check(f.set),
	} {
		if err != nil {
			return err
		}
	}
	for _, u := range f.mcpURLs {
		if reason := urlProblem(u); reason != "" {
			return fmt.Errorf("%w: --mcp %s", errUsage, reason)
		}
	}
	if f.publicURL != "" && !baseURL(f.publicURL) {
		return fmt.Errorf("%w: --public-url must be an http(s) base URL such as https://bridge.example.com", errUsage)
	}
	return nil
}

// baseURL tells whether raw is an http(s) URL with a host and neither a
// query nor a fragment.
func baseURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.RawQuery == "" && u.Fragment == ""
}

func (f *serveOTCFlags) checkTokenStore() error {
	file := strings.HasPrefix(f.tokenStore, "file:")
	if f.tokenStore != "memory" && !file || f.tokenStore == "file:" {
		return fmt.Errorf("%w: --token-store must be memory or file:PATH", errUsage)
	}
	if file && f.tokenKeyEnv == "" {
		return fmt.Errorf("%w: --token-store file:PATH needs --token-key-env (the tokens are encrypted at rest)", errUsage)
	}
	if f.stateURL != "" && f.set["token-store"] {
		return fmt.Errorf("%w: with --state the OAuth tokens are kept in its Redis: drop --token-store", errUsage)
	}
	if f.drainDelay < 0 {
		return fmt.Errorf("%w: --drain-delay must not be negative", errUsage)
	}
	if f.startupWait <= 0 {
		return fmt.Errorf("%w: --startup-wait must be positive", errUsage)
	}
	return nil
}

// otcFrontSetup is what serve-otc serves, built from its flags, the
// environment and its config file by (*Main).otcFrontSetup: the OTC
// handler's options and the MCP servers, every secret read. It holds no
// listener and starts nothing (the --state client connects on first use),
// so the same flags build it again.
type otcFrontSetup struct {
	server otc.Options
	ups    []bridge.MCPServer
	// own are the variables that hold serve-otc's own secrets: kept from
	// the children's environment.
	own      []string
	tokenKey []byte              // --token-key-env's key; nil without it
	shared   *state.Redis        // --state; nil: this process's memory
	controls *bridge.Controls    // the config file's access and rate_limits; nil without
	webhooks []webhooks.Endpoint // the config file's webhooks; nil without
}

// close closes what the setup opened: the --state client.
func (s *otcFrontSetup) close() {
	if s.shared != nil {
		_ = s.shared.Close()
	}
}

// otcFrontSetup reads what the flags name — secrets in the environment,
// the --state store, the config file — and reports every problem in one
// error (docs/otc-front.md, Config file).
func (m *Main) otcFrontSetup(f *serveOTCFlags, log zerolog.Logger) (*otcFrontSetup, error) {
	s := &otcFrontSetup{server: otc.Options{IdempotencyTTL: f.idemTTL, IdempotencyMaxRunning: f.idemRunning, AllowedHosts: f.allowedHosts, AllowedOrigins: f.corsOrigins,
		TrustedProxies: f.trustedProxies}}
	var p problems
	m.readOTCSecrets(&p, f, s, log)
	for _, a := range strings.Split(f.jwtAudiences, ",") {
		if a = strings.TrimSpace(a); a != "" {
			s.server.JWTAudiences = append(s.server.JWTAudiences, a)
		}
	}
	cfg := m.readOTCFrontUpstreams(&p, f, s, log)
	s.controls = controls(&p, f.configPath, cfg.Access, cfg.RateLimits, controlsFront{otc: true, tokens: f.jwtSecretEnv != "", tokenFlag: "--jwt-secret-env"})
	s.webhooks = m.webhookEndpoints(&p, f.configPath, cfg.Webhooks)
	if err := p.err(); err != nil {
		s.close()
		return nil, err
	}
	for _, u := range s.ups {
		// A call with a call_id runs detached from its client: bound it a
		// little past the longest upstream call timeout, so that the
		// upstream's own timeout (which cancels the call there) ends it first.
		s.server.CallTimeout = max(s.server.CallTimeout, u.Config.CallTimeout+detachedCallGrace)
	}
	return s, nil
}

// readOTCFrontUpstreams reads what the configuration decides — the MCP servers
// of the config file, of --mcp and after -- (the built-in sample without
// any) — into s.ups; problems go to p. It runs at the start and at each
// reload (docs/operations.md, Reload without restart), s.own read.
func (m *Main) readOTCFrontUpstreams(p *problems, f *serveOTCFlags, s *otcFrontSetup, log zerolog.Logger) otcFrontConfig {
	cfg := m.readMCPServers(p, f, s, log)
	if len(p.list) > 0 {
		return cfg
	}
	if len(f.command) > 0 {
		// Named by --name or, once it answers, by its serverInfo.name:
		// never by its command line (docs/observability.md, Logs).
		s.ups = append(s.ups, bridge.MCPServer{Toolkit: f.name, Config: upstream.Config{Name: f.name, Command: f.command[0], Args: f.command[1:], CallTimeout: f.callTimeout}})
	}
	if len(s.ups) == 0 {
		log.Info().Msg("no upstream named: serving the built-in sample MCP server")
		s.ups = []bridge.MCPServer{{Toolkit: "Sample", Config: upstream.Config{Name: "sample", InProcess: upstream.Piped(mcpsample.ServeStdio), CallTimeout: f.callTimeout}}}
	}
	for i := range s.ups {
		c := &s.ups[i].Config
		c.Unsetenv = childUnsetenv(cfg, c.Name, s.own)
		if c.MaxMessageBytes == 0 {
			c.MaxMessageBytes = f.maxMessage
		}
	}
	return cfg
}

// readOTCSecrets reads the secrets the flags name (transport auth, the
// identity flags', the token key, the --state password) and opens the
// --state client; problems go to p.
func (m *Main) readOTCSecrets(p *problems, f *serveOTCFlags, s *otcFrontSetup, log zerolog.Logger) {
	if f.apiKeyEnv != "" {
		s.server.APIKey = p.env(m.Getenv, "--api-key-env", "", f.apiKeyEnv)
		s.own = append(s.own, f.apiKeyEnv)
	}
	if f.jwtSecretEnv != "" {
		s.server.JWTSecret = []byte(p.env(m.Getenv, "--jwt-secret-env", "", f.jwtSecretEnv))
		s.own = append(s.own, f.jwtSecretEnv)
	}
	s.own = append(s.own, f.identity.check(m, p, f.set, f.listen)...)
	if f.tokenKeyEnv != "" {
		if v := p.env(m.Getenv, "--token-key-env", "", f.tokenKeyEnv); v != "" {
			var err error
			if s.tokenKey, err = vault.ParseKey(v); err != nil {
				p.add("--token-key-env", "", fmt.Sprintf("%s: %v", f.tokenKeyEnv, err))
			}
		}
		s.own = append(s.own, f.tokenKeyEnv)
	}
	if f.stateURL == "" {
		return
	}
	var password string
	if f.statePasswordEnv != "" {
		password = p.env(m.Getenv, "--state-password-env", "", f.statePasswordEnv)
		s.own = append(s.own, f.statePasswordEnv)
	}
	// go-redis logs through one process-wide logger (the standard
	// library's, on stderr, as plain text): send its lines to ours.
	redis.SetLogger(redisLog{log})
	var err error
	if s.shared, err = state.Open(f.stateURL, &state.Options{Password: password}); err != nil {
		p.add("--state", "", err.Error())
	}
}

// readMCPServers reads the MCP servers of the config file and of --mcp
// into s.ups, and returns the config file's contents; problems go to p.
func (m *Main) readMCPServers(p *problems, f *serveOTCFlags, s *otcFrontSetup, log zerolog.Logger) otcFrontConfig {
	var cfg otcFrontConfig
	if f.configPath != "" {
		var warning string
		var err error
		cfg, warning, err = loadOTCFrontConfig(f.configPath)
		switch {
		case err != nil:
			p.addErr(f.configPath, "", err)
		case len(cfg.MCPServers) == 0:
			p.add(f.configPath, "mcpServers", "has no server (every one is disabled, or the object is empty): add one, or run serve-otc without --config for the built-in sample MCP server")
		default:
			s.ups = m.mcpServers(p, f.configPath, cfg, f.callTimeout)
		}
		if warning != "" {
			log.Warn().Msg(warning)
		}
	}
	var extra http.Header
	if len(f.headers) > 0 {
		extra = f.headers.header(p, m.Getenv)
	}
	for _, u := range f.mcpURLs {
		s.ups = append(s.ups, bridge.MCPServer{ForwardContext: f.forwardContext, Config: upstream.Config{URL: u, SSE: f.forceSSE, CallTimeout: f.callTimeout, Headers: extra}})
	}
	return cfg
}

// runOTCFront wires the running parts — the tracer, the metrics listener,
// the OAuth client, the front — and serves s until ctx ends, then stops
// the MCP servers once in-flight calls are done.
func (m *Main) runOTCFront(ctx context.Context, log zerolog.Logger, f *serveOTCFlags, s *otcFrontSetup) error {
	tracer, stopTracing, err := m.startTracing(ctx, log, "mcpotc serve-otc")
	if err != nil {
		return err
	}
	defer stopTracing()
	opts := &bridge.OTCFrontOptions{Server: s.server, Logger: log, Version: buildVersion(), Tracer: tracer, PublicURL: f.publicURL,
		Controls: s.controls, LimitStore: limitStore(s.shared), AuditArgNames: f.audit.argNames, StartupWait: f.startupWait}
	if f.metricsListen != "" {
		opts.Metrics = metrics.New()
		if err := m.serveMetrics(ctx, log, f.metricsListen, opts.Metrics); err != nil {
			return err
		}
	}
	if opts.Audit, err = f.audit.open(m, log, opts.Metrics); err != nil {
		return err
	}
	defer closeAudit(ctx, log, opts.Audit)
	var stopWebhooks func()
	if opts.Webhooks, stopWebhooks, err = startWebhooks(ctx, log, opts.Metrics, s.webhooks); err != nil {
		return err
	}
	defer stopWebhooks()
	if err := m.otcFrontStores(ctx, f, s, opts); err != nil {
		return err
	}
	f.identity.apply(&opts.Server, opts)
	warnUnverified(log, s.ups)
	// The upstreams get a context that the signal does not end: they are
	// closed by otcFront.Close below, once in-flight calls are done (or the
	// grace ran out), not at the signal (docs/otc-front.md, OTC front).
	otcFront, err := bridge.NewOTCFront(context.WithoutCancel(ctx), s.ups, opts)
	if err != nil {
		return err
	}
	m.reloads(ctx, log, f.configPath, f.watchConfig, opts.Metrics, metrics.FrontOTC, func(rctx context.Context) error {
		return m.reloadOTCFront(rctx, log, f, s, otcFront)
	})
	h := bridge.AuditRefusals(opts.Audit, metrics.FrontOTC, f.trustedProxies, otcFront.Handler())
	serveErr := m.serveHTTPWith(ctx, log, f.listen, bridge.CORS(f.corsOrigins, bridge.LogRefusals(log, h)), "OTC for MCP servers",
		// /ready fails first, so that load balancers stop sending
		// requests; those that still come are served until the shutdown,
		// which lets in-flight calls end.
		draining(log, f.drainDelay, otcFront.Drain, graceful))
	// In-flight calls are done (or the grace ran out): stop the upstreams.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := otcFront.Close(cctx); err != nil {
		log.Error().Err(err).Msg("stopping MCP servers")
	}
	return serveErr
}

// reloadOTCFront reads the config file again and has the front serve it
// (docs/operations.md, Reload without restart): its problems are those of the start; the front refuses
// what it cannot serve without a restart (the first server with oauth).
func (m *Main) reloadOTCFront(ctx context.Context, log zerolog.Logger, f *serveOTCFlags, s *otcFrontSetup, front *bridge.OTCFront) error {
	next := &otcFrontSetup{own: s.own}
	var p problems
	cfg := m.readOTCFrontUpstreams(&p, f, next, log)
	ctl := controls(&p, f.configPath, cfg.Access, cfg.RateLimits, controlsFront{otc: true, tokens: f.jwtSecretEnv != "", tokenFlag: "--jwt-secret-env"})
	next.webhooks = m.webhookEndpoints(&p, f.configPath, cfg.Webhooks)
	if err := p.err(); err != nil {
		return err
	}
	warnWebhooksChanged(log, s.webhooks, next.webhooks)
	for _, u := range next.ups {
		if bound := u.Config.CallTimeout + detachedCallGrace; bound > s.server.CallTimeout {
			log.Warn().Str("upstream", u.Config.Name).Dur("call_timeout", u.Config.CallTimeout).
				Msgf("a call with a call_id runs detached from its client, bounded at start by the longest call_timeout: such calls are cut at %s until a restart", s.server.CallTimeout)
		}
	}
	warnUnverified(log, next.ups)
	return front.Reload(ctx, bridge.OTCFrontConfig{Upstreams: next.ups, Controls: ctl})
}

// otcFrontStores sets where the front keeps what outlives a request: the
// call_id answers and the OAuth tokens, in the --state store when there is
// one (which GET /ready then checks), and the OAuth client's options.
func (m *Main) otcFrontStores(ctx context.Context, f *serveOTCFlags, s *otcFrontSetup, opts *bridge.OTCFrontOptions) error {
	var tokens vault.Store // nil: --token-store
	if s.shared != nil {
		// The replicas share the call_id answers and the tokens; /ready
		// says whether this one reaches them.
		if f.idemTTL > 0 {
			opts.Server.IdempotencyStore = s.shared
		}
		tokens = s.shared
		// A retry of a challenged call may reach another replica.
		opts.ResumeStore = s.shared.Resumes()
		opts.Checks = map[string]func(context.Context) error{"store": s.shared.Ping}
	}
	if !slices.ContainsFunc(s.ups, func(u bridge.MCPServer) bool { return u.OAuth != nil }) {
		return nil
	}
	if s.shared != nil && s.tokenKey == nil {
		return fmt.Errorf("%w: --state keeps OAuth tokens in Redis, encrypted: it needs --token-key-env, the same key on every replica", errUsage)
	}
	var err error
	opts.OAuth, err = oauthOptions(ctx, f.publicURL, f.listen, f.tokenStore, tokens, s.tokenKey)
	return err
}

// childUnsetenv names the variables a child must not inherit from the
// bridge's environment: the bridge's own credentials and every ${VAR} that
// another configured server's env or headers reference (that server's
// secrets). A variable the child's own env references still reaches it
// through that env entry.
func childUnsetenv(cfg otcFrontConfig, name string, own []string) []string {
	out := slices.Clone(own)
	if cfg.Webhooks != nil {
		// The webhooks' secrets are serve-otc's own.
		for _, w := range *cfg.Webhooks {
			if w.SecretEnv != "" && !slices.Contains(out, w.SecretEnv) {
				out = append(out, w.SecretEnv)
			}
		}
	}
	for n, c := range cfg.MCPServers {
		if c.OAuth != nil {
			// URL servers only: no child needs them.
			for _, v := range []string{c.OAuth.ClientSecretEnv, c.OAuth.ClientPrivateKeyEnv} {
				if v != "" && !slices.Contains(out, v) {
					out = append(out, v)
				}
			}
		}
		if n == name {
			continue
		}
		for _, values := range []map[string]string{c.Env, c.Headers} {
			for _, v := range values {
				for _, ref := range envRef.FindAllStringSubmatch(v, -1) {
					if !slices.Contains(out, ref[1]) {
						out = append(out, ref[1])
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// oauthOptions are the OAuth client options of serve-otc: the public URL
// (default: the listen address), and the token vault: in shared (--state)
// when set, else as --token-store says.
func oauthOptions(ctx context.Context, publicURL, listen, store string, shared vault.Store, key []byte) (*oauth.Options, error) {
	if publicURL == "" {
		host, port, _ := net.SplitHostPort(listen)
		if port == "0" {
			return nil, fmt.Errorf("%w: --listen with port 0 needs --public-url: the OAuth redirect URL must name the port", errUsage)
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		publicURL = "http://" + net.JoinHostPort(host, port)
	}
	var st vault.Store = vault.Memory(nil)
	if path, ok := strings.CutPrefix(store, "file:"); shared != nil {
		st = shared
	} else if ok {
		fst, err := vault.OpenFile(path, nil)
		if err != nil {
			return nil, fmt.Errorf("--token-store: %w", err)
		}
		st = fst
	}
	v, err := vault.New(st, key)
	if err != nil {
		return nil, fmt.Errorf("--token-store: %w", err)
	}
	if key != nil {
		// A store sealed under another key would read as empty: every
		// user asked to authorize again, and nobody told why.
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := v.CheckKey(cctx); errors.Is(err, vault.ErrWrongKey) {
			return nil, fmt.Errorf("%w: --token-key-env: the token store's records were sealed with another key: "+
				"give the key it was written with (every replica the same), or remove the store to start over (every user then authorizes again)", errUsage)
		} else if err != nil {
			return nil, fmt.Errorf("token store: %w", err)
		}
	}
	return &oauth.Options{PublicURL: publicURL, Vault: v, Replicated: shared != nil, ClientName: "mcpotc"}, nil
}

// redisLog takes go-redis's log lines (a pool that failed to dial, …) at
// debug level: what they report reaches the log anyway, as the error of
// the call or the /ready check that met it.
type redisLog struct{ log zerolog.Logger }

func (l redisLog) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug().Str("component", "redis").Msg(fmt.Sprintf(format, v...))
}

// detachedCallGrace is how long a detached call may outlive its upstream's
// call timeout (the upstream answers ErrLost at its timeout).
const detachedCallGrace = 5 * time.Second

// mcpServers checks the configured MCP servers and expands ${VAR}s;
// problems go to p.
func (m *Main) mcpServers(p *problems, file string, cfg otcFrontConfig, callTimeout time.Duration) []bridge.MCPServer {
	var out []bridge.MCPServer
	for _, n := range sortedKeys(cfg.MCPServers) {
		c := cfg.MCPServers[n]
		key := c.key
		if key == "" {
			key = "mcpServers." + n
		}
		before := len(p.list)
		u := m.mcpServer(p, file, key, n, c, callTimeout)
		if len(p.list) == before {
			out = append(out, u)
		}
	}
	return out
}

// mcpServer checks the MCP server n, at key in file; problems go to p.
func (m *Main) mcpServer(p *problems, file, key, n string, c mcpServerConfig, callTimeout time.Duration) bridge.MCPServer {
	u := bridge.MCPServer{Toolkit: c.Toolkit, Version: c.Version, Allow: c.Allow, Deny: c.Deny,
		ForwardAuthorization: c.ForwardAuthorization, ForwardContext: c.ForwardContext, Tools: overrides(p, file, key+".tools", c.Tools, "")}
	u.Config = upstream.Config{Name: n, CallTimeout: time.Duration(c.CallTimeout)}
	if u.Config.CallTimeout == 0 {
		u.Config.CallTimeout = callTimeout
	}
	checkMCPServerValues(p, file, key, c)
	u.Config.MaxMessageBytes = c.MaxMessageBytes // zero: --max-message-bytes
	u.Config.Protocol = c.Protocol
	switch {
	case c.Command != "" && c.URL != "":
		p.add(file, key, "has both command and url: give one")
	case c.Command != "":
		m.stdioServer(p, file, key, c, &u.Config)
	case c.URL != "":
		m.urlServer(p, file, key, c, &u.Config)
	default:
		p.add(file, key, "needs a command (stdio) or a url (HTTP)")
	}
	if c.ForwardAuthorization && c.URL == "" {
		p.add(file, key+".forward_authorization", "needs a url server: a stdio child has no Authorization header")
	}
	if c.OAuth != nil {
		u.OAuth = m.oauthConfig(p, file, key+".oauth", c)
	}
	return u
}

// checkMCPServerValues checks a server's values that are wrong in
// themselves: max_message_bytes, version, type and protocol.
func checkMCPServerValues(p *problems, file, key string, c mcpServerConfig) {
	if c.MaxMessageBytes < 0 {
		p.add(file, key+".max_message_bytes", "must be a positive number of bytes")
	}
	if c.Version != "" && !otc.ValidVersion(c.Version) {
		p.add(file, key+".version", fmt.Sprintf("%q is not x.y.z", c.Version))
	}
	if err := oneOf(file, key+".type", c.Type, "", "stdio", "http", "streamable-http", "streamableHttp", "sse"); err != nil {
		p.addErr(file, key+".type", err)
	}
	if c.Protocol == "" {
		return
	}
	if err := oneOf(file, key+".protocol", c.Protocol, upstream.ProtocolAuto, upstream.ProtocolModern, upstream.ProtocolLegacy); err != nil {
		p.addErr(file, key+".protocol", err)
	} else if c.Protocol == upstream.ProtocolModern && c.Type == "sse" {
		p.add(file, key+".protocol", "2026-07-28 needs streamable HTTP or stdio: legacy SSE carries 2025-11-25 and earlier only")
	}
}

// stdioServer sets up a command server's child: command, args, cwd and
// env with its ${VAR}s expanded.
func (m *Main) stdioServer(p *problems, file, key string, c mcpServerConfig, cfg *upstream.Config) {
	if c.Type != "" && c.Type != "stdio" || len(c.Headers) > 0 {
		p.add(file, key, "a command server is stdio: type and headers do not apply")
	}
	cfg.Command, cfg.Args, cfg.Dir = c.Command, c.Args, c.Cwd
	for _, k := range sortedKeys(c.Env) {
		v, err := expandEnv(m.Getenv, file, key+".env."+k, c.Env[k])
		if err != nil {
			p.addErr(file, key+".env."+k, err)
			continue
		}
		cfg.Env = append(cfg.Env, k+"="+v)
	}
}

// urlServer sets up a url server's connection: URL, transport and headers
// with their ${VAR}s expanded.
func (m *Main) urlServer(p *problems, file, key string, c mcpServerConfig, cfg *upstream.Config) {
	if reason := urlProblem(c.URL); reason != "" {
		p.add(file, key+".url", reason)
	}
	if c.Type == "stdio" || len(c.Env) > 0 || len(c.Args) > 0 || c.Cwd != "" {
		p.add(file, key, "a url server is HTTP: type stdio, args, env and cwd do not apply")
	}
	cfg.URL, cfg.SSE = c.URL, c.Type == "sse"
	cfg.Headers = http.Header{}
	for _, k := range sortedKeys(c.Headers) {
		ev, err := expandEnv(m.Getenv, file, key+".headers."+k, c.Headers[k])
		if err != nil {
			p.addErr(file, key+".headers."+k, err)
			continue
		}
		cfg.Headers.Set(k, ev)
	}
}

// oauthConfig checks a server's "oauth" entry and reads its secrets from
// the environment; problems go to p.
func (m *Main) oauthConfig(p *problems, file, key string, c mcpServerConfig) *oauth.Config {
	o := c.OAuth
	out := &oauth.Config{ClientID: o.ClientID, Scopes: o.Scopes, Grant: o.Grant, PerUser: o.PerUser, UserVerification: o.UserVerification,
		ClientMetadataURL: o.ClientMetadataURL}
	checkOAuthEntry(p, file, key, c)
	if nets, err := networks(o.AllowNetworks); err != nil {
		p.add(file, key+".allow_networks", err.Error())
	} else {
		out.AllowNetworks = nets
	}
	if o.ClientSecretEnv != "" {
		out.ClientSecret = p.env(m.Getenv, file, key+".client_secret_env", o.ClientSecretEnv)
	}
	if o.ClientPrivateKeyEnv != "" {
		if pemText := p.env(m.Getenv, file, key+".client_private_key_env", o.ClientPrivateKeyEnv); pemText != "" {
			k, err := oauth.ParsePrivateKey([]byte(pemText))
			if err != nil {
				p.add(file, key+".client_private_key_env", fmt.Sprintf("%s: %v", o.ClientPrivateKeyEnv, err))
			}
			out.PrivateKey = k
		}
	}
	return out
}

// checkOAuthEntry checks what a server's "oauth" entry says, alone and
// with the rest of the server's entry.
func checkOAuthEntry(p *problems, file, key string, c mcpServerConfig) {
	o := c.OAuth
	if why := userVerificationProblem(o); why != "" {
		p.add(file, key+".user_verification", why)
	}
	if c.URL == "" {
		p.add(file, key, "needs a url server: OAuth protects HTTP servers")
	}
	if _, ok := c.Headers["Authorization"]; ok {
		p.add(file, key, "and headers.Authorization both set the Authorization header: keep one")
	}
	if c.ForwardAuthorization {
		p.add(file, key, "and forward_authorization both set the Authorization header: keep one")
	}
	if err := oneOf(file, key+".grant", o.Grant, "", oauth.GrantAuthorizationCode, oauth.GrantClientCredentials); err != nil {
		p.addErr(file, key+".grant", err)
	}
	if o.Grant == oauth.GrantClientCredentials && o.ClientID == "" {
		p.add(file, key+".client_id", "the client_credentials grant needs a pre-registered client_id")
	}
	if (o.ClientSecretEnv != "" || o.ClientPrivateKeyEnv != "") && o.ClientID == "" {
		p.add(file, key+".client_id", "a client secret or private key goes with a pre-registered client_id")
	}
	if o.ClientSecretEnv != "" && o.ClientPrivateKeyEnv != "" {
		p.add(file, key, "client_secret_env and client_private_key_env: give one way to authenticate the client")
	}
	if o.ClientMetadataURL != "" {
		if u, err := url.Parse(o.ClientMetadataURL); err != nil || u.Scheme != "https" || u.Path == "" || u.Path == "/" {
			p.add(file, key+".client_metadata_url", "must be an https URL with a path (a client ID metadata document)")
		}
	}
}

// sampleMCP serves the built-in sample MCP server over stdio.
func (m *Main) sampleMCP(ctx context.Context, args []string) error {
	fs := m.flags("sample-mcp", "")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	err := mcpsample.ServeStdio(ctx, m.Stdin, m.Stdout)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
