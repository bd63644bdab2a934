package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The per-server protocol key (docs/otc-front.md, Config file): bad values and
// a pin that cannot work are reported at start, with the key's place.
func TestServeOTCProtocolChecked(t *testing.T) {
	dir := t.TempDir()
	config := func(name, server string) string {
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, []byte(`{"mcpServers":{"web":`+server+`}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name, server, stderr string
	}{
		{"unknown value", `{"url":"http://127.0.0.1:1/mcp","protocol":"2024-11-05"}`,
			`mcpServers.web.protocol: "2024-11-05" is not one of auto, 2026-07-28, 2025-11-25`},
		{"not a string", `{"url":"http://127.0.0.1:1/mcp","protocol":2026}`, "mcpServers.web.protocol"},
		{"modern over SSE", `{"type":"sse","url":"http://127.0.0.1:1/sse","protocol":"2026-07-28"}`,
			"mcpServers.web.protocol: 2026-07-28 needs streamable HTTP or stdio"},
	}
	for _, tt := range tests {
		code, stdout, stderr := run(t, "serve-otc", "--config", config(strings.ReplaceAll(tt.name, " ", "-"), tt.server))
		if code != 2 || !strings.Contains(stderr, tt.stderr) || stdout != "" {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want exit 2 and stderr with %q", tt.name, code, stderr, stdout, tt.stderr)
		}
	}
}
