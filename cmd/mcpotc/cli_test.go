package main

import (
	"regexp"
	"strings"
	"testing"
)

// A mistyped command gets the nearest one; one far from every command gets
// the list alone.
func TestUnknownCommandDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve-mpc"}, `mcpotc: unknown command "serve-mpc": did you mean "serve-mcp"?`},
		{[]string{"serve-otx", "--listen", "127.0.0.1:1"}, `mcpotc: unknown command "serve-otx": did you mean "serve-otc"?`},
		{[]string{"sampleotc"}, `mcpotc: unknown command "sampleotc": did you mean "sample-otc"?`},
		{[]string{"help", "serve-mpc"}, `mcpotc help: unknown command "serve-mpc": did you mean "serve-mcp"?`},
		{[]string{"bogus"}, `mcpotc: unknown command "bogus"` + "\n"},
	} {
		code, stdout, stderr := run(t, tc.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("mcpotc %q: %d %q\nwant 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// -h writes every flag as --name, as the README and the error messages
// do, and the flags still parse written either way.
func TestHelpWritesDoubleDashes(t *testing.T) {
	for _, cmd := range []string{"serve-mcp", "serve-otc", "sample-otc"} {
		code, stdout, _ := run(t, cmd, "-h")
		if code != 0 {
			t.Fatalf("%s -h: %d", cmd, code)
		}
		if single := regexp.MustCompile(`(?m)^  -[a-z]`).FindAllString(stdout, -1); len(single) > 0 {
			t.Errorf("%s -h writes %d flags with one dash: %q", cmd, len(single), single)
		}
		if n := len(regexp.MustCompile(`(?m)^  --[a-z][a-z0-9-]* `).FindAllString(stdout, -1)) +
			len(regexp.MustCompile(`(?m)^  --[a-z][a-z0-9-]*\n`).FindAllString(stdout, -1)); n < 3 {
			t.Errorf("%s -h lists %d --flags:\n%s", cmd, n, stdout)
		}
		if !strings.Contains(stdout, "\n  --listen string\n    \taddress") && cmd != "serve-mcp" {
			t.Errorf("%s -h: --listen is not listed as the flag package lists it:\n%s", cmd, stdout)
		}
	}
	for _, args := range [][]string{{"sample-otc", "-lisen", "x"}, {"sample-otc", "--lisen", "x"}} {
		if _, _, stderr := run(t, args...); !strings.Contains(stderr, "did you mean --listen?") {
			t.Errorf("%q: %s", args, stderr)
		}
	}
}
