// Package redistest starts a real redis-server (the Debian package
// redis-server) for tests: on a free loopback port, without persistence,
// stopped when the test ends.
package redistest

import (
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Start starts redis-server and returns its redis:// URL once it answers
// PING. It skips the test when redis-server is not installed.
func Start(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (Debian package redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := c.Ping(t.Context()).Err(); err == nil {
			return "redis://127.0.0.1:" + port + "/0"
		} else if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %s does not answer PING: %v", port, err)
		}
	}
}
