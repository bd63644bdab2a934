package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a process the bench started, leader of its own process group.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string        // its stderr (and stdout when unused), in the work dir
	done chan struct{} // closed once it has exited and been reaped
	err  error         // its exit, once done is closed
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// procs tracks every process the bench started, to stop them all at the end.
type procs struct {
	dir string
	mu  sync.Mutex
	all []*proc
}

// command prepares a process whose stderr goes to <dir>/<name>.log; the
// caller may set Stdin/Stdout before start.
func (ps *procs) command(name string, argv ...string) (*exec.Cmd, string, error) {
	logPath := filepath.Join(ps.dir, logName(name))
	f, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, logPath, nil
}

func logName(name string) string {
	r := strings.NewReplacer(" ", "-", "/", "-", "(", "", ")", "", ">", "", ":", "")
	return r.Replace(name) + ".log"
}

// start starts cmd and tracks it.
func (ps *procs) start(name string, cmd *exec.Cmd, logPath string) (*proc, error) {
	if err := cmd.Start(); err != nil {
		closeStderr(cmd)
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return ps.track(name, cmd, logPath, true), nil
}

// track records a started process; wait says whether to reap it here
// (false when another owner, such as an MCP stdio transport, waits for it).
func (ps *procs) track(name string, cmd *exec.Cmd, logPath string, wait bool) *proc {
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	if wait {
		go func() {
			p.err = cmd.Wait()
			closeStderr(cmd)
			close(p.done)
		}()
	} else {
		go func() {
			// Poll for the exit without reaping (the owner reaps).
			for {
				if err := syscall.Kill(cmd.Process.Pid, 0); err != nil || isZombie(cmd.Process.Pid) {
					close(p.done)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	ps.mu.Lock()
	ps.all = append(ps.all, p)
	ps.mu.Unlock()
	return p
}

func closeStderr(cmd *exec.Cmd) {
	if f, ok := cmd.Stderr.(*os.File); ok {
		_ = f.Close()
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state …: the comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}

// stop asks a process to stop (SIGTERM), then kills its process group.
func (ps *procs) stop(p *proc, grace time.Duration) {
	if p == nil || p.exited() {
		ps.killGroup(p)
		return
	}
	_ = syscall.Kill(p.pid(), syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	}
	ps.killGroup(p)
}

// killGroup kills what is left of the process group the bench made for p
// (children of a bridge that outlived it).
func (ps *procs) killGroup(p *proc) {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
}

// stopAll stops every tracked process, the last started first.
func (ps *procs) stopAll() {
	ps.mu.Lock()
	all := slices.Clone(ps.all)
	ps.mu.Unlock()
	slices.Reverse(all)
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Go(func() { ps.stop(p, 5*time.Second) })
	}
	wg.Wait()
}

// waitLogAddr waits for a JSON log line of the process with an "addr"
// member (mcpotc logs the address it listens on) and returns it.
func waitLogAddr(ctx context.Context, p *proc, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		if addr := logAddr(p.log); addr != "" {
			return addr, nil
		}
		if p.exited() {
			return "", fmt.Errorf("%s exited before listening: %v\n%s", p.name, p.err, tail(p.log, 20))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("%s did not say where it listens within %s\n%s", p.name, timeout, tail(p.log, 20))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func logAddr(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Addr != "" {
			return line.Addr
		}
	}
	return ""
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// freePort returns a loopback port that was free a moment ago (for peers
// that cannot listen on port 0 and say which port they got).
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// memory of a process, from /proc/<pid>/status, in KiB.
type memory struct{ hwm, rss int64 }

func readMemory(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	var m memory
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmHWM":
			m.hwm = n
		case "VmRSS":
			m.rss = n
		}
	}
	if m.hwm == 0 && m.rss == 0 {
		return m, fmt.Errorf("no VmHWM/VmRSS in /proc/%d/status", pid)
	}
	return m, nil
}

// resetPeak resets the process's VmHWM to its current RSS (Linux
// clear_refs 5), so that the next reading is the peak of what follows.
// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on
// Linux (sysconf(_SC_CLK_TCK)).
const userHZ = 100

// cpuTime is the CPU time, user and system, that process pid and its
// threads have used; false when it cannot be read. It is the sum of the
// threads' run times in /proc/PID/task/*/schedstat (nanoseconds, as the
// scheduler accounts them), else utime + stime of /proc/PID/stat, which
// the kernel samples at each tick (10 ms): over a round of a few hundred
// calls of 100 µs that sampling alone is off by several percent. A thread
// that exits takes its time with it; the Go runtime and Node keep theirs.
func cpuTime(pid int) (time.Duration, bool) {
	if d, ok := schedTime(pid); ok {
		return d, true
	}
	return statTime(pid)
}

// schedTime sums the first field (time on a CPU, ns) of the schedstat of
// each of pid's threads.
func schedTime(pid int) (time.Duration, bool) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // the thread exited since the listing
			}
			return 0, false
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += ns
	}
	return time.Duration(sum), true
}

// statTime is utime + stime of /proc/PID/stat.
func statTime(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:])) // from field 3 on
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * (time.Second / userHZ), true
}

func resetPeak(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// peakKiB reads the process's VmHWM; 0 when it cannot be read.
func peakKiB(pid int) int64 {
	m, err := readMemory(pid)
	if err != nil {
		return 0
	}
	return m.hwm
}

// machine describes where the bench ran.
type machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
	Kernel    string `json:"kernel,omitempty"`
	Node      string `json:"node,omitempty"`
}

func describeMachine(node string) machine {
	m := machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if node != "" {
		if out, err := exec.Command(node, "--version").Output(); err == nil {
			m.Node = strings.TrimSpace(string(out))
		}
	}
	return m
}

// moduleRoot is the directory of the go.mod of the mcpotc module, when the
// bench runs inside it.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module: run the bench from the mcpotc checkout, or pass --mcpotc")
	}
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	if !bytes.Contains(b, []byte("module github.com/mcpotc/mcpotc\n")) {
		return "", fmt.Errorf("%s is not the mcpotc module: run the bench from the mcpotc checkout, or pass --mcpotc", gomod)
	}
	return filepath.Dir(gomod), nil
}

// pprofOverlay is added to cmd/mcpotc when the bench builds it with
// --pprof: it serves net/http/pprof on $MCPOTC_BENCH_PPROF. The product's
// own sources are not changed, and the binary the bench builds without
// --pprof is the plain one.
const pprofOverlay = `package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	if addr := os.Getenv("MCPOTC_BENCH_PPROF"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
`

// buildMCPOTC builds cmd/mcpotc into dir (with the pprof overlay when asked).
func buildMCPOTC(root, dir string, withPprof bool) (string, error) {
	bin := filepath.Join(dir, "mcpotc")
	args := []string{"build", "-o", bin}
	if withPprof {
		src := filepath.Join(dir, "zz_bench_pprof.go")
		if err := os.WriteFile(src, []byte(pprofOverlay), 0o644); err != nil {
			return "", err
		}
		overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{
			filepath.Join(root, "cmd", "mcpotc", "zz_bench_pprof.go"): src,
		}})
		ov := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(ov, overlay, 0o644); err != nil {
			return "", err
		}
		args = append(args, "-overlay", ov)
	}
	args = append(args, "./cmd/mcpotc")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/mcpotc: %v\n%s", err, out)
	}
	return bin, nil
}
