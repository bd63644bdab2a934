//go:build e2e

package e2e

// Reload without restart (issue 29) through the built binary: a reload
// under 64-way load fails no call and serves the new tool list within a
// second, on both fronts; a call in flight on a server the reload removes
// finishes; a configuration with problems is refused with the start's own
// message, and the front keeps serving the old one.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// reloadLoad is the concurrency of the load a reload runs under.
const reloadLoad = 64

// writeConfig writes text to path through a rename, as editors and
// configuration managers replace a file.
func writeConfig(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// loadClient is an HTTP client for reloadLoad callers: its connections
// are kept for them.
func loadClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 2*reloadLoad, 2*reloadLoad
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func postJSON(c *http.Client, url, body string, header map[string]string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), err
}

// load runs call on reloadLoad goroutines until stop is closed; failures
// are kept (the first 20) and counted.
type load struct {
	calls, failed atomic.Int64
	mu            sync.Mutex
	first         []string
	wg            sync.WaitGroup
	stop          chan struct{}
}

func startLoad(call func() error) *load {
	l := &load{stop: make(chan struct{})}
	for range reloadLoad {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				err := call()
				l.calls.Add(1)
				if err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					if len(l.first) < 20 {
						l.first = append(l.first, err.Error())
					}
					l.mu.Unlock()
				}
			}
		})
	}
	return l
}

func (l *load) end() (calls, failed int64, first []string) {
	close(l.stop)
	l.wg.Wait()
	return l.calls.Load(), l.failed.Load(), l.first
}

// otcIDs are the sorted tool ids of serve-otc's GET /tools.
func otcIDs(t *testing.T, c *http.Client, base string) []string {
	t.Helper()
	resp, err := c.Get(base + "/tools")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatalf("GET /tools: %d %v", resp.StatusCode, err)
	}
	var ids []string
	for _, it := range list.Items {
		ids = append(ids, it.ID)
	}
	slices.Sort(ids)
	return ids
}

func sampleKit(kit string) []string {
	return []string{kit + ".add@1.0.0", kit + ".echo@1.0.0", kit + ".fail@1.0.0", kit + ".slow@1.0.0"}
}

// waitIDs polls GET /tools until it lists want, and returns how long that
// took from since.
func waitOTCIDs(t *testing.T, c *http.Client, base string, since time.Time, timeout time.Duration, want []string) time.Duration {
	t.Helper()
	for {
		got := otcIDs(t, c, base)
		if slices.Equal(got, want) {
			return time.Since(since)
		}
		if time.Since(since) > timeout {
			t.Fatalf("GET /tools lists %q, want %q", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestE2EReloadUnderLoadOTCFront: serve-otc with two stdio MCP servers
// (One, Two) under 64 callers of One.add, and a slow call in flight on
// Two. SIGHUP with a file that changes One's command line (a new child),
// removes Two and adds Three: no call fails, the slow call on the removed
// server succeeds, GET /tools lists One and Three within a second, and the
// replaced children are stopped.
func TestE2EReloadUnderLoadOTCFront(t *testing.T) {
	bin := buildMcpotc(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "serve-otc.json")
	server := func(kit string, env map[string]string) map[string]any {
		s := map[string]any{"command": bin, "args": []string{"sample-mcp"}, "toolkit": kit}
		if env != nil {
			s["env"] = env
		}
		return s
	}
	config := func(servers map[string]any) string {
		b, _ := json.Marshal(map[string]any{"mcpServers": servers})
		return string(b)
	}
	writeConfig(t, cfg, config(map[string]any{"one": server("One", nil), "two": server("Two", nil)}))
	br := otcfStart(t, []string{"--config", cfg, "--log-format", "json"}, nil)
	c := loadClient()
	waitOTCIDs(t, c, br.base, time.Now(), 30*time.Second, append(sampleKit("One"), sampleKit("Two")...))

	before := childPIDs(t, br.p.Pid())
	if len(before) != 2 {
		t.Fatalf("the bridge's children at start: %v, want One's and Two's", before)
	}
	slow := make(chan string, 1)
	go func() {
		code, body, err := postJSON(c, br.base+"/tools/call", `{"tool_id":"Two.slow","input":{"seconds":2}}`, nil)
		slow <- fmt.Sprintf("%d %s %v", code, body, err)
	}()
	l := startLoad(func() error {
		code, body, err := postJSON(c, br.base+"/tools/call", `{"tool_id":"One.add","input":{"a":2,"b":3}}`, nil)
		if err != nil || code != http.StatusOK || !strings.Contains(body, `"success":true`) {
			return fmt.Errorf("%d %s %v", code, truncate(body, 300), err)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)

	writeConfig(t, cfg, config(map[string]any{"one": server("One", map[string]string{"RELOADED": "1"}), "three": server("Three", nil)}))
	hup := time.Now()
	if err := syscall.Kill(br.p.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// How long it takes is a figure (logged), not a pass mark: a loaded
	// machine starts the new children slower.
	took := waitOTCIDs(t, c, br.base, hup, 30*time.Second, append(sampleKit("One"), sampleKit("Three")...))
	time.Sleep(time.Second) // the load goes on on the new configuration
	calls, failed, first := l.end()
	if failed > 0 || calls == 0 {
		t.Errorf("%d of %d calls failed across the reload: %q", failed, calls, first)
	}
	if got := <-slow; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"success":true`) {
		t.Errorf("the call in flight on the removed server: %s", got)
	}
	// The children of One's old command line and of Two are stopped; those
	// of One's new one and of Three run.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		now := childPIDs(t, br.p.Pid())
		if len(now) == 2 && !slices.Contains(now, before[0]) && !slices.Contains(now, before[1]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bridge's children: %v, want two others than %v", now, before)
		}
	}
	t.Logf("serve-otc: %d callers, %d calls, %d failed; the new tool list served %v after SIGHUP (a new child for One, Three started)",
		reloadLoad, calls, failed, took.Round(time.Millisecond))
}

// childPIDs are the processes whose parent is pid (Linux: /proc).
func childPIDs(t *testing.T, pid int) []int {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue // it exited meanwhile
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		i := strings.LastIndex(string(b), ") ")
		if i < 0 {
			continue
		}
		rest := string(b)[i+2:]
		var state string
		var child, ppid int
		if _, err := fmt.Sscanf(rest, "%s %d", &state, &ppid); err != nil || ppid != pid || state == "Z" {
			continue
		}
		fmt.Sscanf(filepath.Base(filepath.Dir(st)), "%d", &child)
		out = append(out, child)
	}
	slices.Sort(out)
	return out
}

// TestE2EReloadRefusedOTCFront: a file with problems (a misspelt key, a
// value of the wrong type) sent by SIGHUP is refused: the log line's
// error is the message a start with that file prints, and the front serves
// its old tools and answers calls; fixing the file and SIGHUP again applies
// it.
func TestE2EReloadRefusedOTCFront(t *testing.T) {
	bin := buildMcpotc(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "serve-otc.json")
	good := fmt.Sprintf(`{"mcpServers":{"one":{"command":%q,"args":["sample-mcp"],"toolkit":"One"}}}`, bin)
	bad := fmt.Sprintf(`{"mcpServers":{"one":{"command":%q,"args":["sample-mcp"],"toolkit":"One","alow":["add"]},"two":{"command":%q,"args":"sample-mcp"}}}`, bin, bin)
	writeConfig(t, cfg, good)
	br := otcfStart(t, []string{"--config", cfg, "--log-format", "json"}, nil)
	c := loadClient()
	waitOTCIDs(t, c, br.base, time.Now(), 30*time.Second, sampleKit("One"))

	// What a start with the bad file says.
	badPath := filepath.Join(dir, "bad.json")
	writeConfig(t, badPath, bad)
	out, err := exec.Command(bin, "serve-otc", "--listen", "127.0.0.1:0", "--config", badPath).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("a start with the bad file: %v %s", err, out)
	}
	want := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(string(out), "mcpotc serve-otc: "), "\n"), badPath, cfg)

	writeConfig(t, cfg, bad)
	if err := syscall.Kill(br.p.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	refusal := otcfWaitLog(t, br.p, 10*time.Second, "the refusal", func(m map[string]any) bool {
		return m["message"] == "configuration reload refused: the running configuration is kept"
	})
	if refusal["error"] != want || refusal["level"] != "error" {
		t.Errorf("the refusal logged:\n%v\na start prints:\n%v", refusal["error"], want)
	}
	if !strings.Contains(want, "2 problems") || !strings.Contains(want, "alow") || !strings.Contains(want, "two.args: want a list") {
		t.Fatalf("the start's message does not name both problems: %s", want)
	}
	if got := otcIDs(t, c, br.base); !slices.Equal(got, sampleKit("One")) {
		t.Errorf("tools after the refusal: %q", got)
	}
	if code, body, err := postJSON(c, br.base+"/tools/call", `{"tool_id":"One.echo","input":{"message":"still here"}}`, nil); code != 200 || !strings.Contains(body, "still here") {
		t.Errorf("a call after the refusal: %d %s %v", code, body, err)
	}

	writeConfig(t, cfg, strings.Replace(good, `"toolkit":"One"`, `"toolkit":"One","allow":["add"]`, 1))
	hup := time.Now()
	if err := syscall.Kill(br.p.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	took := waitOTCIDs(t, c, br.base, hup, 5*time.Second, []string{"One.add@1.0.0"})
	t.Logf("refused with the start's message (%d problems); the fixed file applied %v after SIGHUP", strings.Count(want, "\n"), took.Round(time.Millisecond))
}

// TestE2EReloadUnderLoadMCPFront: serve-mcp (streamable HTTP) with
// --watch-config over two OTC servers — sample-otc (prefix a_) and a slow
// one — under 64 concurrent tools/call of a_Calculator_Add in one session,
// and a slow call in flight. The file changes: the slow server goes,
// another sample-otc (prefix b_) comes. No call fails, the slow call
// succeeds, and tools/list names the b_ tools within a second of the
// write.
func TestE2EReloadUnderLoadMCPFront(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	portA, portB := freePort(t), freePort(t)
	startSampleOTC(t, ctx, portA)
	startSampleOTC(t, ctx, portB)
	slowUp := slowOTC(t, 2*time.Second)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "serve-mcp.json")
	upstream := func(name, url, prefix string) map[string]any {
		return map[string]any{"name": name, "url": url, "prefix": prefix}
	}
	config := func(ups ...any) string {
		b, _ := json.Marshal(map[string]any{"upstreams": ups})
		return string(b)
	}
	urlA, urlB := fmt.Sprintf("http://127.0.0.1:%d", portA), fmt.Sprintf("http://127.0.0.1:%d", portB)
	writeConfig(t, cfg, config(upstream("a", urlA, "a_"), upstream("slow", slowUp.URL, "")))
	br := startBridge(t, ctx, "http", []string{"--config", cfg, "--watch-config", "--log-format", "json"}, nil)
	cs := br.connect(t, ctx, clientOpts{protocol: "2025-11-25"})
	names := toolNames(listTools(t, ctx, cs))
	if !slices.Contains(names, "a_Calculator_Add") || !slices.Contains(names, "Slow_Wait") {
		t.Fatalf("tools at start: %v", names)
	}

	slow := make(chan string, 1)
	go func() {
		res, err := callTool(t, ctx, cs, "Slow_Wait", map[string]any{"tag": "in-flight"})
		if err != nil {
			slow <- err.Error()
			return
		}
		slow <- fmt.Sprintf("isError=%v %s", res.IsError, textOf(res))
	}()
	waitTag(t, slowUp.started, "the slow call", 10*time.Second)
	l := startLoad(func() error {
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		defer ccancel()
		res, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: "a_Calculator_Add", Arguments: map[string]any{"a": 2, "b": 3}})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("isError: %s", textOf(res))
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)

	writeConfig(t, cfg, config(upstream("a", urlA, "a_"), upstream("b", urlB, "b_")))
	written := time.Now()
	var took time.Duration
	for {
		names = toolNames(listTools(t, ctx, cs))
		if slices.Contains(names, "b_Calculator_Add") && !slices.Contains(names, "Slow_Wait") {
			took = time.Since(written)
			break
		}
		if time.Since(written) > 30*time.Second {
			t.Fatalf("tools after the file changed: %v", names)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Second)
	calls, failed, first := l.end()
	if failed > 0 || calls == 0 {
		t.Errorf("%d of %d calls failed across the reload: %q", failed, calls, first)
	}
	if got := <-slow; got != `isError=false {"slept_ms":2000,"tag":"in-flight"}` {
		t.Errorf("the call in flight on the removed upstream: %s", got)
	}
	t.Logf("serve-mcp --watch-config: %d callers, %d calls, %d failed; the new tool list served %v after the file was written",
		reloadLoad, calls, failed, took.Round(time.Millisecond))
}
