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
	"strings"
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
//   - For each stdio child the bridge starts a small process of its own
//     binary (/proc/self/exe with the hidden argument watchdogArg), detached
//     from the bridge: an intermediate process starts it and exits, so it is
//     not the bridge's child (the bridge's process tree is the children and
//     what they start, nothing else) and the bridge never reaps it.
//   - The watchdog's stdin is the read end of a pipe whose only write end is
//     the bridge's (close-on-exec: no child inherits it). The bridge writes
//     the child's process group id once the child runs, and "." when it has
//     ended the group itself (stop). If the pipe ends without the ".", the
//     bridge is gone, however it died: the watchdog sends SIGKILL to the
//     group and exits.
//
// What holds: on SIGKILL (or a crash) of the bridge, every process still in
// a stdio child's process group is killed within a pipe wakeup. What does
// not: a process that leaves the group (setsid, setpgid) escapes, as it
// escapes Close; a bridge killed in the instant between a child's start and
// the write of its group id leaves that child's background processes; a
// bridge that is PID 1 (a container without an init) starts no watchdog —
// when it dies, the container's processes die with it; when
// /proc/self/exe cannot be started, the bridge logs a warning and runs the
// child as before (Pdeathsig only). Each watchdog is one idle process of
// the bridge's binary per running stdio child, ending with it. Other Unix
// systems keep the process group and Close only (watchdog_other.go).

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

// watchGroup reads the process group id, then waits for the pipe's end: a
// "." first means the bridge ended the group itself; a bare end, that the
// bridge died, and the group is killed.
func watchGroup(r io.Reader) int {
	br := bufio.NewReader(r)
	line, err := br.ReadString('\n')
	if err != nil {
		return 0 // the bridge ended before it started the child
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pgid <= 1 {
		return 2
	}
	if b, err := br.ReadByte(); err == nil && b == '.' {
		return 0
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return 0
}

// watchdog is the bridge's end of a group watchdog.
type watchdog struct {
	w *os.File
}

// startWatchdog starts a detached group watchdog, before the child it will
// watch. It returns nil without an error where none is started (the
// bridge is PID 1).
func startWatchdog() (*watchdog, error) {
	if os.Getpid() == 1 {
		return nil, nil
	}
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
	return &watchdog{w: w}, nil
}

// watch tells the watchdog the process group it guards.
func (d *watchdog) watch(pgid int) {
	if d != nil {
		_, _ = fmt.Fprintf(d.w, "%d\n", pgid)
	}
}

// release ends the watchdog without a kill: the bridge ended the group (or
// never started it).
func (d *watchdog) release() {
	if d != nil {
		_, _ = d.w.Write([]byte("."))
		_ = d.w.Close()
	}
}
