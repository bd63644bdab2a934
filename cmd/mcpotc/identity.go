package main

import (
	"flag"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge"
	"github.com/mcpotc/mcpotc/mcp/oauth"
	"github.com/mcpotc/mcpotc/otc"
)

// identityFlags are serve-otc's flags of the trust model (docs/security.md,
// Security model): how per-user upstreams learn who their user is, and how the user
// who completes an authorization proves to be that user.
type identityFlags struct {
	jwtUserClaim     *string
	trustStated      *bool
	oidcIssuer       *string
	oidcClientID     *string
	oidcSecretEnv    *string
	oidcClaim        *string
	verifierURL      *string
	oidcClientSecret string // read from oidcSecretEnv
}

func registerIdentityFlags(fs *flag.FlagSet) *identityFlags {
	return &identityFlags{
		jwtUserClaim:  fs.String("jwt-user-claim", "sub", "the claim of a caller's JWT that names its user: per-user upstreams act for that user (context.user_id must be the same or absent)"),
		trustStated:   fs.Bool("trust-stated-user-ids", false, "per-user upstreams take context.user_id from callers that did not authenticate (no --api-key-env or --jwt-secret-env); loopback --listen only"),
		oidcIssuer:    fs.String("user-oidc-issuer", "", "issuer URL of the OpenID provider users sign in at before an authorization with user_verification oidc"),
		oidcClientID:  fs.String("user-oidc-client-id", "", "the bridge's client id at --user-oidc-issuer (redirect URI: PUBLIC_URL/oauth/login)"),
		oidcSecretEnv: fs.String("user-oidc-client-secret-env", "", "environment variable holding the client secret at --user-oidc-issuer (none: a public client)"),
		oidcClaim:     fs.String("user-oidc-claim", "sub", "the ID token claim that must equal the challenged user id (user_verification oidc)"),
		verifierURL:   fs.String("user-verifier-url", "", "the application's page that confirms who is signed in (user_verification verifier): the browser comes there with ?flow_id=…, the application POSTs /oauth/confirm"),
	}
}

// check reports the flags' problems to p and reads the client secret.
func (f *identityFlags) check(m *Main, p *problems, set map[string]bool, listen string) []string {
	var own []string
	if *f.trustStated && !loopbackListen(listen) {
		p.add("--trust-stated-user-ids", "", "only on a loopback --listen (127.0.0.1, [::1], localhost): elsewhere any host could name any user")
	}
	if *f.oidcIssuer != "" {
		if u, err := url.Parse(*f.oidcIssuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			p.add("--user-oidc-issuer", "", "must be the provider's issuer URL, e.g. https://login.example.com")
		}
		if *f.oidcClientID == "" {
			p.add("--user-oidc-client-id", "", "is needed with --user-oidc-issuer")
		}
	} else {
		for _, n := range []string{"user-oidc-client-id", "user-oidc-client-secret-env", "user-oidc-claim"} {
			if set[n] {
				p.add("--"+n, "", "goes with --user-oidc-issuer")
			}
		}
	}
	if *f.oidcSecretEnv != "" {
		f.oidcClientSecret = p.env(m.Getenv, "--user-oidc-client-secret-env", "", *f.oidcSecretEnv)
		own = append(own, *f.oidcSecretEnv)
	}
	if *f.verifierURL != "" {
		if u, err := url.Parse(*f.verifierURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			p.add("--user-verifier-url", "", "must be an absolute http(s) URL of the application")
		}
	}
	return own
}

// apply sets what the flags configure in the front's options.
func (f *identityFlags) apply(server *otc.Options, opts *bridge.OTCFrontOptions) {
	server.JWTUserClaim = *f.jwtUserClaim
	opts.TrustStatedUserIDs = *f.trustStated
	if opts.OAuth == nil {
		return
	}
	opts.OAuth.VerifierURL = *f.verifierURL
	if *f.oidcIssuer != "" {
		opts.OAuth.UserOIDC = &oauth.UserOIDC{Issuer: *f.oidcIssuer, ClientID: *f.oidcClientID, ClientSecret: f.oidcClientSecret,
			Claim: *f.oidcClaim}
		if c := *f.oidcClaim; c != "sub" {
			opts.OAuth.UserOIDC.Scopes = claimScopes(c)
		}
	}
}

// claimScopes are the OpenID scopes that ask for claim (OpenID Connect Core
// §5.4), none for others.
func claimScopes(claim string) []string {
	switch claim {
	case "email", "email_verified":
		return []string{"email"}
	case "preferred_username", "name", "nickname", "given_name", "family_name":
		return []string{"profile"}
	}
	return nil
}

// warnUnverified logs, once at start, each per-user upstream whose
// authorizations anyone may complete.
func warnUnverified(log zerolog.Logger, ups []bridge.MCPServer) {
	for _, u := range ups {
		if u.OAuth != nil && u.OAuth.PerUser && u.OAuth.UserVerification == oauth.VerifyNone {
			log.Warn().Str("upstream", u.Config.Name).
				Msg("user_verification none: whoever opens a user's authorization link binds their own account to that user; safe for one user only")
		}
	}
}

// loopbackListen reports whether addr listens on loopback only.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// userVerificationProblem checks a server's oauth.user_verification.
func userVerificationProblem(o *oauthConfig) string {
	switch o.UserVerification {
	case "":
		if o.PerUser {
			return fmt.Sprintf("per_user needs user_verification: %q (users sign in at --user-oidc-issuer), %q (the application confirms, --user-verifier-url) or %q (anyone who opens a user's link binds their account: one user only)",
				oauth.VerifyOIDC, oauth.VerifyVerifier, oauth.VerifyNone)
		}
	case oauth.VerifyOIDC, oauth.VerifyVerifier, oauth.VerifyNone:
		if !o.PerUser {
			return "goes with per_user: true (the operator's authorization is bound to the browser that opens its URL, found in the log)"
		}
	default:
		return fmt.Sprintf("must be %q, %q or %q", oauth.VerifyOIDC, oauth.VerifyVerifier, oauth.VerifyNone)
	}
	return ""
}
