package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpotc/mcpotc/otc"
)

// Other is the label of a tool or upstream outside the catalog.
const Other = "other"

// Outcomes of a call: the label outcome (otc.CallRecord.Outcome names
// the OTC front's).
const (
	OK           = otc.OutcomeOK           // the tool ran and succeeded
	ToolError    = otc.OutcomeToolError    // the tool ran and failed (isError, success:false)
	InvalidInput = otc.OutcomeInvalidInput // the input or request was refused (-32602, 422, 400)
	UnknownTool  = otc.OutcomeUnknownTool  // no such tool
	AuthRequired = otc.OutcomeAuthRequired // a user must authorize, or credentials were refused
	Unavailable  = otc.OutcomeUnavailable  // the upstream is down, starting or refusing for now
	Timeout      = otc.OutcomeTimeout      // the call timeout ran out
	Cancelled    = otc.OutcomeCancelled    // the client cancelled the call or went away
	Internal     = otc.OutcomeInternal     // anything else: the bridge or the upstream failed
	RateLimited  = otc.OutcomeRateLimited  // refused by a rate limit (docs/operations.md, Operator controls)
)

// Fronts: the label front.
const (
	FrontMCP = "mcp" // serve-mcp
	FrontOTC = "otc" // serve-otc
)

// durationBuckets are the OpenTelemetry MCP semantic conventions' advice
// for mcp.*.operation.duration, in seconds.
var durationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// Metrics are the metrics of one process.
type Metrics struct {
	reg       *prometheus.Registry
	calls     *prometheus.CounterVec
	server    *prometheus.HistogramVec // MCP front: mcp.server.operation.duration
	client    *prometheus.HistogramVec // OTC front: mcp.client.operation.duration
	refreshes *prometheus.CounterVec
	replays   *prometheus.CounterVec
	oauth     *prometheus.CounterVec
	limited   *prometheus.CounterVec
	reloads   *prometheus.CounterVec
	webhooks  *prometheus.CounterVec

	mu       sync.Mutex
	watchers []watcher
}

// UpstreamState is what a front reports of one upstream at each scrape.
type UpstreamState struct {
	Name     string
	Up       bool  // serving (its catalog listed, its connection open)
	Tools    int   // tools in its catalog
	Restarts int64 // reconnections or child restarts so far (counter)
}

type watcher struct {
	front string
	state func() []UpstreamState
}

var (
	descUp       = prometheus.NewDesc("mcpotc_upstream_up", "1 when the upstream is serving, else 0.", []string{"front", "upstream"}, nil)
	descTools    = prometheus.NewDesc("mcpotc_upstream_tools", "Tools in the upstream's catalog.", []string{"front", "upstream"}, nil)
	descRestarts = prometheus.NewDesc("mcpotc_upstream_restarts_total", "Reconnections or child process restarts of the upstream.", []string{"front", "upstream"}, nil)
)

// New returns the metrics of a process, with Go runtime and process
// metrics.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpotc_calls_total", Help: "Tool calls answered, by front, upstream, tool and outcome.",
	}, []string{"front", "upstream", "tool", "outcome"})
	labels := []string{"mcp_method_name", "upstream", "gen_ai_tool_name", "outcome"}
	m.server = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "mcp_server_operation_duration_seconds", Help: "serve-mcp: duration of MCP tools/call requests (OpenTelemetry mcp.server.operation.duration).",
		Buckets: durationBuckets,
	}, labels)
	m.client = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "mcp_client_operation_duration_seconds", Help: "serve-otc: duration of the MCP tools/call requests behind OTC calls (OpenTelemetry mcp.client.operation.duration).",
		Buckets: durationBuckets,
	}, labels)
	m.refreshes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpotc_catalog_refreshes_total", Help: "Catalog listings of an upstream, by result (ok, error).",
	}, []string{"front", "upstream", "result"})
	m.replays = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpotc_idempotency_replays_total", Help: "OTC calls answered from the call_id idempotency (the tool did not run again).",
	}, []string{"front"})
	m.oauth = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpotc_oauth_events_total", Help: "OAuth client events of serve-otc, by upstream and event (challenge, authorized, authorization_failed, refresh, refresh_failed).",
	}, []string{"upstream", "event"})
	m.limited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpotc_rate_limited_total", Help: "Calls refused by a rate limit, by front, upstream, tool and limit (principal, tool).",
	}, []string{"front", "upstream", "tool", "limit"})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpotc_config_reloads_total", Help: "Configuration reloads (SIGHUP, --watch-config), by front and result (applied, refused).",
	}, []string{"front", "result"})
	m.webhooks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpotc_webhook_deliveries_total", Help: "Webhook messages and attempts, by endpoint (scheme, host and port), event and result (delivered, retried, failed, dropped).",
	}, []string{"endpoint", "event", "result"})
	m.reg.MustRegister(m.calls, m.server, m.client, m.refreshes, m.replays, m.oauth, m.limited, m.reloads, m.webhooks, upstreamCollector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics (GET /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Registry is where the metrics are registered, for a caller's own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Call records one tools/call answered by front: upstream and tool must be
// names of the catalog (else Other), outcome one of the Outcomes.
func (m *Metrics) Call(front, upstream, tool, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(front, upstream, tool, outcome).Inc()
	h := m.server
	if front == FrontOTC {
		h = m.client
	}
	h.WithLabelValues("tools/call", upstream, tool, outcome).Observe(d.Seconds())
}

// Replayed records an OTC call answered from the idempotency cache.
func (m *Metrics) Replayed(front string) {
	if m != nil {
		m.replays.WithLabelValues(front).Inc()
	}
}

// RateLimited records a call of tool (of upstream) that a rate limit
// refused: limit is the one that did, "principal" or "tool".
func (m *Metrics) RateLimited(front, upstream, tool, limit string) {
	if m != nil {
		m.limited.WithLabelValues(front, upstream, tool, limit).Inc()
	}
}

// Refreshed records a catalog listing of upstream.
func (m *Metrics) Refreshed(front, upstream string, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.refreshes.WithLabelValues(front, upstream, result).Inc()
}

// OAuth records an OAuth client event of upstream (see mcpotc_oauth_events_total).
func (m *Metrics) OAuth(upstream, event string) {
	if m != nil {
		m.oauth.WithLabelValues(upstream, event).Inc()
	}
}

// Results of a configuration reload (see mcpotc_config_reloads_total).
const (
	ReloadApplied = "applied"
	ReloadRefused = "refused"
)

// Reloaded records a configuration reload of front: ReloadApplied or
// ReloadRefused.
func (m *Metrics) Reloaded(front, result string) {
	if m != nil {
		m.reloads.WithLabelValues(front, result).Inc()
	}
}

// Results of a webhook message (see mcpotc_webhook_deliveries_total;
// bridge/webhooks).
const (
	// WebhookDelivered: an attempt was answered 2xx (once a message).
	WebhookDelivered = "delivered"
	// WebhookRetried: an attempt failed and another is scheduled (once an
	// attempt).
	WebhookRetried = "retried"
	// WebhookFailed: the last attempt failed (attempts or time spent).
	WebhookFailed = "failed"
	// WebhookDropped: never delivered, its queue (or the caller's share
	// of it) full, or the sender closed before it was.
	WebhookDropped = "dropped"
)

// Webhook records a webhook message's result at endpoint (its origin:
// scheme, host and port, never a path or query) for event.
func (m *Metrics) Webhook(endpoint, event, result string) {
	if m != nil {
		m.webhooks.WithLabelValues(endpoint, event, result).Inc()
	}
}

// Watch reports, at each scrape, the upstreams state returns for front.
func (m *Metrics) Watch(front string, state func() []UpstreamState) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watchers = append(m.watchers, watcher{front, state})
}

// GaugeFunc registers a gauge read at each scrape (such as the MCP
// sessions open).
func (m *Metrics) GaugeFunc(name, help string, f func() float64) {
	if m != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
}

// CounterFunc registers a counter read at each scrape (such as the audit
// log's dropped lines).
func (m *Metrics) CounterFunc(name, help string, f func() float64) {
	if m != nil {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f))
	}
}

// upstreamCollector reads the watched fronts' upstreams at scrape time.
type upstreamCollector struct{ m *Metrics }

func (c upstreamCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descUp
	ch <- descTools
	ch <- descRestarts
}

func (c upstreamCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	ws := append([]watcher(nil), c.m.watchers...)
	c.m.mu.Unlock()
	for _, w := range ws {
		for _, u := range w.state() {
			up := 0.0
			if u.Up {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up, w.front, u.Name)
			ch <- prometheus.MustNewConstMetric(descTools, prometheus.GaugeValue, float64(u.Tools), w.front, u.Name)
			ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(u.Restarts), w.front, u.Name)
		}
	}
}
