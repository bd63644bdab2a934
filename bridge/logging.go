package bridge

import (
	"context"
	"log/slog"
	"net/http"
	"unicode/utf8"

	"github.com/rs/zerolog"
)

// maxLoggedID bounds the call_id and trace_id written to a log line: a
// caller chooses them, and a log line is not the place for its 256 bytes
// (docs/observability.md, Logs).
const maxLoggedID = 64

// cutID is s cut to maxLoggedID bytes, on a UTF-8 boundary.
func cutID(s string) string {
	if len(s) <= maxLoggedID {
		return s
	}
	s = s[:maxLoggedID]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// slogLogger routes slog records (the mcp package's logs and mcp-go's)
// into log. zerolog writes its own level, time and message fields, and
// SlogHandler (zerolog v1.35.1) copies every attribute as a field of the
// same name: an attribute named "message" would make a line with two
// "message" keys, and one attribute given twice (With and the record) two
// of that key. Such an attribute is written as "attr_<key>" instead.
func slogLogger(log zerolog.Logger) *slog.Logger {
	return slog.New(&uniqueKeys{inner: zerolog.NewSlogHandler(log)})
}

// uniqueKeys is a slog.Handler that renames an attribute whose key zerolog
// writes itself or an earlier attribute already used.
type uniqueKeys struct {
	inner   slog.Handler
	seen    map[string]bool // top-level keys of the attributes added by WithAttrs
	grouped bool            // under a group: keys are prefixed, no clash
}

func reservedKey(k string) bool {
	return k == zerolog.MessageFieldName || k == zerolog.LevelFieldName || k == zerolog.TimestampFieldName
}

// rename returns attrs with clashing keys renamed; seen is updated.
func (h *uniqueKeys) rename(attrs []slog.Attr, seen map[string]bool) []slog.Attr {
	if h.grouped {
		return attrs
	}
	out := make([]slog.Attr, 0, len(attrs))
	for _, a := range attrs {
		for reservedKey(a.Key) || seen[a.Key] {
			a.Key = "attr_" + a.Key
		}
		seen[a.Key] = true
		out = append(out, a)
	}
	return out
}

func (h *uniqueKeys) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *uniqueKeys) Handle(ctx context.Context, r slog.Record) error {
	if h.grouped {
		return h.inner.Handle(ctx, r)
	}
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, a)
		return true
	})
	seen := make(map[string]bool, len(h.seen)+len(attrs))
	for k := range h.seen {
		seen[k] = true
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(h.rename(attrs, seen)...)
	return h.inner.Handle(ctx, out)
}

func (h *uniqueKeys) WithAttrs(attrs []slog.Attr) slog.Handler {
	seen := make(map[string]bool, len(h.seen)+len(attrs))
	for k := range h.seen {
		seen[k] = true
	}
	return &uniqueKeys{inner: h.inner.WithAttrs(h.rename(attrs, seen)), seen: seen, grouped: h.grouped}
}

func (h *uniqueKeys) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &uniqueKeys{inner: h.inner.WithGroup(name), seen: h.seen, grouped: true}
}

// LogRefusals wraps a front's HTTP handler (OTC, or MCP with a bearer
// token): each request it answers 401 (transport authentication failed) is
// logged once, with the method, path and remote address and never the
// credential sent. The otc and mcp packages answer the 401 and log nothing.
func LogRefusals(log zerolog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == http.StatusUnauthorized {
			log.Warn().Int("status", http.StatusUnauthorized).Str("method", r.Method).Str("path", cutID(r.URL.Path)).
				Str("remote", r.RemoteAddr).Msg("request refused: transport authentication failed")
		}
	})
}

// statusWriter records the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes a flush on (streamed answers).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
