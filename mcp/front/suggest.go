package front

import (
	"context"
	"strings"

	"github.com/mcpotc/mcpotc/internal/editdist"
)

// Did you mean, for a tools/call of a tool the front does not serve: hosts
// and models write an OTC id (Calculator.Add@1.1.0) where the MCP name
// goes (Calculator_Add), forget an upstream's prefix, or mistype. The
// suggestions are names the caller may see (visibility.go), so a hidden
// tool is never named.
//
// Bounds: no suggestion over catalogs of more than suggestScanMax tools or
// for names longer than suggestMaxLen bytes; at most suggestMax names.
const (
	suggestScanMax = 1000
	suggestMaxLen  = 128
	suggestMax     = 3
)

// normName folds what MCP names and OTC ids spell differently: case, a
// version (@1.1.0) and the separators _ - and .
func normName(s string) string {
	if i := strings.IndexByte(s, '@'); i >= 0 {
		s = s[:i]
	}
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r != '_' && r != '-' && r != '.' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// suggest returns the served names, visible to the caller of ctx, that a
// call of name most likely meant, best first; nil when none is close.
func suggest(ctx context.Context, c *catalog, name string) []string {
	if len(name) > suggestMaxLen || len(c.names) > suggestScanMax || len(c.names) == 0 {
		return nil
	}
	tf := c.filter(ctx)
	want := normName(name)
	var same, suffix, near []string
	bestD := max(1, len(want)/8) + 1
	for _, n := range c.names {
		if tf != nil && !tf.Allows(n) {
			continue
		}
		got := normName(n)
		switch {
		case got == want:
			same = append(same, n)
		case want != "" && (strings.HasSuffix(got, want) || strings.HasSuffix(want, got)):
			suffix = append(suffix, n) // a prefix the name lacks, or has too many
		default:
			switch d := editdist.Distance(want, got); {
			case d < bestD:
				near, bestD = []string{n}, d
			case d == bestD && near != nil:
				near = append(near, n)
			}
		}
	}
	out := append(append(same, suffix...), near...)
	if len(out) > suggestMax {
		out = out[:suggestMax]
	}
	return out
}

// didYouMean is the tail of an unknown tool's message: "; did you mean
// 'A' or 'B'?", or "".
func didYouMean(names []string) string {
	if len(names) == 0 {
		return ""
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'"
	}
	return "; did you mean " + strings.Join(quoted, " or ") + "?"
}
