package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// taskFake is a streamable HTTP MCP server, raw JSON-RPC over plain JSON
// answers, whose tool "research" requires tasks (MCP 2025-11-25): it
// follows a script for tasks/get and tasks/result and records every
// request it gets.
type taskFake struct {
	noTasks      bool            // do not declare capabilities.tasks
	pollInterval json.RawMessage // of every Task answered; nil: none
	// status gives the status (and statusMessage) of the n-th tasks/get (from 1).
	status func(n int) (string, string)
	// result answers tasks/result: a result object, or an error object when
	// it starts with {"code".
	result string

	mu      sync.Mutex
	methods []string
	authz   []string          // "method Authorization" of every request
	calls   []json.RawMessage // params of tools/call
	gets    int
	results int
	cancels []json.RawMessage // params of tasks/cancel
}

func (f *taskFake) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.methods {
		if m == method {
			n++
		}
	}
	return n
}

func (f *taskFake) cancelled() []json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]json.RawMessage(nil), f.cancels...)
}

func (f *taskFake) task(status, msg string) string {
	t := map[string]any{"taskId": "task-1", "status": status, "createdAt": "2025-11-25T10:30:00Z",
		"lastUpdatedAt": "2025-11-25T10:30:00Z", "ttl": 60000}
	if msg != "" {
		t["statusMessage"] = msg
	}
	if f.pollInterval != nil {
		t["pollInterval"] = f.pollInterval
	}
	b, _ := json.Marshal(t)
	return string(b)
}

func (f *taskFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if m.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	f.mu.Lock()
	f.methods = append(f.methods, m.Method)
	f.authz = append(f.authz, m.Method+" "+r.Header.Get("Authorization"))
	f.mu.Unlock()
	result, errObj := f.answer(m.Method, m.Params)
	w.Header().Set("Content-Type", "application/json")
	if errObj != "" {
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":%s}`, m.ID, errObj)
		return
	}
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
}

func (f *taskFake) answer(method string, params json.RawMessage) (result, errObj string) {
	switch method {
	case "initialize":
		caps := `{"tools":{},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}}`
		if f.noTasks {
			caps = `{"tools":{}}`
		}
		return `{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"serverInfo":{"name":"task-fake","version":"1.0.0"}}`, ""
	case "ping":
		return `{}`, ""
	case "tools/list":
		return `{"tools":[{"name":"research","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},` +
			`{"name":"plain","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}]}`, ""
	case "tools/call":
		var p struct {
			Name string          `json:"name"`
			Task json.RawMessage `json:"task"`
		}
		_ = json.Unmarshal(params, &p)
		f.mu.Lock()
		f.calls = append(f.calls, params)
		f.mu.Unlock()
		switch {
		case p.Task != nil && p.Name == "research":
			return `{"task":` + f.task("working", "") + `}`, ""
		case p.Task != nil:
			return "", `{"code":-32601,"message":"tool does not support tasks"}`
		case p.Name == "research":
			return "", `{"code":-32601,"message":"Tool research requires task augmentation (taskSupport: 'required')"}`
		default:
			return `{"content":[{"type":"text","text":"plain answer"}]}`, ""
		}
	case "tasks/get":
		f.mu.Lock()
		f.gets++
		n := f.gets
		f.mu.Unlock()
		status, msg := f.status(n)
		if status == "" {
			return "", `{"code":-32602,"message":"Failed to retrieve task: Task not found"}`
		}
		return f.task(status, msg), ""
	case "tasks/result":
		f.mu.Lock()
		f.results++
		f.mu.Unlock()
		if strings.HasPrefix(f.result, `{"code"`) {
			return "", f.result
		}
		return f.result, ""
	case "tasks/cancel":
		f.mu.Lock()
		f.cancels = append(f.cancels, params)
		f.mu.Unlock()
		return f.task("cancelled", "Client cancelled task execution."), ""
	}
	return "", `{"code":-32601,"message":"method not found"}`
}

// startTaskFake starts an upstream on f and waits for its tools.
func startTaskFake(t *testing.T, f *taskFake, callTimeout time.Duration) *Upstream {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	u, _ := startHTTP(t, Config{URL: srv.URL + "/mcp", CallTimeout: callTimeout}, Options{})
	waitReady(t, u)
	waitTools(t, u, 2)
	return u
}

const taskReport = `{"content":[{"type":"text","text":"report <ready>"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"task-1"}}}`

func TestUpstreamTaskCompletedAfterPolling(t *testing.T) {
	f := &taskFake{pollInterval: json.RawMessage(`10`), result: taskReport,
		status: func(n int) (string, string) {
			if n < 3 {
				return "working", "stage " + fmt.Sprint(n)
			}
			return "completed", ""
		}}
	u := startTaskFake(t, f, 30*time.Second)
	res, err := callTool(t, u, "research", `{"topic":"bridges"}`)
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	// The result of tasks/result, without the related-task _meta, which
	// names the bridge's own upstream task.
	var got, want any
	_ = json.Unmarshal(res, &got)
	_ = json.Unmarshal([]byte(`{"content":[{"type":"text","text":"report <ready>"}]}`), &want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("result %s, want %v", res, want)
	}
	// The call carried params.task with the call timeout as ttl.
	var call struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Task      map[string]any  `json:"task"`
	}
	if len(f.calls) != 1 || json.Unmarshal(f.calls[0], &call) != nil {
		t.Fatalf("tools/call params %q, want one", f.calls)
	}
	if call.Name != "research" || string(call.Arguments) != `{"topic":"bridges"}` || fmt.Sprint(call.Task) != "map[ttl:30000]" {
		t.Errorf("tools/call params %s, want name research, the arguments and task {ttl:30000}", f.calls[0])
	}
	// Polled until terminal (3 tasks/get), then one tasks/result; no cancel.
	if g, r, c := f.count("tasks/get"), f.count("tasks/result"), len(f.cancelled()); g != 3 || r != 1 || c != 0 {
		t.Errorf("tasks/get %d, tasks/result %d, tasks/cancel %d; want 3, 1, 0", g, r, c)
	}
}

func TestUpstreamTaskInputRequiredGoesToResult(t *testing.T) {
	// input_required: tasks/result at once (it delivers the server's
	// requests and blocks until the task is terminal).
	f := &taskFake{pollInterval: json.RawMessage(`10`), result: taskReport,
		status: func(int) (string, string) { return "input_required", "which one?" }}
	u := startTaskFake(t, f, 30*time.Second)
	if _, err := callTool(t, u, "research", `{}`); err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if g, r := f.count("tasks/get"), f.count("tasks/result"); g != 1 || r != 1 {
		t.Errorf("tasks/get %d, tasks/result %d; want 1, 1", g, r)
	}
}

func TestUpstreamTaskFailedAndCancelledMapped(t *testing.T) {
	cases := []struct {
		name, status, msg, result string
		check                     func(t *testing.T, res json.RawMessage, err error)
	}{
		{"failed with an isError result", "failed", "boom", `{"content":[{"type":"text","text":"tool said no"}],"isError":true}`,
			func(t *testing.T, res json.RawMessage, err error) {
				if err != nil || !strings.Contains(string(res), `"isError":true`) || !strings.Contains(string(res), "tool said no") {
					t.Errorf("got %s, %v; want the isError result", res, err)
				}
			}},
		{"failed with a JSON-RPC error", "failed", "the source is down", `{"code":-32603,"message":"Task task-1 has no result stored"}`,
			func(t *testing.T, res json.RawMessage, err error) {
				var ue *Error
				if !errors.As(err, &ue) || ue.Code != -32603 || ue.Message != "task failed: the source is down" {
					t.Errorf("got %s, %v; want *Error -32603 \"task failed: the source is down\"", res, err)
				}
			}},
		{"cancelled upstream", "cancelled", "cancelled by an operator", `{"code":-32603,"message":"Task task-1 has no result stored"}`,
			func(t *testing.T, res json.RawMessage, err error) {
				if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "cancelled by an operator") {
					t.Errorf("got %s, %v; want ErrLost naming the status message", res, err)
				}
			}},
		{"task vanished", "", "", taskReport,
			func(t *testing.T, res json.RawMessage, err error) {
				if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "Task not found") {
					t.Errorf("got %s, %v; want ErrLost naming the answer", res, err)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &taskFake{pollInterval: json.RawMessage(`10`), result: c.result,
				status: func(int) (string, string) { return c.status, c.msg }}
			u := startTaskFake(t, f, 30*time.Second)
			res, err := callTool(t, u, "research", `{}`)
			c.check(t, res, err)
			// A task that ended on its own (or is gone) is not cancelled.
			if n := len(f.cancelled()); n != 0 {
				t.Errorf("%d tasks/cancel sent, want 0", n)
			}
		})
	}
}

func TestUpstreamTaskTimeoutCancelsTask(t *testing.T) {
	// pollInterval 1 ms is clamped to taskPollMin: polls stay bounded.
	f := &taskFake{pollInterval: json.RawMessage(`1`), result: taskReport,
		status: func(int) (string, string) { return "working", "" }}
	timeout := 400 * time.Millisecond
	u := startTaskFake(t, f, timeout)
	_, err := callTool(t, u, "research", `{}`)
	if !errors.Is(err, ErrLost) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CallTool: %v, want ErrLost and DeadlineExceeded (a timed-out call)", err)
	}
	eventually(t, 10*time.Second, "tasks/cancel", func() bool { return len(f.cancelled()) == 1 })
	if got := string(f.cancelled()[0]); got != `{"taskId":"task-1"}` {
		t.Errorf("tasks/cancel params %s, want {\"taskId\":\"task-1\"}", got)
	}
	if g, max := f.count("tasks/get"), int(timeout/taskPollMin)+1; g < 1 || g > max {
		t.Errorf("%d tasks/get in %v, want 1..%d (pollInterval clamped to %v)", g, timeout, max, taskPollMin)
	}
	if r := f.count("tasks/result"); r != 0 {
		t.Errorf("%d tasks/result for a task that never ended", r)
	}
}

func TestUpstreamTaskCallerCancelCancelsTask(t *testing.T) {
	f := &taskFake{pollInterval: json.RawMessage(`20`), result: taskReport,
		status: func(int) (string, string) { return "working", "" }}
	u := startTaskFake(t, f, 30*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := u.CallTool(ctx, "research", json.RawMessage(`{}`), nil, nil)
		done <- err
	}()
	eventually(t, 10*time.Second, "a tasks/get", func() bool { return f.count("tasks/get") > 0 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("CallTool: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CallTool did not return after its context was cancelled")
	}
	eventually(t, 10*time.Second, "tasks/cancel", func() bool { return len(f.cancelled()) == 1 })
}

func TestUpstreamTaskOnlyWhenRequiredAndDeclared(t *testing.T) {
	// "optional" is called plainly.
	f := &taskFake{result: taskReport, status: func(int) (string, string) { return "completed", "" }}
	u := startTaskFake(t, f, 30*time.Second)
	res, err := callTool(t, u, "plain", `{}`)
	if err != nil || resultText(t, res) != "plain answer" {
		t.Fatalf("plain: %s, %v", res, err)
	}
	if strings.Contains(string(f.calls[0]), `"task"`) {
		t.Errorf("an optional tool was called task-augmented: %s", f.calls[0])
	}

	// A server that does not declare tasks.requests.tools.call is never
	// sent a task (the spec forbids it), so a tool that requires one is
	// left out of the list, with one log line; called anyway, it gets the
	// server's own answer.
	g := &taskFake{noTasks: true, result: taskReport, status: func(int) (string, string) { return "completed", "" }}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	u, logs := startHTTP(t, Config{URL: srv.URL + "/mcp"}, Options{})
	waitReady(t, u)
	if tools := waitTools(t, u, 1); !strings.Contains(string(tools[0]), `"name":"plain"`) {
		t.Errorf("listed %s, want only the plain tool", tools)
	}
	logs.waitLog(t, "skipping a tool that requires tasks", 5*time.Second)
	if n := strings.Count(logs.String(), "skipping a tool that requires tasks"); n != 1 {
		t.Errorf("%d log lines for the tool left out, want 1 per listing: %s", n, logs.String())
	}
	_, err = callTool(t, u, "research", `{}`)
	var ue *Error
	if !errors.As(err, &ue) || ue.Code != -32601 {
		t.Errorf("research on a server without tasks: %v, want its -32601", err)
	}
	if strings.Contains(string(g.calls[0]), `"task"`) {
		t.Errorf("a server without the tasks capability was sent a task: %s", g.calls[0])
	}
}

func TestUpstreamTaskStatusNotificationWakes(t *testing.T) {
	s := &taskState{}
	woken, unwait := s.wait("t-9")
	defer unwait()
	s.notified(json.RawMessage(`{"taskId":"other","status":"completed"}`))
	select {
	case <-woken:
		t.Fatal("woken by another task's notification")
	default:
	}
	s.notified(json.RawMessage(`{"taskId":"t-9","status":"completed"}`))
	s.notified(json.RawMessage(`{"taskId":"t-9","status":"completed"}`)) // never blocks
	select {
	case <-woken:
	default:
		t.Fatal("not woken by its notification")
	}
}

func TestUpstreamTaskPollInterval(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		in   *float64
		want time.Duration
	}{{nil, taskPollDefault}, {f(0), taskPollDefault}, {f(1), taskPollMin}, {f(250), 250 * time.Millisecond}, {f(3.6e6), taskPollMax}} {
		if got := (&taskObject{PollInterval: c.in}).interval(); got != c.want {
			t.Errorf("pollInterval %v: %v, want %v", c.in, got, c.want)
		}
	}
}

// userKey carries a user in a call's context, as mcp/oauth does.
type userKey struct{}

// perUserAuth is an Authorizer that authorizes each request as the user
// of its context (the operator without one), as a per-user OAuth client
// does.
type perUserAuth struct{}

func (perUserAuth) Authorization(ctx context.Context) (string, error) {
	user, _ := ctx.Value(userKey{}).(string)
	if user == "" {
		user = "operator"
	}
	return "Bearer token-of-" + user, nil
}

func (perUserAuth) Unauthorized(context.Context, string, *http.Response) (bool, error) {
	return false, nil
}

// The cancel of a user's call goes with that user's credentials, never
// the bridge's own: a task cancelled with the operator's token would be
// another account's request (or be refused, leaving the user's task
// running).
func TestUpstreamTaskCancelCarriesTheCallersIdentity(t *testing.T) {
	for _, c := range []struct {
		name   string
		cancel func(context.Context) (context.Context, func())
	}{
		{"call timeout", func(ctx context.Context) (context.Context, func()) { return ctx, func() {} }},
		{"caller cancels", func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(300*time.Millisecond, cancel)
			return ctx, cancel
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &taskFake{pollInterval: json.RawMessage(`20`), result: taskReport,
				status: func(int) (string, string) { return "working", "" }}
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			u, _ := startHTTP(t, Config{URL: srv.URL + "/mcp", CallTimeout: 400 * time.Millisecond, Auth: perUserAuth{}}, Options{})
			waitReady(t, u)
			waitTools(t, u, 2)
			ctx, cancel := c.cancel(context.WithValue(context.Background(), userKey{}, "alice"))
			defer cancel()
			if _, err := u.CallTool(ctx, "research", json.RawMessage(`{}`), nil, nil); err == nil {
				t.Fatal("the call did not end early")
			}
			eventually(t, 10*time.Second, "tasks/cancel", func() bool { return len(f.cancelled()) == 1 })
			f.mu.Lock()
			authz := slices.Clone(f.authz)
			f.mu.Unlock()
			want := map[string]string{
				"tools/call":   "Bearer token-of-alice",
				"tasks/get":    "Bearer token-of-alice",
				"tasks/cancel": "Bearer token-of-alice",
				"tools/list":   "Bearer token-of-operator", // the catalog is the bridge's own
			}
			for _, line := range authz {
				method, got, _ := strings.Cut(line, " ")
				if w, ok := want[method]; ok && got != w {
					t.Errorf("%s went with %q, want %q", method, got, w)
				}
			}
		})
	}
}

// notifications/cancelled of a user's call over 2025-11-25 HTTP goes with
// that user's credentials too.
func TestUpstreamHTTPCancelNotificationCarriesTheCallersIdentity(t *testing.T) {
	blocked := make(chan string, 1)
	wire, ts, _ := newStreamable(t, blocked)
	u, _ := startHTTP(t, Config{URL: ts.URL + "/mcp", Auth: perUserAuth{}}, Options{})
	waitReady(t, u)
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), userKey{}, "bob"))
	time.AfterFunc(200*time.Millisecond, cancel)
	if _, err := u.CallTool(ctx, "block", nil, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	var notes []wireReq
	eventually(t, 5*time.Second, "notifications/cancelled", func() bool {
		notes = wire.requests("notifications/cancelled")
		return len(notes) == 1
	})
	if got, call := notes[0].header.Get("Authorization"), wire.requests("tools/call")[0].header.Get("Authorization"); got != "Bearer token-of-bob" || call != got {
		t.Errorf("notifications/cancelled went with %q, the call with %q; want both %q", got, call, "Bearer token-of-bob")
	}
}
