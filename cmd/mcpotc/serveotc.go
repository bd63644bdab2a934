package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mcpotc/mcpotc/bridge"
	"github.com/mcpotc/mcpotc/mcp"
	mcpsample "github.com/mcpotc/mcpotc/mcp/sample"
	"github.com/mcpotc/mcpotc/otc"
)

// otcFrontConfig is the config file of serve-otc: the mcpServers object MCP
// hosts use, with a few keys of mcpotc's own per server.
type otcFrontConfig struct {
	MCPServers map[string]mcpServerConfig `json:"mcpServers"`
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
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${VAR} in s; an unset variable is an error.
func expandEnv(getenv func(string) string, file, key, s string) (string, error) {
	var missing string
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		v := getenv(name)
		if v == "" && missing == "" {
			missing = name
		}
		return v
	})
	if missing != "" {
		return "", &configError{file, key, fmt.Sprintf("environment variable %s is not set", missing)}
	}
	return out, nil
}

func (m *Main) serveOTC(ctx context.Context, args []string) error {
	fs := m.flags("serve-otc", "[--listen 127.0.0.1:8080] [--config FILE] [--mcp URL]... [flags] [-- COMMAND [ARGS...]]")
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve OTC on")
	configPath := fs.String("config", "", "JSON config file with an mcpServers object (see README)")
	var mcpURLs stringList
	fs.Var(&mcpURLs, "mcp", "URL of an MCP server over streamable HTTP, or legacy SSE when the path ends in /sse (repeatable)")
	forceSSE := fs.Bool("mcp-sse", false, "use the legacy SSE transport for every --mcp URL")
	forwardContext := fs.Bool("forward-context", false, "send each call's OTC context (tokens, secrets, user id) to --mcp servers that are mcpotc MCP fronts (see README, Round trips)")
	name := fs.String("name", "", "toolkit name of the '-- COMMAND' server (default: its serverInfo.name)")
	callTimeout := fs.Duration("call-timeout", 60*time.Second, "bound on each tool call")
	maxMessage := fs.Int64("max-message-bytes", mcp.DefaultUpstreamMaxMessageBytes, "bound on one message from an MCP server (a stdio line, an HTTP body or event); a longer answer fails its call")
	apiKeyEnv := fs.String("api-key-env", "", "environment variable holding the API key OTC clients must send (OXP-API-Key or bearer)")
	jwtSecretEnv := fs.String("jwt-secret-env", "", "environment variable holding the HS256 secret of the bearer JWTs OTC clients may send")
	jwtAudiences := fs.String("jwt-audience", "", "comma-separated audiences a JWT's aud may name (tokens with aud need one)")
	idemTTL := fs.Duration("idempotency-ttl", 10*time.Minute, "how long a call_id's answer is kept and replayed (0: off)")
	idemRunning := fs.Int("idempotency-max-running", otc.DefaultIdempotencyMaxRunning, "bound on calls with a call_id running at once (beyond it: 400 temporarily unavailable, Retry-After)")
	var allowedHosts stringList
	fs.Var(&allowedHosts, "allowed-host", "host name admitted in Host and Origin on a loopback listener besides localhost and loopback IPs, e.g. a reverse proxy's (repeatable)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error (logs go to stderr)")
	var command []string
	if i := slices.Index(args, "--"); i >= 0 {
		if i == len(args)-1 {
			return fmt.Errorf("%w: '--' must be followed by a command", errUsage)
		}
		args, command = args[:i], args[i+1:]
	}
	if err := m.parse(fs, args); err != nil {
		return err
	}
	log, err := m.logger(*level)
	if err != nil {
		return err
	}
	if *callTimeout <= 0 {
		return fmt.Errorf("%w: --call-timeout must be positive", errUsage)
	}
	if *maxMessage <= 0 {
		return fmt.Errorf("%w: --max-message-bytes must be positive", errUsage)
	}
	if *idemRunning <= 0 {
		return fmt.Errorf("%w: --idempotency-max-running must be positive", errUsage)
	}
	server := otc.Options{IdempotencyTTL: *idemTTL, IdempotencyMaxRunning: *idemRunning, AllowedHosts: allowedHosts}
	var ownSecrets []string // read here, then kept from the children's environment
	if *apiKeyEnv != "" {
		if server.APIKey, err = requireEnv(m.Getenv, "--api-key-env", "", *apiKeyEnv); err != nil {
			return err
		}
		ownSecrets = append(ownSecrets, *apiKeyEnv)
	}
	if *jwtSecretEnv != "" {
		secret, err := requireEnv(m.Getenv, "--jwt-secret-env", "", *jwtSecretEnv)
		if err != nil {
			return err
		}
		server.JWTSecret = []byte(secret)
		ownSecrets = append(ownSecrets, *jwtSecretEnv)
	}
	for _, a := range strings.Split(*jwtAudiences, ",") {
		if a = strings.TrimSpace(a); a != "" {
			server.JWTAudiences = append(server.JWTAudiences, a)
		}
	}

	var ups []bridge.MCPUpstream
	var cfg otcFrontConfig
	if *configPath != "" {
		if err := loadConfig(*configPath, &cfg); err != nil {
			return err
		}
		if ups, err = m.mcpUpstreams(*configPath, cfg, *callTimeout); err != nil {
			return err
		}
	}
	for _, u := range mcpURLs {
		if err := checkURL("--mcp", "", u); err != nil {
			return err
		}
		ups = append(ups, bridge.MCPUpstream{ForwardContext: *forwardContext, Config: mcp.UpstreamConfig{Name: u, URL: u, SSE: *forceSSE, CallTimeout: *callTimeout}})
	}
	if len(command) > 0 {
		n := *name
		if n == "" {
			n = commandName(command)
		}
		ups = append(ups, bridge.MCPUpstream{Toolkit: *name, Config: mcp.UpstreamConfig{Name: n, Command: command[0], Args: command[1:], CallTimeout: *callTimeout}})
	} else if *name != "" {
		return fmt.Errorf("%w: --name names the '-- COMMAND' server; there is none", errUsage)
	}
	if len(ups) == 0 {
		log.Info().Msg("no upstream named: serving the built-in sample MCP server")
		ups = []bridge.MCPUpstream{{Toolkit: "Sample", Config: mcp.UpstreamConfig{Name: "sample", InProcess: mcpsample.NewServer(), CallTimeout: *callTimeout}}}
	}

	for i := range ups {
		ups[i].Config.Unsetenv = childUnsetenv(cfg, ups[i].Config.Name, ownSecrets)
		if ups[i].Config.MaxMessageBytes == 0 {
			ups[i].Config.MaxMessageBytes = *maxMessage
		}
		// A call with a call_id runs detached from its client: bound it a
		// little past the longest upstream call timeout, so that the
		// upstream's own timeout (which cancels the call there) ends it first.
		server.CallTimeout = max(server.CallTimeout, ups[i].Config.CallTimeout+detachedCallGrace)
	}
	// The upstreams get a context that the signal does not end: they are
	// closed by front.Close below, once in-flight calls are done (or the
	// grace ran out), not at the signal (README, OTC front).
	front, err := bridge.NewOTCFront(context.WithoutCancel(ctx), ups, &bridge.OTCFrontOptions{Server: server, Logger: log, Version: buildVersion()})
	if err != nil {
		return err
	}
	serveErr := m.serveHTTPWith(ctx, log, *listen, bridge.LogRefusals(log, front.Handler()), "OTC for MCP servers",
		func(sctx context.Context, srv *http.Server) error { return srv.Shutdown(sctx) })
	// In-flight calls are done (or the grace ran out): stop the upstreams.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := front.Close(cctx); err != nil {
		log.Error().Err(err).Msg("stopping MCP servers")
	}
	return serveErr
}

// childUnsetenv names the variables a child must not inherit from the
// bridge's environment: the bridge's own credentials and every ${VAR} that
// another configured server's env or headers reference (that server's
// secrets). A variable the child's own env references still reaches it
// through that env entry.
func childUnsetenv(cfg otcFrontConfig, name string, own []string) []string {
	out := slices.Clone(own)
	for n, c := range cfg.MCPServers {
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

// detachedCallGrace is how long a detached call may outlive its upstream's
// call timeout (the upstream answers ErrLost at its timeout).
const detachedCallGrace = 5 * time.Second

// checkURL checks an http(s) URL without credentials.
func checkURL(file, key, raw string) error {
	u, err := url.Parse(raw)
	if raw == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &configError{file, key, fmt.Sprintf("%q is not an http(s) URL", raw)}
	}
	if u.User != nil {
		return &configError{file, key, "must not carry credentials: use headers"}
	}
	return nil
}

// mcpUpstreams checks the configured MCP servers and expands ${VAR}s.
func (m *Main) mcpUpstreams(file string, cfg otcFrontConfig, callTimeout time.Duration) ([]bridge.MCPUpstream, error) {
	names := make([]string, 0, len(cfg.MCPServers))
	for n := range cfg.MCPServers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []bridge.MCPUpstream
	for _, n := range names {
		c := cfg.MCPServers[n]
		key := "mcpServers." + n
		u := bridge.MCPUpstream{Toolkit: c.Toolkit, Version: c.Version, Allow: c.Allow, Deny: c.Deny,
			ForwardAuthorization: c.ForwardAuthorization, ForwardContext: c.ForwardContext}
		u.Config = mcp.UpstreamConfig{Name: n, CallTimeout: time.Duration(c.CallTimeout)}
		if u.Config.CallTimeout == 0 {
			u.Config.CallTimeout = callTimeout
		}
		if c.MaxMessageBytes < 0 {
			return nil, &configError{file, key + ".max_message_bytes", "must be a positive number of bytes"}
		}
		u.Config.MaxMessageBytes = c.MaxMessageBytes // zero: --max-message-bytes
		if c.Version != "" && !otc.ValidVersion(c.Version) {
			return nil, &configError{file, key + ".version", fmt.Sprintf("%q is not x.y.z", c.Version)}
		}
		if err := oneOf(file, key+".type", c.Type, "", "stdio", "http", "streamable-http", "streamableHttp", "sse"); err != nil {
			return nil, err
		}
		switch {
		case c.Command != "" && c.URL != "":
			return nil, &configError{file, key, "has both command and url: give one"}
		case c.Command != "":
			if c.Type != "" && c.Type != "stdio" || len(c.Headers) > 0 {
				return nil, &configError{file, key, "a command server is stdio: type and headers do not apply"}
			}
			u.Config.Command, u.Config.Args, u.Config.Dir = c.Command, c.Args, c.Cwd
			envKeys := make([]string, 0, len(c.Env))
			for k := range c.Env {
				envKeys = append(envKeys, k)
			}
			sort.Strings(envKeys)
			for _, k := range envKeys {
				v, err := expandEnv(m.Getenv, file, key+".env."+k, c.Env[k])
				if err != nil {
					return nil, err
				}
				u.Config.Env = append(u.Config.Env, k+"="+v)
			}
		case c.URL != "":
			if err := checkURL(file, key+".url", c.URL); err != nil {
				return nil, err
			}
			if c.Type == "stdio" || len(c.Env) > 0 || len(c.Args) > 0 || c.Cwd != "" {
				return nil, &configError{file, key, "a url server is HTTP: type stdio, args, env and cwd do not apply"}
			}
			u.Config.URL, u.Config.SSE = c.URL, c.Type == "sse"
			u.Config.Headers = http.Header{}
			for k, v := range c.Headers {
				ev, err := expandEnv(m.Getenv, file, key+".headers."+k, v)
				if err != nil {
					return nil, err
				}
				u.Config.Headers.Set(k, ev)
			}
		default:
			return nil, &configError{file, key, "needs a command (stdio) or a url (HTTP)"}
		}
		if c.ForwardAuthorization && c.URL == "" {
			return nil, &configError{file, key + ".forward_authorization", "needs a url server: a stdio child has no Authorization header"}
		}
		out = append(out, u)
	}
	return out, nil
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

// commandName names a '-- COMMAND' server for logs and health: the
// program, or for an interpreter or launcher the script or package it runs.
func commandName(command []string) string {
	name := filepath.Base(command[0])
	switch name {
	case "node", "npx", "bun", "bunx", "deno", "python", "python3", "uv", "uvx", "pipx", "sh", "bash", "docker":
		for _, a := range command[1:] {
			if !strings.HasPrefix(a, "-") && a != "run" {
				return filepath.Base(a)
			}
		}
	}
	return name
}
