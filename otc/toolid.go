package otc

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The spec's patterns (ToolId, ToolVersion and the ToolDefinition name).
var (
	toolIDPattern   = regexp.MustCompile(`^[A-Za-z0-9_]+\.[A-Za-z0-9_]+(@([0-9]+|[0-9]+\.[0-9]+\.[0-9]+))?$`)
	versionPattern  = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)
	toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// ToolID is a parsed tool id: Toolkit.Tool, optionally @x or @x.y.z.
type ToolID struct {
	Toolkit string
	Tool    string
	// Version is "" (latest), "x" (shorthand for x.0.0) or "x.y.z".
	Version string
}

// ParseToolID parses id with the spec's ToolId pattern.
func ParseToolID(id string) (ToolID, error) {
	if !toolIDPattern.MatchString(id) {
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
func ValidToolName(name string) bool { return toolNamePattern.MatchString(name) }

// ValidVersion reports whether v is x.y.z.
func ValidVersion(v string) bool { return versionPattern.MatchString(v) }

// semver is a parsed x.y.z; numbers too large for uint64 never match.
type semver [3]uint64

func parseSemver(v string) (semver, bool) {
	if !versionPattern.MatchString(v) {
		return semver{}, false
	}
	var s semver
	for i, part := range strings.SplitN(v, ".", 3) {
		n, err := strconv.ParseUint(part, 10, 64)
		if err != nil {
			return semver{}, false
		}
		s[i] = n
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
