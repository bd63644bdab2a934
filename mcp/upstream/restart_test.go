package upstream

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// waitRecorder records the backoff waits an upstream chose (Options.waited).
type waitRecorder struct {
	mu   sync.Mutex
	list []waitRecord
}

type waitRecord struct {
	what    string
	attempt int
	d       time.Duration
}

func (w *waitRecorder) record(what string, attempt int, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, waitRecord{what, attempt, d})
}

// of returns the recorded waits of one kind.
func (w *waitRecorder) of(what string) []waitRecord {
	return lockedFilter(&w.mu, &w.list, func(x waitRecord) bool { return x.what == what })
}

// checkGrowing checks that waits are the attempts 0, 1, 2… of the backoff
// from min doubling up to max, each within its jitter (half to all of the
// nominal wait).
func checkGrowing(t *testing.T, waits []waitRecord, from int, minD, maxD time.Duration) {
	t.Helper()
	for i, w := range waits {
		nominal := minD
		for range from + i {
			nominal = min(2*nominal, maxD)
		}
		if w.attempt != from+i || w.d < nominal/2 || w.d > nominal {
			t.Errorf("wait %d = attempt %d of %s, want attempt %d of %s to %s (all: %+v)", i, w.attempt, w.d, from+i, nominal/2, nominal, waits)
		}
	}
}

// The backoff bounds of the fakes that startGrowing starts.
const growMin, growMax = 10 * time.Millisecond, 80 * time.Millisecond

// startGrowing starts the fake upstream with cfg and a backoff from growMin
// to growMax, and records the waits it chooses.
func startGrowing(t *testing.T, cfg Config) (*Upstream, *testLogs, *waitRecorder) {
	t.Helper()
	waits := &waitRecorder{}
	cfg.RestartBackoffMin, cfg.RestartBackoffMax = growMin, growMax
	u, logs := startFake(t, cfg, Options{waited: waits.record})
	return u, logs, waits
}

// A child that was ready for longer than StableAfter and is killed is
// restarted at once, every time: no backoff wait is chosen.
func TestUpstreamStableChildRestartsAtOnce(t *testing.T) {
	var waits waitRecorder
	u, logs := startFake(t, Config{
		StableAfter: time.Nanosecond, // every ready connection has run "long enough"
		// Were a backoff chosen, it would be long and recorded.
		RestartBackoffMin: 10 * time.Second, RestartBackoffMax: 10 * time.Second,
	}, Options{waited: waits.record})
	waitReady(t, u)
	pids := []int{childPID(t, u)}
	for i := 1; i <= 3; i++ {
		if err := syscall.Kill(pids[len(pids)-1], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, fmt.Sprintf("restart %d", i), func() bool {
			st := u.Status()
			return st.Ready && st.Restarts == i
		})
		pid := childPID(t, u)
		for _, p := range pids {
			if p == pid {
				t.Fatalf("restart %d: pid %d again", i, pid)
			}
		}
		pids = append(pids, pid)
	}
	if got := waits.of("restart"); len(got) != 0 {
		t.Errorf("backoff waits chosen for a stable child: %+v", got)
	}
	if n := strings.Count(logs.String(), "restart_at_once=true"); n != 3 {
		t.Errorf("%d losses logged as restarted at once, want 3:\n%s", n, logs)
	}
	if n := strings.Count(logs.String(), "upstream child started"); n != 4 {
		t.Errorf("%d children started, want 4", n)
	}
}

// A child that dies at start is restarted after waits that grow: 10, 20,
// 40, 80, 80… ms (each jittered), not in a tight loop.
func TestUpstreamChildDyingAtStartBacksOff(t *testing.T) {
	u, _, waits := startGrowing(t, Config{Env: []string{fakeExitAtStart + "=1"}})
	eventually(t, 20*time.Second, "6 restart waits", func() bool { return len(waits.of("restart")) >= 6 })
	checkGrowing(t, waits.of("restart")[:6], 0, growMin, growMax)
	if u.Ready() {
		t.Error("ready")
	}
}

// A child that crashes soon after it is ready (within StableAfter) backs
// off as one that dies at start.
func TestUpstreamChildCrashingSoonAfterReadyBacksOff(t *testing.T) {
	u, _, waits := startGrowing(t, Config{StableAfter: time.Hour})
	for i := 1; i <= 4; i++ {
		waitReady(t, u)
		_, _ = callTool(t, u, "crash", "")
		eventually(t, 10*time.Second, fmt.Sprintf("restart wait %d", i), func() bool { return len(waits.of("restart")) == i })
	}
	checkGrowing(t, waits.of("restart"), 0, growMin, growMax)
}

// A tools/list that keeps failing is tried again after growing waits, and
// the waits start over after a success.
func TestUpstreamToolsListFailingBacksOff(t *testing.T) {
	u, logs, waits := startGrowing(t, Config{Env: []string{fakeBadList + "=1"}})
	waitReady(t, u)
	eventually(t, 20*time.Second, "6 tools/list waits", func() bool { return len(waits.of("tools/list")) >= 6 })
	checkGrowing(t, waits.of("tools/list")[:6], 0, growMin, growMax)
	if u.Tools() != nil {
		t.Errorf("tools listed: %s", u.Tools())
	}
	logs.waitLog(t, "tools/list failed; will retry", time.Second)

	// The list is fixed: it is read, and the next failure starts over.
	if _, err := callTool(t, u, "list_ok", `{}`); err != nil {
		t.Fatal(err)
	}
	waitTools(t, u, 4)
	before := len(waits.of("tools/list"))
	if _, err := callTool(t, u, "list_bad", `{}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a new tools/list failure", func() bool { return len(waits.of("tools/list")) > before+1 })
	all := waits.of("tools/list")
	// The waits after the success (a retry may have been pending when it came).
	var after []waitRecord
	for i := before; i < len(all); i++ {
		if all[i].attempt == 0 {
			after = all[i:]
			break
		}
	}
	if len(after) < 2 {
		t.Fatalf("waits after the list was fixed and broken again: %+v", all[before:])
	}
	checkGrowing(t, after[:2], 0, growMin, growMax)
	if st := u.Status(); !st.Ready || st.Restarts != 0 {
		t.Errorf("a failing tools/list restarted the child: %+v", st)
	}
	if got := waits.of("restart"); len(got) != 0 {
		t.Errorf("restart waits: %+v", got)
	}
}
