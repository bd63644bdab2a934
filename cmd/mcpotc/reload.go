package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/metrics"
)

// Reload without restart (docs/operations.md, Reload without restart)
//
// With --config, SIGHUP re-reads the file and, with --watch-config, so
// does a change of its contents. The new configuration is checked as at
// the start — the same problems, in the same words — and either applied
// whole (the front's Reload) or refused, the running configuration kept
// and the refusal logged. What the command line and the environment
// decide is read once, at the start: a reload changes the file's part.

// watchConfigUsage is the help of --watch-config, on both fronts.
const watchConfigUsage = "re-read --config when its contents change, as SIGHUP does: upstreams added, removed or changed without a restart (see docs/operations.md, Reload without restart)"

// watchInterval is how often --watch-config reads the file; a change is
// applied once two reads watchSettle apart agree (an editor that writes
// in steps is not caught halfway).
const (
	watchInterval = 250 * time.Millisecond
	watchSettle   = 100 * time.Millisecond
)

// maxWatchedConfig bounds the file --watch-config reads.
const maxWatchedConfig = 16 << 20

// reloads runs apply at each SIGHUP and, with watch, at each change of the
// file at path, until ctx ends; nothing without a path (SIGHUP keeps its
// default action then: the process ends). It returns at once.
func (m *Main) reloads(ctx context.Context, log zerolog.Logger, path string, watch bool, mt *metrics.Metrics, front string, apply func(context.Context) error) {
	if path == "" {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var tick <-chan time.Time
	var ticker *time.Ticker
	if watch {
		ticker = time.NewTicker(watchInterval)
		tick = ticker.C
	}
	served := configDigest(path)
	go func() {
		defer signal.Stop(hup)
		if ticker != nil {
			defer ticker.Stop()
		}
		for {
			trigger := ""
			select {
			case <-ctx.Done():
				return
			case <-hup:
				trigger = "SIGHUP"
			case <-tick:
				d := configDigest(path)
				if d == "" || d == served {
					continue // unreadable (being replaced), or what is served
				}
				select {
				case <-time.After(watchSettle):
				case <-ctx.Done():
					return
				}
				if configDigest(path) != d {
					continue // still being written
				}
				trigger = "the file changed"
			}
			served = configDigest(path) // a refused file is not tried again until it changes
			m.reload(ctx, log, path, trigger, mt, front, apply)
		}
	}()
}

// reload applies the configuration once and logs how it went.
func (m *Main) reload(ctx context.Context, log zerolog.Logger, path, trigger string, mt *metrics.Metrics, front string, apply func(context.Context) error) {
	start := time.Now()
	if err := apply(ctx); err != nil {
		mt.Reloaded(front, metrics.ReloadRefused)
		// In the words a start with this file prints (Run).
		msg := strings.TrimPrefix(err.Error(), errUsage.Error()+": ")
		log.Error().Str("config", path).Str("trigger", trigger).Str("error", msg).
			Msg("configuration reload refused: the running configuration is kept")
		return
	}
	mt.Reloaded(front, metrics.ReloadApplied)
	log.Info().Str("config", path).Str("trigger", trigger).Dur("took", time.Since(start)).Msg("configuration reloaded")
}

// configDigest is a digest of the file at path, "" when it cannot be
// read (or is larger than maxWatchedConfig).
func configDigest(path string) string {
	st, err := os.Stat(path)
	if err != nil || st.Size() > maxWatchedConfig {
		return ""
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return string(sum[:])
}

// revision is a digest of a config file entry as read (its keys in
// order), for the fronts' Reload: an entry whose revision did not change
// is kept as it is.
func revision(entry any) string {
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(entry)
	return fmt.Sprintf("%x", sha256.Sum256(b.Bytes()))
}
