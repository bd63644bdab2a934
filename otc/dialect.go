package otc

import (
	"fmt"
	"strings"
)

// Dialect is one of the shapes OTC/OXP takes on the wire
// (docs/mapping.md, OTC as mcpotc speaks it).
type Dialect string

// The dialects. DialectAuto is a client setting: learn the dialect from the
// server's GET /tools answer. DialectLoose is what a client learns from a
// server that lists a bare array (langchain-tool-server): it is written like
// oxp-1.0 and read with every tolerance.
const (
	DialectAuto    Dialect = "auto"
	DialectOTC10   Dialect = "otc-1.0"
	DialectOXP10   Dialect = "oxp-1.0"
	DialectOXPFlat Dialect = "oxp-flat"
	DialectLoose   Dialect = "loose"
)

// The $schema values this package writes, and the OXP-Version header.
const (
	SchemaOTC10       = "otc://1.0"
	SchemaOXP10       = "urn:oxp:1.0"
	VersionHeader     = "OXP-Version"
	HeaderVersion10   = "1.0"
	APIKeyHeader      = "OXP-API-Key"
	oldAPIKeyHeader   = "OTC-API-Key"
	rfcAPIKeyHeader   = "X-API-Key"
	contentTypeJSON   = "application/json"
	maxErrorBodyBytes = 64 << 10
)

// ParseDialect reads a dialect name as given on a command line or in a config file.
func ParseDialect(s string) (Dialect, error) {
	switch d := Dialect(strings.ToLower(strings.TrimSpace(s))); d {
	case "":
		return DialectAuto, nil
	case DialectAuto, DialectOTC10, DialectOXP10, DialectOXPFlat, DialectLoose:
		return d, nil
	}
	return "", fmt.Errorf("unknown OTC dialect %q (want auto, otc-1.0, oxp-1.0 or oxp-flat)", s)
}

// envelope reports whether the dialect wraps bodies in {"$schema", "request"|"result"}.
func (d Dialect) envelope() bool { return d != DialectOXPFlat }

// schemaURI is the $schema the dialect writes.
func (d Dialect) schemaURI() string {
	if d == DialectOTC10 {
		return SchemaOTC10
	}
	return SchemaOXP10
}

// dialectOfSchema tells which dialect a $schema value names. Accepted: the
// short forms and the published openapi.json URLs of both repositories
// (ArcadeAI/OpenToolCalling, OpenToolCalling/Specification,
// OpenExecProtocol/Specification) at version 1.0.
func dialectOfSchema(schema string) (Dialect, bool) {
	s := strings.TrimSpace(schema)
	switch s {
	case SchemaOTC10, "otc://1", "otc://1.0.0":
		return DialectOTC10, true
	case SchemaOXP10, "urn:oxp:1", "urn:oxp:1.0.0":
		return DialectOXP10, true
	}
	lower := strings.ToLower(s)
	if !strings.HasPrefix(lower, "https://") && !strings.HasPrefix(lower, "http://") {
		return "", false
	}
	if !strings.HasSuffix(lower, "/http/1.0/openapi.json") {
		return "", false
	}
	switch {
	case strings.Contains(lower, "/openexecprotocol/"):
		return DialectOXP10, true
	case strings.Contains(lower, "/opentoolcalling/"):
		return DialectOTC10, true
	}
	return "", false
}

// validVersionHeader reports whether an OXP-Version header value is one this package speaks.
func validVersionHeader(v string) bool {
	switch strings.TrimSpace(v) {
	case "1", "1.0", "1.0.0":
		return true
	}
	return false
}
