//go:build e2e

package e2e

// TestREADME runs every example of README.md and docs/*.md as it is
// written there (README, Quick start: "Every example in this README and in
// docs/ is run by a test").
//
// Each fenced block of those pages is preceded by a marker line
//
//	<!-- readme-test: NAME -->
//
// and NAME, unique across the pages, is a check below. A block without a
// marker, a marker without a check, and a check whose block is gone all
// fail the test (and TestDocsExamples, docs_test.go, which needs no build
// tag), so no example can be added, renamed, moved or removed without this
// test following. Messages name the page and line (docs/operations.md:61).
//
// Shell blocks run command by command with bash, in the module root, with
// the mcpotc under test first on PATH (and Node's, for npx): a command
// ending in " &" starts in the background for the rest of its block; the
// lines "# …" right under a command are its expected output — one JSON line
// is compared as data ("…" matches any value), other lines must appear in
// the output in that order, and "# (exit status N)" is the exit status
// expected instead of 0. A command that cannot connect yet (curl's exit
// status 7, its server still starting) is tried again for a minute. Config
// blocks are started as the README says to start them. Where a command
// cannot run here as written, the check says what runs instead and why; the
// test prints the list (CI shows it: .ci/run, step "README examples").
//
// The examples use the README's fixed ports (8080, 8081, 8090): the test
// runs them one after the other, and fails when a port is taken.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeEnv is what every check needs.
type readmeEnv struct {
	root  string   // the module root
	bin   string   // the mcpotc under test
	env   []string // added to the environment of every command: PATH
	peers string   // node_modules of the pinned peers
	notes []string // how each block was run, for the listing
	// outputs keeps each command's output, by block name, for later checks.
	outputs map[string][]string
}

func (r *readmeEnv) note(b readmeBlock, format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf("%-22s %-26s %s", b.name, b.at(), fmt.Sprintf(format, args...)))
}

// readmeChecks maps each marker to what runs its block.
var readmeChecks = map[string]func(t *testing.T, r *readmeEnv, b readmeBlock){
	"quick-start":          readmeQuickStart,
	"sample-otc-curl":      readmeSampleOTCCurl,
	"install":              readmeInstall,
	"release":              readmeRelease,
	"serve-mcp-synopsis":   readmeSynopsis("serve-mcp"),
	"claude-desktop":       readmeClaudeDesktop,
	"serve-mcp-config":     readmeServeMCPConfig,
	"config-problems":      readmePlain,
	"serve-otc-synopsis":   readmeSynopsis("serve-otc"),
	"serve-otc-everything": readmeServeOTCEverything,
	"serve-otc-config":     readmeServeOTCConfig,
	"serve-otc-oauth":      readmeServeOTCOAuth,
	"serve-otc-per-user":   readmeServeOTCPerUser,
	"replicas":             readmeScaleOut,
	"controls-mcp-config":  readmeControls("testdata/config/serve-mcp-controls.json", "TestControlsMCPFrontOIDC", "its upstream on a free port, the issuer one of two zitadel/oidc OPs"),
	"webhooks-config": func(t *testing.T, r *readmeEnv, b readmeBlock) {
		readmeSameJSON(t, r, b, "testdata/config/serve-mcp-webhooks.json")
		r.note(b, "is testdata/config/serve-mcp-webhooks.json (as data), which cmd/mcpotc TestWebhooksConfigExamples loads")
	},
	"tasks-config": func(t *testing.T, r *readmeEnv, b readmeBlock) {
		readmeSameJSON(t, r, b, "testdata/config/serve-mcp-tasks.json")
		r.note(b, "is testdata/config/serve-mcp-tasks.json (as data), which cmd/mcpotc TestMCPFrontTasksConfigExample loads")
	},
	"conformance-next-table": readmeConformanceTable,
	"controls-otc-config":    readmeControls("testdata/config/serve-otc-controls.json", "TestControlsOTCFrontJWT", "on a free port, with HS256 JWT callers"),
	"haproxy-cfg":            readmeScaleOut,
	"serve-mcp-oauth":        readmePlain,
	"cors":                   readmePlain,
	"metrics":                readmePlain,
	"audit-log":              readmeOperator,
	"reload":                 readmeOperator,
	"trace-tree":             readmeTraceTree,
	"bench":                  readmeBench,
	"bench-output":           readmeBenchOutput,
	"tests":                  readmeTests,
	"design-flow":            readmeDiagram,
}

func TestREADME(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := buildMcpotc(t)
	r := &readmeEnv{
		root:    root,
		bin:     bin,
		peers:   peersDir(t),
		outputs: map[string][]string{},
	}
	r.env = []string{"PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + filepath.Dir(nodeBin(t)) + string(os.PathListSeparator) + os.Getenv("PATH")}
	if filepath.Base(bin) != "mcpotc" {
		t.Fatalf("the binary under test is %s: README commands call it mcpotc", bin)
	}

	blocks := readmeBlocks(t, root)
	// MCPOTC_README_ONLY=name,… runs only those blocks, for a developer at
	// work; CI runs them all (it refuses the variable).
	only := os.Getenv("MCPOTC_README_ONLY")
	if only != "" && os.Getenv("CI") != "" {
		t.Fatal("MCPOTC_README_ONLY is set in CI: every README example must run")
	}
	byName := readmeMarkersOnce(t, blocks)
	seen := map[string]bool{}
	for _, b := range blocks {
		if b.name == "" || seen[b.name] {
			continue // reported by readmeBlocks, readmeMarkersOnce
		}
		seen[b.name] = true
		if byName[b.name].at() != b.at() {
			continue
		}
		check := readmeChecks[b.name]
		if check == nil {
			t.Errorf("%s: marker %q has no check in internal/e2e/readme_test.go", b.at(), b.name)
			continue
		}
		if only != "" && !slices.Contains(strings.Split(only, ","), b.name) {
			continue
		}
		for _, port := range []int{8080, 8081, 8090} {
			readmePortFree(t, port)
		}
		t.Run(b.name, func(t *testing.T) { check(t, r, b) })
	}
	if only != "" {
		t.Logf("README examples: only %s (MCPOTC_README_ONLY):\n%s", only, strings.Join(r.notes, "\n"))
		return
	}
	var unused []string
	for name := range readmeChecks {
		if !seen[name] {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("checks whose block is gone from README.md and docs/*.md (or lost its marker): %v", unused)
	}
	readmeFlagsExist(t, r)
	t.Logf("README examples (%d blocks, README.md and docs/*.md):\n%s", len(blocks), strings.Join(r.notes, "\n"))
}

// readmeFlagsExist fails when the prose or tables of README.md or of a
// page of docs/ name a --flag that no mcpotc command (nor the bench)
// defines: a renamed flag must take the docs with it.
func readmeFlagsExist(t *testing.T, r *readmeEnv) {
	t.Helper()
	defined := map[string]bool{"help": true, "version": true}
	flagLine := regexp.MustCompile(`(?m)^  --?([a-z0-9][a-z0-9-]*)`) // mcpotc writes --name, mcpotc-bench -name
	helps := [][]string{{r.bin, "serve-mcp", "-h"}, {r.bin, "serve-otc", "-h"}, {r.bin, "sample-otc", "-h"}, {r.bin, "sample-mcp", "-h"}, {r.bin, "version", "-h"},
		{"go", "run", "./cmd/mcpotc-bench", "-h"}}
	for _, h := range helps {
		cmd := exec.Command(h[0], h[1:]...)
		cmd.Dir = r.root
		out, _ := cmd.CombinedOutput() // -h exits 0 (mcpotc) or 2 (flag.ExitOnError)
		for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
			defined[m[1]] = true
		}
	}
	if !defined["listen"] || !defined["only"] {
		t.Fatalf("could not read the flags from -h")
	}
	// A redis-server command line names its configuration directives as
	// --flags (docs/operations.md, Running several replicas): not mcpotc's.
	redisLine := regexp.MustCompile(`(?m)^redis-server .*$`)
	flagRef := regexp.MustCompile(`(?:^|[\s\x60(\[])--([a-z][a-z0-9-]+)`)
	for _, page := range docPages(t, r.root) {
		b, err := os.ReadFile(filepath.Join(r.root, page))
		if err != nil {
			t.Fatal(err)
		}
		var unknown []string
		for _, m := range flagRef.FindAllStringSubmatch(redisLine.ReplaceAllString(string(b), ""), -1) {
			if !defined[m[1]] && !slices.Contains(unknown, m[1]) {
				unknown = append(unknown, m[1])
			}
		}
		if len(unknown) > 0 {
			t.Errorf("%s names flags no command defines: --%s", page, strings.Join(unknown, ", --"))
		}
	}
	r.notes = append(r.notes, fmt.Sprintf("%-22s %-26s every --flag the pages name is defined by mcpotc or mcpotc-bench", "(all text)", "README.md, docs/*.md"))
}

// readmePortFree fails when port is taken on 127.0.0.1 (by a leftover, or
// something else running here): the README's examples need it.
func readmePortFree(t *testing.T, port int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			l.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("port %d is taken (%v): the README's examples need it", port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// --- shell blocks ------------------------------------------------------------

// readmeCommand is one command of a shell block.
type readmeCommand struct {
	text string   // as written, continuation lines included
	bg   bool     // it ends in " &"
	want []string // the "# " lines under it
	file string   // its page
	line int      // its line there
}

// at is the command's file:line, for messages.
func (c readmeCommand) at() string { return fmt.Sprintf("%s:%d", c.file, c.line) }

func readmeCommands(b readmeBlock) []readmeCommand {
	var cmds []readmeCommand
	lines := strings.Split(strings.TrimRight(b.text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if want, ok := strings.CutPrefix(line, "# "); ok && len(cmds) > 0 {
			c := &cmds[len(cmds)-1]
			c.want = append(c.want, want)
			continue
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		c := readmeCommand{text: line, file: b.file, line: b.line + 1 + i}
		for strings.HasSuffix(c.text, "\\") && i+1 < len(lines) {
			i++
			c.text += "\n" + lines[i]
		}
		c.bg = strings.HasSuffix(strings.TrimSpace(c.text), "&")
		cmds = append(cmds, c)
	}
	return cmds
}

// readmeShellOpts adapt how a shell block runs.
type readmeShellOpts struct {
	dir string // working directory; default the module root
	env []string
	// servers are commands that run until stopped (in a terminal of their
	// own, in the README's words): started in the background, and ready
	// when the URL answers 200.
	servers map[string]string
	// instead maps a command to what runs in its place, with why.
	instead map[string][2]string
	// unset are variables removed from the environment.
	unset []string
	// timeout bounds each foreground command; default one minute.
	timeout time.Duration
}

// readmeShell runs a shell block and returns each command's output.
func readmeShell(t *testing.T, r *readmeEnv, b readmeBlock, o readmeShellOpts) []string {
	t.Helper()
	if b.lang != "sh" {
		t.Fatalf("%s: block %q is %q, want sh", b.at(), b.name, b.lang)
	}
	dir := o.dir
	if dir == "" {
		dir = r.root
	}
	if o.timeout == 0 {
		o.timeout = time.Minute
	}
	env := append(append([]string{}, r.env...), o.env...)
	var outputs []string
	started := false
	for _, c := range readmeCommands(b) {
		text := c.text
		if alt, ok := o.instead[strings.TrimSpace(text)]; ok {
			r.note(b, "%q runs as %q: %s", strings.TrimSpace(text), alt[0], alt[1])
			text = alt[0]
		}
		if url, ok := o.servers[strings.TrimSpace(text)]; ok || c.bg {
			cmd := strings.TrimSuffix(strings.TrimSpace(text), "&")
			p := startProcess(t, context.Background(), "bash", []string{"-c", "cd " + strconv.Quote(dir) + " && exec " + cmd}, env)
			if url != "" {
				readmeWait200(t, p, url)
			}
			started = true
			outputs = append(outputs, "")
			continue
		}
		out, code := readmeRun(t, dir, text, env, o, started)
		outputs = append(outputs, out)
		readmeExpect(t, c, out, code)
	}
	return outputs
}

// readmeRun runs one command with bash; a curl that cannot connect yet
// (exit status 7) is tried again while a server of the block starts.
func readmeRun(t *testing.T, dir, text string, env []string, o readmeShellOpts, retry bool) (string, int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
		cmd := exec.CommandContext(ctx, "bash", "-c", text)
		cmd.Dir = dir
		cmd.Env = readmeUnset(append(os.Environ(), env...), o.unset)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if timedOut {
			t.Fatalf("%s: still running after %v:\n%s", text, o.timeout, readmeTail(string(out)))
		}
		if code == 7 && retry && strings.HasPrefix(text, "curl") && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		return string(out), code
	}
}

func readmeUnset(env, unset []string) []string {
	if len(unset) == 0 {
		return env
	}
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(unset, name) {
			out = append(out, kv)
		}
	}
	return out
}

// readmeWait200 waits until url answers 200 (a front is listening and its
// upstreams are listed), or the process exits.
func readmeWait200(t *testing.T, p *proc, url string) {
	t.Helper()
	p.waitHTTP(t, url, 2*time.Minute)
}

// readmeExpect compares a command's output with the "# " lines under it.
func readmeExpect(t *testing.T, c readmeCommand, out string, code int) {
	t.Helper()
	want := c.want
	wantCode := 0
	if n := len(want); n > 0 {
		if m := regexp.MustCompile(`^\(exit status (\d+)\)$`).FindStringSubmatch(want[n-1]); m != nil {
			wantCode, _ = strconv.Atoi(m[1])
			want = want[:n-1]
		}
	}
	if code != wantCode {
		t.Errorf("%s: %s\nexit status %d, want %d; output:\n%s", c.at(), c.text, code, wantCode, readmeTail(out))
		return
	}
	if len(want) == 1 && (strings.HasPrefix(want[0], "{") || strings.HasPrefix(want[0], "[")) {
		if err := readmeJSONLike(want[0], strings.TrimSpace(out)); err != nil {
			t.Errorf("%s: %s\n%v\n got %s\nwant %s", c.at(), c.text, err, readmeTail(out), want[0])
		}
		return
	}
	got := strings.Split(strings.ReplaceAll(out, "\r", ""), "\n")
	i := 0
	for _, w := range want {
		for i < len(got) && strings.TrimRight(got[i], " ") != w {
			i++
		}
		if i == len(got) {
			t.Errorf("%s: %s\noutput lacks (in this order) %q; output:\n%s", c.at(), c.text, w, readmeTail(out))
			return
		}
		i++
	}
}

// readmeJSONLike compares got with want as JSON data, where "…" in want
// (quoted or bare) matches any value.
func readmeJSONLike(want, got string) error {
	want = regexp.MustCompile(`([:\[,])…`).ReplaceAllString(want, `$1"…"`)
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		return fmt.Errorf("the README's expected output is not JSON: %v", err)
	}
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		return fmt.Errorf("the output is not JSON: %v", err)
	}
	return readmeMatch("$", w, g)
}

func readmeMatch(path string, w, g any) error {
	if w == "…" {
		return nil
	}
	switch wv := w.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: got %v, want an object", path, g)
		}
		for k := range gv {
			if _, ok := wv[k]; !ok {
				return fmt.Errorf("%s.%s: not in the README", path, k)
			}
		}
		for k, v := range wv {
			gk, ok := gv[k]
			if !ok {
				return fmt.Errorf("%s.%s: missing", path, k)
			}
			if err := readmeMatch(path+"."+k, v, gk); err != nil {
				return err
			}
		}
		return nil
	case []any:
		gv, ok := g.([]any)
		if !ok || len(gv) != len(wv) {
			return fmt.Errorf("%s: got %v, want %d items", path, g, len(wv))
		}
		for i := range wv {
			if err := readmeMatch(fmt.Sprintf("%s[%d]", path, i), wv[i], gv[i]); err != nil {
				return err
			}
		}
		return nil
	default:
		if !reflect.DeepEqual(w, g) {
			return fmt.Errorf("%s: got %v, want %v", path, g, w)
		}
		return nil
	}
}

func readmeTail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// --- the checks ----------------------------------------------------------------

// readmePlain runs a shell block exactly as written.
// readmeScaleOut: the reference deployment needs fixed ports of its own
// (6379, 8181-8183) and an MCP server on 3000; TestScaleOut runs these two
// blocks as written, on free ports, with an MCP server of its own.
func readmeScaleOut(t *testing.T, r *readmeEnv, b readmeBlock) {
	readmeDeployment(t, r.root)
	r.note(b, "run by TestScaleOut (internal/e2e/scaleout_test.go) as written, on free ports, with its own MCP server; its figures are in CI's step \"scale-out\"")
}

// readmeControls: an "Operator controls" config is the file the e2e test
// test runs (internal/e2e/controls_test.go), as data; that test checks
// what the README says of it.
func readmeControls(file, test, how string) func(t *testing.T, r *readmeEnv, b readmeBlock) {
	return func(t *testing.T, r *readmeEnv, b readmeBlock) {
		readmeSameJSON(t, r, b, file)
		r.note(b, "is %s (as data); run by %s (internal/e2e/controls_test.go), %s", file, test, how)
	}
}

// readmeTraceTree: each line of the tree is a span of traceChain, in
// order: its name, its service and its kind.
func readmeTraceTree(t *testing.T, r *readmeEnv, b readmeBlock) {
	lines := strings.Split(strings.TrimSpace(b.text), "\n")
	if len(lines) != len(traceChain) {
		t.Fatalf("%s: %d lines, want the %d spans TestTraceAcrossBothBridges checks", b.at(), len(lines), len(traceChain))
	}
	for i, line := range lines {
		f := strings.Fields(strings.TrimLeft(line, "└─│ "))
		s := traceChain[i]
		got := strings.Join(f, " ")
		if !strings.HasPrefix(got, s.name+" "+s.service+" "+s.kind) {
			t.Errorf("%s: line %d is %q, want the span %s %s %s", b.at(), i+1, line, s.name, s.service, s.kind)
		}
	}
	r.note(b, "the spans TestTraceAcrossBothBridges receives, in order")
}

func readmePlain(t *testing.T, r *readmeEnv, b readmeBlock) {
	var unset []string
	if b.name == "config-problems" {
		// "Run without the variables": make sure they are not set here.
		unset = []string{"TOOLS_OXP_API_KEY", "TWILIO_API_KEY", "GOOGLE_ACCESS_TOKEN", "BILLING_JWT_SECRET"}
	}
	readmeShell(t, r, b, readmeShellOpts{unset: unset})
	r.note(b, "run as written; expected output compared")
}

// readmeDiagram checks a diagram of the code (docs/design.md): each
// package it names (mcp/front, otc.Client's otc, bridge, mapping) is a
// directory of the module, so that a package moved or renamed takes the
// diagram with it.
func readmeDiagram(t *testing.T, r *readmeEnv, b readmeBlock) {
	var pkgs []string
	for _, m := range regexp.MustCompile(`\b([a-z]+(?:/[a-z]+)*)(?:\.[A-Z][A-Za-z]*)?\b`).FindAllStringSubmatch(b.text, -1) {
		word := m[1]
		if !strings.Contains(m[0], "/") && !strings.Contains(m[0], ".") && word != "bridge" && word != "mapping" {
			continue // a word of the diagram's prose
		}
		if slices.Contains(pkgs, word) {
			continue
		}
		pkgs = append(pkgs, word)
		if fi, err := os.Stat(filepath.Join(r.root, filepath.FromSlash(word))); err != nil || !fi.IsDir() {
			t.Errorf("%s: the diagram names the package %s, which is not a directory of the module", b.at(), word)
		}
	}
	if len(pkgs) < 5 {
		t.Errorf("%s: the diagram names %d packages (%v), want each front's chain", b.at(), len(pkgs), pkgs)
	}
	r.note(b, "a diagram: each package it names (%s) is in the module", strings.Join(pkgs, ", "))
}

// The quick start: the MCP front on the sample toolkit, reached by an MCP
// client (initialize, tools/list, a call), then the tests.
func readmeQuickStart(t *testing.T, r *readmeEnv, b readmeBlock) {
	readmeShell(t, r, b, readmeShellOpts{
		servers: map[string]string{
			"go run ./cmd/mcpotc serve-mcp --transport http   # the MCP front on the built-in sample OTC toolkit, at http://127.0.0.1:8090/mcp": "http://127.0.0.1:8090/health",
		},
		instead: map[string][2]string{
			"go test ./...                                    # runs the tests (needs only Go)": {"true", readmeByCI(t, r, `go test -race -count=1 ./...`)},
		},
	})
	session := readmeMCPSession(t, "http://127.0.0.1:8090/mcp")
	tools := readmeMCPCall(t, "http://127.0.0.1:8090/mcp", session, 2, "tools/list", `{}`)
	if !strings.Contains(tools, `"name":"Calculator_Add"`) {
		t.Errorf("tools/list through the quick start's front: %s", readmeTail(tools))
	}
	res := readmeMCPCall(t, "http://127.0.0.1:8090/mcp", session, 3, "tools/call", `{"name":"Calculator_Add","arguments":{"a":10,"b":5}}`)
	if !strings.Contains(res, `"structuredContent":{"sum":15}`) {
		t.Errorf("tools/call Calculator_Add: %s", readmeTail(res))
	}
	r.note(b, "serve-mcp via go run as written, then initialize, tools/list and Calculator_Add over http://127.0.0.1:8090/mcp")
}

// readmeByCI checks that .ci/run runs command itself and says so.
func readmeByCI(t *testing.T, r *readmeEnv, command string) string {
	t.Helper()
	ci, err := os.ReadFile(filepath.Join(r.root, ".ci", "run"))
	if err != nil || !strings.Contains(string(ci), command) {
		t.Errorf(".ci/run does not run %q (%v)", command, err)
	}
	return "CI runs it itself (.ci/run: " + command + "); running it inside go test would run this test again"
}

func readmeMCPSession(t *testing.T, url string) string {
	t.Helper()
	status, header, body := postMessage(t, url, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"readme","version":"1"}}}`, nil)
	if status != http.StatusOK || header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	session := header.Get("Mcp-Session-Id")
	if status, _, body := postMessage(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, http.Header{"Mcp-Session-Id": {session}}); status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", status, body)
	}
	return session
}

func readmeMCPCall(t *testing.T, url, session string, id int, method, params string) string {
	t.Helper()
	status, _, body := postMessage(t, url, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params), http.Header{"Mcp-Session-Id": {session}})
	if status != http.StatusOK {
		t.Fatalf("%s: %d %s", method, status, body)
	}
	return body
}

// The curl block needs the sample toolkit that the sentence above it starts.
func readmeSampleOTCCurl(t *testing.T, r *readmeEnv, b readmeBlock) {
	p := startProcess(t, context.Background(), "bash", []string{"-c", "cd " + strconv.Quote(r.root) + " && exec go run ./cmd/mcpotc sample-otc"}, r.env)
	readmeWait200(t, p, "http://127.0.0.1:8081/health")
	out := readmeShell(t, r, b, readmeShellOpts{})
	if !strings.Contains(out[0], `"id":"Calculator.Add@1.0.0"`) {
		t.Errorf("curl -s localhost:8081/tools: %s", readmeTail(out[0]))
	}
	r.note(b, "after `go run ./cmd/mcpotc sample-otc` (the sentence above it): run as written; expected output compared")
}

func readmeInstall(t *testing.T, r *readmeEnv, b readmeBlock) {
	gobin := t.TempDir()
	out := readmeShell(t, r, b, readmeShellOpts{
		env: []string{"GOBIN=" + gobin, "PATH=" + gobin + string(os.PathListSeparator) + os.Getenv("PATH")},
		instead: map[string][2]string{
			"go install github.com/mcpotc/mcpotc/cmd/mcpotc@latest   # needs Go 1.26.8 or later": {"go install ./cmd/mcpotc",
				"the same package, from this checkout: the module is not fetched from its proxy here"},
		},
		timeout: 5 * time.Minute,
	})
	if _, err := os.Stat(filepath.Join(gobin, "mcpotc")); err != nil {
		t.Errorf("go install put no mcpotc in GOBIN: %v", err)
	}
	if !regexp.MustCompile(`^mcpotc (devel|v\S+)( [0-9a-f]{12}( \(dirty\))?)? go1\.\d+`).MatchString(out[1]) {
		t.Errorf("mcpotc version: %q", out[1])
	}
	r.note(b, "mcpotc version printed %q", strings.TrimSpace(out[1]))
}

func readmeRelease(t *testing.T, r *readmeEnv, b readmeBlock) {
	// RELEASE_PLATFORMS, when set (CI sets linux/amd64), is what the block
	// builds; a release, without it, builds all six.
	want := []string{"mcpotc-v1.2.3-darwin-amd64", "mcpotc-v1.2.3-darwin-arm64", "mcpotc-v1.2.3-linux-amd64", "mcpotc-v1.2.3-linux-arm64", "mcpotc-v1.2.3-windows-amd64.exe", "mcpotc-v1.2.3-windows-arm64.exe"}
	var env []string
	if pl := os.Getenv("RELEASE_PLATFORMS"); pl != "" {
		env = []string{"RELEASE_PLATFORMS=" + pl}
		want = nil
		for _, p := range strings.Fields(pl) {
			name := "mcpotc-v1.2.3-" + strings.ReplaceAll(p, "/", "-")
			if strings.HasPrefix(p, "windows/") {
				name += ".exe"
			}
			want = append(want, name)
		}
		sort.Strings(want)
	}
	readmeShell(t, r, b, readmeShellOpts{timeout: 10 * time.Minute, env: env})
	sums, err := os.ReadFile(filepath.Join(r.root, "dist", "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		f := strings.Fields(line)
		names = append(names, f[len(f)-1])
	}
	sort.Strings(names)
	if !slices.Equal(names, want) {
		t.Errorf("SHA256SUMS lists %v, want %v", names, want)
	}
	r.note(b, "run as written, RELEASE_PLATFORMS=%q: %d binaries, sums verified, scratch-root run (see .ci/release)", os.Getenv("RELEASE_PLATFORMS"), len(want))
}

// A synopsis names exactly the flags the command has.
func readmeSynopsis(command string) func(t *testing.T, r *readmeEnv, b readmeBlock) {
	return func(t *testing.T, r *readmeEnv, b readmeBlock) {
		if !strings.HasPrefix(b.text, "mcpotc "+command+" ") {
			t.Fatalf("%s: the synopsis does not start with mcpotc %s", b.at(), command)
		}
		documented := readmeFlagSet(regexp.MustCompile(`\[--([a-z0-9-]+)`).FindAllStringSubmatch(b.text, -1))
		out, err := exec.Command(r.bin, command, "-h").CombinedOutput()
		if err != nil {
			t.Fatalf("%s -h: %v\n%s", command, err, out)
		}
		defined := readmeFlagSet(regexp.MustCompile(`(?m)^  --?([a-z0-9][a-z0-9-]*)`).FindAllStringSubmatch(string(out), -1))
		if !slices.Equal(documented, defined) {
			t.Errorf("%s: the synopsis names %v\n%s -h defines %v", b.at(), documented, command, defined)
		}
		r.note(b, "synopsis: its %d flags are exactly those of `mcpotc %s -h`", len(defined), command)
	}
}

func readmeFlagSet(matches [][]string) []string {
	var out []string
	for _, m := range matches {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	sort.Strings(out)
	return out
}

// The Claude Desktop entry, started as Claude Desktop starts it: its
// command, its args, its env and nothing else of ours; its config file is
// the README's serve-mcp config (testdata/config/serve-mcp.json); its
// "tools" upstream is the sample toolkit on 8081.
func readmeClaudeDesktop(t *testing.T, r *readmeEnv, b readmeBlock) {
	var host struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(b.text), &host); err != nil {
		t.Fatalf("%s: %v", b.at(), err)
	}
	s, ok := host.MCPServers["otc-tools"]
	if !ok || s.Command != "/usr/local/bin/mcpotc" {
		t.Fatalf("%s: no otc-tools server run by /usr/local/bin/mcpotc: %+v", b.at(), host)
	}
	args := slices.Clone(s.Args)
	for i, a := range args {
		if a == "/home/me/.config/mcpotc/serve-mcp.json" {
			args[i] = filepath.Join(r.root, "testdata", "config", "serve-mcp.json")
		}
	}
	sample := startProcess(t, context.Background(), r.bin, []string{"sample-otc"}, nil)
	readmeWait200(t, sample, "http://127.0.0.1:8081/health")

	var env []string
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	p := startProcess(t, context.Background(), r.bin, args, readmeUnset(env, nil))
	p.rpcCall(t, 1, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "readme", "version": "1"}}, time.Minute)
	p.rpcNotify(t, "notifications/initialized", nil)
	tools := string(p.rpcCall(t, 2, "tools/list", map[string]any{}, time.Minute))
	if !strings.Contains(tools, `"name":"Calculator_Add"`) {
		t.Errorf("tools/list: %s", readmeTail(tools))
	}
	r.note(b, "started as a host would (command → the mcpotc under test, the config path → testdata/config/serve-mcp.json, env as written); over stdio: initialize, tools/list has the tools of its \"tools\" upstream")
}

// readmeSameJSON fails unless the block is the file, as data.
func readmeSameJSON(t *testing.T, r *readmeEnv, b readmeBlock, file string) {
	t.Helper()
	f, err := os.ReadFile(filepath.Join(r.root, file))
	if err != nil {
		t.Fatal(err)
	}
	var fromFile, fromREADME any
	if err := json.Unmarshal(f, &fromFile); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b.text), &fromREADME); err != nil {
		t.Fatalf("%s: %v", b.at(), err)
	}
	if !reflect.DeepEqual(fromFile, fromREADME) {
		t.Errorf("%s: the block is not %s", b.at(), file)
	}
}

func readmeServeMCPConfig(t *testing.T, r *readmeEnv, b readmeBlock) {
	readmeSameJSON(t, r, b, "testdata/config/serve-mcp.json")
	sample := startProcess(t, context.Background(), r.bin, []string{"sample-otc"}, nil)
	readmeWait200(t, sample, "http://127.0.0.1:8081/health")
	env := []string{"TOOLS_OXP_API_KEY=placeholder", "TWILIO_API_KEY=placeholder", "GOOGLE_ACCESS_TOKEN=placeholder", "BILLING_JWT_SECRET=placeholder"}
	p := startProcess(t, context.Background(), r.bin, []string{"serve-mcp", "--config", filepath.Join(r.root, "testdata", "config", "serve-mcp.json"), "--transport", "http"}, env)
	// Health is 503 for as long as billing is down; what is waited for is
	// the state the example shows: tools listed, billing named as down.
	p.waitListening(t, "http://127.0.0.1:8090/health", time.Minute)
	var health struct {
		Status    string            `json:"status"`
		Upstreams map[string]string `json:"upstreams"`
	}
	var status int
	var body string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		status, _, body = httpDo(t, http.MethodGet, "http://127.0.0.1:8090/health", "", nil)
		health.Upstreams = nil
		_ = json.Unmarshal([]byte(body), &health)
		if (health.Upstreams["tools"] == "ready" && health.Upstreams["billing"] != "" && health.Upstreams["billing"] != "connecting") || time.Now().After(deadline) {
			break
		}
	}
	// billing.example.internal does not exist: that upstream is down, the
	// other serves.
	if status != http.StatusServiceUnavailable || health.Status != "unavailable" || health.Upstreams["tools"] != "ready" || health.Upstreams["billing"] == "" || health.Upstreams["billing"] == "ready" {
		t.Errorf("GET /health: %d %s", status, body)
	}
	session := readmeMCPSession(t, "http://127.0.0.1:8090/mcp")
	if tools := readmeMCPCall(t, "http://127.0.0.1:8090/mcp", session, 2, "tools/list", `{}`); !strings.Contains(tools, `"name":"Calculator_Add"`) {
		t.Errorf("tools/list: %s", readmeTail(tools))
	}
	r.note(b, "is testdata/config/serve-mcp.json (as data); started with its 4 variables set to placeholders: tools ready, billing down (no such host), GET /health 503 names it")
}

// server-everything as the README starts it: npx finds the pinned peer in
// .ci/peers (no download).
func readmeServeOTCEverything(t *testing.T, r *readmeEnv, b readmeBlock) {
	readmeShell(t, r, b, readmeShellOpts{
		dir: filepath.Dir(r.peers),
		servers: map[string]string{
			"mcpotc serve-otc -- npx -y @modelcontextprotocol/server-everything": "http://127.0.0.1:8080/health",
		},
	})
	r.note(b, "run as written from .ci/peers (npx runs the pinned server-everything); expected output compared")
}

func readmeServeOTCConfig(t *testing.T, r *readmeEnv, b readmeBlock) {
	readmeSameJSON(t, r, b, "testdata/config/serve-otc.json")
	p := startProcess(t, context.Background(), "bash", []string{"-c", "cd " + filepath.Dir(r.peers) + " && exec mcpotc serve-otc --config " + filepath.Join(r.root, "testdata", "config", "serve-otc.json")},
		append(slices.Clone(r.env), "GITHUB_MCP_TOKEN=placeholder"))
	deadline := time.Now().Add(2 * time.Minute)
	var tools string
	for {
		// /health stays 503 while github (no such host here) and notes
		// (nothing listens) are down: what is waited for is everything's
		// tools in GET /tools.
		p.waitListening(t, "http://127.0.0.1:8080/health", time.Until(deadline))
		_, _, tools = httpDo(t, http.MethodGet, "http://127.0.0.1:8080/tools", "", nil)
		if strings.Contains(tools, `"Everything.get_sum@`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(tools, `"Everything.get_sum@`) || strings.Contains(tools, "trigger_sampling_request") {
		t.Errorf("GET /tools: want Everything's tools without trigger-sampling-request: %s", readmeTail(tools))
	}
	status, _, body := httpDo(t, http.MethodGet, "http://127.0.0.1:8080/health", "", nil)
	var health struct {
		Upstreams map[string]string `json:"upstreams"`
	}
	_ = json.Unmarshal([]byte(body), &health)
	if status != http.StatusServiceUnavailable || health.Upstreams["everything"] != "ready" || health.Upstreams["github"] == "ready" || health.Upstreams["notes"] == "ready" {
		t.Errorf("GET /health: %d %s", status, body)
	}
	r.note(b, "is testdata/config/serve-otc.json (as data); started from .ci/peers with GITHUB_MCP_TOKEN=placeholder: Everything's tools listed (deny honoured), github and notes (nothing there) down in /health")
}

// The audit log and reload examples (docs/observability.md, Audit log; Reload without
// restart): run as written, in a directory of their own (they write
// audit.log, servers.json and serve-otc.log there); serve-otc is ready
// when /health answers 200.
func readmeOperator(t *testing.T, r *readmeEnv, b readmeBlock) {
	servers := map[string]string{}
	for _, c := range readmeCommands(b) {
		if c.bg {
			servers[strings.TrimSpace(c.text)] = "http://127.0.0.1:8080/health"
		}
	}
	readmeShell(t, r, b, readmeShellOpts{dir: t.TempDir(), servers: servers})
	r.note(b, "run as written in a temporary directory; serve-otc waited for until /health is 200; expected output compared")
}

// The OAuth example: the TypeScript SDK's example server with its demo
// authorization server on the ports the config names, serve-otc with the
// config as written, and the flow a user goes through.
func readmeServeOTCOAuth(t *testing.T, r *readmeEnv, b readmeBlock) {
	readmeSameJSON(t, r, b, "testdata/config/serve-otc-oauth.json")
	script := filepath.Join(r.peers, "@modelcontextprotocol", "sdk", "dist", "esm", "examples", "server", "simpleStreamableHttp.js")
	demo := startProcess(t, context.Background(), nodeBin(t), []string{script, "--oauth"}, []string{"MCP_PORT=3000", "MCP_AUTH_PORT=3001"})
	demo.waitHTTP(t, "http://localhost:3001/.well-known/oauth-authorization-server", time.Minute)
	p := startProcess(t, context.Background(), r.bin, []string{"serve-otc", "--config", filepath.Join(r.root, "testdata", "config", "serve-otc-oauth.json")}, nil)
	p.waitListening(t, "http://127.0.0.1:8080/health", time.Minute)
	var health struct {
		Status    string            `json:"status"`
		Upstreams map[string]string `json:"upstreams"`
	}
	var raw string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		_, _, raw = httpDo(t, http.MethodGet, "http://127.0.0.1:8080/health", "", nil)
		_ = json.Unmarshal([]byte(raw), &health)
		if health.Status == "authorization_required" || time.Now().After(deadline) {
			break
		}
	}
	if health.Upstreams["demo"] != "waiting for the operator to authorize the bridge (OAuth): the URL is in the bridge's log" || strings.Contains(raw, "/oauth/") {
		t.Fatalf("GET /health before the authorization: %s", raw)
	}
	// The URL, where the README says the operator finds it: the log.
	var url string
	for deadline := time.Now().Add(30 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		lines, _ := otcfLogLines(p.Stderr())
		for _, l := range lines {
			if l["message"] == "upstream needs an authorization: open this URL in a browser" {
				url, _ = l["url"].(string)
			}
		}
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:8080/oauth/authorize/") {
		t.Fatalf("the authorization URL in the log: %q", url)
	}
	page := newOAuthBrowser(t, "").open(url, nil) // what a browser does: the demo server approves at once
	if page.Status != http.StatusOK || page.URL.Path != "/oauth/callback" {
		t.Fatalf("opening the authorization URL ended at %s with %d", page.URL.Path, page.Status)
	}
	readmeWait200(t, p, "http://127.0.0.1:8080/health")
	_, _, res := httpDo(t, http.MethodPost, "http://127.0.0.1:8080/tools/call", `{"tool_id":"Demo.greet","input":{"name":"OAuth"}}`, http.Header{"Content-Type": {"application/json"}})
	if !strings.Contains(res, `"value":"Hello, OAuth!"`) {
		t.Errorf("Demo.greet after the authorization: %s", readmeTail(res))
	}
	r.note(b, "is testdata/config/serve-otc-oauth.json; against the TypeScript SDK's example server (--oauth, ports 3000/3001): /health authorization_required (no URL), the URL from the log opened, /health 200, Demo.greet answered")
}

// The per-user example: the file as written, serve-otc with the command
// line of the text after it, zitadel/oidc's example OpenID Provider at
// the issuer it names, and the flows of the text: the operator, alice, and
// bob opening alice's link.
func readmeServeOTCPerUser(t *testing.T, r *readmeEnv, b readmeBlock) {
	readmeSameJSON(t, r, b, "testdata/config/serve-otc-per-user.json")
	page, err := os.ReadFile(filepath.Join(r.root, b.file))
	if err != nil {
		t.Fatal(err)
	}
	after := strings.Join(strings.Split(string(page), "\n")[b.line:], "\n")
	m := regexp.MustCompile("Run it with `([^`]+)`").FindStringSubmatch(after)
	if m == nil {
		t.Fatalf("%s: no \"Run it with `…`\" after the per-user example", b.at())
	}
	command := strings.Join(strings.Fields(m[1]), " ")
	const want = "OTC_API_KEY=… USERS_OIDC_SECRET=… mcpotc serve-otc --config testdata/config/serve-otc-per-user.json --api-key-env OTC_API_KEY " +
		"--user-oidc-issuer http://127.0.0.1:9998/ --user-oidc-client-id mcpotc --user-oidc-client-secret-env USERS_OIDC_SECRET"
	if command != want {
		t.Fatalf("%s: the per-user command is %q, the test runs %q", b.at(), command, want)
	}
	usersOPAt(t, "127.0.0.1:9998", "http://127.0.0.1:8080")
	script := filepath.Join(r.peers, "@modelcontextprotocol", "sdk", "dist", "esm", "examples", "server", "simpleStreamableHttp.js")
	demo := startProcess(t, context.Background(), nodeBin(t), []string{script, "--oauth"}, []string{"MCP_PORT=3000", "MCP_AUTH_PORT=3001"})
	demo.waitHTTP(t, "http://localhost:3001/.well-known/oauth-authorization-server", time.Minute)
	run := strings.Replace(want, "OTC_API_KEY=… USERS_OIDC_SECRET=… ", "OTC_API_KEY=readme-key USERS_OIDC_SECRET=op-secret ", 1)
	p := startProcess(t, context.Background(), "bash", []string{"-c", "cd " + strconv.Quote(r.root) + " && exec env " + run}, r.env)
	p.waitListening(t, "http://127.0.0.1:8080/health", time.Minute)
	b2 := &otcfBridge{p: p, base: "http://127.0.0.1:8080", bin: r.bin}
	newOAuthBrowser(t, "").authorize(oauthOperatorURL(t, b2, "demo"))
	readmeWait200(t, p, "http://127.0.0.1:8080/health")
	call := func() string {
		_, _, body := httpDo(t, http.MethodPost, "http://127.0.0.1:8080/tools/call",
			`{"tool_id":"Demo.greet","input":{"name":"you"},"context":{"user_id":"id1"}}`,
			http.Header{"Content-Type": {"application/json"}, "OXP-API-Key": {"readme-key"}})
		return body
	}
	var challenge struct {
		MissingRequirements struct {
			Authorization []struct{ URL string } `json:"authorization"`
		} `json:"missing_requirements"`
	}
	if err := json.Unmarshal([]byte(call()), &challenge); err != nil || len(challenge.MissingRequirements.Authorization) != 1 {
		t.Fatalf("alice's first call: %v %+v", err, challenge)
	}
	link := challenge.MissingRequirements.Authorization[0].URL
	if page := newOAuthBrowser(t, "bob").open(link, nil); page.Status != http.StatusForbidden || !strings.Contains(page.Body, "This authorization link is for another user") {
		t.Errorf("bob opening alice's link: %d %s", page.Status, readmeTail(page.Body))
	}
	newOAuthBrowser(t, "alice").authorize(link)
	if res := call(); !strings.Contains(res, `"value":"Hello, you!"`) {
		t.Errorf("alice's call after her authorization: %s", readmeTail(res))
	}
	r.note(b, "is testdata/config/serve-otc-per-user.json; the command of the text run as written (the key and secret set), zitadel/oidc's example OpenID Provider at 127.0.0.1:9998, the TypeScript SDK's example server (ports 3000/3001): the operator's URL from the log opened; alice (id1) challenged; bob, signed in, refused on her link; alice signed in and authorized; her call answered")
}

func readmeBench(t *testing.T, r *readmeEnv, b readmeBlock) {
	// Where the README's commands write: outside the working tree.
	prof, benchJSON := "/tmp/prof", "/tmp/bench.json"
	os.Remove(benchJSON)
	t.Cleanup(func() {
		os.Remove(benchJSON)
		os.RemoveAll(prof)
	})
	out := readmeShell(t, r, b, readmeShellOpts{timeout: 10 * time.Minute})
	r.outputs[b.name] = out
	var report struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if raw, err := os.ReadFile(benchJSON); err != nil || json.Unmarshal(raw, &report) != nil || len(report.Rows) == 0 {
		t.Errorf("%s: %v, %d rows", benchJSON, err, len(report.Rows))
	}
	if _, err := os.Stat(filepath.Join(r.root, "bench.json")); err == nil {
		t.Errorf("the bench left bench.json in the working tree")
	}
	profiles, _ := filepath.Glob(filepath.Join(prof, "*.cpu.pprof"))
	if len(profiles) == 0 {
		t.Errorf("--pprof %s wrote no CPU profile", prof)
	}
	if !strings.Contains(out[3], "ok  \tgithub.com/mcpotc/mcpotc/bridge") || !strings.Contains(out[3], "ns/op") {
		t.Errorf("go test -bench: %s", readmeTail(out[3]))
	}
	r.note(b, "run as written (4 commands); bench.json has %d rows, %d CPU profiles, Go benchmarks ran", len(report.Rows), len(profiles))
}

// The bench's sample output is what the bench prints, figures aside: each
// line, with its numbers, units and met/missed replaced by placeholders, is a
// line of `go run ./cmd/mcpotc-bench`, and the other way round (the first
// line, which names the machine, is skipped).
func readmeBenchOutput(t *testing.T, r *readmeEnv, b readmeBlock) {
	out := r.outputs["bench"]
	if len(out) == 0 {
		t.Fatal("the bench block did not run")
	}
	shape := func(text string) []string {
		var lines []string
		for i, l := range strings.Split(strings.TrimSpace(text), "\n") {
			if i > 0 && strings.TrimSpace(l) != "" {
				lines = append(lines, readmeBenchShape(l))
			}
		}
		return lines
	}
	shown, printed := shape(b.text), shape(out[0])
	if d := readmeLineDiff(shown, printed); d != "" {
		t.Errorf("%s: the sample output is not what `go run ./cmd/mcpotc-bench` prints (# = a figure):\n%s", b.at(), d)
		t.Logf("`go run ./cmd/mcpotc-bench` printed:\n%s", out[0])
	}
	r.note(b, "sample output: its %d lines are the lines `go run ./cmd/mcpotc-bench` prints, figures aside", len(shown))
}

var (
	readmeFigure = regexp.MustCompile(`\d[\d.,]*(?:\s?(?:ns|µs|ms|s|MiB|KiB|MB|GB)\b|×)?`)
	readmeStatus = regexp.MustCompile(`^(met|missed)\b`)
)

// readmeBenchShape is a bench output line without its figures: numbers with
// their units become #, a target's met/missed becomes "status", and runs of
// spaces (column widths) one space.
func readmeBenchShape(line string) string {
	l := strings.Join(strings.Fields(line), " ")
	l = readmeStatus.ReplaceAllString(l, "status")
	return readmeFigure.ReplaceAllString(l, "#")
}

// readmeLineDiff lists the lines only one side has ("-": only in the page,
// "+": only printed), or returns "".
func readmeLineDiff(readme, printed []string) string {
	count := func(lines []string) map[string]int {
		m := map[string]int{}
		for _, l := range lines {
			m[l]++
		}
		return m
	}
	inReadme, inPrinted := count(readme), count(printed)
	var d strings.Builder
	for _, l := range readme {
		if inPrinted[l] == 0 {
			fmt.Fprintf(&d, "  - %s\n", l)
		}
	}
	for _, l := range printed {
		if inReadme[l] == 0 {
			fmt.Fprintf(&d, "  + %s\n", l)
		}
	}
	return d.String()
}

func readmeTests(t *testing.T, r *readmeEnv, b readmeBlock) {
	cmds := readmeCommands(b)
	if len(cmds) != 2 {
		t.Fatalf("%s: want go test and .ci/run, got %d commands", b.at(), len(cmds))
	}
	r.note(b, "`go test ./...`: %s", readmeByCI(t, r, "go test -race -count=1 ./..."))
	r.note(b, "`bash .ci/run`: is CI itself, which runs this test")
}

// readmeConformanceTable: the 2026-07-28 conformance table in docs/tests.md
// is the one TestConformanceNext prints: each "listed FAIL" row is a
// scenario of testdata/conformance-next/expected-failures.txt failing
// exactly the checks listed there, each PASS row a scenario the file does
// not list, and every listed scenario has its row.
func readmeConformanceTable(t *testing.T, r *readmeEnv, b readmeBlock) {
	expected := readNextExpected(t)
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(b.text), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 {
			t.Errorf("%s: a row of fewer than three fields: %q", b.at(), line)
			continue
		}
		key := f[0] + " " + f[1]
		seen[key] = true
		want, listed := expected[key]
		switch {
		case f[2] == "listed":
			got := strings.Split(f[len(f)-1], ",")
			slices.Sort(got)
			if !listed || !slices.Equal(got, want.checks) {
				t.Errorf("%s: %s is listed FAIL %v; %s lists %v", b.at(), key, got, nextExpectedFile, want.checks)
			}
		case f[2] == "PASS" && listed:
			t.Errorf("%s: %s passes but %s lists it", b.at(), key, nextExpectedFile)
		case f[2] != "PASS":
			t.Errorf("%s: %s: %q is neither PASS nor listed FAIL", b.at(), key, f[2])
		}
	}
	for key := range expected {
		if !seen[key] {
			t.Errorf("%s: no row for %s, which %s lists", b.at(), key, nextExpectedFile)
		}
	}
	r.note(b, "each row held to %s (%d listed)", nextExpectedFile, len(expected))
}
