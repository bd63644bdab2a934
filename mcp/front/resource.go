package front

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	mcpserver "github.com/mark3labs/mcp-go/server"
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
	// cannot tell (503: the authorization server is unreachable…).
	Verify func(ctx context.Context, token string) (*Identity, error)
}

// Identity is what a verified token says.
type Identity struct {
	Subject  string    // "sub": the user (or client) the token is for
	ClientID string    // the client it was issued to, when known
	Scopes   []string  // the scopes it grants
	Audience []string  // the resources it is for
	Expiry   time.Time // zero: not said
}

// principal names who the identity is, for binding sessions: its subject,
// else its client.
func (id *Identity) principal() string {
	if id.Subject != "" {
		return "sub:" + id.Subject
	}
	return "client:" + id.ClientID
}

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
	return u.Scheme + "://" + u.Host + mcpserver.ProtectedResourceMetadataPath(a.Resource)
}

// metadataPaths are the paths the metadata is served at: the one with the
// resource's path, and the root one (clients of older revisions ask there).
func (a *ResourceAuth) metadataPaths() []string {
	return []string{mcpserver.ProtectedResourceMetadataPath(a.Resource), mcpserver.WellKnownProtectedResourcePath}
}

func (a *ResourceAuth) metadataHandler() http.Handler {
	return mcpserver.NewProtectedResourceMetadataHandler(mcpserver.ProtectedResourceMetadataConfig{
		Resource:               a.Resource,
		AuthorizationServers:   a.AuthorizationServers,
		ScopesSupported:        a.Scopes,
		BearerMethodsSupported: []string{"header"},
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
	switch {
	case errors.Is(err, ErrInvalidToken):
		refuse(http.StatusUnauthorized, "invalid_token", "unauthorized: the token is not valid")
		return nil
	case err != nil:
		w.Header().Set("Retry-After", "5")
		http.Error(w, "the token cannot be checked now: the authorization server did not answer", http.StatusServiceUnavailable)
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
