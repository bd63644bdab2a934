package policy

import "strings"

// Glob reports whether name matches pattern, where "*" matches any run of
// characters (none included) and every other character itself. It never
// fails: a pattern has no syntax to get wrong.
func Glob(pattern, name string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == name
	}
	// The part before the first star is a prefix, the part after the last
	// a suffix; the parts between are found in order, leftmost first
	// (which is enough: a later match could only leave less room).
	prefix := pattern[:star]
	if !strings.HasPrefix(name, prefix) {
		return false
	}
	name = name[len(prefix):]
	rest := pattern[star+1:]
	last := strings.LastIndexByte(rest, '*')
	if last < 0 {
		return strings.HasSuffix(name, rest)
	}
	suffix := rest[last+1:]
	if len(name) < len(suffix) || !strings.HasSuffix(name, suffix) {
		return false
	}
	name = name[:len(name)-len(suffix)]
	for _, part := range strings.Split(rest[:last], "*") {
		i := strings.Index(name, part)
		if i < 0 {
			return false
		}
		name = name[i+len(part):]
	}
	return true
}

// anyGlob reports whether name matches one of patterns.
func anyGlob(patterns []string, name string) bool {
	for _, p := range patterns {
		if Glob(p, name) {
			return true
		}
	}
	return false
}
