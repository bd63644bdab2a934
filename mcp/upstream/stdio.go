package upstream

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// process is a running stdio child, leader of its own process group.
type process struct {
	cmd        *exec.Cmd
	pid        int
	stdin      *os.File // the bridge's ends of the pipes
	stdout     *os.File
	stderr     *os.File
	exited     chan struct{} // closed once the child has been reaped
	waitErr    error         // set before exited is closed
	stderrDone chan struct{} // closed when the stderr pump has stopped
	watchdog   *watchdog     // kills the group if the bridge dies (nil: none)
}

// spawn starts the configured command with its own pipes (not exec's
// StdinPipe/StdoutPipe: Wait would close those under mcp-go's reader).
func (u *Upstream) spawn() (_ *process, err error) {
	cmd := exec.Command(u.cfg.Command, u.cfg.Args...)
	cmd.Env = append(inheritedEnv(u.cfg.Unsetenv), u.cfg.Env...)
	cmd.Dir = u.cfg.Dir
	cmd.SysProcAttr = sysProcAttr()

	var files []*os.File
	defer func() {
		if err != nil {
			for _, f := range files {
				f.Close()
			}
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	// The watchdog runs before the child does, so that the child's group
	// is guarded from its start on (watchdog_linux.go).
	wd, werr := startWatchdog()
	if werr != nil {
		u.log.Warn("no group watchdog: the child's background processes may outlive a killed bridge", "error", werr)
	}
	if err := cmd.Start(); err != nil {
		wd.release()
		return nil, err
	}
	wd.watch(cmd.Process.Pid)
	// The child holds its ends now.
	inR.Close()
	outW.Close()
	errW.Close()

	p := &process{
		cmd:        cmd,
		pid:        cmd.Process.Pid,
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
		watchdog:   wd,
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	go u.pumpStderr(errR, p.stderrDone)
	// Only the program's base name: arguments may carry secrets.
	u.log.Info("upstream child started", "command", filepath.Base(u.cfg.Command), "pid", p.pid)
	return p, nil
}

// exitDesc describes how the child ended: "exit status 3", "signal: killed".
// Only valid once exited is closed.
func (p *process) exitDesc() string {
	var ee *exec.ExitError
	switch {
	case p.waitErr == nil:
		return "exit status 0"
	case errors.As(p.waitErr, &ee):
		return ee.Error()
	default:
		return p.waitErr.Error()
	}
}

// stop ends the child once its stdin has been closed: it waits grace for an
// exit, sends SIGTERM to the process group, waits grace again, then always
// kills the whole group (whatever the child started goes with it) and waits
// a bounded time for the reaping. A closed hurry skips the grace periods.
func (p *process) stop(hurry <-chan struct{}, grace time.Duration, log *slog.Logger) {
	exited := func() bool {
		select {
		case <-p.exited:
			return true
		default:
			return false
		}
	}
	wait := func(d time.Duration) bool {
		if exited() {
			return true
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-p.exited:
			return true
		case <-t.C:
			return false
		case <-hurry:
			return exited()
		}
	}
	if !wait(grace) {
		log.Info("upstream child still running after its stdin was closed; sending SIGTERM", "pid", p.pid)
		if err := terminateGroup(p.cmd.Process); err != nil {
			log.Debug("SIGTERM failed", "pid", p.pid, "error", err)
		}
		if !wait(grace) {
			log.Warn("upstream child still running after SIGTERM; killing its process group", "pid", p.pid)
		}
	}
	_ = killGroup(p.cmd.Process)
	t := time.NewTimer(killWait)
	select {
	case <-p.exited:
	case <-t.C:
		log.Error("upstream child did not exit after SIGKILL", "pid", p.pid)
	}
	t.Stop()
	p.watchdog.release()
	// Let the stderr pump log what is left (a crash report), then release
	// the pipes: this also ends mcp-go's reader if a process outside the
	// group still holds the child's stdout.
	t = time.NewTimer(time.Second)
	select {
	case <-p.stderrDone:
	case <-t.C:
	}
	t.Stop()
	p.stdout.Close()
	p.stderr.Close()
}

// pumpStderr logs the child's stderr line by line, each line in the field
// "line" of a record "child stderr" (the logger names the upstream); a line
// longer than StderrLineMax is cut.
func (u *Upstream) pumpStderr(r io.Reader, done chan<- struct{}) {
	defer close(done)
	limit := u.cfg.StderrLineMax
	br := bufio.NewReaderSize(r, 4096)
	var line []byte
	cut := false
	emit := func() {
		text := strings.TrimRight(strings.ToValidUTF8(string(line), "\uFFFD"), "\r")
		if cut {
			text += " …[line truncated]"
		}
		if text != "" {
			u.log.Info("child stderr", "line", text)
		}
		line, cut = line[:0], false
	}
	for {
		chunk, more, err := br.ReadLine()
		if err != nil {
			if len(line) > 0 || cut {
				emit()
			}
			return
		}
		if room := limit - len(line); room >= len(chunk) {
			line = append(line, chunk...)
		} else {
			line = append(line, chunk[:max(room, 0)]...)
			cut = true
		}
		if !more {
			emit()
		}
	}
}

// childStdin is the child's stdin as mcp-go's stdio transport writes it. It
// notes which tracked requests were written in full, so that a failed call
// can tell "never sent" (ErrUnavailable) from "sent, then lost" (ErrLost).
type childStdin struct {
	f       *os.File
	wmu     sync.Mutex // one line at a time: mcp-go's and respond's
	mu      sync.Mutex
	pending map[int64]*atomic.Bool
}

func (w *childStdin) Write(p []byte) (int, error) {
	w.wmu.Lock()
	n, err := w.f.Write(p)
	w.wmu.Unlock()
	if err == nil {
		if id, ok := requestID(p); ok {
			w.mu.Lock()
			if f := w.pending[id]; f != nil {
				f.Store(true)
			}
			w.mu.Unlock()
		}
	}
	return n, err
}

func (w *childStdin) Close() error { return w.f.Close() }

func (w *childStdin) track(id int64) *atomic.Bool {
	f := new(atomic.Bool)
	w.mu.Lock()
	w.pending[id] = f
	w.mu.Unlock()
	return f
}

func (w *childStdin) untrack(id int64) {
	w.mu.Lock()
	delete(w.pending, id)
	w.mu.Unlock()
}

// requestID reads the id of a request line as mcp-go's transport writes
// it: {"jsonrpc":"2.0","id":17,"method":… (a response to a server request
// has no method after its id).
func requestID(line []byte) (int64, bool) {
	const prefix = `{"jsonrpc":"2.0","id":`
	s := string(line[:min(len(line), 64)])
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return 0, false
	}
	var id int64
	i := 0
	for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
		id = id*10 + int64(rest[i]-'0')
	}
	if i == 0 || !strings.HasPrefix(rest[i:], `,"method":`) {
		return 0, false
	}
	return id, true
}

// respond writes an answer line of the bridge's own to the child, in the
// background (the child may be blocked writing its stdout, which the caller
// reads).
func (w *childStdin) respond(line []byte) {
	go func() { _, _ = w.Write(line) }()
}

// childStdout is the child's stdout as mcp-go's stdio transport reads it, its
// lines bounded by lines (see lineBounder); its end means the connection is
// gone.
type childStdout struct {
	f     *os.File
	lines *lineBounder
	onEnd func()
}

func (r *childStdout) Read(p []byte) (int, error) {
	n, err := r.lines.read(r.f, p)
	if err != nil {
		r.onEnd()
	}
	return n, err
}

// inheritedEnv is the bridge's environment less the named variables.
func inheritedEnv(unset []string) []string {
	env := os.Environ()
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
