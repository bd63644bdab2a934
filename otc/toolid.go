package otc

import (
	"fmt"
	"strconv"
	"strings"
)

// The spec's patterns, matched by hand (they run on every call; a regexp
// costs a few hundred nanoseconds each time):
//
//	ToolId                  ^[A-Za-z0-9_]+\.[A-Za-z0-9_]+(@([0-9]+|[0-9]+\.[0-9]+\.[0-9]+))?$
//	ToolVersion             ^[0-9]+\.[0-9]+\.[0-9]+$
//	ToolDefinition name     ^[A-Za-z0-9_-]{1,64}$

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// wordRun is the length of the run of [A-Za-z0-9_] at the start of s.
func wordRun(s string) int {
	i := 0
	for i < len(s) && isWordByte(s[i]) {
		i++
	}
	return i
}

// digitRun is the length of the run of [0-9] at the start of s.
func digitRun(s string) int {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// matchVersion reports whether s is [0-9]+\.[0-9]+\.[0-9]+ exactly.
func matchVersion(s string) bool {
	for part := 0; part < 3; part++ {
		n := digitRun(s)
		if n == 0 {
			return false
		}
		s = s[n:]
		if part < 2 {
			if len(s) == 0 || s[0] != '.' {
				return false
			}
			s = s[1:]
		}
	}
	return len(s) == 0
}

// matchToolID reports whether id matches the ToolId pattern.
func matchToolID(id string) bool {
	n := wordRun(id)
	if n == 0 || n == len(id) || id[n] != '.' {
		return false
	}
	rest := id[n+1:]
	m := wordRun(rest)
	if m == 0 {
		return false
	}
	rest = rest[m:]
	switch {
	case len(rest) == 0:
		return true
	case rest[0] != '@':
		return false
	}
	v := rest[1:]
	if d := digitRun(v); d > 0 && d == len(v) {
		return true // @x
	}
	return matchVersion(v)
}

// ToolID is a parsed tool id: Toolkit.Tool, optionally @x or @x.y.z.
type ToolID struct {
	Toolkit string
	Tool    string
	// Version is "" (latest), "x" (shorthand for x.0.0) or "x.y.z".
	Version string
}

// ParseToolID parses id with the spec's ToolId pattern.
func ParseToolID(id string) (ToolID, error) {
	if !matchToolID(id) {
		return ToolID{}, fmt.Errorf("tool id %q does not match Toolkit.Tool[@x|@x.y.z] (letters, digits and _ only)", id)
	}
	base, version, _ := strings.Cut(id, "@")
	toolkit, tool, _ := strings.Cut(base, ".")
	return ToolID{Toolkit: toolkit, Tool: tool, Version: version}, nil
}

// Key is Toolkit.Tool, the id without its version.
func (t ToolID) Key() string { return t.Toolkit + "." + t.Tool }

// String is the id as parsed.
func (t ToolID) String() string {
	if t.Version == "" {
		return t.Key()
	}
	return t.Key() + "@" + t.Version
}

// ValidToolName reports whether name matches the spec's ToolDefinition name pattern.
func ValidToolName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isWordByte(c) && c != '-' {
			return false
		}
	}
	return true
}

// ValidVersion reports whether v is x.y.z.
func ValidVersion(v string) bool { return matchVersion(v) }

// semver is a parsed x.y.z; numbers too large for uint64 never match.
type semver [3]uint64

func parseSemver(v string) (semver, bool) {
	if !matchVersion(v) {
		return semver{}, false
	}
	var s semver
	for i := range s {
		part, rest, _ := strings.Cut(v, ".")
		n, err := strconv.ParseUint(part, 10, 64)
		if err != nil {
			return semver{}, false
		}
		s[i], v = n, rest
	}
	return s, true
}

func (a semver) less(b semver) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// CompareVersions orders two x.y.z versions numerically (-1, 0, +1);
// a version that is not x.y.z sorts before every valid one.
func CompareVersions(a, b string) int {
	sa, oka := parseSemver(a)
	sb, okb := parseSemver(b)
	switch {
	case !oka && !okb:
		return strings.Compare(a, b)
	case !oka:
		return -1
	case !okb:
		return 1
	case sa.less(sb):
		return -1
	case sb.less(sa):
		return 1
	}
	return 0
}

// ResolveVersion picks the version that a requested version selects among
// the available ones, as the spec says: "x.y.z" exactly, "x" exactly x.0.0
// (not the latest x.*), "" the latest. ok is false when none matches.
func ResolveVersion(requested string, available []string) (version string, ok bool) {
	switch {
	case requested == "":
		for _, v := range available {
			if !ok || CompareVersions(v, version) > 0 {
				version, ok = v, true
			}
		}
		return version, ok
	case !strings.Contains(requested, "."):
		requested += ".0.0"
	}
	want, valid := parseSemver(requested)
	if !valid {
		return "", false
	}
	for _, v := range available {
		if got, valid := parseSemver(v); valid && got == want {
			return v, true
		}
	}
	return "", false
}
