//go:build linux

package upstream

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// A stdio child leads a process group of its own, and Close ends that whole
// group (stop: stdin closed, SIGTERM, SIGKILL of the group). When the bridge
// itself is SIGKILLed nothing in it runs: Pdeathsig (sysProcAttr) has the
// kernel kill the direct child, but whatever the child left running in the
// background (`sh -c 'sleep 600 & exec server'`) is only reparented. The
// group watchdog covers that case on Linux:
//
//   - At its first stdio child the bridge starts one small process of its
//     own binary (/proc/self/exe with the hidden argument watchdogArg),
//     detached from the bridge: an intermediate process starts it and
//     exits, so it is not the bridge's child (the bridge's process tree is
//     the children and what they start, nothing else) and the bridge never
//     reaps it. One watchdog serves every child of the process: starting
//     the bridge's binary twice per child start (a restart after a crash
//     included) cost a loaded machine a second of downtime per restart.
//   - The watchdog's stdin is the read end of a pipe whose only write end is
//     the bridge's (close-on-exec: no child inherits it). The bridge writes
//     "+PGID" once a child runs, and "-PGID" when it has ended that group
//     itself (stop). If the pipe ends, the bridge is gone, however it died:
//     the watchdog sends SIGKILL to every group still written and exits
//     (none, after an orderly exit).
//
// What holds: on SIGKILL (or a crash) of the bridge, every process still in
// a stdio child's process group is killed within a pipe wakeup. What does
// not: a process that leaves the group (setsid, setpgid) escapes, as it
// escapes Close; a bridge killed in the instant between a child's start and
// the write of its group id leaves that child's background processes; a
// bridge that is PID 1 (a container without an init) starts no watchdog —
// when it dies, the container's processes die with it; when
// /proc/self/exe cannot be started, the bridge logs a warning and runs the
// child as before (Pdeathsig only), and tries again at the next child. The
// watchdog is one idle process of the bridge's binary, ending with the
// bridge. Other Unix systems keep the process group and Close only
// (watchdog_other.go).

// watchdogArg is the hidden first argument that makes any binary linking
// this package a group watchdog (see init); "run" follows it in the
// detached watchdog itself, nothing in the intermediate.
const watchdogArg = "__mcpotc-stdio-group-watchdog"

// watchdogStartWait bounds the start of a watchdog (the intermediate
// process's start and exit).
const watchdogStartWait = 5 * time.Second

func init() {
	if len(os.Args) >= 2 && os.Args[1] == watchdogArg {
		os.Exit(watchdogMain(os.Args[2:]))
	}
}

// watchdogMain is the program of the two watchdog processes.
func watchdogMain(args []string) int {
	if len(args) == 0 {
		// The intermediate: start the watchdog on the same stdin and
		// exit without waiting for it, so that it is nobody's child but
		// init's (or the nearest subreaper's).
		p, err := os.StartProcess("/proc/self/exe", []string{"mcpotc-stdio-group-watchdog", watchdogArg, "run"}, &os.ProcAttr{
			Dir:   "/",
			Env:   []string{},
			Files: []*os.File{os.Stdin, nil, nil},
		})
		if err != nil {
			return 1
		}
		_ = p.Release()
		return 0
	}
	return watchGroup(os.Stdin)
}

// watchGroup keeps the process groups the bridge writes ("+PGID" when a
// child runs, "-PGID" when the bridge ended its group) until the pipe ends,
// then kills those still kept: the bridge is gone.
func watchGroup(r io.Reader) int {
	groups := map[int]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	// The pipe ended: the bridge is gone. What it did not end, ends now.
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return 0
}

// watchdog is the bridge's end of a group watchdog.
// groupWatchdog is a watchdog process and the bridge's end of its pipe.
type groupWatchdog struct {
	mu     sync.Mutex
	w      *os.File
	broken bool // a write failed: the next child starts another
}

// shared is the process's one watchdog (startWatchdog).
var shared struct {
	mu sync.Mutex
	d  *groupWatchdog
}

// watchdog is one child's place in the shared watchdog.
type watchdog struct {
	d    *groupWatchdog
	pgid int
}

// startWatchdog returns the process's group watchdog for a child about to
// start, starting it (again, when it broke) first. It returns nil without
// an error where none is started (the bridge is PID 1).
func startWatchdog() (*watchdog, error) {
	if os.Getpid() == 1 {
		return nil, nil
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.d != nil && !shared.d.isBroken() {
		return &watchdog{d: shared.d}, nil
	}
	d, err := newGroupWatchdog()
	if err != nil {
		return nil, err
	}
	shared.d = d
	return &watchdog{d: d}, nil
}

// newGroupWatchdog starts a detached group watchdog.
func newGroupWatchdog() (*groupWatchdog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path:  "/proc/self/exe",
		Args:  []string{"mcpotc-stdio-group-watchdog", watchdogArg},
		Env:   []string{},
		Dir:   "/",
		Stdin: r,
		// A session of its own: no terminal's signals, and apart from
		// the bridge's process group.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("group watchdog: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t := time.NewTimer(watchdogStartWait)
	defer t.Stop()
	select {
	case err = <-done:
	case <-t.C:
		_ = cmd.Process.Kill()
		err = errors.Join(errors.New("did not start in time"), <-done)
	}
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("group watchdog: %w", err)
	}
	return &groupWatchdog{w: w}, nil
}

func (d *groupWatchdog) isBroken() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.broken
}

// send writes one line to the watchdog; a failed write (the watchdog was
// killed) marks it broken, so that the next child starts another.
func (d *groupWatchdog) send(op byte, pgid int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.broken {
		return
	}
	if _, err := fmt.Fprintf(d.w, "%c%d\n", op, pgid); err != nil {
		d.broken = true
	}
}

// watch tells the watchdog the process group it guards.
func (c *watchdog) watch(pgid int) {
	if c != nil && c.d != nil {
		c.pgid = pgid
		c.d.send('+', pgid)
	}
}

// release tells the watchdog the bridge ended the group (or never started
// it): it is no longer killed when the bridge dies.
func (c *watchdog) release() {
	if c != nil && c.d != nil && c.pgid > 0 {
		c.d.send('-', c.pgid)
		c.pgid = 0
	}
}
