package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServeOTCMaxMessageBytesChecked(t *testing.T) {
	dir := t.TempDir()
	config := func(name, value string) string {
		path := filepath.Join(dir, name+".json")
		cfg := `{"mcpServers":{"web":{"url":"http://127.0.0.1:1/mcp","max_message_bytes":` + value + `}}}`
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"serve-otc", "--max-message-bytes", "0"}, 2, "--max-message-bytes must be positive"},
		{[]string{"serve-otc", "--max-message-bytes", "-1"}, 2, "--max-message-bytes must be positive"},
		{[]string{"serve-otc", "--max-message-bytes", "16MiB"}, 2, "-max-message-bytes"},
		{[]string{"serve-otc", "--config", config("negative", "-5")}, 2, "mcpServers.web.max_message_bytes: must be a positive number of bytes"},
		{[]string{"serve-otc", "--config", config("string", `"16MiB"`)}, 2, "mcpServers.web.max_message_bytes: want a number"},
	}
	for _, tt := range tests {
		code, stdout, stderr := run(t, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.stderr) || stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d and stderr with %q", tt.args, code, stderr, stdout, tt.code, tt.stderr)
		}
	}
}
