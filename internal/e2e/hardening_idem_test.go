//go:build e2e

package e2e

// End-to-end tests of issue 9's OTC-front hardening through the built
// binary (`mcpotc sample-otc`, which serves through the same otc.Handler as
// serve-otc): oversized call_ids are refused without growing memory, and
// the browser protection (Host/Origin, JSON content type, --allowed-host).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpotc/mcpotc/internal/conntest"
)

// idemE2EVmRSS reads a process's resident set size in KiB.
func idemE2EVmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

var idemE2EJSON = map[string]string{"Content-Type": "application/json", "OXP-Version": "1.0"}

// TestE2EHardeningIdemLongCallID: 300 calls with a 2 MiB call_id are each
// a 400 that does not echo it, nothing is kept, and the server's RSS stays
// flat (growth under 64 MiB, where keeping them would take 600 MiB).
func TestE2EHardeningIdemLongCallID(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port := freePort(t)
	p := startProcess(t, ctx, buildMcpotc(t), []string{"sample-otc", "--listen", "127.0.0.1:" + strconv.Itoa(port), "--log-level", "warn"}, nil)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p.waitHTTP(t, base+"/health", 30*time.Second)
	url := base + "/tools/call"

	// Warm up: buffers, pools and the idempotency cache in use.
	long := strings.Repeat("x", 2<<20)
	for i := 0; i < 20; i++ {
		status, _, data, err := conntest.Post(ctx, url, idemE2EJSON, []byte(fmt.Sprintf(`{"tool_id":"Calculator.Add","call_id":"warm-%d","input":{"a":%d,"b":1}}`, i, i)))
		if err != nil || status != 200 {
			t.Fatalf("warm-up call: %d %s %v", status, data, err)
		}
	}
	// longCalls sends n calls with distinct 2 MiB call_ids, 4 at a time.
	longCalls := func(first, n int) {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		jobs := make(chan int)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range jobs {
					// Each call_id distinct: a cache that kept them would grow.
					id := strconv.Itoa(i) + long[len(strconv.Itoa(i)):]
					body := []byte(`{"tool_id":"Calculator.Add","call_id":"` + id + `","input":{"a":1,"b":1}}`)
					status, _, data, err := conntest.Post(ctx, url, idemE2EJSON, body)
					switch {
					case err != nil:
						errs <- err
					case status != 400:
						errs <- fmt.Errorf("call %d: status %d, want 400: %.300s", i, status, data)
					case len(data) > 4096 || !bytes.Contains(data, []byte("at most 256")):
						errs <- fmt.Errorf("call %d: 400 body (%d bytes) %.300s; want a short body naming the bound", i, len(data), data)
					}
				}
			}()
		}
		for i := first; i < first+n; i++ {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	// Warm up with the same load, so that the heap has grown to what
	// four 2 MiB requests at once need; then 300 more must not add to it.
	longCalls(0, 20)
	before := idemE2EVmRSS(t, p.Pid())
	longCalls(1000, 300)
	after := idemE2EVmRSS(t, p.Pid())
	t.Logf("sample-otc VmRSS: %d KiB before, %d KiB after 300 calls with a 2 MiB call_id", before, after)
	if growth := after - before; growth > 64<<10 {
		t.Errorf("RSS grew by %d KiB (> 64 MiB) over 300 refused calls", growth)
	}
	// The server still serves, and a normal call_id is still kept.
	for i := 0; i < 2; i++ {
		status, _, data, err := conntest.Post(ctx, url, idemE2EJSON, []byte(`{"tool_id":"Calculator.Add","call_id":"after","input":{"a":2,"b":3}}`))
		var got struct {
			Value struct {
				Sum float64 `json:"sum"`
			} `json:"value"`
		}
		if err != nil || status != 200 || json.Unmarshal(data, &got) != nil || got.Value.Sum != 5 {
			t.Fatalf("call after the long ones: %d %s %v", status, data, err)
		}
	}
}

// TestE2EHardeningIdemBrowserProtection: on its loopback listener,
// sample-otc refuses a foreign Host or Origin (403) and a call without a
// JSON content type (415); --allowed-host admits a proxy's name.
func TestE2EHardeningIdemBrowserProtection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	port := freePort(t)
	p := startProcess(t, ctx, buildMcpotc(t), []string{"sample-otc", "--listen", "127.0.0.1:" + strconv.Itoa(port),
		"--allowed-host", "tools.example.com", "--allowed-host", "other.example"}, nil)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p.waitHTTP(t, base+"/health", 30*time.Second)
	body := []byte(`{"tool_id":"Calculator.Add","input":{"a":2,"b":3}}`)
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{"OXP-Version": "1.0"}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	for _, tt := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"local", with(map[string]string{"Content-Type": "application/json"}), 200},
		{"localhost origin", with(map[string]string{"Content-Type": "application/json", "Origin": "http://localhost:5173"}), 200},
		{"allowed host", with(map[string]string{"Content-Type": "application/json", "Host": "tools.example.com", "Origin": "https://tools.example.com"}), 200},
		{"second allowed host", with(map[string]string{"Content-Type": "application/json", "Host": "other.example:8080"}), 200},
		{"foreign host", with(map[string]string{"Content-Type": "application/json", "Host": "attacker.example"}), 403},
		{"foreign origin", with(map[string]string{"Content-Type": "application/json", "Origin": "https://attacker.example"}), 403},
		{"no content type", with(nil), 415},
		{"text/plain", with(map[string]string{"Content-Type": "text/plain"}), 415},
		{"form", with(map[string]string{"Content-Type": "application/x-www-form-urlencoded"}), 415},
	} {
		status, _, data, err := conntest.Post(ctx, base+"/tools/call", tt.header, body)
		if err != nil || status != tt.want {
			t.Errorf("%s: %d %s %v; want %d", tt.name, status, data, err, tt.want)
			continue
		}
		var got map[string]any
		if err := json.Unmarshal(data, &got); err != nil {
			t.Errorf("%s: body %q is not JSON", tt.name, data)
		}
		if v, _ := got["value"].(map[string]any); tt.want == 200 && (v == nil || v["sum"] != 5.0) {
			t.Errorf("%s: %s", tt.name, data)
		}
	}
}

// TestE2EHardeningIdemServeOTC: through serve-otc (the built-in sample MCP
// server): a client that gives up on a slow call at 0.3 s and retries with
// the same call_id gets the first run's answer (the log shows one run and
// one replay), and a call_id used with the API key is a 400 for a JWT
// caller, and for another JWT sub.
func TestE2EHardeningIdemServeOTC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	port := freePort(t)
	secret := "jwt-secret-for-e2e"
	p := startProcess(t, ctx, buildMcpotc(t), []string{"serve-otc", "--listen", "127.0.0.1:" + strconv.Itoa(port),
		"--api-key-env", "IDEM_E2E_KEY", "--jwt-secret-env", "IDEM_E2E_JWT"},
		[]string{"IDEM_E2E_KEY=the-api-key", "IDEM_E2E_JWT=" + secret})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p.waitHTTP(t, base+"/health", 30*time.Second)
	url := base + "/tools/call"
	withKey := map[string]string{"Content-Type": "application/json", "OXP-Version": "1.0", "OXP-API-Key": "the-api-key"}
	jwtFor := func(sub string) map[string]string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{"Content-Type": "application/json", "OXP-Version": "1.0", "Authorization": "Bearer " + tok}
	}

	// Disconnect, then retry.
	slow := []byte(`{"tool_id":"Sample.slow","call_id":"e2e-slow-1","input":{"seconds":1.5,"steps":1}}`)
	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, _, _, err := conntest.Post(cctx, url, withKey, slow)
	ccancel()
	if err == nil {
		t.Fatal("the slow call was answered within 0.3 s; the client must give up first")
	}
	status, _, data, err := conntest.Post(ctx, url, withKey, slow)
	if err != nil || status != 200 || !bytes.Contains(data, []byte(`"success":true`)) {
		t.Fatalf("retry: %d %s %v", status, data, err)
	}
	var lines []map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for {
		lines = lines[:0]
		for _, l := range strings.Split(p.Stderr(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["message"] == "call" && m["call_id"] == "e2e-slow-1" {
				lines = append(lines, m)
			}
		}
		if len(lines) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	runs, replays := 0, 0
	for _, m := range lines {
		if m["replayed"] == true {
			replays++
		} else {
			runs++
		}
	}
	if runs != 1 || replays != 1 {
		t.Errorf("call e2e-slow-1: %d runs and %d replays in the log, want 1 and 1:\n%v", runs, replays, lines)
	}

	// Another caller reusing a call_id.
	add := []byte(`{"tool_id":"Sample.add","call_id":"e2e-shared","input":{"a":1,"b":2}}`)
	if status, _, data, err := conntest.Post(ctx, url, withKey, add); err != nil || status != 200 {
		t.Fatalf("API key caller: %d %s %v", status, data, err)
	}
	for _, sub := range []string{"alice", "bob"} {
		status, _, data, err := conntest.Post(ctx, url, jwtFor(sub), add)
		if err != nil || status != 400 || !bytes.Contains(data, []byte("already used")) {
			t.Errorf("JWT %s reusing the API key caller's call_id: %d %s %v; want 400", sub, status, data, err)
		}
	}
	add2 := []byte(`{"tool_id":"Sample.add","call_id":"e2e-alice","input":{"a":1,"b":2}}`)
	if status, _, data, _ := conntest.Post(ctx, url, jwtFor("alice"), add2); status != 200 {
		t.Fatalf("alice: %d %s", status, data)
	}
	if status, _, data, _ := conntest.Post(ctx, url, jwtFor("bob"), add2); status != 400 {
		t.Errorf("bob reusing alice's call_id: %d %s; want 400", status, data)
	}
}
