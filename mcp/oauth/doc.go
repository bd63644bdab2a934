// Package oauth is the OAuth 2.1 client side of mcpotc's HTTP upstreams:
// it gets, keeps and refreshes the tokens with which the bridge reaches an
// MCP server protected as the MCP authorization specification (2025-11-25)
// describes, for the bridge's own identity (shared mode) or for each OTC
// user (per-user mode).
//
// What it owns:
//   - Discovery from a 401: the WWW-Authenticate challenge, protected
//     resource metadata (RFC 9728: the advertised URL, then the well-known
//     URL with the endpoint's path, then at the root), authorization server
//     metadata (RFC 8414, then OpenID Connect discovery), and the 2025-03-26
//     fallbacks (the server's origin as authorization server, default
//     endpoints). An authorization server without PKCE S256 is refused.
//   - Client registration: a pre-registered client (Config.ClientID), a
//     client ID metadata document (Config.ClientMetadataURL), or dynamic
//     client registration (RFC 7591), in that order.
//   - The authorization code grant with PKCE S256 and the resource
//     parameter (RFC 8707): a pending authorization per (upstream, user),
//     named by an opaque state; the bridge's routes under /oauth/ (Manager)
//     send the user to the authorization server, take the code back, check
//     the RFC 9207 iss parameter, and exchange it. Scopes: those of the
//     challenge, else Config.Scopes, else the resource's scopes_supported;
//     a 403 insufficient_scope asks again for the union (step-up), a bounded
//     number of times.
//   - The client credentials grant (Config.Grant), with a client secret
//     (basic or post) or a private key (private_key_jwt, RFC 7523).
//   - Tokens in a vault (package vault) keyed by (upstream, user),
//     refreshed before they expire, dropped when the upstream answers 401.
//
// Client implements the upstream package's Authorizer: the HTTP round
// tripper of an upstream asks it for the Authorization header of each
// request and hands it each 401/403 answer. A caller that needs an
// authorization gets an *AuthorizationRequired error with the URL to open
// and the URL to poll (the OTC challenge's url and check_url).
//
// Tokens, codes, verifiers and client secrets are never logged, put in a
// URL of the bridge or in an error. The state in a challenge URL is random
// (128 bits or more) and single-use.
//
// Token endpoint requests use golang.org/x/oauth2; discovery and dynamic
// registration use the official MCP Go SDK's oauthex package, whose checks
// (RFC 9728 resource binding, RFC 8414 issuer, URL schemes, HTTPS or
// loopback) the bridge keeps. mark3labs/mcp-go's client OAuth is not used:
// see the upstream package's mcpgo_compat.go for why.
package oauth
