package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// server is what discovery learned about an upstream's authorization: the
// resource to name (RFC 8707), the authorization server, and the client
// registration the bridge uses with it.
type server struct {
	metadataURL     string // the resource_metadata URL it came from ("" when none was advertised)
	resource        string
	scopesSupported []string // the resource's scopes_supported
	asm             *oauthex.AuthServerMeta
	client          registration
}

// registration is the bridge's client at an authorization server.
type registration struct {
	ID     string `json:"id"`
	Secret string `json:"secret,omitempty"`
	// Method is the token endpoint auth method: client_secret_basic,
	// client_secret_post, none, or private_key_jwt.
	Method string `json:"method"`
}

func (r registration) authStyle() oauth2.AuthStyle {
	if r.Method == "client_secret_basic" {
		return oauth2.AuthStyleInHeader
	}
	return oauth2.AuthStyleInParams
}

// challengeParams are the parameters of a response's Bearer challenge.
type challengeParams struct {
	resourceMetadata string
	scopes           []string
	err              string
}

func parseChallenge(resp *http.Response) challengeParams {
	var p challengeParams
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return p
	}
	for _, c := range cs {
		if c.Scheme != "bearer" {
			continue
		}
		if p.resourceMetadata == "" {
			p.resourceMetadata = c.Params["resource_metadata"]
		}
		if p.scopes == nil && c.Params["scope"] != "" {
			p.scopes = strings.Fields(c.Params["scope"])
		}
		if p.err == "" {
			p.err = c.Params["error"]
		}
	}
	return p
}

// discover finds the upstream's authorization server and registers the
// bridge with it as MCP authorization 2025-11-25 describes, with the
// 2025-03-26 fallbacks. Every fetch goes through the upstream's hardened
// client (fetch.go); protected resource metadata is read on the MCP
// server's origin only, authorization server metadata at the issuer's own
// well-known URLs.
func (c *Client) discover(ctx context.Context, ch challengeParams) (*server, error) {
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	hc := c.hc
	if ch.resourceMetadata != "" && !sameOrigin(ch.resourceMetadata, c.cfg.ServerURL) {
		// RFC 9728 §3.3 binds the metadata to the resource, not its
		// location: a URL elsewhere would make the bridge fetch whatever
		// the upstream names.
		return nil, fmt.Errorf("the resource_metadata of the MCP server's challenge is not on the MCP server's origin (%s): refused without fetching it",
			originOf(c.cfg.ServerURL))
	}
	s := &server{metadataURL: ch.resourceMetadata}
	var issuer string
	legacy := false // no protected resource metadata: 2025-03-26
	for _, u := range prmURLs(ch.resourceMetadata, c.cfg.ServerURL) {
		tctx, tr := withTrace(ctx)
		prm, err := oauthex.GetProtectedResourceMetadata(tctx, u.url, u.resource, hc)
		if err != nil || prm == nil {
			if ctx.Err() != nil {
				return nil, tr.fail("protected resource metadata", u.url, ctx.Err())
			}
			if tr.wasRefused() {
				// A redirect elsewhere, a body too large: the server
				// misbehaves; no fallback.
				return nil, tr.fail("protected resource metadata", u.url, err)
			}
			continue
		}
		if len(prm.AuthorizationServers) == 0 {
			return nil, fmt.Errorf("the protected resource metadata at %s names no authorization server", errorURLOf(u.url))
		}
		s.resource = prm.Resource
		s.scopesSupported = prm.ScopesSupported
		issuer = prm.AuthorizationServers[0]
		break
	}
	if issuer == "" {
		// 2025-03-26: the MCP server's origin is the authorization server.
		o, err := url.Parse(c.cfg.ServerURL)
		if err != nil {
			return nil, err
		}
		o.Path, o.RawPath, o.RawQuery, o.Fragment = "", "", "", ""
		issuer = o.String()
		s.resource = c.cfg.ServerURL
		legacy = true
	}
	var asm *oauthex.AuthServerMeta
	var err error
	if legacy {
		asm, err = legacyMetadata(ctx, issuer, hc)
	} else {
		tctx, tr := withTrace(ctx)
		asm, err = auth.GetAuthServerMetadata(tctx, rootless(issuer), hc)
		if err != nil {
			err = tr.fail("authorization server metadata", issuer, err)
		} else if asm != nil && !sameIssuer(asm.Issuer, issuer) {
			// The library forgives a trailing "/"; RFC 8414 §3.3 wants
			// the issuer identical to the one the URL was built from.
			err = &fetchError{what: "authorization server metadata", url: errorURLOf(issuer),
				status: http.StatusOK, reason: "the metadata names another issuer (RFC 8414 §3.3)"}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("authorization server %s: %w", errorURLOf(issuer), err)
	}
	if asm == nil {
		// 2025-03-26: default endpoints under the authorization server.
		base := strings.TrimSuffix(issuer, "/")
		asm = &oauthex.AuthServerMeta{
			Issuer:                issuer,
			AuthorizationEndpoint: base + "/authorize",
			TokenEndpoint:         base + "/token",
			RegistrationEndpoint:  base + "/register",
		}
	} else if !slices.Contains(asm.CodeChallengeMethodsSupported, "S256") {
		// MCP authorization 2025-11-25, "Authorization Code Protection":
		// a client must refuse to proceed without PKCE S256.
		return nil, fmt.Errorf("authorization server %s does not support PKCE with S256; the bridge refuses it", errorURLOf(issuer))
	}
	s.asm = asm
	reg, err := c.register(ctx, asm)
	if err != nil {
		return nil, err
	}
	s.client = reg
	return s, nil
}

// legacyMetadata reads the authorization server metadata of a server
// without protected resource metadata (MCP authorization 2025-03-26,
// "Server Metadata Discovery"): at the well-known URL of the MCP server's
// origin. Servers of that revision publish there the metadata of an
// issuer with a path on the same origin (an authorization server mounted
// below it); that issuer is accepted, and oauthex's checks (issuer, PKCE,
// URL schemes) run against it. Nil, nil: none there.
func legacyMetadata(ctx context.Context, origin string, hc *http.Client) (*oauthex.AuthServerMeta, error) {
	const what = "authorization server metadata"
	metaURL := strings.TrimSuffix(origin, "/") + "/.well-known/oauth-authorization-server"
	ctx, tr := withTrace(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metaURL, nil)
	if err != nil {
		return nil, tr.fail(what, metaURL, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, tr.fail(what, metaURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil
	}
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxFetchBody)).Decode(&doc); err != nil {
		return nil, tr.fail(what, metaURL, err)
	}
	if !sameOrigin(doc.Issuer, origin) {
		return nil, &fetchError{what: what, url: errorURLOf(metaURL), status: resp.StatusCode, reason: "the metadata names an issuer on another origin than the MCP server's"}
	}
	ctx, tr = withTrace(ctx)
	asm, err := oauthex.GetAuthServerMeta(ctx, metaURL, doc.Issuer, hc)
	if err != nil {
		return nil, tr.fail(what, metaURL, err)
	}
	return asm, nil
}

type prmURL struct{ url, resource string }

// prmURLs lists where protected resource metadata may be, in the order of
// MCP authorization 2025-11-25 ("Protected Resource Metadata Discovery
// Requirements"), each with the resource identifier it must declare
// (RFC 9728 §3.3).
func prmURLs(advertised, serverURL string) []prmURL {
	var urls []prmURL
	if advertised != "" {
		urls = append(urls, prmURL{advertised, serverURL})
	}
	su, err := url.Parse(serverURL)
	if err != nil {
		return urls
	}
	m := *su
	m.RawQuery, m.Fragment = "", ""
	if p := strings.Trim(su.Path, "/"); p != "" {
		m.Path, m.RawPath = "/.well-known/oauth-protected-resource/"+p, ""
		urls = append(urls, prmURL{m.String(), serverURL})
	}
	m.Path, m.RawPath = "/.well-known/oauth-protected-resource", ""
	root := *su
	root.Path, root.RawPath, root.RawQuery, root.Fragment = "", "", "", ""
	return append(urls, prmURL{m.String(), root.String()})
}

// register chooses the bridge's client at the authorization server: the
// pre-registered one, a client ID metadata document, or one registered
// dynamically (RFC 7591).
func (c *Client) register(ctx context.Context, asm *oauthex.AuthServerMeta) (registration, error) {
	switch {
	case c.cfg.ClientID != "":
		r := registration{ID: c.cfg.ClientID, Secret: c.cfg.ClientSecret, Method: "none"}
		switch {
		case c.cfg.PrivateKey != nil:
			r.Method = "private_key_jwt"
		case c.cfg.ClientSecret != "":
			r.Method = secretMethod(asm.TokenEndpointAuthMethodsSupported)
		}
		return r, nil
	case c.cfg.ClientMetadataURL != "" && asm.ClientIDMetadataDocumentSupported:
		return registration{ID: c.cfg.ClientMetadataURL, Method: "none"}, nil
	case asm.RegistrationEndpoint != "" && c.cfg.Grant != GrantClientCredentials: // (client credentials: client_id is required)
		meta := &oauthex.ClientRegistrationMetadata{
			RedirectURIs:            []string{c.m.callbackURL()},
			ApplicationType:         applicationType(c.m.callbackURL()),
			TokenEndpointAuthMethod: "none",
			GrantTypes:              []string{"authorization_code", "refresh_token"},
			ResponseTypes:           []string{"code"},
			ClientName:              c.m.clientName,
			Scope:                   strings.Join(c.cfg.Scopes, " "),
		}
		rctx, tr := withTrace(ctx)
		res, err := oauthex.RegisterClient(rctx, asm.RegistrationEndpoint, meta, c.hc)
		if err != nil {
			return registration{}, tr.fail("dynamic client registration", asm.RegistrationEndpoint, err)
		}
		r := registration{ID: res.ClientID, Secret: res.ClientSecret, Method: res.TokenEndpointAuthMethod}
		if r.Method == "" {
			// RFC 7591 §2: the default is client_secret_basic; without a
			// secret there is nothing to send.
			r.Method = "client_secret_basic"
			if r.Secret == "" {
				r.Method = "none"
			}
		}
		return r, nil
	default:
		return registration{}, errors.New("the authorization server " + asm.Issuer +
			" offers no way for the bridge to register (no dynamic registration, no client ID metadata document support):" +
			" register a client there and set oauth.client_id (and client_secret_env) for this server")
	}
}

// applicationType is the OpenID Connect Dynamic Client Registration
// application_type the bridge registers with (MCP authorization, SEP-837:
// a client MUST send one, since a server that gets none assumes "web"):
// "native" when its callback is an http URL on a loopback host (OIDC
// Registration §2 allows those only to native clients), "web" otherwise
// (serve-otc behind its public HTTPS URL is a web server's client).
func applicationType(redirectURI string) string {
	u, err := url.Parse(redirectURI)
	if err == nil && u.Scheme == "http" {
		h := u.Hostname()
		if h == "localhost" || strings.HasSuffix(h, ".localhost") {
			return "native"
		}
		if ip, err := netip.ParseAddr(h); err == nil && ip.IsLoopback() {
			return "native"
		}
	}
	return "web"
}

// sameIssuer says whether two issuer identifiers are the same: character
// for character, with no trailing-slash, case or port normalization
// (RFC 9207 §2.4 and RFC 8414 §3.3 compare them as strings; MCP
// authorization, SEP-2468, forbids any normalization before comparing).
func sameIssuer(a, b string) bool { return a == b }

// secretMethod picks how a client with a secret authenticates at the token
// endpoint: HTTP Basic, which every server must support (RFC 6749 §2.3.1),
// unless the server lists only client_secret_post.
func secretMethod(supported []string) string {
	if slices.Contains(supported, "client_secret_post") && !slices.Contains(supported, "client_secret_basic") {
		return "client_secret_post"
	}
	return "client_secret_basic"
}

// redactErr is err in this package's words: a library's error text may
// quote an answer (a body, a header value), which no error of the bridge
// repeats. A fetchError or a refusal stays as it is.
func redactErr(err error) error {
	if err == nil {
		return nil
	}
	var fe *fetchError
	if errors.As(err, &fe) {
		return fe
	}
	var r *refusal
	if errors.As(err, &r) {
		return r
	}
	return errors.New(describe(err))
}

// errorURLOf is the URL s as an error names it (errorURL).
func errorURLOf(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(an unreadable URL)"
	}
	return errorURL(u)
}

// originOf is the origin of the URL s, as an error names it.
func originOf(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(an unreadable URL)"
	}
	return errorURL(&url.URL{Scheme: u.Scheme, Host: u.Host})
}
