package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/audit"
	"github.com/mcpotc/mcpotc/bridge/metrics"
)

// auditFlags are the audit log's flags, the same on both fronts (docs/observability.md,
// Audit log).
type auditFlags struct {
	path     string
	maxBytes int64
	keep     int
	argNames bool
}

func registerAuditFlags(fs *flag.FlagSet) *auditFlags {
	a := &auditFlags{}
	fs.StringVar(&a.path, "audit-log", "", "write an audit log — one JSON line per tool call and per authorization event, never a token, secret or argument value — to this file, or to stderr (see docs/observability.md, Audit log)")
	fs.Int64Var(&a.maxBytes, "audit-log-max-bytes", audit.DefaultMaxBytes, fmt.Sprintf("rotate the --audit-log file before it would grow past this many bytes (at least %d)", audit.MinMaxBytes))
	fs.IntVar(&a.keep, "audit-log-keep", audit.DefaultKeep, "rotated --audit-log files kept: FILE.1 (the newest) to FILE.N")
	fs.BoolVar(&a.argNames, "audit-log-arg-names", false, "add the names of each call's arguments (never their values) to its --audit-log line")
	return a
}

// check refuses the audit flags that are wrong in themselves or given
// without what they apply to.
func (a *auditFlags) check(set map[string]bool) error {
	for _, err := range []error{
		needs(set, a.path != "", "--audit-log FILE|stderr", "audit-log-max-bytes", "audit-log-keep", "audit-log-arg-names"),
		needs(set, a.path != "stderr", "an --audit-log file (stderr is not rotated)", "audit-log-max-bytes", "audit-log-keep"),
	} {
		if err != nil {
			return err
		}
	}
	if set["audit-log"] && a.path == "" {
		return fmt.Errorf("%w: --audit-log needs a file, or stderr", errUsage)
	}
	if a.maxBytes < audit.MinMaxBytes {
		return fmt.Errorf("%w: --audit-log-max-bytes must be at least %d", errUsage, audit.MinMaxBytes)
	}
	if a.keep < 1 {
		return fmt.Errorf("%w: --audit-log-keep must be at least 1", errUsage)
	}
	return nil
}

// open opens the audit log (nil without --audit-log): its dropped lines are
// logged (at most every 10 s) and counted in mt.
func (a *auditFlags) open(m *Main, log zerolog.Logger, mt *metrics.Metrics) (*audit.Log, error) {
	if a.path == "" {
		return nil, nil
	}
	opts := &audit.Options{MaxBytes: a.maxBytes, Keep: a.keep, Warn: func(dropped int64, err error) {
		log.Warn().Int64("dropped", dropped).AnErr("error", err).
			Msg("audit log: lines dropped (the file or stream is slower than the calls, or writing failed); mcpotc_audit_dropped_total counts them")
	}}
	var l *audit.Log
	if a.path == "stderr" {
		l = audit.New(m.Stderr, opts)
	} else {
		var err error
		if l, err = audit.Open(a.path, opts); err != nil {
			return nil, fmt.Errorf("%w: --audit-log: %v", errUsage, err)
		}
	}
	mt.CounterFunc("mcpotc_audit_dropped_total", "Audit log lines dropped: the buffer was full, or writing failed.", func() float64 { return float64(l.Dropped()) })
	log.Info().Str("audit_log", a.path).Msg("writing the audit log")
	return l, nil
}

// closeAudit writes what the audit log still buffers, within shutdownGrace.
func closeAudit(ctx context.Context, log zerolog.Logger, l *audit.Log) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := l.Close(cctx); err != nil {
		log.Error().Err(err).Msg("closing the audit log")
	}
}
