//go:build e2e

package e2e

// TestScaleOut runs the reference deployment of docs/operations.md, Running
// several replicas: a real redis-server, three serve-otc replicas started
// with its command line and HAProxy with its configuration,
// on ports of its own, in front of one MCP server (the official Go SDK,
// in this process) whose tool counts its executions. It prints its figures
// (calls, executions, errors); .ci/run shows them in the step "scale-out".
//
// redis-server and haproxy are the Debian packages (.ci/run installs them);
// when MCPOTC_E2E or CI is true a missing one fails the test.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpotc/mcpotc/internal/conntest"
)

// scaleCounter is the upstream's record of the "work" tool's runs, by key:
// started, and finished (not cancelled).
type scaleCounter struct {
	mu       sync.Mutex
	started  map[string]int
	finished map[string]int
}

func (c *scaleCounter) get(key string) (started, finished int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started[key], c.finished[key]
}

// scaleUpstream serves an MCP server over streamable HTTP (JSON answers)
// with the tool "work" {key, ms}: it runs ms milliseconds and answers
// "key=KEY run=RANDOM", a value of its own per run, so that two runs never
// give the same answer.
func scaleUpstream(t *testing.T) (url string, c *scaleCounter) {
	c = &scaleCounter{started: map[string]int{}, finished: map[string]int{}}
	type in struct {
		Key string `json:"key"`
		Ms  int    `json:"ms"`
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "scale", Version: "1.0.0"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "work", Description: "Runs ms milliseconds; counts its runs by key."},
		func(ctx context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
			c.mu.Lock()
			c.started[a.Key]++
			c.mu.Unlock()
			select {
			case <-time.After(time.Duration(a.Ms) * time.Millisecond):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			c.mu.Lock()
			c.finished[a.Key]++
			c.mu.Unlock()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "key=" + a.Key + " run=" + rand.Text()}}}, nil, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{JSONResponse: true}))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp", c
}

// startRedis starts redis-server on a free port, without persistence.
func startRedis(t *testing.T) (url string, p *proc) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missingPeer(t, "redis-server is not installed (Debian package redis-server; .ci/run installs it)")
	}
	port := freePort(t)
	p = startProcess(t, context.Background(), bin, []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir()}, nil)
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(p.Stdout(), "Ready to accept connections"); {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not start:\n%s", p.Stdout())
		}
		select {
		case <-p.Done():
			t.Fatalf("redis-server exited:\n%s", p.Stdout())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return "redis://127.0.0.1:" + strconv.Itoa(port) + "/0", p
}

// readmeDeployment reads the "replicas" and "haproxy-cfg" blocks (of
// docs/operations.md; readmeBlocks reads every page):
// the serve-otc and serve-mcp arguments (with $port, the Redis and the
// upstreams' URLs to be replaced) and the HAProxy configuration.
func readmeDeployment(t *testing.T, root string) (otcArgs, mcpArgs []string, haproxyCfg string) {
	t.Helper()
	for _, b := range readmeBlocks(t, root) {
		switch b.name {
		case "replicas":
			for _, line := range strings.Split(b.text, "\n") {
				for _, cmd := range []string{"serve-otc", "serve-mcp"} {
					// The replicas' lines, started on each $port (the
					// block's MCP server at :3000 is one of its own here).
					if _, rest, ok := strings.Cut(line, "mcpotc "+cmd+" "); ok && strings.Contains(rest, "$port") {
						args := append([]string{cmd}, strings.Fields(strings.TrimSuffix(strings.TrimSpace(rest), "&"))...)
						if cmd == "serve-otc" {
							otcArgs = args
						} else {
							mcpArgs = args
						}
					}
				}
			}
		case "haproxy-cfg":
			haproxyCfg = b.text
		}
	}
	if otcArgs == nil || mcpArgs == nil || haproxyCfg == "" {
		t.Fatalf("docs/operations.md: the blocks replicas (with an mcpotc serve-otc and an mcpotc serve-mcp line) and haproxy-cfg are gone")
	}
	return otcArgs, mcpArgs, haproxyCfg
}

// replace applies old→new to s and fails the test when an old is not in
// s: the README changed in a way this test must follow.
func replaceAll(t *testing.T, what, s string, pairs ...string) string {
	t.Helper()
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("docs/operations.md, %s: %q is gone; TestScaleOut replaces it", what, pairs[i])
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	return s
}

type scaleReplica struct {
	p    *proc
	base string
}

// scaleCall is one POST /tools/call of work {key, ms} with call_id key.
type scaleAnswer struct {
	status int
	header http.Header
	body   map[string]any
	err    error
}

func scaleCall(ctx context.Context, base, toolID, callID, key string, ms int) scaleAnswer {
	req := map[string]any{"tool_id": toolID, "input": map[string]any{"key": key, "ms": ms}}
	if callID != "" {
		req["call_id"] = callID
	}
	b, _ := json.Marshal(req)
	status, hdr, raw, err := conntest.Post(ctx, base+"/tools/call", idemE2EJSON, b)
	a := scaleAnswer{status: status, header: hdr, err: err}
	if err == nil {
		if jerr := json.Unmarshal(raw, &a.body); jerr != nil {
			a.err = fmt.Errorf("HTTP %d, not JSON: %s", status, truncate(string(raw), 500))
		}
	}
	return a
}

// value is the tool's answer of a successful call, else "".
func (a scaleAnswer) value() string {
	if a.err != nil || a.status != http.StatusOK || a.body["success"] != true {
		return ""
	}
	v, _ := a.body["value"].(string)
	return v
}

func (a scaleAnswer) String() string {
	if a.err != nil {
		return a.err.Error()
	}
	b, _ := json.Marshal(a.body)
	return fmt.Sprintf("HTTP %d %s", a.status, truncate(string(b), 500))
}

// getJSONOr is GET url: its status, 0 when it fails.
func getJSONOr(url string) (int, map[string]any) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := otcfDo(ctx, http.MethodGet, url, nil, nil)
	if err != nil {
		return 0, nil
	}
	m, _ := r.Body.(map[string]any)
	return r.Status, m
}

func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := otcfDo(ctx, http.MethodGet, url, nil, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	m, _ := r.Body.(map[string]any)
	return r.Status, m
}

func TestScaleOut(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	haproxyBin, err := exec.LookPath("haproxy")
	if err != nil {
		missingPeer(t, "haproxy is not installed (Debian package haproxy; .ci/run installs it)")
	}
	otcArgs, mcpArgs, cfg := readmeDeployment(t, root)
	redisURL, redisProc := startRedis(t)
	upURL, count := scaleUpstream(t)
	bin := buildMcpotc(t)
	otcLB, mcpLB := "127.0.0.1:"+strconv.Itoa(freePort(t)), "127.0.0.1:"+strconv.Itoa(freePort(t))

	// The serve-otc replicas, as the README starts them. --call-timeout 3s
	// (a test setting) makes a dead replica's claim expire within 13 s:
	// the call timeout, 5 s of detached-call grace, 5 s of lease margin.
	var reps []*scaleReplica
	var ports []string
	startOTC := func(port string) *scaleReplica {
		var args []string
		for _, a := range otcArgs {
			args = append(args, strings.NewReplacer("$port", port, "redis://127.0.0.1:6379/0", redisURL, "http://127.0.0.1:3000/mcp", upURL).Replace(a))
		}
		args = append(args, "--call-timeout", "3s")
		if !strings.Contains(strings.Join(args, " "), redisURL) || !strings.Contains(strings.Join(args, " "), upURL) {
			t.Fatalf("docs/operations.md, replicas: the serve-otc line no longer names redis://127.0.0.1:6379/0 and http://127.0.0.1:3000/mcp: %q", otcArgs)
		}
		return &scaleReplica{p: startProcess(t, context.Background(), bin, args, nil), base: "http://127.0.0.1:" + port}
	}
	for range 3 {
		port := strconv.Itoa(freePort(t))
		ports = append(ports, port)
		reps = append(reps, startOTC(port))
	}
	// The serve-mcp replicas, as the README starts them, with a session
	// key of the test's own, in front of the OTC replicas' balancer.
	sessionKey := "MCPOTC_SESSION_KEY=" + rand.Text() + rand.Text()
	var mcpReps []*scaleReplica
	var mcpPorts []string
	startMCP := func(port string) *scaleReplica {
		var args []string
		for _, a := range mcpArgs {
			args = append(args, strings.NewReplacer("$port", port, "http://127.0.0.1:8080", "http://"+otcLB).Replace(a))
		}
		if j := strings.Join(args, " "); !strings.Contains(j, "http://"+otcLB) || !strings.Contains(j, "--session-key-env MCPOTC_SESSION_KEY") {
			t.Fatalf("docs/operations.md, replicas: the serve-mcp line no longer names http://127.0.0.1:8080 and --session-key-env MCPOTC_SESSION_KEY: %q", mcpArgs)
		}
		return &scaleReplica{p: startProcess(t, context.Background(), bin, append(args, "--log-format", "json"), []string{sessionKey}),
			base: "http://127.0.0.1:" + port}
	}
	for range 3 {
		port := strconv.Itoa(freePort(t))
		mcpPorts = append(mcpPorts, port)
		mcpReps = append(mcpReps, startMCP(port))
	}
	cfg = replaceAll(t, "haproxy-cfg", cfg, "127.0.0.1:8080", otcLB, "127.0.0.1:8090", mcpLB,
		"127.0.0.1:8181", "127.0.0.1:"+ports[0], "127.0.0.1:8182", "127.0.0.1:"+ports[1], "127.0.0.1:8183", "127.0.0.1:"+ports[2],
		"127.0.0.1:8191", "127.0.0.1:"+mcpPorts[0], "127.0.0.1:8192", "127.0.0.1:"+mcpPorts[1], "127.0.0.1:8193", "127.0.0.1:"+mcpPorts[2])
	cfgPath := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ha := startProcess(t, context.Background(), haproxyBin, []string{"-f", cfgPath, "-db"}, nil)
	lb := "http://" + otcLB

	// Every replica ready (its upstreams listed; Redis reachable for
	// serve-otc).
	waitReady := func(what string, r *scaleReplica, store bool) {
		t.Helper()
		r.p.waitHTTP(t, r.base+"/ready", 60*time.Second)
		deadline := time.Now().Add(60 * time.Second)
		for {
			status, body := getJSON(t, r.base+"/ready")
			if status == http.StatusOK {
				if checks, _ := body["checks"].(map[string]any); store && checks["store"] != "ok" {
					t.Fatalf("%s: /ready 200 without the store check: %v", what, body)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /ready %d %v", what, status, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for i, r := range reps {
		waitReady(fmt.Sprintf("serve-otc replica %d", i), r, true)
	}
	var toolID string
	_, tools := getJSON(t, reps[0].base+"/tools")
	for _, tl := range tools["tools"].([]any) {
		if m := tl.(map[string]any); m["name"] == "scale_work" {
			toolID, _ = m["id"].(string)
		}
	}
	if toolID == "" {
		t.Fatalf("no tool scale_work in %v", tools)
	}
	// HAProxy sends requests once its checks found the replicas ready.
	waitLB := func(base string) {
		t.Helper()
		ha.waitHTTP(t, base+"/ready", 30*time.Second)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if status, _ := getJSONOr(base + "/ready"); status == http.StatusOK {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("HAProxy found no replica ready behind %s within 30 s:\n%s", base, ha.Stderr())
			}
		}
	}
	waitLB(lb)
	for i, r := range mcpReps {
		waitReady(fmt.Sprintf("serve-mcp replica %d", i), r, false)
	}
	waitLB("http://" + mcpLB)

	t.Run("MCPSessionAcrossReplicas", func(t *testing.T) {
		// Halfway, replica 0 is killed and started again on its port, as
		// an orchestrator would: the session goes on.
		restart := func() {
			if err := syscall.Kill(mcpReps[0].p.Pid(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-mcpReps[0].p.Done()
			mcpReps[0] = startMCP(mcpPorts[0])
			waitReady("serve-mcp replica 0, restarted", mcpReps[0], false)
		}
		scaleMCPSession(t, "http://"+mcpLB+"/mcp", mcpReps, count, restart)
	})

	t.Run("OneExecutionPerCallID", func(t *testing.T) {
		// 64 callers, each sending its call_id to the three replicas at
		// once.
		const callers = 64
		answers := make([][3]scaleAnswer, callers)
		var wg sync.WaitGroup
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for i := range callers {
			for j, r := range reps {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := fmt.Sprintf("once-%d", i)
					answers[i][j] = scaleCall(ctx, r.base, toolID, id, id, 300)
				}()
			}
		}
		wg.Wait()
		calls, errs, execs, same := 0, 0, 0, 0
		for i := range callers {
			id := fmt.Sprintf("once-%d", i)
			started, finished := count.get(id)
			execs += started
			if started != 1 || finished != 1 {
				t.Errorf("%s: the tool ran %d times (%d finished), want once", id, started, finished)
			}
			for j := range reps {
				calls++
				if answers[i][j].value() == "" {
					errs++
					t.Errorf("%s on replica %d: %v", id, j, answers[i][j])
				}
			}
			if v := answers[i][0].value(); v != "" && v == answers[i][1].value() && v == answers[i][2].value() {
				same++
			} else {
				t.Errorf("%s: the three replicas answered %q, %q, %q", id, answers[i][0].value(), answers[i][1].value(), answers[i][2].value())
			}
		}
		t.Logf("scale-out: %d call_ids sent to 3 replicas at once: %d calls, %d executions, %d errors, %d/%d call_ids with identical answers", callers, calls, execs, errs, same, callers)
	})

	t.Run("ThroughHAProxy", func(t *testing.T) {
		// 64 callers through the load balancer, 8 call_ids each, every
		// call sent twice (a client's retry): 1,024 calls, 512 executions.
		const callers, each = 64, 8
		var mu sync.Mutex
		calls, errs := 0, 0
		var wg sync.WaitGroup
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range each {
					id := fmt.Sprintf("lb-%d-%d", i, k)
					a, b := scaleCall(ctx, lb, toolID, id, id, 20), scaleCall(ctx, lb, toolID, id, id, 20)
					mu.Lock()
					calls += 2
					if a.value() == "" || a.value() != b.value() {
						errs++
						t.Errorf("%s: %v, then %v", id, a, b)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		execs := 0
		for i := range callers {
			for k := range each {
				started, _ := count.get(fmt.Sprintf("lb-%d-%d", i, k))
				execs += started
				if started != 1 {
					t.Errorf("lb-%d-%d ran %d times", i, k, started)
				}
			}
		}
		t.Logf("scale-out: %d callers through HAProxy (round robin over 3 replicas), %d call_ids each sent twice: %d calls, %d executions, %d errors", callers, each, calls, execs, errs)
	})

	t.Run("KillUnderLoad", func(t *testing.T) {
		scaleKillUnderLoad(t, lb, toolID, reps[2], count)
		// The replica comes back on its port, as an orchestrator would
		// restart it, and HAProxy takes it in again.
		reps[2] = startOTC(ports[2])
		waitReady("serve-otc replica 2, restarted", reps[2], true)
	})

	t.Run("DeadReplicaLeaseExpires", func(t *testing.T) {
		// A call runs on replica 2, which is killed; the client repeats
		// it on replica 0, which waits for the dead replica's lease to
		// end, then answers that the outcome is unknown: the MCP server
		// finished the killed replica's run, and a call_id runs at most
		// once. A new call_id runs.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		go scaleCall(ctx, reps[2].base, toolID, "dead-1", "dead-1", 2500)
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if started, _ := count.get("dead-1"); started == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the call on replica 2 never reached the tool")
			}
		}
		if err := syscall.Kill(reps[2].p.Pid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-reps[2].p.Done()
		start := time.Now()
		a := scaleCall(ctx, reps[0].base, toolID, "dead-1", "dead-1", 2500)
		waited := time.Since(start)
		if a.err != nil || a.status != http.StatusBadRequest || a.body["message"] != "The outcome of this call is unknown" || a.header.Get("x-should-retry") != "" {
			t.Fatalf("the repeat on replica 0 after the kill: %v %v", a, a.header)
		}
		if again := scaleCall(ctx, reps[1].base, toolID, "dead-1", "dead-1", 2500); again.body["message"] != "The outcome of this call is unknown" {
			t.Errorf("a second repeat, on replica 1: %v", again)
		}
		started, finished := count.get("dead-1")
		if started != 1 {
			t.Errorf("the tool ran %d times for dead-1, want once", started)
		}
		if b := scaleCall(ctx, reps[0].base, toolID, "dead-2", "dead-2", 10); b.value() == "" {
			t.Errorf("the call with a new call_id: %v", b)
		}
		t.Logf("scale-out: replica killed mid-call (SIGKILL): the repeat on another replica waited %v for the dead replica's lease to end, then answered 400 \"The outcome of this call is unknown\" (no retry headers); the tool ran %d time(s) (%d finished: the MCP server ended the killed replica's run), not again; a new call_id ran",
			waited.Round(100*time.Millisecond), started, finished)
	})

	t.Run("Drain", func(t *testing.T) {
		// SIGTERM: /ready is 503 "draining" at once; requests are still
		// served during --drain-delay; then the replica exits.
		r := reps[1]
		if err := syscall.Kill(r.p.Pid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			status, body := getJSON(t, r.base+"/ready")
			if status == http.StatusServiceUnavailable && body["status"] == "draining" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("/ready after SIGTERM: %d %v", status, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if a := scaleCall(ctx, r.base, toolID, "", "drain", 10); a.value() == "" {
			t.Fatalf("a call during the drain delay: %v", a)
		}
		if err := r.p.Wait(30 * time.Second); err != nil {
			t.Fatalf("the replica after SIGTERM: %v", err)
		}
		// The balancer sends everything to the one replica left.
		if a := scaleCall(ctx, lb, toolID, "after-drain", "after-drain", 10); a.value() == "" {
			t.Fatalf("through HAProxy with one replica left: %v", a)
		}
	})

	t.Run("RedisDown", func(t *testing.T) {
		// Calls without call_id go on; calls with one get 400 temporarily
		// unavailable with the retry headers, fast; /ready is 503.
		if err := redisProc.Stop(); err != nil {
			t.Logf("redis-server stop: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r := reps[0]
		if a := scaleCall(ctx, r.base, toolID, "", "no-id", 10); a.value() == "" {
			t.Fatalf("a call without call_id, Redis down: %v", a)
		}
		start := time.Now()
		a := scaleCall(ctx, r.base, toolID, "down-1", "down-1", 10)
		took := time.Since(start)
		if a.err != nil || a.status != http.StatusBadRequest || a.header.Get("Retry-After") == "" || a.header.Get("x-should-retry") != "true" ||
			!strings.Contains(fmt.Sprint(a.body), "temporarily unavailable") {
			t.Fatalf("a call with call_id, Redis down: %v %v", a, a.header)
		}
		if started, _ := count.get("down-1"); started != 0 {
			t.Fatalf("the call ran %d times with Redis down", started)
		}
		status, body := getJSON(t, r.base+"/ready")
		if checks, _ := body["checks"].(map[string]any); status != http.StatusServiceUnavailable || checks["store"] == "ok" || checks["store"] == nil {
			t.Fatalf("/ready with Redis down: %d %v", status, body)
		}
		t.Logf("scale-out: Redis down: a call without call_id answered; a call with one got 400 temporarily unavailable (Retry-After %s) in %v; /ready 503: %v",
			a.header.Get("Retry-After"), took.Round(time.Millisecond), body["checks"])
	})
}

// TestMCPFrontDrain: serve-mcp --transport http at SIGTERM answers GET
// /ready 503 "draining" at once, still serves MCP during --drain-delay,
// then exits 0.
func TestMCPFrontDrain(t *testing.T) {
	bin := buildMcpotc(t)
	port := strconv.Itoa(freePort(t))
	base := "http://127.0.0.1:" + port
	p := startProcess(t, context.Background(), bin, []string{"serve-mcp", "--transport", "http", "--listen", "127.0.0.1:" + port, "--drain-delay", "2s"}, nil)
	// waitReady polls GET /ready every poll until it answers status with
	// that "status" in its body, for at most within.
	waitReady := func(what string, within, poll time.Duration, status int, want string) {
		t.Helper()
		for deadline := time.Now().Add(within); ; time.Sleep(poll) {
			got, body := getJSONOr(base + "/ready")
			if got == status && body["status"] == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d %v", what, got, body)
			}
		}
	}
	p.waitHTTP(t, base+"/ready", 60*time.Second)
	waitReady("GET /ready", 30*time.Second, 50*time.Millisecond, http.StatusOK, "ok")
	if err := syscall.Kill(p.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitReady("GET /ready after SIGTERM", 5*time.Second, 20*time.Millisecond, http.StatusServiceUnavailable, "draining")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	init := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"drain","version":"0"}}}`)
	status, _, raw, err := conntest.Post(ctx, base+"/mcp", map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}, init)
	if err != nil || status != http.StatusOK || !strings.Contains(string(raw), `"protocolVersion"`) {
		t.Fatalf("initialize during the drain delay: %d %v %s", status, err, truncate(string(raw), 500))
	}
	if err := p.Wait(30 * time.Second); err != nil {
		t.Fatalf("serve-mcp after SIGTERM: %v", err)
	}
}
