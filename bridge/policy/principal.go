package policy

import (
	"strings"
)

// Principal is who calls, as a front's transport established it. Access
// rules and rate limits are matched on it; nothing a caller merely states
// (an OTC context.user_id, a forwarded _meta carrier) is part of it.
type Principal struct {
	// Key names the principal, unambiguously among the front's principals:
	// rate limits are counted by it. Always one of package
	// internal/principal's names (a token's issuer and subject, a client
	// address, an IPv6 address by its /64, "stdio", "bearer", "api-key"),
	// the same name every other per-caller bound and record of the front
	// uses.
	Key string
	// Authenticated: the transport checked the caller's credentials (a
	// token, an API key, a bearer token), or the caller is the process
	// that started the front (stdio).
	Authenticated bool
	// Token: Issuer, Subject, Scopes and Claims are those of a token the
	// front verified (an OAuth access token, a JWT).
	Token   bool
	Issuer  string
	Subject string
	Scopes  []string
	// Claims are the token's claims as JSON decodes them (nil: none).
	Claims map[string]any
}

// claim returns the values of the token's claim name: a string claim's
// value, or the strings of an array claim; nothing for a claim of another
// type. name is looked up as it is first (namespaced claims such as
// "https://example.com/groups" hold dots), then as a dotted path into
// nested objects ("realm_access.roles").
func (p *Principal) claim(name string) []string {
	if p == nil || p.Claims == nil {
		return nil
	}
	v, ok := p.Claims[name]
	if !ok {
		var cur any = p.Claims
		for _, part := range strings.Split(name, ".") {
			m, isObject := cur.(map[string]any)
			if !isObject {
				return nil
			}
			if cur, ok = m[part]; !ok {
				return nil
			}
		}
		v = cur
	}
	switch c := v.(type) {
	case string:
		return []string{c}
	case []string:
		return c
	case []any:
		out := make([]string, 0, len(c))
		for _, e := range c {
			if s, isString := e.(string); isString {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
