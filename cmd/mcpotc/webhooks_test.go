package main

import (
	"context"
	"encoding/base64"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/bridge/webhooks"
	"github.com/mcpotc/mcpotc/internal/wiretest"
)

var (
	whsecA = "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef01234567"))
	whsecB = "whsec_" + base64.StdEncoding.EncodeToString([]byte("abcdefghijklmnopqrstuvwxyz012345"))
)

// The example files: every key read, the secrets from the environment
// (two during a rotation), the defaults left to the sender.
func TestWebhooksConfigExamples(t *testing.T) {
	env := map[string]string{"MCPOTC_WEBHOOK_SECRET": whsecA, "OPS_WEBHOOK_SECRETS": whsecB + " " + whsecA}
	m := &Main{Getenv: func(k string) string { return env[k] }}
	var p problems
	var cfg mcpFrontConfig
	if err := loadMCPFrontConfig("../../testdata/config/serve-mcp-webhooks.json", &cfg); err != nil {
		t.Fatal(err)
	}
	eps := m.webhookEndpoints(&p, "serve-mcp-webhooks.json", cfg.Webhooks)
	if err := p.err(); err != nil {
		t.Fatal(err)
	}
	if len(eps) != 2 || len(eps[0].Secrets) != 1 || len(eps[1].Secrets) != 2 ||
		!slices.Equal(eps[0].Events, []webhooks.Type{webhooks.TaskCompleted, webhooks.TaskFailed}) || eps[1].Events != nil ||
		eps[1].Timeout != 5*time.Second || eps[1].AllowNetworks[0] != netip.MustParsePrefix("10.1.2.0/24") ||
		eps[1].Retry != (webhooks.Retry{For: 30 * time.Minute, First: 10 * time.Second, MaxInterval: 5 * time.Minute, MaxAttempts: 12}) {
		t.Errorf("endpoints: %+v", eps)
	}
	ocfg, warning, err := loadOTCFrontConfig("../../testdata/config/serve-otc-webhooks.json")
	if err != nil || warning != "" {
		t.Fatal(err, warning)
	}
	eps = m.webhookEndpoints(&p, "serve-otc-webhooks.json", ocfg.Webhooks)
	if err := p.err(); err != nil || len(eps) != 1 || len(eps[0].Events) != 4 {
		t.Fatalf("%v %+v", err, eps)
	}
	// The secret's variable is serve-otc's own: no MCP server child gets it.
	if own := childUnsetenv(ocfg, "everything", nil); !slices.Contains(own, "MCPOTC_WEBHOOK_SECRET") {
		t.Errorf("children keep the webhook secret: unset only %v", own)
	}
}

// Every mistake of "webhooks" is reported with its key, in one error,
// and no secret is repeated in it.
func TestWebhooksConfigErrors(t *testing.T) {
	env := map[string]string{"S": whsecA, "RAW": "not-a-whsec-value", "SHORT": "whsec_" + base64.StdEncoding.EncodeToString([]byte("short"))}
	for _, tt := range []struct{ name, webhooks, want string }{
		{"good", `[{"url":"https://h.example/x","secret_env":"S"}]`, ""},
		{"none", `[]`, ""},
		{"not a list", `{"url":"https://h.example/x"}`, "webhooks: want a list"},
		{"unknown key", `[{"url":"https://h.example/x","secret_evn":"S"}]`, `webhooks[0].secret_evn: unknown key: did you mean "secret_env"?`},
		{"no url", `[{"secret_env":"S"}]`, "webhooks[0].url: is missing"},
		{"bad url", `[{"url":"ftp://h.example/x","secret_env":"S"}]`, "webhooks[0].url: not an http or https URL"},
		{"credentials in url", `[{"url":"https://u:hunter2@h.example/x","secret_env":"S"}]`, "webhooks[0].url: the URL holds user information"},
		{"no secret", `[{"url":"https://h.example/x"}]`, "webhooks[0].secret_env: is missing"},
		{"unset variable", `[{"url":"https://h.example/x","secret_env":"UNSET"}]`, "webhooks[0].secret_env: environment variable UNSET is not set"},
		{"secret written in", `[{"url":"https://h.example/x","secret_env":"` + whsecA + `"}]`, "webhooks[0].secret_env: must name an environment variable"},
		{"not whsec", `[{"url":"https://h.example/x","secret_env":"RAW"}]`, "webhooks[0].secret_env: environment variable RAW: the secret does not begin with whsec_"},
		{"short secret", `[{"url":"https://h.example/x","secret_env":"SHORT"}]`, "webhooks[0].secret_env: environment variable SHORT: the secret has 5 key bytes: want 24 to 64"},
		{"bad event", `[{"url":"https://h.example/x","secret_env":"S","events":["task.done"]}]`, `webhooks[0].events[0]: "task.done" is not an event`},
		{"no event", `[{"url":"https://h.example/x","secret_env":"S","events":[]}]`, "webhooks[0].events: lists no event"},
		{"bad network", `[{"url":"https://h.example/x","secret_env":"S","allow_networks":["intranet"]}]`, `webhooks[0].allow_networks: "intranet" is not a network`},
		{"bad duration", `[{"url":"https://h.example/x","secret_env":"S","retry":{"for":"forever"}}]`, `webhooks[0].retry.for: "forever" is not a positive duration`},
		{"bad attempts", `[{"url":"https://h.example/x","secret_env":"S","retry":{"max_attempts":-1}}]`, "webhooks[0].retry.max_attempts: must be at least 1"},
		{"retry key", `[{"url":"https://h.example/x","secret_env":"S","retry":{"first_wait":"1s"}}]`, "webhooks[0].retry.first_wait: unknown key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &Main{Getenv: func(k string) string { return env[k] }}
			for _, front := range []string{"serve-mcp", "serve-otc"} {
				var p problems
				var list *[]webhookConfig
				if front == "serve-mcp" {
					path := writeConfig(t, `{"upstreams":[{"url":"http://h"}],"webhooks":`+tt.webhooks+`}`)
					var cfg mcpFrontConfig
					if err := loadMCPFrontConfig(path, &cfg); err != nil {
						p.addErr(path, "", err)
					}
					list = cfg.Webhooks
					m.webhookEndpoints(&p, path, list)
				} else {
					path := writeConfig(t, `{"mcpServers":{"a":{"command":"x"}},"webhooks":`+tt.webhooks+`}`)
					cfg, warning, err := loadOTCFrontConfig(path)
					if err != nil {
						p.addErr(path, "", err)
					}
					if warning != "" {
						t.Errorf("%s: warning %s", front, warning)
					}
					m.webhookEndpoints(&p, path, cfg.Webhooks)
				}
				checkConfigError(t, p.err(), tt.want)
				if err := p.err(); err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "not-a-whsec-value") || strings.Contains(err.Error(), whsecA)) {
					t.Errorf("%s: the error repeats a secret: %v", front, err)
				}
			}
		})
	}
}

// A webhook configuration error stops both commands with exit code 2
// before anything starts.
func TestWebhooksConfigExit(t *testing.T) {
	for _, tc := range []struct {
		cmd, flag, body string
	}{
		{"serve-mcp", "--transport=http", `{"upstreams":[{"url":"http://127.0.0.1:1"}],"webhooks":[{"url":"https://h.example/x","secret_env":"MCPOTC_TEST_UNSET"}]}`},
		{"serve-otc", "--listen=127.0.0.1:0", `{"mcpServers":{"a":{"url":"http://127.0.0.1:1/mcp"}},"webhooks":[{"url":"https://h.example/x","secret_env":"MCPOTC_TEST_UNSET"}]}`},
	} {
		var stderr wiretest.Buffer
		m := &Main{Stdout: &wiretest.Buffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
		code := m.Run(context.Background(), []string{tc.cmd, tc.flag, "--config", writeConfig(t, tc.body)})
		if code != 2 || !strings.Contains(stderr.String(), "webhooks[0].secret_env: environment variable MCPOTC_TEST_UNSET is not set") {
			t.Errorf("%s: code %d, stderr:\n%s", tc.cmd, code, stderr.String())
		}
	}
}
