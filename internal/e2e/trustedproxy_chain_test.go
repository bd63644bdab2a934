//go:build e2e

package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestE2ETrustedProxyNoChainPeer: serve-mcp (no authentication, an OTC
// upstream with accept_forwarded_context) behind a real HAProxy (option
// forwardfor, connecting from 127.0.0.1) with --trusted-proxy 127.0.0.1
// (issue 34, item 3). The attack: client 127.0.0.2 sends, through the
// proxy, "X-Forwarded-For: 127.0.0.1" and a carrier naming user "victim"
// — the OTC server receives the configured user and the call_id scoped;
// so it does for the same client without the header (nothing the proxy
// relays is the chain peer). The honest chain peer, a process of this
// host connecting directly from 127.0.0.3, still has its carrier's user
// and call_id reach the OTC server as sent.
func TestE2ETrustedProxyNoChainPeer(t *testing.T) {
	haproxyBin, err := exec.LookPath("haproxy")
	if err != nil {
		missingPeer(t, "haproxy is not installed (Debian package haproxy; .ci/run installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	otc := startOTCRecorder(t)
	cfg := serveMCPConfig(t, map[string]any{"url": otc.srv.URL, "user_id": "static", "accept_forwarded_context": true})
	br := startBridge(t, ctx, "http", []string{"--config", cfg, "--stateless", "--trusted-proxy", "127.0.0.1"}, nil)
	u, _ := url.Parse(br.url)
	backend := u.Host
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + backend + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve-mcp is not ready: %v", err)
		}
	}

	front := "127.0.0.1:" + strconv.Itoa(freePort(t))
	dir := t.TempDir()
	haPath := filepath.Join(dir, "haproxy.cfg")
	haCfg := `defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s

frontend mcp
    bind ` + front + `
    option forwardfor
    default_backend mcp

backend mcp
    server a ` + backend + ` source 127.0.0.1
`
	if err := os.WriteFile(haPath, []byte(haCfg), 0o600); err != nil {
		t.Fatal(err)
	}
	startProcess(t, context.Background(), haproxyBin, []string{"-f", haPath, "-db"}, nil)

	carrier := func(callID, user string) string {
		return `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"Me_Who","arguments":{},"_meta":{"mcpotc/otc-request":` +
			`{"call_id":"` + callID + `","context":{"user_id":"` + user + `"}}}}}`
	}
	// post sends body from the loopback address src to addr (host:port).
	post := func(src, addr, xff, body string) (int, string) {
		t.Helper()
		tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}).DialContext}
		defer tr.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = backend
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// HAProxy up: a call through it is answered by serve-mcp.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if status, _ := post("127.0.0.2", front, "", carrier("probe", "")); status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no answer through haproxy")
		}
	}
	for _, tc := range []struct {
		what, src, addr, xff, callID, user, wantUser string
		asIs                                         bool
	}{
		{"client 127.0.0.2 through HAProxy naming 127.0.0.1 in X-Forwarded-For", "127.0.0.2", front, "127.0.0.1", "forged-1", "victim", "static", false},
		{"client 127.0.0.2 through HAProxy", "127.0.0.2", front, "", "forged-2", "victim", "static", false},
		{"the chain peer, directly from 127.0.0.3", "127.0.0.3", backend, "", "chain-1", "user-chain", "user-chain", true},
	} {
		if status, body := post(tc.src, tc.addr, tc.xff, carrier(tc.callID, tc.user)); status != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.what, status, truncate(body, 300))
		}
		got := otc.last(t)
		if got["user_id"] != tc.wantUser || (got["call_id"] == tc.callID) != tc.asIs || !strings.HasSuffix(got["call_id"], "-"+tc.callID) && !tc.asIs {
			t.Errorf("%s (carrier user %q, call_id %q): the OTC server received %v, want user %q, call_id as sent: %t",
				tc.what, tc.user, tc.callID, got, tc.wantUser, tc.asIs)
		}
	}
}
