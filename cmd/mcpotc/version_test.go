package main

import (
	"context"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/mcpotc/mcpotc/internal/wiretest"
)

func TestVersionString(t *testing.T) {
	vcs := func(v, rev, modified string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/mcpotc/mcpotc", Version: v}}
		if rev != "" {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs.revision", Value: rev}, debug.BuildSetting{Key: "vcs.modified", Value: modified})
		}
		return bi
	}
	const rev = "b93739e57ee2c0ffee0123456789abcdef012345"
	tests := []struct {
		name    string
		ldflags string
		bi      *debug.BuildInfo
		want    string
	}{
		{"go install @v1.2.3", "", vcs("v1.2.3", "", ""), "v1.2.3 go1.26.0"},
		{"go install @commit", "", vcs("v0.0.0-20261124040920-b93739e57ee2", "", ""), "v0.0.0-20261124040920-b93739e57ee2 go1.26.0"},
		{"clone, Go < 1.24", "", vcs("(devel)", rev, "false"), "devel b93739e57ee2 go1.26.0"},
		{"clone, pseudo-version", "", vcs("v0.0.0-20261124040920-b93739e57ee2", rev, "false"), "devel b93739e57ee2 go1.26.0"},
		{"clone, dirty", "", vcs("v0.0.0-20261124040920-b93739e57ee2+dirty", rev, "true"), "devel b93739e57ee2 (dirty) go1.26.0"},
		{"clone, after a tag", "", vcs("v1.2.4-0.20261124040920-b93739e57ee2", rev, "false"), "devel b93739e57ee2 go1.26.0"},
		{"clone at a tag", "", vcs("v1.2.3", rev, "false"), "v1.2.3 b93739e57ee2 go1.26.0"},
		{"release script", "v1.2.3", vcs("(devel)", rev, "false"), "v1.2.3 b93739e57ee2 go1.26.0"},
		{"no build info", "", nil, "devel go1.26.0"},
	}
	for _, tt := range tests {
		if got := versionString(tt.ldflags, tt.bi, "go1.26.0"); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// serve-mcp on a terminal says, once, on stderr, what it is waiting for.
func TestServeMCPStdioHintOnTerminal(t *testing.T) {
	for _, tty := range []bool{true, false} {
		var out, errb wiretest.Buffer
		stdin := strings.NewReader("")
		m := &Main{Stdin: stdin, Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" },
			Terminal: func(f any) bool { return tty && f == any(stdin) }}
		code := m.Run(context.Background(), []string{"serve-mcp", "--log-level", "error"})
		if code != 0 {
			t.Fatalf("tty %v: exit %d: %s", tty, code, errb.String())
		}
		if got := strings.Count(errb.String(), stdioHint); got != map[bool]int{true: 1, false: 0}[tty] {
			t.Errorf("tty %v: hint printed %d times; stderr:\n%s", tty, got, errb.String())
		}
		if out.String() != "" {
			t.Errorf("tty %v: stdout %q, want nothing (stdout is the protocol)", tty, out.String())
		}
	}
}
