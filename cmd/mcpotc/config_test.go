package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/internal/wiretest"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkConfigError checks the error of reading a config.json: none when
// want is empty, else one that names the file and contains want.
func checkConfigError(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("error = %v, want it to name the file and contain %q", err, want)
	}
}

func TestMCPFrontConfigExample(t *testing.T) {
	env := map[string]string{"TOOLS_OXP_API_KEY": "k", "TWILIO_API_KEY": "t", "GOOGLE_ACCESS_TOKEN": "g", "BILLING_JWT_SECRET": "s"}
	m := &Main{Getenv: func(k string) string { return env[k] }}
	var cfg mcpFrontConfig
	if err := loadConfig("../../testdata/config/serve-mcp.json", &cfg); err != nil {
		t.Fatal(err)
	}
	var p problems
	ups := m.otcServers(&p, zerolog.Nop(), "serve-mcp.json", cfg.Upstreams, false)
	if err := p.err(); err != nil {
		t.Fatal(err)
	}
	if len(ups) != 2 || ups[0].Secrets["TWILIO_API_KEY"] != "t" || ups[0].Tokens["google"] != "g" || ups[0].UserID != "user_123" ||
		ups[0].CallTimeout.String() != "30s" || ups[1].Prefix != "billing_" {
		t.Errorf("upstreams = %+v", ups)
	}
}

func TestMCPFrontConfigErrors(t *testing.T) {
	tests := []struct {
		name, body string
		env        map[string]string
		http       bool
		want       string
	}{
		{"unknown top key", `{"upstream":[]}`, nil, false, `config.json: upstream: unknown key: did you mean "upstreams"? (known: upstreams, access, rate_limits, webhooks)`},
		{"unknown nested key", `{"upstreams":[{"url":"http://h","api_key":"inline"}]}`, nil, false, `upstreams[0].api_key: unknown key`},
		{"wrong type", `{"upstreams":[{"url":5}]}`, nil, false, `upstreams[0].url: want a string`},
		{"not a list", `{"upstreams":{}}`, nil, false, `upstreams: want a list`},
		{"bad duration", `{"upstreams":[{"url":"http://h","call_timeout":"soon"}]}`, nil, false, `upstreams[0].call_timeout: "soon" is not a positive duration`},
		{"bad url", `{"upstreams":[{"url":"ftp://h"}]}`, nil, false, `upstreams[0].url: "ftp://h": want an http:// or https:// URL`},
		{"credentials in url", `{"upstreams":[{"url":"http://u:p@h"}]}`, nil, false, `upstreams[0].url: must not carry credentials`},
		{"bad dialect", `{"upstreams":[{"url":"http://h","dialect":"otc-2"}]}`, nil, false, `upstreams[0].dialect: unknown OTC dialect`},
		{"bad user id claim", `{"upstreams":[{"url":"http://h","user_id_from_token":true,"user_id_claim":"email"}]}`, nil, false, `upstreams[0].user_id_claim: "email" is not sub or client_id`},
		{"user id claim alone", `{"upstreams":[{"url":"http://h","user_id_claim":"sub"}]}`, nil, false, `upstreams[0].user_id_claim: goes with user_id_from_token: true`},
		{"bad prefix", `{"upstreams":[{"url":"http://h","prefix":"a b"}]}`, nil, false, `upstreams[0].prefix`},
		{"duplicate name", `{"upstreams":[{"url":"http://h"},{"url":"http://h"}]}`, nil, false, `upstreams[1].name: "h" is used twice`},
		{"inline secret", `{"upstreams":[{"url":"http://h","secrets":{"K":"sk-live-123"}}]}`, nil, false, `upstreams[0].secrets.K: must name an environment variable`},
		{"unset env", `{"upstreams":[{"url":"http://h","api_key_env":"NOPE"}]}`, nil, false, `upstreams[0].api_key_env: environment variable NOPE is not set`},
		{"audience without secret", `{"upstreams":[{"url":"http://h","jwt_audience":"a"}]}`, nil, false, `upstreams[0].jwt_audience: needs jwt_secret_env`},
		{"caller token on stdio", `{"upstreams":[{"url":"http://h","forward_caller_token":["google"]}]}`, nil, false, `forward_caller_token: needs an HTTP transport`},
		{"caller token on http", `{"upstreams":[{"url":"http://h","forward_caller_token":["google"]}]}`, nil, true, ``},
		{"not JSON", `{`, nil, false, `config.json: line 1, column 2: invalid JSON`},
		{"not an object", `[]`, nil, false, `config.json: want a JSON object`},
		{"misspelt key", `{"upstreams":[{"url":"http://h","api_key_nev":"K"}]}`, nil, false, `upstreams[0].api_key_nev: unknown key: did you mean "api_key_env"?`},
		{"no scheme", `{"upstreams":[{"url":"127.0.0.1:8081"}]}`, nil, false, `upstreams[0].url: "127.0.0.1:8081" has no scheme: add http://, e.g. http://127.0.0.1:8081`},
		{"header var", `{"upstreams":[{"url":"http://h","headers":{"X-Key":"${NOPE}"}}]}`, nil, false, `upstreams[0].headers.X-Key: environment variable NOPE is not set`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.body)
			m := &Main{Getenv: func(k string) string { return tt.env[k] }}
			var cfg mcpFrontConfig
			err := loadConfig(path, &cfg)
			if err == nil {
				var p problems
				m.otcServers(&p, zerolog.Nop(), path, cfg.Upstreams, tt.http)
				err = p.err()
			}
			checkConfigError(t, err, tt.want)
			if err != nil && strings.Contains(err.Error(), "sk-live-123") {
				t.Errorf("error echoes a secret: %v", err)
			}
		})
	}
}

func TestOTCFrontConfigExample(t *testing.T) {
	m := &Main{Getenv: func(k string) string { return map[string]string{"GITHUB_MCP_TOKEN": "ghp_x"}[k] }}
	cfg, warning, err := loadOTCFrontConfig("../../testdata/config/serve-otc.json")
	if err != nil || warning != "" {
		t.Fatal(err, warning)
	}
	var p problems
	ups := m.mcpServers(&p, "serve-otc.json", cfg, time.Minute)
	if err := p.err(); err != nil {
		t.Fatal(err)
	}
	if len(ups) != 3 {
		t.Fatalf("%d upstreams", len(ups))
	}
	everything, github, notes := ups[0], ups[1], ups[2]
	if everything.Config.Command != "npx" || strings.Join(everything.Config.Env, ",") != "LOG_LEVEL=warn" || everything.Toolkit != "Everything" ||
		everything.Config.CallTimeout != 30*time.Second || everything.Deny[0] != "trigger-sampling-request" {
		t.Errorf("everything = %+v", everything)
	}
	if github.Config.Headers.Get("Authorization") != "Bearer ghp_x" || github.Version != "2.1.0" || github.Config.CallTimeout != time.Minute || len(github.Allow) != 2 {
		t.Errorf("github = %+v", github)
	}
	if !notes.Config.SSE || !notes.ForwardAuthorization {
		t.Errorf("notes = %+v", notes)
	}
}

func TestOTCFrontConfigErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"unknown key", `{"mcpServers":{"a":{"comand":"x"}}}`, `mcpServers.a.comand: unknown key: did you mean "command"?`},
		{"no servers", `{"globalShortcut":"Ctrl+Space"}`, `config.json: has no mcpServers (or VS Code servers) object`},
		{"empty", `{"mcpServers":{}}`, ``},
		{"servers not an object", `{"servers":[]}`, `config.json: servers: want an object`},
		{"twice", `{"mcpServers":{"a":{"command":"x"}},"servers":{"a":{"command":"y"}}}`, `servers.a: is also in mcpServers`},
		{"vs code input", `{"servers":{"a":{"url":"http://h","headers":{"Authorization":"Bearer ${input:token}"}}}}`, `servers.a.headers.Authorization: ${input:token} is a VS Code prompt input`},
		{"syntax", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}", `config.json: line 3, column 26: invalid JSON`},
		{"neither", `{"mcpServers":{"a":{}}}`, `mcpServers.a: needs a command (stdio) or a url (HTTP)`},
		{"both", `{"mcpServers":{"a":{"command":"x","url":"http://h"}}}`, `mcpServers.a: has both command and url`},
		{"bad type", `{"mcpServers":{"a":{"url":"http://h","type":"ws"}}}`, `mcpServers.a.type: "ws" is not one of`},
		{"headers on stdio", `{"mcpServers":{"a":{"command":"x","headers":{"A":"b"}}}}`, `a command server is stdio`},
		{"env on http", `{"mcpServers":{"a":{"url":"http://h","env":{"A":"b"}}}}`, `a url server is HTTP`},
		{"bad version", `{"mcpServers":{"a":{"command":"x","version":"1.0"}}}`, `mcpServers.a.version: "1.0" is not x.y.z`},
		{"unset var", `{"mcpServers":{"a":{"url":"http://h","headers":{"Authorization":"Bearer ${NOPE}"}}}}`, `mcpServers.a.headers.Authorization: environment variable NOPE is not set`},
		{"forward on stdio", `{"mcpServers":{"a":{"command":"x","forward_authorization":true}}}`, `forward_authorization: needs a url server`},
		{"bad timeout", `{"mcpServers":{"a":{"command":"x","call_timeout":"0s"}}}`, `call_timeout: "0s" is not a positive duration`},
		{"args type", `{"mcpServers":{"a":{"command":"x","args":"-y"}}}`, `mcpServers.a.args: want a list`},
		{"oauth", `{"mcpServers":{"a":{"url":"http://h/mcp","oauth":{}}}}`, ``},
		{"oauth key", `{"mcpServers":{"a":{"url":"http://h/mcp","oauth":{"client_secret":"s3cret"}}}}`, `mcpServers.a.oauth.client_secret: unknown key (known: client_id, client_secret_env,`},
		{"oauth on stdio", `{"mcpServers":{"a":{"command":"x","oauth":{}}}}`, `mcpServers.a.oauth: needs a url server`},
		{"oauth and header", `{"mcpServers":{"a":{"url":"http://h","headers":{"Authorization":"Bearer x"},"oauth":{}}}}`, `mcpServers.a.oauth: and headers.Authorization both set`},
		{"oauth grant", `{"mcpServers":{"a":{"url":"http://h","oauth":{"grant":"password"}}}}`, `mcpServers.a.oauth.grant: "password" is not one of`},
		{"oauth per user", `{"mcpServers":{"a":{"url":"http://h","oauth":{"per_user":true,"user_verification":"oidc"}}}}`, ``},
		{"oauth per user cc", `{"mcpServers":{"a":{"url":"http://h","oauth":{"per_user":true,"user_verification":"verifier","grant":"client_credentials","client_id":"c"}}}}`, ``},
		// No safe default: who completes a user's authorization must be said.
		{"oauth per user unverified", `{"mcpServers":{"a":{"url":"http://h","oauth":{"per_user":true}}}}`, `mcpServers.a.oauth.user_verification: per_user needs user_verification: "oidc"`},
		{"oauth verification unknown", `{"mcpServers":{"a":{"url":"http://h","oauth":{"per_user":true,"user_verification":"trust"}}}}`, `mcpServers.a.oauth.user_verification: must be "oidc", "verifier" or "none"`},
		{"oauth verification shared", `{"mcpServers":{"a":{"url":"http://h","oauth":{"user_verification":"oidc"}}}}`, `mcpServers.a.oauth.user_verification: goes with per_user: true`},
		{"oauth cc", `{"mcpServers":{"a":{"url":"http://h","oauth":{"grant":"client_credentials"}}}}`, `mcpServers.a.oauth.client_id: the client_credentials grant needs`},
		{"oauth secret unset", `{"mcpServers":{"a":{"url":"http://h","oauth":{"client_id":"c","client_secret_env":"NOPE"}}}}`, `mcpServers.a.oauth.client_secret_env: environment variable NOPE is not set`},
		{"oauth secret in file", `{"mcpServers":{"a":{"url":"http://h","oauth":{"client_id":"c","client_secret_env":"abc-def"}}}}`, `must name an environment variable`},
		{"oauth cimd", `{"mcpServers":{"a":{"url":"http://h","oauth":{"client_metadata_url":"http://x/"}}}}`, `client_metadata_url: must be an https URL with a path`},
		{"oauth allow_networks", `{"mcpServers":{"a":{"url":"http://h","oauth":{"allow_networks":["10.0.0.0/8","fd00::/8","192.168.1.5"]}}}}`, ``},
		{"oauth allow_networks bad", `{"mcpServers":{"a":{"url":"http://h","oauth":{"allow_networks":["10.0.0.0/33"]}}}}`, `mcpServers.a.oauth.allow_networks: "10.0.0.0/33" is not a network (CIDR such as 10.0.0.0/8) nor an IP address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.body)
			m := &Main{Getenv: func(string) string { return "" }}
			cfg, _, err := loadOTCFrontConfig(path)
			if err == nil {
				var p problems
				m.mcpServers(&p, path, cfg, time.Minute)
				err = p.err()
			}
			checkConfigError(t, err, tt.want)
		})
	}
}

// TestOTCFrontConfigAsHostsWriteIt reads a file the way MCP hosts write
// them: Claude Desktop's top-level keys, VS Code's servers object with
// ${env:VAR} and its inputs, host-only server keys, disabled servers.
func TestOTCFrontConfigAsHostsWriteIt(t *testing.T) {
	path := writeConfig(t, `{
  "globalShortcut": "Ctrl+Space",
  "inputs": [{"type": "promptString", "id": "token"}],
  "mcpServers": {
    "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "autoApprove": ["echo"], "timeout": 60},
    "old": {"command": "old-server", "disabled": true}
  },
  "servers": {
    "github": {"type": "http", "url": "https://api.example.com/mcp/", "headers": {"Authorization": "Bearer ${env:GH_TOKEN}"}},
    "off": {"url": "http://127.0.0.1:1/mcp", "disabled": true}
  }
}`)
	cfg, warning, err := loadOTCFrontConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	wantWarning := path + ": ignoring keys that are for MCP hosts, not mcpotc: mcpServers.everything.autoApprove, mcpServers.everything.timeout, globalShortcut, inputs"
	if warning != wantWarning {
		t.Errorf("warning = %q\nwant      %q", warning, wantWarning)
	}
	m := &Main{Getenv: func(k string) string { return map[string]string{"GH_TOKEN": "ghp_1"}[k] }}
	var p problems
	ups := m.mcpServers(&p, path, cfg, time.Minute)
	if err := p.err(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range ups {
		got = append(got, u.Config.Name+" "+u.Config.Command+u.Config.URL+" "+u.Config.Headers.Get("Authorization"))
	}
	want := []string{"everything npx ", "github https://api.example.com/mcp/ Bearer ghp_1"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("servers = %q, want %q", got, want)
	}

	// The warning is one log line, at start.
	var stderr wiretest.Buffer
	mm := &Main{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }}
	code := mm.Run(context.Background(), []string{"serve-otc", "--log-format", "json", "--config", writeConfig(t, `{"globalShortcut":"x","mcpServers":{"a":{"url":"http://127.0.0.1:1/mcp","headers":{"A":"${NOPE}"}}}}`)})
	if code != 2 || strings.Count(stderr.String(), "ignoring keys that are for MCP hosts") != 1 || !strings.Contains(stderr.String(), "mcpServers.a.headers.A: environment variable NOPE is not set") {
		t.Errorf("code %d, stderr:\n%s", code, stderr.String())
	}
}
