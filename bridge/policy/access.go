package policy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// Rule grants the principals it matches the tools its globs name. Its
// conditions all hold for a principal it matches: Anyone alone matches
// every caller; otherwise each condition set must hold.
type Rule struct {
	// Anyone matches every caller, authenticated or not. It goes alone.
	Anyone bool
	// Authenticated matches the callers whose credentials were checked.
	Authenticated bool
	// Issuer and Subject match a token's iss and sub: Issuer alone, every
	// subject of that issuer; Subject with the Issuer it belongs to (""
	// for a token without iss). A final "/" of an issuer is ignored.
	Issuer, Subject string
	// Scopes must all be granted to the token.
	Scopes []string
	// Claims map a claim (a top-level name, else a dotted path) to the
	// values it may have: the token's claim (a string, or an array of
	// strings) must hold one of them, for every claim named.
	Claims map[string][]string
	// Tools are the globs ("*": any characters) of the tools granted, as
	// the front names them.
	Tools []string
}

// conditions reports whether the rule names who it is for.
func (r *Rule) conditions() bool {
	return r.Anyone || r.Authenticated || r.Issuer != "" || r.Subject != "" || len(r.Scopes) > 0 || len(r.Claims) > 0
}

func (r *Rule) check() error {
	switch {
	case !r.conditions():
		return errors.New("names no caller: give anyone, authenticated, issuer, subject, scopes or claims")
	case r.Anyone && (r.Authenticated || r.Issuer != "" || r.Subject != "" || len(r.Scopes) > 0 || len(r.Claims) > 0):
		return errors.New("anyone matches every caller: give it alone, or drop it")
	case len(r.Tools) == 0:
		return errors.New("grants no tool: give tools, globs such as \"Calculator_*\" or \"*\"")
	}
	for _, t := range r.Tools {
		if t == "" {
			return errors.New("tools: an empty glob matches no tool")
		}
	}
	for name, values := range r.Claims {
		if name == "" || len(values) == 0 {
			return fmt.Errorf("claims: %q needs a claim name and at least one value", name)
		}
	}
	return nil
}

// matches reports whether the rule is for p.
func (r *Rule) matches(p *Principal) bool {
	if r.Anyone {
		return true
	}
	if p == nil || r.Authenticated && !p.Authenticated {
		return false
	}
	if r.Issuer != "" || r.Subject != "" {
		if !p.Token || strings.TrimSuffix(p.Issuer, "/") != strings.TrimSuffix(r.Issuer, "/") {
			return false
		}
		if r.Subject != "" && p.Subject != r.Subject {
			return false
		}
	}
	if len(r.Scopes) > 0 || len(r.Claims) > 0 {
		if !p.Token {
			return false
		}
		for _, s := range r.Scopes {
			if !slices.Contains(p.Scopes, s) {
				return false
			}
		}
		for name, want := range r.Claims {
			if !slices.ContainsFunc(p.claim(name), func(v string) bool { return slices.Contains(want, v) }) {
				return false
			}
		}
	}
	return true
}

// Access is an access policy: a caller sees and may call the tools that
// the rules it matches grant, and no other. A nil *Access grants every
// tool to everyone (no policy configured).
type Access struct {
	id    uint64
	rules []Rule
}

var accessIDs atomic.Uint64

// NewAccess checks rules and returns the policy they make. No rule at
// all is a policy too: nobody sees any tool.
func NewAccess(rules []Rule) (*Access, error) {
	a := &Access{id: accessIDs.Add(1), rules: make([]Rule, len(rules))}
	for i, r := range rules {
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		r.Tools = slices.Clone(r.Tools)
		r.Scopes = slices.Clone(r.Scopes)
		a.rules[i] = r
	}
	return a, nil
}

// For is what p may see and call: nil (everything) when a is nil.
func (a *Access) For(p *Principal) *Grant {
	if a == nil {
		return nil
	}
	g := &Grant{}
	var key strings.Builder
	key.WriteString("access" + strconv.FormatUint(a.id, 10) + ":")
	for i := range a.rules {
		r := &a.rules[i]
		if r.matches(p) {
			g.tools = append(g.tools, r.Tools...)
			key.WriteString(strconv.Itoa(i))
			key.WriteByte(',')
		}
	}
	g.key = key.String()
	return g
}

// Grant is what one caller may see and call. A nil *Grant allows every
// tool.
type Grant struct {
	key   string
	tools []string
}

// Allows reports whether the caller may see and call tool.
func (g *Grant) Allows(tool string) bool {
	return g == nil || anyGlob(g.tools, tool)
}

// Key names the grant: two callers whose grants have the same key see the
// same tools (the rules they match are the same, of the same policy).
func (g *Grant) Key() string {
	if g == nil {
		return ""
	}
	return g.key
}
