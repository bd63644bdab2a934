//go:build linux

package upstream

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// backgroundChild is a stdio child that leaves a process in the background
// and execs the fake server: `sh -c 'sleep 600 & exec server'`.
func backgroundChild() Config {
	return Config{
		Command: "/bin/sh",
		Args: []string{"-c", `sleep 600 & echo "grandchild $!" >&2; exec "$0" -test.run='^TestUpstreamFakeServerProcess$'`,
			os.Args[0]},
	}
}

// grandchildPID reads the pid the child printed to its stderr.
func grandchildPID(t *testing.T, logs *testLogs) int {
	t.Helper()
	logs.waitLog(t, "grandchild ", 10*time.Second)
	m := regexp.MustCompile(`grandchild (\d+)`).FindStringSubmatch(logs.String())
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// running tells whether pid is a live process (a zombie is not).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// TestUpstreamStdioCloseEndsBackgroundGrandchild: the child of
// `sh -c 'sleep 600 & exec server'` serves calls, and after Close the
// background sleep is gone with it (the process group is ended).
func TestUpstreamStdioCloseEndsBackgroundGrandchild(t *testing.T) {
	cfg := backgroundChild()
	cfg.Name = "background"
	cfg.Env = []string{fakeEnv + "=1", "GORACE=atexit_sleep_ms=0"}
	cfg.KillGrace = 300 * time.Millisecond
	u, logs := startLogged(t, cfg, Options{}, false)
	waitReady(t, u)
	gc := grandchildPID(t, logs)
	if !running(gc) {
		t.Fatalf("the grandchild %d is not running", gc)
	}
	pid := childPID(t, u) // the honest flow: the child answers
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := u.Close(ctx); err != nil {
		t.Fatal(err)
	}
	assertGone(t, pid)
	eventually(t, 5*time.Second, fmt.Sprintf("the grandchild %d to end", gc), func() bool { return !running(gc) })
}

// watchdogOf finds the detached watchdog process reading the pipe d writes.
func watchdogOf(t *testing.T, d *groupWatchdog) int {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(d.w.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("pipe:[%d]", st.Ino)
	var pid int
	eventually(t, 10*time.Second, "the watchdog process", func() bool {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			n, err := strconv.Atoi(e.Name())
			if err != nil || n == os.Getpid() {
				continue
			}
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", n)); err == nil && l == want {
				if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", n)); strings.Contains(string(cmd), "\x00run") {
					pid = n
					return true
				}
			}
		}
		return false
	})
	return pid
}

// startGroup starts `sh -c 'sleep 600 & …; exec sleep 600'` leading a
// process group of its own and returns it and the background sleep's pid.
func startGroup(t *testing.T) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `sleep 600 & echo $!; exec sleep 600`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	gc, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	return cmd, gc
}

// TestUpstreamWatchdogKillsGroupWhenBridgeDies: the watchdog's pipe ends
// — what a SIGKILL of the bridge does, the kernel closing its end — and
// every group still written, background process included, is killed; a
// group the bridge released ("-PGID": it ended the group itself) is left
// alone. The watchdog is not the bridge's child, and one serves every
// child of the process.
func TestUpstreamWatchdogKillsGroupWhenBridgeDies(t *testing.T) {
	d, err := newGroupWatchdog()
	if err != nil {
		t.Fatalf("newGroupWatchdog: %v", err)
	}
	wpid := watchdogOf(t, d)
	if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", wpid)); strings.Contains(string(b), fmt.Sprintf(") S %d ", os.Getpid())) {
		t.Errorf("the watchdog %d is the bridge's child: %s", wpid, b)
	}
	killed, gcKilled := startGroup(t)
	kept, gcKept := startGroup(t)
	a := &watchdog{d: d}
	a.watch(killed.Process.Pid)
	b := &watchdog{d: d}
	b.watch(kept.Process.Pid)
	b.release()
	_ = d.w.Close() // the bridge dies: its end of the pipe closes
	if err := killed.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the child: %v, want killed", err)
	}
	eventually(t, 10*time.Second, fmt.Sprintf("the background process %d to end", gcKilled), func() bool { return !running(gcKilled) })
	eventually(t, 10*time.Second, "the watchdog to exit", func() bool { return !running(wpid) })
	if !running(gcKept) || !running(kept.Process.Pid) {
		t.Errorf("the watchdog killed a group the bridge released")
	}

	// One watchdog per process: a second child gets the first's.
	s1, err := startWatchdog()
	if err != nil || s1 == nil {
		t.Fatalf("startWatchdog: %v, %v", s1, err)
	}
	s2, err := startWatchdog()
	if err != nil || s2 == nil || s2.d != s1.d {
		t.Errorf("a second child's watchdog: %v, %v; want the first's", s2, err)
	}
}
