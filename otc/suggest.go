package otc

import (
	"slices"
	"strings"

	"github.com/mcpotc/mcpotc/internal/editdist"
)

// Did-you-mean for a call to a tool id nobody serves: ids differ with how a
// server was started (Sample.add, mcpotc_sample.add) and clients write the
// name (Calculator_Add) or the MCP spelling (get-sum) where the id goes.
// The suggestions are tool ids the catalog lists to the caller anyway
// (suggestFor: never one its Options.Access filter hides).

// Bounds: the edit-distance pass runs only over catalogs of at most
// suggestScanMax tools and requests of at most suggestMaxLen bytes (the
// lookups by normalized name are map reads); at most suggestMax ids are
// offered.
const (
	suggestScanMax = 1000
	suggestMaxLen  = 128
	suggestMax     = 3
)

// normToolKey folds what ids, names and MCP names spell differently:
// case, and the separators _ - and . (so Calculator_Add, calculator.add
// and Calculator.Add meet).
func normToolKey(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r != '_' && r != '-' && r != '.' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// suggestIndex is built with the catalog: normalized key → keys, and
// normalized tool part → keys.
type suggestIndex struct {
	byNorm, byTool map[string][]string
	keys           []string // sorted
}

func newSuggestIndex(keys []string) suggestIndex {
	ix := suggestIndex{byNorm: map[string][]string{}, byTool: map[string][]string{}, keys: slices.Sorted(slices.Values(keys))}
	for _, k := range ix.keys {
		ix.byNorm[normToolKey(k)] = append(ix.byNorm[normToolKey(k)], k)
		if i := strings.LastIndexByte(k, '.'); i >= 0 {
			t := normToolKey(k[i+1:])
			ix.byTool[t] = append(ix.byTool[t], k)
		}
	}
	return ix
}

// suggestFor returns the served Toolkit.Tool keys a request for id (any
// string a client sent as tool_id) most likely meant, best first, among
// the keys keep allows (nil: all); nil when none is close.
func (ix suggestIndex) suggestFor(id string, keep func(string) bool) []string {
	if len(id) > suggestMaxLen || len(ix.keys) == 0 {
		return nil
	}
	kept := func(ks []string) []string {
		if keep == nil {
			return ks
		}
		var out []string
		for _, k := range ks {
			if keep(k) {
				out = append(out, k)
			}
		}
		return out
	}
	req, _, _ := strings.Cut(id, "@")
	if ks := kept(ix.byNorm[normToolKey(req)]); len(ks) > 0 {
		return ks[:min(len(ks), suggestMax)]
	}
	// The same tool in another toolkit: Sample.add for mcpotc_sample.add.
	// Of several, those whose toolkit is nearest the one asked for.
	toolkit, tool := "", req
	if i := strings.LastIndexByte(req, '.'); i >= 0 {
		toolkit, tool = normToolKey(req[:i]), req[i+1:]
	}
	if ks := kept(ix.byTool[normToolKey(tool)]); len(ks) > 0 {
		var best []string
		bestD := -1
		for _, k := range ks {
			kit := normToolKey(k[:strings.LastIndexByte(k, '.')])
			d := 0 // no toolkit asked for, or one toolkit name holds the other
			if toolkit != "" && !strings.Contains(kit, toolkit) && !strings.Contains(toolkit, kit) {
				d = 1 + editdist.Distance(toolkit, kit)
			}
			switch {
			case bestD < 0 || d < bestD:
				best, bestD = []string{k}, d
			case d == bestD:
				best = append(best, k)
			}
		}
		if len(best) <= suggestMax {
			return best
		}
	}
	if len(ix.keys) > suggestScanMax {
		return nil
	}
	// A typo: at most one edit in 8 bytes (at least one).
	want := strings.ToLower(req)
	best, bestD := []string(nil), max(1, len(want)/8)+1
	for _, k := range ix.keys {
		if keep != nil && !keep(k) {
			continue
		}
		switch d := editdist.Distance(want, strings.ToLower(k)); {
		case d < bestD:
			best, bestD = []string{k}, d
		case d == bestD && best != nil && len(best) < suggestMax:
			best = append(best, k)
		}
	}
	return best
}

// didYouMean is the suggestion appended to a "was not found" message: ";
// did you mean 'A'?" or "…'A' or 'B'?"; "" when there is none.
func didYouMean(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = "'" + k + "'"
	}
	return "; did you mean " + strings.Join(quoted, " or ") + "?"
}
