// Package editdist is the edit distance behind mcpotc's "did you mean"
// suggestions (serve-mcp's config keys, the OTC servers' tool ids).
package editdist

// Distance is the Levenshtein distance of a and b, in bytes: the fewest
// insertions, deletions and substitutions that make one the other. It
// takes O(len(a)·len(b)) time: callers bound what they compare.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
