package upstream

import (
	"context"
	"log/slog"
)

// What mcp-go v1.2.1's client transports do that the upstream works
// around, each with where the workaround lives and, where mcp-go's side can
// be shown alone, the canary test that fails when mcp-go changes:
//
//   - Stdio.readResponses (client/transport/stdio.go) reads a line however
//     long it is and skips a line it cannot decode: lineBounder (limit.go)
//     bounds the lines and cuts one over the limit with an undecodable
//     byte (TestUpstreamCanaryMCPGoStdioSkipsUndecodableLine).
//   - StreamableHTTP.SendRequest (client/transport/streamable_http.go)
//     reads a JSON answer, an error body or an event whole: limitBody
//     (http.go) bounds each message (TestUpstreamCanaryMCPGoReadsHTTPAnswersWhole).
//   - SSE.readSSE (client/transport/sse.go) reads a line however long it
//     is and cannot answer server→client requests: sseBody (http.go)
//     bounds the events and answers those requests itself.
//   - StreamableHTTP answers ErrSessionTerminated once the server forgets
//     the session (HTTP 404) and leaves a new initialize to its caller:
//     connection.reinitialize (conn.go).
//   - OAuthHandler (client/transport/oauth.go) is not used: Config.Auth
//     (package mcp/oauth, with the official MCP Go SDK's oauthex and
//     golang.org/x/oauth2) authorizes the requests in roundTripper
//     (http.go). OAuthHandler keeps one token (TokenStore has no key) and
//     one expected state per handler, so one pending authorization at a
//     time (TestUpstreamCanaryMCPGoOAuthOneExpectedState), and it has no
//     client ID metadata documents, RFC 9207 iss check, scope from the
//     challenge or scopes_supported, step-up, root protected resource
//     metadata fallback, PKCE S256 check, or client credentials grant.
//   - StreamableHTTP.SendRequest answers ErrLegacySSEServer to any 4xx of
//     initialize and ErrSessionTerminated to any 404, dropping the body: a
//     modern-only server's -32022 naming the versions it speaks, a modern
//     server's 404 with -32601. roundTripper (http.go) keeps the start of
//     every error body (sendProbe.errBody), read by answeredError (era.go)
//     (TestUpstreamCanaryMCPGoDropsHTTPErrorBodies).
//   - The protocol era (era.go): mcp-go's Client negotiates it
//     (Client.Initialize: server/discover, then initialize), but the
//     upstream does not use Client (it decodes results into typed structs
//     that drop schema keywords and round numbers), and Client falls back
//     to initialize on any failed probe, a 401 or a timeout over HTTP
//     included. connection.negotiate owns the probe, as the spec's
//     versioning section says, with mcp-go's pieces: the transports' modern
//     mode (SetProtocolVersion: no session id, no DELETE, no GET stream),
//     mcp.StandardHeaders, GenerateParamHeaders and
//     NegotiateMutuallySupportedVersion.
//   - mcp.ValidateParamHeaderAnnotations checks x-mcp-header annotations
//     on chains of "properties" only: one under items, anyOf or $defs, which
//     the spec makes invalid, passes (and is never mirrored):
//     unreachableHeader (era.go) finds it
//     (TestUpstreamCanaryMCPGoHeaderAnnotationsOnPropertiesOnly).
//   - The transports log at info and error level, the error under "err",
//     holding the server's URL with its query: transportLogger (below).

// transportLogger is the logger given to mcp-go's transports: their lines
// go out at debug level (they retry on their own and would be noisy), with
// the error key of every other line ("err" in mcp-go v1.2.1, "error"
// here), and each error as safeError gives it: mcp-go logs errors that
// hold the server's URL, query and all.
func (u *Upstream) transportLogger() *slog.Logger {
	return slog.New(debugHandler{u.log.Handler()})
}

type debugHandler struct{ h slog.Handler }

func (d debugHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.h.Enabled(ctx, slog.LevelDebug)
}

func (d debugHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, slog.LevelDebug, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			a.Key = "error"
		}
		if err, ok := a.Value.Any().(error); ok && a.Value.Kind() == slog.KindAny {
			a.Value = slog.StringValue(safeError(err))
		}
		out.AddAttrs(a)
		return true
	})
	return d.h.Handle(ctx, out)
}

func (d debugHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return debugHandler{d.h.WithAttrs(attrs)}
}

func (d debugHandler) WithGroup(name string) slog.Handler {
	return debugHandler{d.h.WithGroup(name)}
}
