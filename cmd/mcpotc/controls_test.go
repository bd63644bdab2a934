package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/policy"
)

// serve-mcp's controls: the keys read, and every mistake reported with
// its key, in one error, before anything starts.
func TestMCPFrontControlsConfig(t *testing.T) {
	const op, other = "https://login.example.com/", "https://partners.example.com"
	tests := []struct {
		name, body string
		issuers    []string
		want       string
	}{
		{"good", `{"upstreams":[{"url":"http://h","prefix":"p_","tools":{"Calculator_Add":{"name":"add","title":"Add","description":"Adds."},"Calculator_Divide":{"hidden":true}}}],
			"access":[{"issuer":"https://login.example.com","subject":"alice","tools":["*"]},{"subject":"bob","tools":["p_add"]},{"claims":{"groups":"support"},"tools":["p_*"]},{"anyone":true,"tools":["p_add"]}],
			"rate_limits":{"per_principal":{"requests":100,"per":"1m"},"per_tool":[{"tools":["p_add"],"requests":5,"per":"10s","burst":2}]}}`, []string{op}, ""},
		{"unknown rule key", `{"upstreams":[{"url":"http://h"}],"access":[{"subjct":"bob","tools":["*"]}]}`, []string{op}, `access[0].subjct: unknown key: did you mean "subject"?`},
		{"no caller", `{"upstreams":[{"url":"http://h"}],"access":[{"tools":["*"]}]}`, nil, `access[0]: names no caller`},
		{"no tools", `{"upstreams":[{"url":"http://h"}],"access":[{"anyone":true}]}`, nil, `access[0]: grants no tool`},
		{"anyone and more", `{"upstreams":[{"url":"http://h"}],"access":[{"anyone":true,"scopes":["x"],"tools":["*"]}]}`, []string{op}, `access[0]: anyone matches every caller`},
		{"token without oauth", `{"upstreams":[{"url":"http://h"}],"access":[{"claims":{"groups":["a"]},"tools":["*"]}]}`, nil, `access[0]: issuer, subject, scopes and claims are those of a caller's token: they need --oauth-issuer`},
		{"untrusted issuer", `{"upstreams":[{"url":"http://h"}],"access":[{"issuer":"https://evil.example.com","tools":["*"]}]}`, []string{op}, `access[0].issuer: "https://evil.example.com" is not an --oauth-issuer`},
		{"subject of which issuer", `{"upstreams":[{"url":"http://h"}],"access":[{"subject":"alice","tools":["*"]}]}`, []string{op, other}, `access[0].subject: a subject is one issuer's: name the issuer too`},
		{"claim values", `{"upstreams":[{"url":"http://h"}],"access":[{"claims":{"groups":5},"tools":["*"]}]}`, []string{op}, `access[0].claims.groups: want a value or a list of values`},
		{"rate without per", `{"upstreams":[{"url":"http://h"}],"rate_limits":{"per_principal":{"requests":10}}}`, nil, `rate_limits.per_principal: per must be a positive duration`},
		{"rate bad per", `{"upstreams":[{"url":"http://h"}],"rate_limits":{"per_principal":{"requests":10,"per":"often"}}}`, nil, `rate_limits.per_principal.per: "often" is not a positive duration`},
		{"tool rate without tools", `{"upstreams":[{"url":"http://h"}],"rate_limits":{"per_tool":[{"requests":10,"per":"1m"}]}}`, nil, `rate_limits.per_tool[0]: tools must name the tools`},
		{"no limit", `{"upstreams":[{"url":"http://h"}],"rate_limits":{}}`, nil, `rate_limits: sets no limit`},
		{"hidden and renamed", `{"upstreams":[{"url":"http://h","tools":{"A":{"hidden":true,"name":"b"}}}]}`, nil, `upstreams[0].tools.A: hidden takes the tool out`},
		{"empty override", `{"upstreams":[{"url":"http://h","tools":{"A":{}}}]}`, nil, `upstreams[0].tools.A: changes nothing`},
		{"bad name", `{"upstreams":[{"url":"http://h","tools":{"A":{"name":"a b"}}}]}`, nil, `upstreams[0].tools.A.name: "a b" is not a tool name`},
		{"two renamed alike", `{"upstreams":[{"url":"http://h","tools":{"A":{"name":"c"},"B":{"name":"c"}}}]}`, nil, `upstreams[0].tools.B.name: "c" is also the new name of A`},
		{"override key", `{"upstreams":[{"url":"http://h","tools":{"A":{"titel":"x"}}}]}`, nil, `upstreams[0].tools.A.titel: unknown key: did you mean "title"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.body)
			m := &Main{Getenv: func(string) string { return "" }}
			var cfg mcpFrontConfig
			err := loadMCPFrontConfig(path, &cfg)
			var p problems
			if err != nil {
				p.addErr(path, "", err)
			}
			ups := m.otcServers(&p, zerolog.Nop(), path, cfg.Upstreams, true)
			c := controls(&p, path, cfg.Access, cfg.RateLimits, controlsFront{issuers: tt.issuers, tokens: len(tt.issuers) > 0, tokenFlag: "--oauth-issuer"})
			checkConfigError(t, p.err(), tt.want)
			if tt.want != "" {
				return
			}
			if ups[0].Tools["Calculator_Add"] != (policy.Override{Name: "add", Title: "Add", Description: "Adds."}) || !ups[0].Tools["Calculator_Divide"].Hidden {
				t.Errorf("overrides: %+v", ups[0].Tools)
			}
			// bob is the only issuer's bob; alice of another issuer is not alice.
			bob := &policy.Principal{Key: "b", Authenticated: true, Token: true, Issuer: op, Subject: "bob"}
			if g := c.Access.For(bob); !g.Allows("p_add") || g.Allows("p_other") {
				t.Errorf("bob: add %v, other %v", g.Allows("p_add"), g.Allows("p_other"))
			}
			alice := &policy.Principal{Key: "a", Authenticated: true, Token: true, Issuer: op, Subject: "alice"}
			otherAlice := &policy.Principal{Key: "o", Authenticated: true, Token: true, Issuer: other, Subject: "alice"}
			if !c.Access.For(alice).Allows("x") || c.Access.For(otherAlice).Allows("x") {
				t.Error("alice's rule is not alice's alone")
			}
			if c.Limits == nil || c.Limits.Principal.Requests != 100 || c.Limits.Principal.Per != time.Minute || len(c.Limits.Tools) != 1 || c.Limits.Tools[0].Burst != 2 {
				t.Errorf("limits: %+v", c.Limits)
			}
		})
	}
}

// serve-otc's controls: top-level access and rate_limits beside
// mcpServers (not ignored as host keys), tools per server.
func TestOTCFrontControlsConfig(t *testing.T) {
	tests := []struct {
		name, body string
		jwt        bool
		want       string
	}{
		{"good", `{"mcpServers":{"a":{"command":"x","tools":{"echo":{"name":"say"},"fail":{"hidden":true}}}},
			"access":[{"subject":"app-1","tools":["*"]},{"issuer":"https://apps.example.com","claims":{"groups":["ops"]},"tools":["A.*"]}],
			"rate_limits":{"per_tool":[{"tools":["*"],"requests":60,"per":"1m"}]}}`, true, ""},
		{"claims without jwt", `{"mcpServers":{"a":{"command":"x"}},"access":[{"claims":{"groups":"ops"},"tools":["*"]}]}`, false, `access[0]: issuer, subject, scopes and claims are those of a caller's token: they need --jwt-secret-env`},
		{"anyone without jwt", `{"mcpServers":{"a":{"command":"x"}},"access":[{"anyone":true,"tools":["A.echo"]}]}`, false, ""},
		{"access not a list", `{"mcpServers":{"a":{"command":"x"}},"access":{"anyone":true}}`, false, `config.json: access: want a list`},
		{"rate key", `{"mcpServers":{"a":{"command":"x"}},"rate_limits":{"per_principle":{}}}`, false, `rate_limits.per_principle: unknown key: did you mean "per_principal"?`},
		{"override", `{"mcpServers":{"a":{"command":"x","tools":{"echo":{"hidden":true,"title":"x"}}}}}`, false, `mcpServers.a.tools.echo: hidden takes the tool out`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.body)
			m := &Main{Getenv: func(string) string { return "" }}
			cfg, warning, err := loadOTCFrontConfig(path)
			var p problems
			if err != nil {
				p.addErr(path, "", err)
			}
			if warning != "" {
				t.Errorf("warning: %s", warning)
			}
			ups := m.mcpServers(&p, path, cfg, time.Minute)
			tokenFlag := "--jwt-secret-env"
			c := controls(&p, path, cfg.Access, cfg.RateLimits, controlsFront{otc: true, tokens: tt.jwt, tokenFlag: tokenFlag})
			checkConfigError(t, p.err(), tt.want)
			if tt.want != "" || tt.name != "good" {
				return
			}
			if ups[0].Tools["echo"].Name != "say" || !ups[0].Tools["fail"].Hidden {
				t.Errorf("overrides: %+v", ups[0].Tools)
			}
			// A subject alone is a JWT's without iss.
			app := &policy.Principal{Key: "a", Authenticated: true, Token: true, Subject: "app-1"}
			issued := &policy.Principal{Key: "b", Authenticated: true, Token: true, Issuer: "https://elsewhere.example.com", Subject: "app-1"}
			if !c.Access.For(app).Allows("A.x") || c.Access.For(issued).Allows("A.x") {
				t.Error("a subject alone: not a JWT's without iss only")
			}
			if c.Limits == nil || c.Limits.Principal != nil || c.Limits.Tools[0].Requests != 60 {
				t.Errorf("limits: %+v", c.Limits)
			}
		})
	}
}

// The --state flags of serve-mcp.
func TestServeMCPStateFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--state-password-env", "P"}, "--state-password-env needs --state redis://…"},
		{[]string{"--state", "http://h"}, `--state: scheme "http"`},
	} {
		code, _, stderr := run(t, append([]string{"serve-mcp"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: code %d %q, want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// The tasks example of docs/long-running.md (testdata/config/serve-mcp-tasks.json,
// checked there by the README test) is a valid serve-mcp configuration, each
// tool's "task" read as the docs say.
func TestMCPFrontTasksConfigExample(t *testing.T) {
	var cfg mcpFrontConfig
	if err := loadMCPFrontConfig("../../testdata/config/serve-mcp-tasks.json", &cfg); err != nil {
		t.Fatal(err)
	}
	var p problems
	got := overrides(&p, "serve-mcp-tasks.json", "upstreams[0].tools", cfg.Upstreams[0].Tools, "")
	if err := p.err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"greet": "never", "slow_compute": "always", "failing_job": "required", "report": "30s"}
	if len(got) != len(want) {
		t.Fatalf("overrides: %+v, want %v", got, want)
	}
	for name, task := range want {
		if got[name].Task != task {
			t.Errorf("%s: task %q, want %q", name, got[name].Task, task)
		}
	}
	if validTaskPolicy("soon") {
		t.Error(`"soon" is taken for a task policy`)
	}
}
