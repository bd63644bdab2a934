package main

import (
	"strings"
	"testing"
)

// A serve-otc configuration (Claude's mcpServers, VS Code's servers) given
// to serve-mcp says what it is and what to run instead; a serve-mcp file
// with a misspelt key still gets the did-you-mean, and a good one starts.
func TestServeMCPGivenAServeOTCConfig(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"Claude's mcpServers", `{"mcpServers":{"fs":{"command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","/tmp"]}}}`,
			"config.json: mcpServers: this is a serve-otc configuration (MCP servers to serve to OTC clients): run `mcpotc serve-otc --config "},
		{"VS Code's servers", `{"servers":{"fs":{"type":"stdio","command":"npx"}}}`,
			"config.json: servers: this is a serve-otc configuration"},
		{"a misspelt serve-mcp key", `{"upstream":[{"url":"http://127.0.0.1:8081"}]}`,
			`config.json: upstream: unknown key: did you mean "upstreams"? (known: upstreams, access, rate_limits, webhooks)`},
	} {
		path := writeConfig(t, tc.body)
		code, stdout, stderr := run(t, "serve-mcp", "--config", path)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: code %d, stderr %q\nwant 2 and %q", tc.name, code, stderr, tc.want)
		}
		if tc.name != "a misspelt serve-mcp key" && !strings.Contains(stderr, `{"upstreams": [{"url": "http://127.0.0.1:8081"}]}`) {
			t.Errorf("%s: no example of serve-mcp's own configuration: %s", tc.name, stderr)
		}
	}
	// The reverse mistake stays explained by serve-otc.
	path := writeConfig(t, `{"upstreams":[{"url":"http://127.0.0.1:8081"}]}`)
	if code, _, stderr := run(t, "serve-otc", "--config", path); code != 2 || !strings.Contains(stderr, "has no mcpServers") {
		t.Errorf("serve-otc given a serve-mcp file: code %d, %s", code, stderr)
	}
}
