package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/mcpotc/mcpotc/bridge/audit"
	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/bridge/tracing"
	"github.com/mcpotc/mcpotc/internal/httpguard"
	"github.com/mcpotc/mcpotc/internal/principal"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/mcp/oauth"
	"github.com/mcpotc/mcpotc/otc"
)

// The audit log's lines (docs/observability.md, Audit log; package audit): what each
// front writes, from what it already knows of a call or a refusal. A
// line never takes a value from a call's context (tokens, secrets) or
// arguments, nor an upstream's or a caller's words.

// auditCall writes the audit line of an answered OTC call.
func (f *OTCFront) auditCall(rec *otc.CallRecord) {
	if f.audit == nil {
		return
	}
	r := &audit.Record{Kind: audit.KindCall, Front: metrics.FrontOTC, Principal: rec.Caller.Principal(), UserID: rec.UserID,
		Tool: rec.ToolID, Outcome: rec.Outcome, Status: rec.Status, Duration: rec.Duration, CallID: rec.CallID, TraceID: traceIDOf(rec)}
	if r.UserID == "" {
		r.UserID = rec.Caller.User // a JWT that names its user
	}
	if rec.Resolved != "" {
		r.Tool, r.Upstream = rec.Resolved, (*f.owners.Load())[rec.Resolved]
	}
	if f.argsIn {
		r.Args = audit.ArgNames(rec.Input)
	}
	f.audit.Write(r)
}

// auditFlow writes the audit line of an OAuth flow's step.
func (f *OTCFront) auditFlow(e oauth.FlowEvent) {
	if f.audit == nil {
		return
	}
	f.audit.Write(&audit.Record{Kind: audit.KindAuthorization, Front: metrics.FrontOTC, Principal: e.Caller, UserID: e.User,
		Upstream: e.Upstream, Outcome: e.Event, Detail: e.Reason})
}

// auditCall writes the audit line of an answered MCP tools/call (t nil: a
// tool the catalog does not hold, named name; detail: a refusal's reason in
// the front's own words, or "").
func (f *MCPFront) auditCall(ctx context.Context, t *frontTool, name string, req *otc.CallToolRequest, outcome, detail string, d time.Duration) {
	if f.opts.Audit == nil {
		return
	}
	r := &audit.Record{Kind: audit.KindCall, Front: metrics.FrontMCP, Principal: front.Principal(ctx), Tool: name, Outcome: outcome,
		Duration: d, TraceID: tracing.TraceID(ctx), Detail: detail}
	if t != nil {
		r.Upstream, r.Tool = t.up.Name, t.Tool.Name
	}
	if req != nil {
		r.CallID = req.CallID
		if req.Context != nil {
			r.UserID = req.Context.UserID
		}
		if r.TraceID == "" {
			r.TraceID = req.TraceID
		}
		if f.opts.AuditArgNames {
			r.Args = audit.ArgNames(req.Input)
		}
	}
	f.opts.Audit.Write(r)
}

// AuditRefusals wraps a front's HTTP handler: each request it answers 401,
// or 403 with a Bearer challenge (a token without a scope the MCP front
// requires), gets an authorization line in a (front: "mcp" or "otc"):
// the client's address (X-Forwarded-For's client when the peer is one of
// trusted, httpguard.ClientAddr), the method and path, the status and the
// answer's own reason (the fronts' fixed texts, which never hold the
// credential). A nil a returns h.
func AuditRefusals(a *audit.Log, frontName string, trusted []netip.Prefix, h http.Handler) http.Handler {
	if a == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &refusalWriter{statusWriter: statusWriter{ResponseWriter: w}}
		h.ServeHTTP(sw, r)
		if !sw.refused() {
			return
		}
		a.Write(&audit.Record{Kind: audit.KindAuthorization, Front: frontName, Principal: principal.AddressOf(httpguard.ClientHost(r, trusted)),
			Outcome: audit.OutcomeRefused, Status: sw.status, Detail: r.Method + " " + cutID(r.URL.Path) + ": " + sw.reason()})
	})
}

// refusalWriter is a statusWriter that keeps the first bytes of a
// refusal's body, for its reason.
type refusalWriter struct {
	statusWriter
	body bytes.Buffer
}

// maxReason bounds the body kept of a refusal.
const maxReason = 512

func (w *refusalWriter) refused() bool {
	return w.status == http.StatusUnauthorized ||
		w.status == http.StatusForbidden && strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer")
}

func (w *refusalWriter) Write(b []byte) (int, error) {
	n, err := w.statusWriter.Write(b)
	if w.refused() && w.body.Len() < maxReason {
		w.body.Write(b[:min(len(b), maxReason-w.body.Len())])
	}
	return n, err
}

// reason is the refusal's reason: the message of a JSON body (the OTC
// front's), else its first line (the MCP front's text).
func (w *refusalWriter) reason() string {
	body := w.body.Bytes()
	var msg struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &msg) == nil && msg.Message != "" {
		return msg.Message
	}
	line, _, _ := strings.Cut(string(body), "\n")
	return strings.TrimSpace(line)
}
