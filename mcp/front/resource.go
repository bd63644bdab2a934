package front

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/mcpotc/mcpotc/internal/principal"
)

// ResourceAuth makes an HTTPHandler an OAuth 2.1 protected resource (MCP
// authorization 2025-11-25): every request but /health and the protected
// resource metadata must carry a bearer token that Verify accepts, issued
// for Resource, with every scope of Scopes.
type ResourceAuth struct {
	// Resource is the resource identifier (RFC 8707, RFC 9728): the URL of
	// the streamable HTTP endpoint as clients reach it. A token's audience
	// must contain it. Required.
	Resource string
	// AuthorizationServers are the issuers named in the metadata. Required.
	AuthorizationServers []string
	// Scopes must all be granted to a token; they are also the metadata's
	// scopes_supported. Zero: none required.
	Scopes []string
	// Verify checks a token and says who it is for: an error wrapping
	// ErrInvalidToken for a token it refuses (401), any other error when it
	// cannot tell (503: the authorization server is unreachable…). The
	// Identity's Issuer must be one of AuthorizationServers (a final slash
	// ignored); it may be left empty when there is only one, which is then
	// the token's. A token of another issuer, or of none among several, is
	// refused (401).
	Verify func(ctx context.Context, token string) (*Identity, error)
}

// Identity is what a verified token says.
//
// A caller is its issuer and subject together, never the subject alone
// (two authorization servers may each have a user "u1"): sessions, call
// logs and Name bind both.
type Identity struct {
	Issuer   string    // "iss": the authorization server that issued the token, as AuthorizationServers spells it
	Subject  string    // "sub": the user (or client) the token is for
	ClientID string    // the client it was issued to, when known
	Scopes   []string  // the scopes it grants
	Audience []string  // the resources it is for
	Expiry   time.Time // zero: not said
	// Claims are the token's claims (or introspection answer's members)
	// as JSON decodes them, for what is decided on claims such as groups.
	// Nil: none known. Read only: the verifier's value may be shared.
	Claims map[string]any

	// several is set by the front: the handler trusts more than one
	// issuer, so Name qualifies names with the issuer.
	several bool
}

// principal names who the identity is, for binding sessions and counting
// them: its issuer and subject (else its client), length-prefixed so that
// no issuer and subject read as another pair, whatever they contain.
func (id *Identity) principal() string {
	if id.Subject == "" {
		return principal.TokenClient(id.Issuer, id.ClientID)
	}
	return principal.Token(id.Issuer, id.Subject)
}

// legacyPrincipal is principal as it was before issuers were part of it:
// the owner hash of a signed session id minted then (a restart with the
// same SessionKeys keeps those sessions their owners'). It names a caller
// unambiguously only when the handler trusts a single issuer.
func (id *Identity) legacyPrincipal() string {
	if id.Subject != "" {
		return "sub:" + id.Subject
	}
	return "client:" + id.ClientID
}

// Name is the identity's name as one string that no other caller of the
// handler shares, for claim "sub" (the subject, the default) or
// "client_id": with a single trusted issuer, the claim's value as it is;
// with several, the issuer with "%" and "#" percent-encoded, then "#",
// then the value ("https://as-b.example.com#u1"). The issuer part holds no
// "#", so the first "#" ends it, and a value holding "#" or "%" cannot make
// two names alike. "" when the token has no such claim. (docs/mcp-front.md,
// Principals, documents this as the user_id_from_token encoding.)
func (id *Identity) Name(claim string) string {
	v := id.Subject
	if claim == "client_id" {
		v = id.ClientID
	}
	if v == "" || !id.several {
		return v
	}
	return issuerEscaper.Replace(id.Issuer) + "#" + v
}

var issuerEscaper = strings.NewReplacer("%", "%25", "#", "%23")

// ErrInvalidToken is the error of a token the verifier refuses.
var ErrInvalidToken = errors.New("invalid token")

type identityKey struct{}

// CallerIdentity returns the identity of the token the HTTP request that
// carried the current MCP request presented, when the handler is a
// protected resource (HTTPOptions.Resource).
func CallerIdentity(ctx context.Context) (*Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(*Identity)
	return id, ok
}

// metadataURL is where the resource's metadata is (RFC 9728 §3.1: the
// well-known path with the resource's path).
func (a *ResourceAuth) metadataURL() string {
	u, err := url.Parse(a.Resource)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host + metadataPath(a.Resource)
}

// wellKnownMetadata is the well-known path of protected resource metadata
// (RFC 9728 §3).
const wellKnownMetadata = "/.well-known/oauth-protected-resource"

// metadataPath is the metadata's path for resource: the well-known path,
// then the resource's path (RFC 9728 §3.1), or the well-known path alone
// for a resource without a path.
func metadataPath(resource string) string {
	u, err := url.Parse(resource)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return wellKnownMetadata
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		return path.Join(wellKnownMetadata, p)
	}
	return wellKnownMetadata
}

// metadataPaths are the paths the metadata is served at: the one with the
// resource's path, and the root one (clients of older revisions ask there).
func (a *ResourceAuth) metadataPaths() []string {
	return []string{metadataPath(a.Resource), wellKnownMetadata}
}

// metadataHandler serves the resource's metadata (RFC 9728 §3.2), encoded
// once: to any origin (a browser client discovers the resource from
// another one), never cached (MCP authorization: keys and servers
// rotate).
func (a *ResourceAuth) metadataHandler() http.Handler {
	body, _ := json.Marshal(struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers,omitempty"`
		Scopes               []string `json:"scopes_supported,omitempty"`
		BearerMethods        []string `json:"bearer_methods_supported"`
	}{a.Resource, a.AuthorizationServers, a.Scopes, []string{"header"}})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
		switch r.Method {
		case http.MethodOptions:
			w.WriteHeader(http.StatusNoContent)
		case http.MethodGet, http.MethodHead:
			h.Set("Content-Type", "application/json")
			h.Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			if r.Method == http.MethodGet {
				_, _ = w.Write(body)
			}
		default:
			h.Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
}

// check verifies the request's token; on failure it writes the answer (401
// or 403 with WWW-Authenticate, 503) and returns nil.
func (a *ResourceAuth) check(w http.ResponseWriter, r *http.Request, token string, hasToken bool) *Identity {
	challenge := fmt.Sprintf(`Bearer resource_metadata=%q`, a.metadataURL())
	if len(a.Scopes) > 0 {
		challenge += fmt.Sprintf(`, scope=%q`, strings.Join(a.Scopes, " "))
	}
	refuse := func(status int, errCode, text string) {
		c := challenge
		if errCode != "" {
			c = fmt.Sprintf(`Bearer error=%q, `, errCode) + strings.TrimPrefix(challenge, "Bearer ")
		}
		w.Header().Set("WWW-Authenticate", c)
		http.Error(w, text, status)
	}
	if !hasToken {
		refuse(http.StatusUnauthorized, "", "unauthorized: a bearer token is required")
		return nil
	}
	id, err := a.Verify(r.Context(), token)
	var trusted bool
	if err == nil {
		c := *id // the verifier's value may be shared (a cache)
		id = &c
		id.Issuer, trusted = a.issuer(id.Issuer)
		id.several = len(a.AuthorizationServers) > 1
	}
	switch {
	case errors.Is(err, ErrInvalidToken):
		refuse(http.StatusUnauthorized, "invalid_token", "unauthorized: the token is not valid")
		return nil
	case err != nil:
		w.Header().Set("Retry-After", "5")
		http.Error(w, "the token cannot be checked now: the authorization server did not answer", http.StatusServiceUnavailable)
		return nil
	case !trusted:
		refuse(http.StatusUnauthorized, "invalid_token", "unauthorized: the token's issuer is not one this server trusts")
		return nil
	case !slices.Contains(id.Audience, a.Resource) && !slices.Contains(id.Audience, strings.TrimSuffix(a.Resource, "/")):
		// MCP authorization 2025-11-25, "Token Audience Binding and
		// Validation": a token issued for another resource is refused.
		refuse(http.StatusUnauthorized, "invalid_token", "unauthorized: the token is for another resource")
		return nil
	case !id.Expiry.IsZero() && time.Now().After(id.Expiry):
		refuse(http.StatusUnauthorized, "invalid_token", "unauthorized: the token has expired")
		return nil
	}
	for _, s := range a.Scopes {
		if !slices.Contains(id.Scopes, s) {
			refuse(http.StatusForbidden, "insufficient_scope", "forbidden: the token lacks the scope "+s)
			return nil
		}
	}
	return id
}

// issuer returns the trusted issuer iss names, as AuthorizationServers
// spells it (a final slash ignored), and false when it names none; an
// empty iss names the only issuer when there is one.
func (a *ResourceAuth) issuer(iss string) (string, bool) {
	if iss == "" {
		if len(a.AuthorizationServers) == 1 {
			return a.AuthorizationServers[0], true
		}
		return "", false
	}
	for _, s := range a.AuthorizationServers {
		if strings.TrimSuffix(s, "/") == strings.TrimSuffix(iss, "/") {
			return s, true
		}
	}
	return "", false
}
