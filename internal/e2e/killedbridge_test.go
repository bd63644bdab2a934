//go:build e2e && linux

package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestE2EOTCFrontKilledBridgeEndsChildGroup: serve-otc runs a stdio child
// `sh -c 'sleep 600 & exec mcpotc sample-mcp'`. The child serves calls;
// after SIGKILL of the bridge (nothing in it runs) the child is gone and so
// is the background sleep it left (the group watchdog, mcp/upstream
// watchdog_linux.go), within a bounded wait polling /proc.
func TestE2EOTCFrontKilledBridgeEndsChildGroup(t *testing.T) {
	t.Parallel()
	bin := buildMcpotc(t)
	b := otcfStart(t, []string{"--name", "bg", "--", "/bin/sh", "-c",
		`sleep 600 & echo "otcE2E background: $!" >&2; exec "$0" sample-mcp`, bin}, nil)
	b.waitHealthy(t, otcfStartTimeout)
	b.waitTools(t, []string{"bg.add@1.0.0"})
	line := otcfWaitLog(t, b.p, 10*time.Second, "the child's background pid", func(m map[string]any) bool {
		return m["message"] == "child stderr" && regexp.MustCompile(`^otcE2E background: \d+$`).MatchString(fmt.Sprint(m["line"]))
	})
	gcPid, _ := strconv.Atoi(regexp.MustCompile(`\d+$`).FindString(fmt.Sprint(line["line"])))
	// The honest flow: the child answers.
	b.expect(t, otcfDialects[1], map[string]any{"tool_id": "bg.add", "input": map[string]any{"a": 2, "b": 3}}, nil, 200, otcfOK(map[string]any{"sum": 5}))

	kids := otcfChildren(b.p.Pid())
	if len(kids) != 1 {
		t.Fatalf("the bridge's children: %v, want one (the child)", kids)
	}
	child := kids[0]
	gc, ok := otcfReadProc(gcPid)
	if !ok || !gc.alive() || gc.PGid != child.PGid {
		t.Fatalf("the background sleep %d: %v (alive %v), want alive in the child's group %d", gcPid, gc, gc.alive(), child.PGid)
	}

	if err := syscall.Kill(b.p.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := b.p.Wait(10 * time.Second); err == nil {
		t.Errorf("serve-otc exited 0 after SIGKILL")
	}
	deadline := time.Now().Add(10 * time.Second)
	for (child.alive() || gc.alive()) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range []otcfProc{child, gc} {
		if p.alive() {
			t.Errorf("alive 10 s after SIGKILL of the bridge: %v", p)
			_ = syscall.Kill(p.Pid, syscall.SIGKILL)
		}
	}
	if groupAlive(child.PGid) {
		t.Errorf("a process of the child's group %d is alive after the bridge was killed", child.PGid)
		_ = syscall.Kill(-child.PGid, syscall.SIGKILL)
	}
}
