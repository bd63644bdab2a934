// Package tracing sets up OpenTelemetry traces for both fronts (docs/observability.md,
// Traces): spans exported over OTLP/HTTP, configured by the standard
// OTEL_* environment variables, and off when none asks for them. It also
// carries W3C trace context across the protocol boundary: a traceparent
// in, a traceparent out.
package tracing
