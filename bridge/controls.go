package bridge

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/bridge/policy"
	"github.com/mcpotc/mcpotc/internal/principal"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/otc"
)

// Controls are the operator's controls over calls (docs/operations.md,
// Operator controls): who may see and call which tool, and how often. Both fronts
// take the same. The zero value controls nothing. A front's controls are
// replaced whole while it serves (SetControls), with the catalog: a list
// or a call reads both at once and keeps them to its end.
type Controls struct {
	// Access is the access policy. Nil: every caller sees every tool.
	Access *policy.Access
	// Limits are the rate limits. Nil: none.
	Limits *policy.Limits
}

// controls is what a front holds of its Controls: the buckets' stores,
// kept across swaps, and the controls the front publishes with its next
// catalog (cur). A request never reads cur: it reads the activeControls
// published with the catalog it loaded (docs/operations.md, Reload without restart: a catalog and its
// controls are one generation), so a catalog is never served under
// another configuration's access policy or limits.
type controls struct {
	front   string // metrics.FrontMCP or metrics.FrontOTC
	log     zerolog.Logger
	metrics *metrics.Metrics
	shared  policy.Store   // the replicas' buckets; nil: local only
	local   *policy.Memory // this process's buckets
	cur     atomic.Pointer[activeControls]
}

// activeControls are one configuration's controls, immutable: published
// with a catalog, read with it once per request.
type activeControls struct {
	ctl     *controls
	access  *policy.Access
	limiter *policy.Limiter // nil: no limits
}

func newControls(frontName string, c *Controls, shared policy.Store, log zerolog.Logger, m *metrics.Metrics) *controls {
	ctl := &controls{front: frontName, log: log, metrics: m, shared: shared, local: policy.NewMemory(0)}
	ctl.set(c)
	return ctl
}

// set makes ctl (nil: none) the controls of the next catalog the front
// publishes; the front publishes one at once (SetControls, Reload).
func (c *controls) set(ctl *Controls) {
	a := &activeControls{ctl: c}
	if ctl != nil {
		a.access = ctl.Access
		if ctl.Limits != nil {
			a.limiter = policy.NewLimiter(ctl.Limits, c.shared, c.local, c.storeDown)
		}
	}
	c.cur.Store(a)
}

// load is the controls of the next catalog the front publishes.
func (c *controls) load() *activeControls { return c.cur.Load() }

// limited reports whether there are rate limits (a call without them
// costs nothing more).
func (a *activeControls) limited() bool { return a.limiter != nil }

// storeDown logs the shared buckets' store failing, and answering again.
func (c *controls) storeDown(err error) {
	if err != nil {
		c.log.Error().Err(err).Msg("rate limits: the --state store cannot be reached; each replica counts calls in its own buckets until it answers")
		return
	}
	c.log.Info().Msg("rate limits: the --state store answers again; the replicas share their buckets")
}

// admit takes a token for a call of tool (of upstream) by the principal
// who names (asked only when there are limits): the zero Decision, or a
// refusal, counted in the metrics and logged.
func (a *activeControls) admit(ctx context.Context, who func() string, upstream, tool string) policy.Decision {
	if a.limiter == nil {
		return policy.Decision{}
	}
	c := a.ctl
	d := a.limiter.Admit(ctx, who(), upstream, tool)
	if d.Wait > 0 {
		c.metrics.RateLimited(c.front, upstream, tool, d.Limit)
		c.log.Info().Str("upstream", upstream).Str("tool", tool).Str("limit", d.Limit).Dur("retry_after", d.Wait).
			Msg("call refused: rate limit")
	}
	return d
}

// limitMessage is what a refused caller reads: which limit, and when to
// call again.
func limitMessage(tool string, d policy.Decision) string {
	secs := int64(math.Ceil(d.Wait.Seconds()))
	after := fmt.Sprintf("%d seconds", secs)
	if secs == 1 {
		after = "1 second"
	}
	if d.Limit == policy.LimitPrincipal {
		return fmt.Sprintf("Rate limit reached: this caller may make %s (all tools together). Try again in %s.", d.Rate, after)
	}
	return fmt.Sprintf("Rate limit reached: this caller may call %s %s. Try again in %s.", tool, d.Rate, after)
}

// MetaRateLimit is the _meta key of a tools/call result that a rate limit
// refused (MCP front): {"retry_after_ms": …, "limit": "principal"|"tool"}.
const MetaRateLimit = "mcpotc/rate-limit"

// rateLimited is the MCP front's answer to a refused call: a result with
// isError, whose text the model reads (the limit and the wait), and the
// wait in _meta for a host.
func rateLimited(tool string, d policy.Decision) *mcpgo.CallToolResult {
	res := mcpgo.NewToolResultError(limitMessage(tool, d))
	res.Meta = &mcpgo.Meta{AdditionalFields: map[string]any{MetaRateLimit: map[string]any{
		"retry_after_ms": d.Wait.Milliseconds(), "limit": d.Limit,
	}}}
	return res
}

// mcpKey is the principal key of the caller of an MCP front request.
func mcpKey(ctx context.Context) func() string {
	return func() string { return mcpPrincipal(ctx).Key }
}

// mcpPrincipal is the caller of an MCP front request, as its transport
// established it (front.CallerPrincipal, front.CallerIdentity).
func mcpPrincipal(ctx context.Context) *policy.Principal {
	p := &policy.Principal{Key: front.CallerPrincipal(ctx)}
	if id, ok := front.CallerIdentity(ctx); ok {
		p.Authenticated, p.Token = true, true
		p.Issuer, p.Subject, p.Scopes, p.Claims = id.Issuer, id.Subject, id.Scopes, id.Claims
	} else if p.Key == principal.Stdio || p.Key == principal.Bearer {
		p.Authenticated = true // the process that started the front; the token's holder
	}
	if p.Key == "" {
		p.Key = principal.Local // in process (HandleMessage)
	}
	return p
}

// mcpVisibility is the MCP front's Options.Visibility: the tools the
// access policy grants the caller.
func (a *activeControls) mcpVisibility(ctx context.Context) *front.ToolFilter {
	access := a.access
	if access == nil {
		return nil
	}
	g := access.For(mcpPrincipal(ctx))
	return &front.ToolFilter{Key: g.Key(), Allows: g.Allows}
}

// otcPrincipal is the caller of an OTC front request, as its transport
// authentication established it.
func otcPrincipal(c otc.Caller) *policy.Principal {
	p := &policy.Principal{Key: c.Principal(), Authenticated: c.Authenticated}
	if c.Authenticated && c.ID != otc.CallerAPIKey {
		p.Token, p.Issuer, p.Subject, p.Scopes, p.Claims = true, c.Issuer, c.Subject, c.Scopes, c.Claims
	}
	return p
}

// otcAccess is the OTC front's otc.Options.Access.
func (a *activeControls) otcAccess(_ context.Context, caller otc.Caller) *otc.ToolFilter {
	access := a.access
	if access == nil {
		return nil
	}
	g := access.For(otcPrincipal(caller))
	return &otc.ToolFilter{Key: g.Key(), Allows: g.Allows}
}

// otcRefusal is the OTC front's 429 body of a refused call (otc answers it
// with Retry-After).
func otcRefusal(tool string, d policy.Decision) *otc.ServerErrorResponse {
	return &otc.ServerErrorResponse{
		Message:          limitMessage(tool, d),
		DeveloperMessage: fmt.Sprintf("rate limit per %s: %s", d.Limit, d.Rate),
		RetryAfter:       max(d.Wait, time.Millisecond),
	}
}
