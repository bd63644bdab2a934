package mapping

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"github.com/mcpotc/mcpotc/otc"
)

// MaxOTCNameLen is the longest OTC tool name the spec allows.
const MaxOTCNameLen = 64

var notIdentifier = regexp.MustCompile(`[^A-Za-z0-9_]`)

// Sanitize replaces every character outside [A-Za-z0-9_] with "_", as OTC
// ids require. An empty result is "_".
func Sanitize(s string) string {
	s = notIdentifier.ReplaceAllString(s, "_")
	if s == "" {
		return "_"
	}
	return s
}

// hashSuffix is "_" and 8 hex digits of the SHA-256 of s.
func hashSuffix(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "_" + hex.EncodeToString(sum[:4])
}

// OTCVersion is the version an MCP server's tools get: the configured one,
// else serverInfo.version when it is x.y.z, else 1.0.0.
func OTCVersion(configured, serverVersion string) string {
	switch {
	case configured != "":
		return configured
	case otc.ValidVersion(serverVersion):
		return serverVersion
	}
	return "1.0.0"
}

// Toolkit is the OTC toolkit name of an MCP server: the configured name,
// else its serverInfo.name, sanitized.
func Toolkit(configured, serverName string) string {
	if configured != "" {
		return Sanitize(configured)
	}
	return Sanitize(serverName)
}

// OTCIdentity is the OTC identity of one MCP tool.
type OTCIdentity struct {
	MCPName string // the original MCP tool name, what calls are sent with
	ID      string // Toolkit.Tool@version
	Name    string // Toolkit_Tool, at most 64 characters
}

// OTCIdentities names the tools of one MCP server for OTC. Tool parts are
// sanitized; when two tools sanitize to the same id or name, each of them
// (compared without case) gets "_" + 8 hex digits of the SHA-256 of its
// original name, so the
// mapping stays a bijection. Names longer than 64 characters keep a prefix
// and end in such a suffix of the full name.
func OTCIdentities(toolkit, version string, mcpNames []string) []OTCIdentity {
	tools := make([]string, len(mcpNames))
	count := map[string]int{}
	for i, n := range mcpNames {
		tools[i] = Sanitize(n)
		count[strings.ToLower(tools[i])]++
	}
	out := make([]OTCIdentity, len(mcpNames))
	for i, n := range mcpNames {
		tool := tools[i]
		if count[strings.ToLower(tool)] > 1 {
			tool += hashSuffix(toolkit + "." + n)
		}
		out[i] = OTCIdentity{
			MCPName: n,
			ID:      fmt.Sprintf("%s.%s@%s", toolkit, tool, version),
			Name:    otcName(toolkit + "_" + tool),
		}
	}
	return out
}

// otcName fits a Toolkit_Tool name into 64 characters.
func otcName(full string) string {
	if len(full) <= MaxOTCNameLen {
		return full
	}
	suffix := hashSuffix(full)
	return full[:MaxOTCNameLen-len(suffix)] + suffix
}

// mcpTitle is the MCP title of an OTC tool: its name with "_" as spaces.
func mcpTitle(otcName string) string { return strings.ReplaceAll(otcName, "_", " ") }
