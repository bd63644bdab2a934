package bridge

import (
	"crypto/sha256"
	"encoding/json"
	"sort"

	"github.com/rs/zerolog"
)

// A catalog is rebuilt whenever one upstream's tool list arrives or is
// listed again; what the log says about it must not repeat with every
// rebuild (docs/observability.md, Logs): a change of the served catalog is one line, and a
// problem with a tool (skipped, withheld) is one line while it lasts.

// catalogPrint is the fingerprint of a served catalog: tool key → hash of
// its served definition.
type catalogPrint map[string][32]byte

func (p catalogPrint) add(key string, def any) {
	b, _ := json.Marshal(def)
	p[key] = sha256.Sum256(b)
}

// logCatalogChange writes one info line when next differs from prev (the
// counts of added, removed and changed tools; at debug, their names) and
// reports whether it did. The first catalog (prev nil) is logged too.
func logCatalogChange(log zerolog.Logger, prev, next catalogPrint) bool {
	var added, removed, changed []string
	for k, h := range next {
		old, ok := prev[k]
		switch {
		case !ok:
			added = append(added, k)
		case old != h:
			changed = append(changed, k)
		}
	}
	for k := range prev {
		if _, ok := next[k]; !ok {
			removed = append(removed, k)
		}
	}
	if prev != nil && len(added)+len(removed)+len(changed) == 0 {
		log.Debug().Int("tools", len(next)).Msg("catalog unchanged")
		return false
	}
	msg := "catalog changed"
	if prev == nil {
		msg = "catalog ready"
	}
	log.Info().Int("tools", len(next)).Int("added", len(added)).Int("removed", len(removed)).Int("changed", len(changed)).Msg(msg)
	if e := log.Debug(); e.Enabled() {
		e.Strs("added", firstSorted(added)).Strs("removed", firstSorted(removed)).Strs("changed", firstSorted(changed)).Msg("catalog change in detail")
	}
	return true
}

// maxLoggedNames bounds the names one debug line lists.
const maxLoggedNames = 50

func firstSorted(s []string) []string {
	sort.Strings(s)
	if len(s) > maxLoggedNames {
		return append(s[:maxLoggedNames:maxLoggedNames], "…")
	}
	return s
}

// onceNotes writes each distinct note once while it holds: a rebuild that
// meets the same problem again does not log it again; one that no longer
// meets it forgets it, so that it is logged again should it come back.
type onceNotes struct {
	prev, cur map[string]bool
}

// fresh tells whether the note key is new since the previous round (log
// it), and records it for this round.
func (n *onceNotes) fresh(key string) bool {
	if n.cur == nil {
		n.cur = map[string]bool{}
	}
	n.cur[key] = true
	return !n.prev[key]
}

// round ends a rebuild: its notes become the ones not to repeat.
func (n *onceNotes) round() {
	n.prev, n.cur = n.cur, nil
}
