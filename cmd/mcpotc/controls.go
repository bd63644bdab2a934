package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge"
	"github.com/mcpotc/mcpotc/bridge/policy"
	"github.com/mcpotc/mcpotc/bridge/state"
	"github.com/mcpotc/mcpotc/mcp/front"
)

// The operator controls' keys (docs/operations.md, Operator controls), the same in
// both config files: "access" and "rate_limits" at the top, "tools" in an
// upstream's (serve-mcp) or a server's (serve-otc) entry. Read here into
// the values of package policy, which a reload rebuilds and swaps whole.

// accessRuleConfig is one rule of "access".
type accessRuleConfig struct {
	Anyone        bool                   `json:"anyone"`
	Authenticated bool                   `json:"authenticated"`
	Issuer        string                 `json:"issuer"`
	Subject       string                 `json:"subject"`
	Scopes        []string               `json:"scopes"`
	Claims        map[string]claimValues `json:"claims"`
	Tools         []string               `json:"tools"`
}

// claimValues are the values a claim may have: one string, or a list.
type claimValues []string

// UnmarshalJSON reads a string or a list of strings.
func (c *claimValues) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*c = claimValues{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New(`want a value or a list of values, such as "admins" or ["admins", "ops"]`)
	}
	*c = many
	return nil
}

// rateLimitsConfig is "rate_limits".
type rateLimitsConfig struct {
	PerPrincipal *rateConfig      `json:"per_principal"`
	PerTool      []toolRateConfig `json:"per_tool"`
}

// rateConfig is a token bucket: burst calls at once, requests per per.
type rateConfig struct {
	Requests int      `json:"requests"`
	Per      Duration `json:"per"`
	Burst    int      `json:"burst"`
}

// toolRateConfig is one entry of "per_tool".
type toolRateConfig struct {
	Tools    []string `json:"tools"`
	Requests int      `json:"requests"`
	Per      Duration `json:"per"`
	Burst    int      `json:"burst"`
}

// toolOverrideConfig is one entry of an upstream's "tools".
type toolOverrideConfig struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Hidden      bool   `json:"hidden"`
	// Task is when the tool's calls become MCP tasks (serve-mcp):
	// "never", "always", "required" or a duration.
	Task string `json:"task"`
}

// mcpToolName is the shape of an MCP tool name (MCP 2025-11-25, Tools:
// 1 to 128 of letters, digits, _, - and .).
var mcpToolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// controlsFront says what a front's principals can be, for the checks of
// "access": serve-mcp's token issuers, or serve-otc's JWTs.
type controlsFront struct {
	// issuers are serve-mcp's --oauth-issuer (nil for serve-otc).
	issuers []string
	// tokens: callers present tokens (serve-mcp --oauth-issuer, serve-otc
	// --jwt-secret-env), whose issuer, subject, scopes and claims rules
	// may name.
	tokens bool
	// tokenFlag names the flag that makes callers present tokens.
	tokenFlag string
	// otc: serve-otc, whose JWTs may have no iss (a subject alone names
	// those).
	otc bool
}

// controls reads "access" and "rate_limits" of file into the front's
// Controls (nil when the file has neither); problems go to p.
func controls(p *problems, file string, access *[]accessRuleConfig, limits *rateLimitsConfig, fr controlsFront) *bridge.Controls {
	if access == nil && limits == nil {
		return nil
	}
	c := &bridge.Controls{}
	if access != nil {
		var rules []policy.Rule
		for i, rc := range *access {
			key := fmt.Sprintf("access[%d]", i)
			r, ok := accessRule(p, file, key, rc, fr)
			if !ok {
				continue
			}
			if _, err := policy.NewAccess([]policy.Rule{r}); err != nil {
				p.add(file, key, strings.TrimPrefix(err.Error(), "rule 0: "))
				continue
			}
			rules = append(rules, r)
		}
		c.Access, _ = policy.NewAccess(rules)
	}
	if limits != nil {
		c.Limits = rateLimits(p, file, limits)
	}
	return c
}

// accessRule reads one rule at key: its issuer checked against the
// front's (and filled in for a subject alone on serve-mcp with one
// issuer), its token conditions against the front's callers.
func accessRule(p *problems, file, key string, rc accessRuleConfig, fr controlsFront) (policy.Rule, bool) {
	r := policy.Rule{Anyone: rc.Anyone, Authenticated: rc.Authenticated, Issuer: rc.Issuer, Subject: rc.Subject, Scopes: rc.Scopes, Tools: rc.Tools}
	if len(rc.Claims) > 0 {
		r.Claims = map[string][]string{}
		for name, values := range rc.Claims {
			r.Claims[name] = values
		}
	}
	before := len(p.list)
	token := rc.Issuer != "" || rc.Subject != "" || len(rc.Scopes) > 0 || len(rc.Claims) > 0
	switch {
	case token && !fr.tokens:
		p.add(file, key, fmt.Sprintf("issuer, subject, scopes and claims are those of a caller's token: they need %s (without it, use anyone or authenticated)", fr.tokenFlag))
	case rc.Issuer != "" && !fr.otc && !slices.ContainsFunc(fr.issuers, func(i string) bool { return strings.TrimSuffix(i, "/") == strings.TrimSuffix(rc.Issuer, "/") }):
		p.add(file, key+".issuer", fmt.Sprintf("%q is not an --oauth-issuer: no token of it is accepted", rc.Issuer))
	case rc.Subject != "" && rc.Issuer == "" && !fr.otc && len(fr.issuers) > 1:
		p.add(file, key+".subject", "a subject is one issuer's: name the issuer too (several --oauth-issuer)")
	case rc.Subject != "" && rc.Issuer == "" && !fr.otc:
		r.Issuer = fr.issuers[0] // the only one
	}
	return r, len(p.list) == before
}

// rateLimits reads "rate_limits"; problems go to p.
func rateLimits(p *problems, file string, c *rateLimitsConfig) *policy.Limits {
	var principal *policy.Rate
	if c.PerPrincipal != nil {
		r := policy.Rate{Requests: c.PerPrincipal.Requests, Per: time.Duration(c.PerPrincipal.Per), Burst: c.PerPrincipal.Burst}
		if _, err := policy.NewLimits(&r, nil); err != nil {
			p.add(file, "rate_limits.per_principal", strings.TrimPrefix(err.Error(), "per principal: "))
		} else {
			principal = &r
		}
	}
	var tools []policy.ToolRate
	for i, t := range c.PerTool {
		tr := policy.ToolRate{Tools: t.Tools, Rate: policy.Rate{Requests: t.Requests, Per: time.Duration(t.Per), Burst: t.Burst}}
		if _, err := policy.NewLimits(nil, []policy.ToolRate{tr}); err != nil {
			p.add(file, fmt.Sprintf("rate_limits.per_tool[%d]", i), strings.TrimPrefix(err.Error(), "per tool 0: "))
			continue
		}
		tools = append(tools, tr)
	}
	if principal == nil && len(tools) == 0 {
		if c.PerPrincipal == nil && len(c.PerTool) == 0 {
			p.add(file, "rate_limits", "sets no limit: give per_principal, per_tool or both")
		}
		return nil
	}
	l, _ := policy.NewLimits(principal, tools)
	return l
}

// overrides reads an upstream's "tools" at key; prefix is what the front
// puts before each name (serve-mcp's prefix), for the check of a new name.
// Problems go to p.
func overrides(p *problems, file, key string, tools map[string]toolOverrideConfig, prefix string) policy.Overrides {
	if len(tools) == 0 {
		return nil
	}
	out := policy.Overrides{}
	renamed := map[string]string{}
	for _, name := range sortedKeys(tools) {
		o := tools[name]
		k := key + "." + name
		switch {
		case o.Hidden && (o.Name != "" || o.Title != "" || o.Description != ""):
			p.add(file, k, "hidden takes the tool out of the catalog: name, title and description do not apply")
			continue
		case !o.Hidden && o.Name == "" && o.Title == "" && o.Description == "" && o.Task == "":
			p.add(file, k, "changes nothing: give name, title, description, task or hidden")
			continue
		case o.Task != "" && !validTaskPolicy(o.Task):
			p.add(file, k+".task", fmt.Sprintf("%q is not a task policy: give never, always, required or a duration such as 2s", o.Task))
			continue
		case o.Name != "" && !mcpToolName.MatchString(prefix+o.Name):
			p.add(file, k+".name", fmt.Sprintf("%q is not a tool name (1 to 128 letters, digits, _, - and ., the prefix included)", o.Name))
			continue
		}
		if o.Name != "" {
			if other, dup := renamed[o.Name]; dup {
				p.add(file, k+".name", fmt.Sprintf("%q is also the new name of %s", o.Name, other))
				continue
			}
			renamed[o.Name] = name
		}
		out[name] = policy.Override{Name: o.Name, Title: o.Title, Description: o.Description, Hidden: o.Hidden, Task: o.Task}
	}
	return out
}

// limitStore is the --state store as the rate limits' buckets' (nil
// without: an interface holding a nil *state.Redis would not be nil).
func limitStore(r *state.Redis) policy.Store {
	if r == nil {
		return nil
	}
	return r
}

// usedStates is the requestStates' used-once store replicas share: the
// --state Redis, or nil (each process its own memory).
func usedStates(r *state.Redis) front.UsedStateStore {
	if r == nil {
		return nil
	}
	return r
}

// openState opens serve-mcp's --state client (it connects on first use);
// problems go to p.
func (m *Main) openState(p *problems, url, passwordEnv string, log zerolog.Logger) *state.Redis {
	var password string
	if passwordEnv != "" {
		password = p.env(m.Getenv, "--state-password-env", "", passwordEnv)
	}
	// go-redis logs through one process-wide logger: send its lines to ours.
	redis.SetLogger(redisLog{log})
	r, err := state.Open(url, &state.Options{Password: password})
	if err != nil {
		p.add("--state", "", err.Error())
		return nil
	}
	return r
}

// validTaskPolicy reports whether s is a tool override's task.
func validTaskPolicy(s string) bool {
	_, ok := bridge.ParseTaskPolicy(s)
	return ok
}

// taskOptions are serve-mcp's MCP task options from its flags: after 0
// makes only tools whose override says so tasks.
func taskOptions(after, ttl time.Duration) bridge.TaskOptions {
	if after == 0 {
		after = -1
	}
	return bridge.TaskOptions{After: after, TTL: ttl}
}
