package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/wiretest"
)

// The flags of the audit log and of --watch-config say what they need.
func TestAuditAndWatchFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve-otc", "--audit-log-keep", "3"}, "--audit-log-keep needs --audit-log FILE|stderr"},
		{[]string{"serve-mcp", "--audit-log-arg-names"}, "--audit-log-arg-names needs --audit-log FILE|stderr"},
		{[]string{"serve-otc", "--audit-log", "stderr", "--audit-log-max-bytes", "100000"}, "--audit-log-max-bytes needs an --audit-log file (stderr is not rotated)"},
		{[]string{"serve-mcp", "--audit-log", "a.log", "--audit-log-max-bytes", "100"}, "--audit-log-max-bytes must be at least 16384"},
		{[]string{"serve-otc", "--audit-log", "a.log", "--audit-log-keep", "0"}, "--audit-log-keep must be at least 1"},
		{[]string{"serve-otc", "--audit-log", ""}, "--audit-log needs a file, or stderr"},
		{[]string{"serve-mcp", "--watch-config"}, "--watch-config needs --config FILE"},
		{[]string{"serve-otc", "--watch-config"}, "--watch-config needs --config FILE"},
		{[]string{"serve-otc", "--audit-log", filepath.Join(t.TempDir(), "no", "such", "dir", "a.log"), "--listen", "127.0.0.1:0"}, "--audit-log: audit log: open"},
	} {
		var stderr wiretest.Buffer
		m := &Main{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }}
		code := m.Run(context.Background(), c.args)
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// startLogged is startCommand that also returns the command's stderr.
func startLogged(t *testing.T, ctx context.Context, env map[string]string, args ...string) (string, *wiretest.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	stderr := &wiretest.Buffer{}
	addr := make(chan string, 1)
	m := &Main{Stdout: io.Discard, Stderr: stderr, Getenv: func(k string) string { return env[k] }, Ready: func(a string) { addr <- a }}
	done := make(chan int, 1)
	go func() { done <- m.Run(ctx, args) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Errorf("%v did not stop", args)
		}
	})
	select {
	case a := <-addr:
		return "http://" + a, stderr
	case code := <-done:
		t.Fatalf("%v exited with %d: %s", args, code, stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatalf("%v did not start: %s", args, stderr.String())
	}
	return "", nil
}

// mcpToolNames lists the tools of a stateless serve-mcp.
func mcpToolNames(t *testing.T, base string) []string {
	t.Helper()
	a := send(t, "POST", base+"/mcp", map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var out struct {
		Result struct {
			Tools []struct{ Name string } `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(a.body), &out); err != nil {
		t.Fatalf("tools/list: %d %s", a.status, a.body)
	}
	var names []string
	for _, tl := range out.Result.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	// Written aside and renamed, as editors and configuration managers do.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// --watch-config: a new upstream in the file is served without a restart;
// a file with problems is refused, logged with the very message a start
// with it prints, and the running configuration keeps serving.
func TestServeMCPWatchConfig(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	otcA := startCommand(t, ctx, nil, "sample-otc", "--listen", "127.0.0.1:0", "--log-level", "error")
	otcB := startCommand(t, ctx, nil, "sample-otc", "--listen", "127.0.0.1:0", "--log-level", "error")
	path := filepath.Join(t.TempDir(), "serve-mcp.json")
	writeFile(t, path, `{"upstreams":[{"name":"a","url":"`+otcA+`","prefix":"a_"}]}`)
	base, stderr := startLogged(t, ctx, nil, "serve-mcp", "--transport", "http", "--stateless", "--listen", "127.0.0.1:0",
		"--config", path, "--watch-config", "--log-format", "json")
	before := mcpToolNames(t, base)
	if len(before) == 0 || !strings.HasPrefix(before[0], "a_") {
		t.Fatalf("tools at start: %v", before)
	}

	writeFile(t, path, `{"upstreams":[{"name":"a","url":"`+otcA+`","prefix":"a_"},{"name":"b","url":"`+otcB+`","prefix":"b_"}]}`)
	start := time.Now()
	var got []string
	for deadline := start.Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got = mcpToolNames(t, base)
		if len(got) == 2*len(before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools after the file changed: %v\n%s", got, stderr.String())
		}
	}
	t.Logf("the new tool list was served %v after the file was written", time.Since(start).Round(time.Millisecond))

	bad := `{"upstreams":[{"name":"a","url":"` + otcA + `","prefx":"a_","api_key_env":"NOT_SET_ANYWHERE"}]}`
	badPath := filepath.Join(t.TempDir(), "bad.json")
	writeFile(t, badPath, bad)
	var atStart wiretest.Buffer
	m := &Main{Stdout: io.Discard, Stderr: &atStart, Getenv: func(string) string { return "" }}
	if code := m.Run(ctx, []string{"serve-mcp", "--config", badPath}); code != 2 {
		t.Fatalf("a start with the bad file: exit %d %s", code, atStart.String())
	}
	want := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(atStart.String(), "mcpotc serve-mcp: "), "\n"), badPath, path)
	writeFile(t, path, bad)
	var refusal map[string]any
	for deadline := time.Now().Add(5 * time.Second); refusal == nil; time.Sleep(20 * time.Millisecond) {
		for _, l := range strings.Split(stderr.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "configuration reload refused: the running configuration is kept" {
				refusal = m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refusal logged:\n%s", stderr.String())
		}
	}
	if refusal["error"] != want || refusal["level"] != "error" || refusal["trigger"] != "the file changed" {
		t.Errorf("the refusal logged %q\nthe start printed  %q", refusal["error"], want)
	}
	if after := mcpToolNames(t, base); !slices.Equal(after, got) {
		t.Errorf("tools after a refused reload: %v, want %v", after, got)
	}
}

// A reload refused for what the start refuses as a usage error (a config
// upstream named like the --otc one) logs it as the start prints it,
// without the "usage" mark.
func TestServeMCPReloadRefusedUsage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	otcA := startCommand(t, ctx, nil, "sample-otc", "--listen", "127.0.0.1:0", "--log-level", "error")
	otcB := startCommand(t, ctx, nil, "sample-otc", "--listen", "127.0.0.1:0", "--log-level", "error")
	path := filepath.Join(t.TempDir(), "serve-mcp.json")
	writeFile(t, path, `{"upstreams":[{"name":"b","url":"`+otcB+`","prefix":"b_"}]}`)
	_, stderr := startLogged(t, ctx, nil, "serve-mcp", "--transport", "http", "--stateless", "--listen", "127.0.0.1:0",
		"--otc", otcA, "--config", path, "--watch-config", "--log-format", "json")
	writeFile(t, path, `{"upstreams":[{"name":"`+strings.TrimPrefix(otcA, "http://")+`","url":"`+otcB+`","prefix":"b_"}]}`)
	var atStart wiretest.Buffer
	m := &Main{Stdout: io.Discard, Stderr: &atStart, Getenv: func(string) string { return "" }}
	if code := m.Run(ctx, []string{"serve-mcp", "--otc", otcA, "--config", path}); code != 2 {
		t.Fatalf("a start with two upstreams of one name: exit %d %s", code, atStart.String())
	}
	want := strings.TrimSuffix(strings.TrimPrefix(atStart.String(), "mcpotc serve-mcp: "), "\n")
	if !strings.HasPrefix(want, "two OTC servers are named") {
		t.Fatalf("the start printed %q", want)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var got string
		for _, l := range strings.Split(stderr.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "configuration reload refused: the running configuration is kept" {
				got, _ = m["error"].(string)
			}
		}
		if got != "" {
			if got != want {
				t.Errorf("the refusal logged %q, the start printed %q", got, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refusal logged:\n%s", stderr.String())
		}
	}
}
