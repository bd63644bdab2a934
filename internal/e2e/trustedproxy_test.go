//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTrustedProxyHAProxy: serve-otc behind a real HAProxy (option
// forwardfor) with --trusted-proxy 127.0.0.1 and a limit of one call an
// hour per caller that did not authenticate. Clients come from their own
// loopback addresses (127.0.0.2 …). Honest: two clients behind the proxy
// have a call each; the audit log names each by its own address. Attacks:
// a client that writes another address in X-Forwarded-For through the
// proxy is still itself (HAProxy adds its address after), and a client
// that reaches serve-otc directly, not being a trusted proxy, has its
// X-Forwarded-For ignored; neither gets a second call.
func TestTrustedProxyHAProxy(t *testing.T) {
	haproxyBin, err := exec.LookPath("haproxy")
	if err != nil {
		missingPeer(t, "haproxy is not installed (Debian package haproxy; .ci/run installs it)")
	}
	bin := buildMcpotc(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "serve-otc.json")
	cfg := `{"mcpServers": {"sample": {"command": "` + bin + `", "args": ["sample-mcp"], "toolkit": "Sample"}},
		"rate_limits": {"per_principal": {"requests": 1, "per": "1h"}}}`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	auditPath := filepath.Join(dir, "audit.log")
	port := strconv.Itoa(freePort(t))
	backend := "127.0.0.1:" + port
	p := startProcess(t, context.Background(), bin, []string{"serve-otc", "--listen", backend, "--config", cfgPath,
		"--trusted-proxy", "127.0.0.1", "--allowed-host", "127.0.0.1", "--audit-log", auditPath}, nil)
	p.waitHTTP(t, "http://"+backend+"/ready", 60*time.Second)

	front := "127.0.0.1:" + strconv.Itoa(freePort(t))
	haCfg := `defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s

frontend otc
    bind ` + front + `
    option forwardfor
    default_backend otc

backend otc
    server a ` + backend + ` source 127.0.0.1
`
	haPath := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(haPath, []byte(haCfg), 0o600); err != nil {
		t.Fatal(err)
	}
	startProcess(t, context.Background(), haproxyBin, []string{"-f", haPath, "-db"}, nil)

	// from calls addr (host:port) from the loopback address src.
	call := func(src, addr, xff string) int {
		t.Helper()
		tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}).DialContext}
		defer tr.CloseIdleConnections()
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/tools/call",
			strings.NewReader(`{"tool_id":"Sample.echo","input":{"message":"hi"}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "127.0.0.1"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("OXP-Version", "1.0")
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("a call from %s to %s: %v", src, addr, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// HAProxy up: its listener answers (a 503 until its backend is seen).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", front, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy does not listen on %s: %v", front, err)
		}
	}
	for _, tc := range []struct {
		what, src, addr, xff string
		want                 int
	}{
		{"client 127.0.0.2 through HAProxy", "127.0.0.2", front, "", 200},
		{"client 127.0.0.3 through HAProxy", "127.0.0.3", front, "", 200},
		{"client 127.0.0.2 again", "127.0.0.2", front, "", 429},
		{"client 127.0.0.2 naming 198.51.100.7 in X-Forwarded-For", "127.0.0.2", front, "198.51.100.7", 429},
		{"client 127.0.0.4 directly", "127.0.0.4", backend, "198.51.100.8", 200},
		{"client 127.0.0.4 directly, naming another address", "127.0.0.4", backend, "198.51.100.9", 429},
	} {
		if got := call(tc.src, tc.addr, tc.xff); got != tc.want {
			t.Errorf("%s: HTTP %d, want %d", tc.what, got, tc.want)
		}
	}

	// The audit log: each call under its client's own address.
	var principals []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		data, _ := os.ReadFile(auditPath)
		principals = principals[:0]
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["audit"] == "call" {
				principals = append(principals, m["principal"].(string)+" "+m["outcome"].(string))
			}
		}
		if len(principals) >= 6 {
			break
		}
	}
	want := []string{"addr:127.0.0.2 ok", "addr:127.0.0.3 ok", "addr:127.0.0.2 rate_limited", "addr:127.0.0.2 rate_limited",
		"addr:127.0.0.4 ok", "addr:127.0.0.4 rate_limited"}
	if strings.Join(principals, "\n") != strings.Join(want, "\n") {
		t.Errorf("the audit log's calls:\n%s\nwant:\n%s", strings.Join(principals, "\n"), strings.Join(want, "\n"))
	}
	t.Logf("serve-otc behind HAProxy with --trusted-proxy 127.0.0.1: %d calls, each under its client's address; forged X-Forwarded-For through the proxy and from a direct client earned no call", len(want))
}
