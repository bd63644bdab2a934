package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/wiretest"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb wiretest.Buffer
	m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code = m.Run(context.Background(), args)
	return code, out.String(), errb.String()
}

func TestCommandLine(t *testing.T) {
	tests := []struct {
		args       []string
		code       int
		stdout     string // substring
		stderr     string // substring
		noStdout   bool
		emptyError bool
	}{
		{args: nil, code: 2, stderr: "Usage: mcpotc <command>", noStdout: true},
		{args: []string{"-h"}, code: 0, stdout: "sample-otc", emptyError: true},
		{args: []string{"help"}, code: 0, stdout: "Commands:", emptyError: true},
		{args: []string{"help", "sample-otc"}, code: 0, stdout: "-listen", emptyError: true},
		{args: []string{"sample-otc", "-h"}, code: 0, stdout: "Usage: mcpotc sample-otc", emptyError: true},
		{args: []string{"version"}, code: 0, stdout: "mcpotc ", emptyError: true},
		{args: []string{"--version"}, code: 0, stdout: "mcpotc devel", emptyError: true},
		{args: []string{"version", "-h"}, code: 0, stdout: "Usage: mcpotc version", emptyError: true},
		{args: []string{"bogus"}, code: 2, stderr: `unknown command "bogus"`, noStdout: true},
		{args: []string{"sample-otc", "--bogus"}, code: 2, stderr: "unknown flag --bogus (see -h)", noStdout: true},
		{args: []string{"sample-otc", "--lisen", ":1"}, code: 2, stderr: "unknown flag --lisen: did you mean --listen?", noStdout: true},
		{args: []string{"serve-mcp", "-h"}, code: 0, stdout: "\nExamples:\n  mcpotc serve-mcp --transport http", emptyError: true},
		{args: []string{"serve-otc", "-h"}, code: 0, stdout: "\nExamples:\n  mcpotc serve-otc ", emptyError: true},
		{args: []string{"sample-otc", "-h"}, code: 0, stdout: "\nExamples:\n", emptyError: true},
		// Errors that say what to type.
		{args: []string{"serve-mcp", "--call-timeout", "30"}, code: 2, stderr: `invalid value "30" for flag -call-timeout: a duration needs a unit: use a duration such as 30s`, noStdout: true},
		{args: []string{"serve-otc", "--idempotency-ttl", "soon"}, code: 2, stderr: "use a duration such as 30s, 500ms or 2m", noStdout: true},
		{args: []string{"serve-otc", "npx", "foo"}, code: 2, stderr: `unexpected argument "npx": put the MCP server's command after --, e.g. mcpotc serve-otc -- npx`, noStdout: true},
		{args: []string{"serve-otc", "--"}, code: 2, stderr: "'--' must be followed by the MCP server's command", noStdout: true},
		{args: []string{"serve-mcp", "http://127.0.0.1:8081"}, code: 2, stderr: `name an OTC server with --otc, e.g. --otc http://127.0.0.1:8081`, noStdout: true},
		{args: []string{"serve-otc", "--listen", "8090"}, code: 2, stderr: "--listen 8090: use host:port, e.g. 127.0.0.1:8090", noStdout: true},
		{args: []string{"sample-otc", "--listen", "http://127.0.0.1:1"}, code: 2, stderr: "use host:port without a scheme", noStdout: true},
		{args: []string{"serve-mcp", "--transport", "http", "--listen", "8090"}, code: 2, stderr: "--listen 8090: use host:port, e.g. 127.0.0.1:8090", noStdout: true},
		{args: []string{"serve-mcp", "--otc", "127.0.0.1:8081"}, code: 2, stderr: `--otc "127.0.0.1:8081" has no scheme: add http://, e.g. http://127.0.0.1:8081`, noStdout: true},
		{args: []string{"serve-otc", "--mcp", "localhost:3000/mcp"}, code: 2, stderr: `add http://, e.g. http://localhost:3000/mcp`, noStdout: true},
		{args: []string{"serve-otc", "--mcp", "http://u:secret@h/mcp"}, code: 2, stderr: `--mcp must not carry credentials`, noStdout: true},
		// Flags that need another flag.
		{args: []string{"serve-mcp", "--listen", "127.0.0.1:9"}, code: 2, stderr: "--listen needs --transport http or sse", noStdout: true},
		{args: []string{"serve-mcp", "--bearer-token-env", "T"}, code: 2, stderr: "--bearer-token-env needs --transport http or sse", noStdout: true},
		{args: []string{"serve-mcp", "--listen", "127.0.0.1:9", "--bearer-token-env", "T", "--cors-origin", "https://a.example"}, code: 2, stderr: "--listen, --bearer-token-env and --cors-origin need --transport http or sse (stdio serves on stdin/stdout)\n", noStdout: true},
		{args: []string{"serve-mcp", "--header", "X-A: b"}, code: 2, stderr: "--header needs --otc URL", noStdout: true},
		{args: []string{"serve-mcp", "--otc", "http://a", "--otc", "http://b", "--otc-api-key-env", "K"}, code: 2, stderr: "--otc-api-key-env needs exactly one --otc", noStdout: true},
		{args: []string{"serve-mcp", "--transport", "sse", "--stateless"}, code: 2, stderr: "--stateless needs --transport http", noStdout: true},
		{args: []string{"serve-mcp", "--oauth-issuer", "https://as.example"}, code: 2, stderr: "--oauth-issuer needs --transport http or sse", noStdout: true},
		{args: []string{"serve-mcp", "--transport", "http", "--oauth-scope", "a"}, code: 2, stderr: "--oauth-scope needs --oauth-issuer", noStdout: true},
		{args: []string{"serve-mcp", "--transport", "http", "--oauth-allow-untyped-jwt", "--oauth-allow-network", "10.0.0.0/8"}, code: 2, stderr: "--oauth-allow-network and --oauth-allow-untyped-jwt need --oauth-issuer", noStdout: true},
		{args: []string{"serve-mcp", "--transport", "http", "--oauth-issuer", "https://as.example", "--oauth-allow-network", "10.0.0.300/8"}, code: 2, stderr: `--oauth-allow-network "10.0.0.300/8" is not a network (CIDR such as 10.0.0.0/8) nor an IP address`, noStdout: true},
		{args: []string{"serve-mcp", "--transport", "http", "--oauth-issuer", "https://as.example", "--bearer-token-env", "T"}, code: 2, stderr: "--bearer-token-env and --oauth-issuer are exclusive", noStdout: true},
		{args: []string{"serve-mcp", "--transport", "sse", "--session-key-env", "K"}, code: 2, stderr: "--session-key-env needs --transport http with sessions", noStdout: true},
		{args: []string{"serve-mcp", "--transport", "http", "--stateless", "--session-key-env", "K"}, code: 2, stderr: "--session-key-env needs --transport http with sessions", noStdout: true},
		{args: []string{"serve-mcp", "--transport", "http", "--session-key-env", "K"}, code: 2, stderr: "--session-key-env: environment variable K is not set", noStdout: true},
		{args: []string{"serve-mcp", "--request-state-key-env", "K"}, code: 2, stderr: "--request-state-key-env: environment variable K is not set", noStdout: true},
		{args: []string{"serve-otc", "--token-store", "file:/tmp/x"}, code: 2, stderr: "--token-store file:PATH needs --token-key-env", noStdout: true},
		{args: []string{"serve-otc", "--state-password-env", "P"}, code: 2, stderr: "--state-password-env needs --state redis://…", noStdout: true},
		{args: []string{"serve-otc", "--state", "redis://h:1/0", "--token-store", "memory"}, code: 2, stderr: "with --state the OAuth tokens are kept in its Redis: drop --token-store", noStdout: true},
		{args: []string{"serve-otc", "--state", "http://u:s3cret@h:1/0"}, code: 2, stderr: `--state: scheme "http": want redis://, rediss:// (TLS) or unix://`, noStdout: true},
		{args: []string{"serve-otc", "--metrics-listen", "9090"}, code: 2, stderr: "--metrics-listen 9090: use host:port", noStdout: true},
		{args: []string{"serve-mcp", "--metrics-listen", "http://x:1"}, code: 2, stderr: "--metrics-listen \"http://x:1\": use host:port without a scheme", noStdout: true},
		{args: []string{"serve-otc", "--drain-delay", "-1s"}, code: 2, stderr: "--drain-delay must not be negative", noStdout: true},
		{args: []string{"serve-otc", "--public-url", "ftp://x"}, code: 2, stderr: "--public-url must be an http(s) base URL", noStdout: true},
		{args: []string{"serve-otc", "--mcp-sse"}, code: 2, stderr: "--mcp-sse needs --mcp URL", noStdout: true},
		{args: []string{"serve-otc", "--name", "X"}, code: 2, stderr: "--name needs an MCP server's command after --", noStdout: true},
		{args: []string{"serve-otc", "--jwt-audience", "a"}, code: 2, stderr: "--jwt-audience needs --jwt-secret-env", noStdout: true},
		{args: []string{"serve-otc", "--mcp", "http://h/mcp", "--header", "Authorization Bearer x"}, code: 2, stderr: "want 'Name: value'", noStdout: true},
		{args: []string{"serve-otc", "--mcp", "http://h/mcp", "--header", "Authorization: Bearer ${NOPE_TOKEN}"}, code: 2, stderr: "--header: Authorization: environment variable NOPE_TOKEN is not set", noStdout: true},
		{args: []string{"serve-otc", "--log-format", "xml"}, code: 2, stderr: `--log-format "xml" is not one of auto, json, text`, noStdout: true},
		{args: []string{"sample-otc", "extra"}, code: 2, stderr: `unexpected argument "extra"`, noStdout: true},
		{args: []string{"sample-otc", "--log-level", "loud"}, code: 2, stderr: "--log-level", noStdout: true},
		{args: []string{"sample-otc", "--listen", "256.0.0.1:1"}, code: 1, stderr: "mcpotc sample-otc:", noStdout: true},
	}
	for _, tt := range tests {
		code, stdout, stderr := run(t, tt.args...)
		if code != tt.code || !strings.Contains(stdout, tt.stdout) || !strings.Contains(stderr, tt.stderr) ||
			(tt.noStdout && stdout != "") || (tt.emptyError && stderr != "") {
			t.Errorf("mcpotc %q: code %d\nstdout: %s\nstderr: %s", tt.args, code, stdout, stderr)
		}
		if strings.Contains(stderr, "secret@") {
			t.Errorf("mcpotc %q repeats a credential: %s", tt.args, stderr)
		}
	}
}

// TestConfigProblemsInOneGo is the acceptance check of the first-hour
// issue: the README's serve-mcp config with no variable set names all four
// in one message and exits 2, before anything is started.
func TestConfigProblemsInOneGo(t *testing.T) {
	code, stdout, stderr := run(t, "serve-mcp", "--config", "../../testdata/config/serve-mcp.json")
	want := `mcpotc serve-mcp: 4 problems:
  ../../testdata/config/serve-mcp.json: upstreams[0].api_key_env: environment variable TOOLS_OXP_API_KEY is not set
  ../../testdata/config/serve-mcp.json: upstreams[0].secrets.TWILIO_API_KEY: environment variable TWILIO_API_KEY is not set
  ../../testdata/config/serve-mcp.json: upstreams[0].authorization.google: environment variable GOOGLE_ACCESS_TOKEN is not set
  ../../testdata/config/serve-mcp.json: upstreams[1].jwt_secret_env: environment variable BILLING_JWT_SECRET is not set
TOOLS_OXP_API_KEY, TWILIO_API_KEY, GOOGLE_ACCESS_TOKEN and BILLING_JWT_SECRET are not set: set them in the environment and run again (the configuration names the variables; secrets are never written in it)
`
	if code != 2 || stdout != "" || stderr != want {
		t.Errorf("code %d\nstdout: %q\nstderr:\n%s\nwant:\n%s", code, stdout, stderr, want)
	}

	// Bad keys, bad values and unset variables of two files' worth of
	// problems come in one message too.
	path := writeConfig(t, `{"upstreams":[{"url":"127.0.0.1:1","dialet":"auto"},{"url":"http://h","api_key_env":"A_KEY","jwt_audience":"x","call_timeout":"5"}]}`)
	code, _, stderr = run(t, "serve-mcp", "--config", path)
	for _, w := range []string{"5 problems:", `upstreams[0].dialet: unknown key: did you mean "dialect"?`, `upstreams[1].call_timeout: "5" is not a positive duration`,
		`upstreams[0].url: "127.0.0.1:1" has no scheme: add http://`, "upstreams[1].api_key_env: environment variable A_KEY is not set", "upstreams[1].jwt_audience: needs jwt_secret_env"} {
		if code != 2 || !strings.Contains(stderr, w) {
			t.Errorf("code %d, stderr lacks %q:\n%s", code, w, stderr)
		}
	}

	for _, tt := range []struct{ body, want string }{
		{`{"upstreams":[]}`, `upstreams: lists no OTC server`},
		{`{}`, `upstreams: lists no OTC server`},
	} {
		code, _, stderr := run(t, "serve-mcp", "--config", writeConfig(t, tt.body))
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: code %d, stderr %s", tt.body, code, stderr)
		}
	}
	code, _, stderr = run(t, "serve-otc", "--config", writeConfig(t, `{"mcpServers":{"a":{"command":"x","disabled":true}}}`))
	if code != 2 || !strings.Contains(stderr, "mcpServers: has no server (every one is disabled") {
		t.Errorf("all disabled: code %d, stderr %s", code, stderr)
	}
}

// TestSampleOTC runs `mcpotc sample-otc` and checks the acceptance
// requests over real HTTP, then stops it like a signal would.
func TestSampleOTC(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr wiretest.Buffer
	addr := make(chan string, 1)
	m := &Main{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }, Ready: func(a string) { addr <- a }}
	done := make(chan int, 1)
	go func() { done <- m.Run(ctx, []string{"sample-otc", "--listen", "127.0.0.1:0"}) }()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case code := <-done:
		t.Fatalf("sample-otc exited with %d: %s", code, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("sample-otc did not start")
	}

	type answer struct {
		status int
		header http.Header
		body   map[string]any
	}
	sendJSON := func(method, path string, header map[string]string, body string) answer {
		t.Helper()
		a := send(t, method, base+path, header, body)
		var got map[string]any
		if err := json.NewDecoder(strings.NewReader(a.body)).Decode(&got); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return answer{a.status, a.header, got}
	}
	jsonCT := map[string]string{"Content-Type": "application/json"}
	envelope := func(req string) string { return `{"$schema":"urn:oxp:1.0","request":` + req + `}` }

	if a := sendJSON("GET", "/health", nil, ""); a.status != 200 {
		t.Errorf("health: %d", a.status)
	}
	if a := sendJSON("GET", "/tools", nil, ""); a.status != 200 || len(a.body["tools"].([]any)) != 6 || len(a.body["items"].([]any)) != 6 {
		t.Errorf("tools: %d %v", a.status, a.body)
	}
	a := sendJSON("POST", "/tools/call", jsonCT, envelope(`{"tool_id":"Calculator.Add@1.0.0","call_id":"123e4567-e89b-12d3-a456-426614174000","input":{"a":10,"b":5}}`))
	if result, _ := a.body["result"].(map[string]any); a.status != 200 || result["value"] != 15.0 || result["call_id"] != "123e4567-e89b-12d3-a456-426614174000" {
		t.Errorf("envelope add: %d %v", a.status, a.body)
	}
	a = sendJSON("POST", "/tools/call", map[string]string{"Content-Type": "application/json", "OXP-Version": "1.0"}, `{"tool_id":"Calculator.Add@1.0.0","input":{"a":10,"b":5}}`)
	if a.status != 200 || a.body["value"] != 15.0 || a.header.Get("OXP-Version") != "1.0" {
		t.Errorf("flat add: %d %v %v", a.status, a.header, a.body)
	}
	if a = sendJSON("POST", "/tools/call", jsonCT, envelope(`{"tool_id":"Calculator.Add@2.0.0","input":{"a":10,"b":5}}`)); a.status != 400 {
		t.Errorf("2.0.0: %d %v", a.status, a.body)
	}
	a = sendJSON("POST", "/tools/call", jsonCT, envelope(`{"tool_id":"Calculator.Add@1.0.0","input":{"a":10,"b":"infinity"}}`))
	if pe, _ := a.body["parameter_errors"].(map[string]any); a.status != 422 || pe["b"] == nil {
		t.Errorf("infinity: %d %v", a.status, a.body)
	}
	a = sendJSON("POST", "/tools/call", jsonCT, envelope(`{"tool_id":"Doorbell.Ring@0.1.0","input":{"doorbell_id":"doorbell1"}}`))
	if r, _ := a.body["result"].(map[string]any); a.status != 200 || r["success"] != false || r["error"].(map[string]any)["retry_after_ms"] != 500.0 {
		t.Errorf("doorbell1: %d %v", a.status, a.body)
	}
	a = sendJSON("POST", "/tools/call", jsonCT, envelope(`{"tool_id":"Gmail.GetEmails@1.2.0","input":{}}`))
	if mr, _ := a.body["missing_requirements"].(map[string]any); a.status != 400 || mr == nil ||
		!strings.HasPrefix(mr["authorization"].([]any)[0].(map[string]any)["url"].(string), base+"/") {
		t.Errorf("gmail: %d %v", a.status, a.body)
	}
	a = sendJSON("POST", "/tools/call", jsonCT, envelope(`{"tool_id":"SMS.Send@0.1.2","input":{"to":"+1234567890","message":"hi"},"context":{"secrets":[{"id":"TWILIO_API_KEY","value":"TWILIO_SECRET_VALUE"}]}}`))
	if r, _ := a.body["result"].(map[string]any); a.status != 200 || r["success"] != true {
		t.Errorf("sms: %d %v", a.status, a.body)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code %d after shutdown: %s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("sample-otc did not stop")
	}
	logs := stderr.String()
	if strings.Contains(logs, "TWILIO_SECRET_VALUE") {
		t.Error("a secret reached the log")
	}
	for _, want := range []string{`"call_id":"123e4567-e89b-12d3-a456-426614174000"`, `"tool_id":"Calculator.Add@1.0.0"`, `"status":422`, `"message":"shutting down"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
}

// A --session-key-env key shorter than 32 bytes is refused, without
// repeating it; several keys are comma-separated.
func TestSessionKeyTooShort(t *testing.T) {
	var out, errb wiretest.Buffer
	long := strings.Repeat("k", 32)
	m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return long + ", sh0rt-secret" }}
	code := m.Run(context.Background(), []string{"serve-mcp", "--transport", "http", "--session-key-env", "K"})
	want := "mcpotc serve-mcp: --session-key-env: key 2 in K is 12 bytes: use 32 or more, random (openssl rand -base64 32)\n"
	if code != 2 || out.String() != "" || errb.String() != want {
		t.Errorf("code %d\nstdout: %q\nstderr: %q\nwant:   %q", code, out.String(), errb.String(), want)
	}
}

// A --request-state-key-env key shorter than 32 bytes is refused the same
// way, on any transport.
func TestRequestStateKeyTooShort(t *testing.T) {
	var out, errb wiretest.Buffer
	m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "sh0rt-secret" }}
	code := m.Run(context.Background(), []string{"serve-mcp", "--request-state-key-env", "K"})
	want := "mcpotc serve-mcp: --request-state-key-env: key 1 in K is 12 bytes: use 32 or more, random (openssl rand -base64 32)\n"
	if code != 2 || out.String() != "" || errb.String() != want {
		t.Errorf("code %d\nstdout: %q\nstderr: %q\nwant:   %q", code, out.String(), errb.String(), want)
	}
}
