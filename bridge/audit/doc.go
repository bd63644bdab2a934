// Package audit writes the audit log of both fronts (--audit-log; docs/observability.md,
// Audit log): one JSON object a line for each tool call and each
// authorization event, with who (the principal and the user id), what (the
// upstream and the tool), how it ended (the outcome, the HTTP status, the
// duration) and the ids that tie it to the logs and traces (call_id,
// trace_id).
//
// A Record holds names and fixed texts only: no token, secret, credential
// or argument value ever reaches it (the argument names, when the operator
// asks for them, are the keys of the arguments object). Every string is cut
// to a bound, so that no line is longer than MaxLineBytes, and every
// control (C0, DEL, C1), line or paragraph separator and invisible
// formatting character (Unicode Cf: bidi overrides, isolates and marks,
// zero-width characters) in it is written as a \u escape: a line never
// reads as two, a terminal acts on none, and the operator sees them.
//
// Writing never holds a call up beyond a bounded buffer: Write encodes the
// line and hands it to one writer goroutine through a buffer of
// Options.Buffer lines, of which one principal may hold
// Options.PerPrincipal; when the buffer, or the principal's share, is full
// the line is dropped and counted (Dropped), and the drops are reported
// through Options.Warn. A
// file is rotated before a line would take it past Options.MaxBytes: PATH
// becomes PATH.1, PATH.1 becomes PATH.2, …, and PATH.Keep is removed.
//
// A nil *Log writes nothing, so that the fronts call it unconditionally.
package audit
