// Package metrics holds the Prometheus metrics of both fronts, served on a
// listener of their own (--metrics-listen; docs/observability.md, Metrics).
//
// Every label is bounded: upstream names come from the configuration, tool
// names from the catalog (a name the catalog does not hold is Other), and
// outcomes from the fixed set below. A nil *Metrics records nothing, so
// the fronts call it unconditionally.
package metrics
