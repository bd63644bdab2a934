//go:build e2e

package e2e

// End-to-end tests of the upstream side of serve-otc's hardening: answers
// over the message limit (a 200 MiB result from a stdio child or an HTTP
// server fails that call, with the bridge's memory bounded), and /health
// while the child is killed again and again (stable children restart at
// once).
//
//	MCPOTC_E2E=1 go test -race -count=1 -tags e2e -run 'TestE2EHardeningUpstream' ./cmd/mcpotc/

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// hardUpChildEnv makes this test binary a tiny MCP stdio server (see
// TestE2EHardeningUpstreamChild): the upstream child of these tests.
const hardUpChildEnv = "MCPOTC_E2E_HARDENING_UPSTREAM_CHILD"

// hardUpRSSBound bounds the bridge's peak resident memory (VmHWM) while a
// 200 MiB answer goes by.
const hardUpRSSBound = 256 << 20

// The child's answer to tools/call "dump": a text of mb MiB, the id first
// or last, streamed in 1 MiB pieces (the child never holds it whole).
func hardUpDumpLine(w io.Writer, id json.RawMessage, mb int, idLast bool) error {
	head := `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"`
	tail := `"}]}}` + "\n"
	if idLast { // the TypeScript SDK's key order
		head = `{"result":{"content":[{"type":"text","text":"`
		tail = `"}]},"jsonrpc":"2.0","id":` + string(id) + "}\n"
	}
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	piece := []byte(strings.Repeat("a", 1<<20))
	for range mb {
		if _, err := w.Write(piece); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, tail)
	return err
}

// hardUpRequest is what the test upstreams read of a JSON-RPC message: a
// tools/call of "dump" asks for mb MiB, its id last when id_last is set.
type hardUpRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string `json:"name"`
		Arguments struct {
			MB     int  `json:"mb"`
			IDLast bool `json:"id_last"`
		} `json:"arguments"`
	} `json:"params"`
}

// TestE2EHardeningUpstreamChild is not a test: with hardUpChildEnv set, it
// serves MCP over stdio (tools "dump" and "small") and exits.
func TestE2EHardeningUpstreamChild(t *testing.T) {
	if os.Getenv(hardUpChildEnv) != "1" {
		return
	}
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	reply := func(id json.RawMessage, result string) {
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", id, result)
		out.Flush()
	}
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			os.Exit(0)
		}
		var m hardUpRequest
		if json.Unmarshal(line, &m) != nil || m.ID == nil || m.Method == "" {
			continue
		}
		switch m.Method {
		case "initialize":
			reply(m.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"big-child","version":"1.0.0"}}`)
		case "ping":
			reply(m.ID, `{}`)
		case "tools/list":
			reply(m.ID, `{"tools":[`+
				`{"name":"dump","inputSchema":{"type":"object","properties":{"mb":{"type":"integer"},"id_last":{"type":"boolean"}}}},`+
				`{"name":"small","inputSchema":{"type":"object"}},`+
				`{"name":"pid","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			switch m.Params.Name {
			case "dump":
				a := m.Params.Arguments
				if err := hardUpDumpLine(out, m.ID, a.MB, a.IDLast); err != nil {
					os.Exit(1)
				}
				out.Flush()
			case "pid":
				reply(m.ID, `{"content":[{"type":"text","text":"`+strconv.Itoa(os.Getpid())+`"}]}`)
			default:
				reply(m.ID, `{"content":[{"type":"text","text":"small ok"}]}`)
			}
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`+"\n", m.ID)
			out.Flush()
		}
	}
}

// hardUpPeakRSS is VmHWM of /proc/pid/status, in bytes.
func hardUpPeakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the bridge's memory: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// hardUpTooLarge is the OTC answer to a call whose answer was over limit.
func hardUpTooLarge(tool, upstream string, limit int, sizeKnown bool) map[string]any {
	size := ""
	if sizeKnown {
		size = ` \(\d+ bytes\)`
	}
	return otcfFailed(map[string]any{
		"message": fmt.Sprintf("The tool's answer is larger than the bridge's limit of %d bytes per message", limit),
		"developer_message": `~^mcp: the answer to "` + tool + `" of upstream "` + upstream + `"` + size +
			fmt.Sprintf(` is longer than the %d-byte message limit \(MaxMessageBytes\); it was dropped; `, limit) +
			`raise the limit with serve-otc --max-message-bytes, or max_message_bytes of this server in the config file$`,
	})
}

// TestE2EHardeningUpstreamStdioTooLarge: a stdio child answers a call with
// a 200 MiB line (its id last, as the TypeScript SDK writes it), then one
// of 20 MiB (id first): each call gets the mapped 200 success:false, the
// next small call on the same child succeeds, and the bridge's peak RSS
// stays under 256 MiB.
func TestE2EHardeningUpstreamStdioTooLarge(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b := otcfStart(t, []string{"--name", "big", "--", self, "-test.run=^TestE2EHardeningUpstreamChild$"},
		[]string{hardUpChildEnv + "=1", "GORACE=atexit_sleep_ms=0"})
	b.waitTools(t, []string{"big.dump@1.0.0", "big.small@1.0.0"})
	d := otcfDialects[2]
	kids := otcfChildren(b.p.Pid())
	if len(kids) != 1 {
		t.Fatalf("the bridge's children: %v, want the one upstream", kids)
	}

	for _, c := range []struct {
		mb     int
		idLast bool
	}{{200, true}, {20, false}} {
		req := map[string]any{"tool_id": "big.dump", "input": map[string]any{"mb": c.mb, "id_last": c.idLast}}
		b.expect(t, d, req, nil, 200, hardUpTooLarge("dump", "big", 16<<20, true)) // the default limit
		b.expect(t, d, map[string]any{"tool_id": "big.small", "input": map[string]any{}}, nil, 200, otcfOK("small ok"))
	}
	if now := otcfChildren(b.p.Pid()); len(now) != 1 || now[0].Pid != kids[0].Pid || !now[0].alive() {
		t.Errorf("the child changed: %v, was %v", now, kids)
	}
	if l := b.waitLogs(2, func(m map[string]any) bool {
		return m["message"] == "upstream answer over the message limit dropped; the request it answers fails"
	}); len(l) != 2 {
		t.Errorf("%d log lines about the dropped answers, want 2: %s", len(l), otcfShow(l))
	}
	peak := hardUpPeakRSS(t, b.p.Pid())
	t.Logf("the bridge's peak RSS: %d MiB", peak>>20)
	if peak >= hardUpRSSBound {
		t.Errorf("the bridge's peak RSS is %d MiB, want < %d MiB", peak>>20, hardUpRSSBound>>20)
	}
	b.checkLogs(t)
	b.stop(t)
}

// hardUpHTTPServer speaks streamable HTTP (JSON answers) with a tool "dump"
// that answers mb MiB, streamed, its id last.
func hardUpHTTPServer(wrote *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m hardUpRequest
		if json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&m) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s-1")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"big-http","version":"1.0.0"}}}`, m.ID)
		case "tools/list":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"dump","inputSchema":{"type":"object"}},{"name":"small","inputSchema":{"type":"object"}}]}}`, m.ID)
		case "tools/call":
			if m.Params.Name != "dump" {
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"small ok"}]}}`, m.ID)
				return
			}
			io.WriteString(w, `{"result":{"content":[{"type":"text","text":"`)
			piece := []byte(strings.Repeat("a", 1<<20))
			for range m.Params.Arguments.MB {
				n, err := w.Write(piece)
				wrote.Add(int64(n))
				if err != nil {
					return // the bridge stopped reading
				}
			}
			fmt.Fprintf(w, `"}]},"jsonrpc":"2.0","id":%s}`, m.ID)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, m.ID)
		}
	})
}

// TestE2EHardeningUpstreamHTTPTooLarge: a streamable HTTP server (limit 8
// MiB from its max_message_bytes) answers a call with a 200 MiB JSON body:
// the call gets the mapped 200 success:false, the bridge stops reading (the server could not write the
// whole answer), the next call succeeds, and the bridge's peak RSS stays
// under 256 MiB.
func TestE2EHardeningUpstreamHTTPTooLarge(t *testing.T) {
	t.Parallel()
	var wrote atomic.Int64
	srv := httptest.NewServer(hardUpHTTPServer(&wrote))
	defer func() {
		srv.CloseClientConnections() // Close waits for every handler
		srv.Close()
	}()
	// The server's own limit (8 MiB) wins over --max-message-bytes.
	b := otcfStart(t, []string{"--max-message-bytes", "1000", "--config",
		hardUpConfig(t, `{"mcpServers":{"web":{"url":"`+srv.URL+`/mcp","toolkit":"Web","max_message_bytes":8388608}}}`)}, nil)
	b.waitTools(t, []string{"Web.dump@1.0.0", "Web.small@1.0.0"})
	d := otcfDialects[0]

	b.expect(t, d, map[string]any{"tool_id": "Web.dump", "input": map[string]any{"mb": 200}}, nil, 200, hardUpTooLarge("dump", "web", 8<<20, false))
	b.expect(t, d, map[string]any{"tool_id": "Web.small", "input": map[string]any{}}, nil, 200, otcfOK("small ok"))
	// The server's writes fail once the bridge closed the connection; a
	// bridge that read the whole body would have taken all 200 MiB.
	if n := wrote.Load(); n >= 200<<20 {
		t.Errorf("the server wrote all %d MiB: the bridge read the whole answer", n>>20)
	}
	peak := hardUpPeakRSS(t, b.p.Pid())
	t.Logf("the bridge's peak RSS: %d MiB (the server wrote %d MiB)", peak>>20, wrote.Load()>>20)
	if peak >= hardUpRSSBound {
		t.Errorf("the bridge's peak RSS is %d MiB, want < %d MiB", peak>>20, hardUpRSSBound>>20)
	}
	b.checkLogs(t)
	b.stop(t)
}

func hardUpConfig(t *testing.T, cfg string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestE2EHardeningUpstreamHealthUnderKills: serve-otc in front of `mcpotc
// sample-mcp`; the child is killed every 2.5-3 s for 13 s while /health is
// polled every 50 ms. A child that ran fine is restarted at once (no
// backoff), so /health answers 200 at least 90 % of the time; every kill
// is followed by exactly one restart.
//
// The bridge is the binary every e2e test runs (race-instrumented under
// -race); the child is mcpotc built without the race detector, whose own
// start takes about 40 ms instead of 130 ms: the child's start is not what
// this test measures, the bridge's restart is.
func TestE2EHardeningUpstreamHealthUnderKills(t *testing.T) {
	t.Parallel()
	buildMcpotc(t) // first: the e2e build, logged
	child := hardUpBuildPlain(t)
	b := otcfStart(t, []string{"--", child, "sample-mcp"}, nil)
	b.waitHealthy(t, otcfStartTimeout)

	ctx, cancel := context.WithTimeout(context.Background(), 13*time.Second)
	defer cancel()
	var ok, total atomic.Int64
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			r, err := otcfDo(rctx, http.MethodGet, b.base+"/health", nil, nil)
			rcancel()
			if ctx.Err() != nil {
				return
			}
			total.Add(1)
			if err == nil && r.Status == http.StatusOK {
				ok.Add(1)
			}
		}
	}()

	kills := 0
	for {
		wait := 2500*time.Millisecond + rand.N(500*time.Millisecond)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		if ctx.Err() != nil {
			break
		}
		kids := otcfChildren(b.p.Pid())
		if len(kids) != 1 {
			t.Fatalf("the bridge's children: %v, want one sample-mcp", kids)
		}
		if err := syscall.Kill(kids[0].Pid, syscall.SIGKILL); err != nil {
			t.Fatalf("SIGKILL to the child: %v", err)
		}
		kills++
	}
	<-polled
	b.waitHealthy(t, 10*time.Second)

	ratio := float64(ok.Load()) / float64(max(total.Load(), 1))
	t.Logf("%d kills; /health 200 in %d of %d polls (%.1f %%)", kills, ok.Load(), total.Load(), 100*ratio)
	if kills < 4 || total.Load() < 100 {
		t.Fatalf("only %d kills and %d polls in 13 s", kills, total.Load())
	}
	if ratio < 0.9 {
		t.Errorf("/health was 200 in %.1f %% of the polls, want ≥ 90 %%", 100*ratio)
	}
	// Each kill: one loss restarted at once, one new child.
	lost := b.waitLogs(kills, func(m map[string]any) bool { return m["message"] == "upstream connection lost" })
	if len(lost) != kills {
		t.Errorf("%d losses logged for %d kills", len(lost), kills)
	}
	for _, l := range lost {
		if l["restart_at_once"] != true {
			t.Errorf("a loss waited for a backoff: %s", otcfShow(l))
		}
	}
	if started := b.waitLogs(kills+1, func(m map[string]any) bool { return m["message"] == "upstream child started" }); len(started) != kills+1 {
		t.Errorf("%d children started for %d kills, want %d", len(started), kills, kills+1)
	}
	b.checkLogs(t)
	b.stop(t)
}

// hardUpBuildPlain builds mcpotc without the race detector into a
// temporary directory.
func hardUpBuildPlain(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "mcpotc")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	start := time.Now()
	// go test runs in the package directory: internal/e2e.
	if out, err := exec.CommandContext(ctx, goTool, "build", "-o", bin, "../../cmd/mcpotc").CombinedOutput(); err != nil {
		t.Fatalf("go build -o %s ../../cmd/mcpotc: %v\n%s", bin, err, out)
	}
	t.Logf("built %s (go build, no -race) in %v", bin, time.Since(start).Round(time.Millisecond))
	return bin
}
