package front

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// The tasks extension and the 2025-11-25 task shape at the wire
// (tasks.go): frames compared as data, the task id and the times
// replaced by fixed ones.

const (
	taskMetaExt   = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	taskMetaNoExt = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	taskServer    = `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"tasks-test","version":"1.0.0"}}`
	taskTimes     = `"createdAt":"2026-01-02T03:04:05Z","lastUpdatedAt":"2026-01-02T03:04:05Z","ttlMs":60000,"pollIntervalMs":1000`
)

// taskFront is a front with tasks on, a fixed clock, and its ended tasks
// told on a channel.
func taskFront(t *testing.T, opts TaskOptions) (*Server, chan *TaskRecord) {
	t.Helper()
	f := New("tasks-test", "1.0.0", nil)
	ended := make(chan *TaskRecord, 16)
	opts.TTL, opts.OnTaskStatus = time.Minute, func(r *TaskRecord) { ended <- r }
	clock := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	if opts.Store == nil {
		opts.Store = NewMemoryTaskStore(opts.MaxTasks, opts.MaxTasksPerPrincipal, opts.MaxTaskBytes, opts.MaxTaskBytesPerPrincipal, clock)
	}
	f.SetTasks(&opts)
	f.tasks.now = clock
	return f, ended
}

// taskCaller is a context of a request from the principal p.
func taskCaller(p string) context.Context {
	return context.WithValue(context.Background(), callerKey{}, &caller{principal: p, sessions: p})
}

// taskIDOf reads the task id of a CreateTaskResult frame (either shape).
func taskIDOf(t *testing.T, frame []byte) string {
	t.Helper()
	var r struct {
		Result struct {
			TaskID string `json:"taskId"`
			Task   struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		} `json:"result"`
	}
	if json.Unmarshal(frame, &r) != nil || (r.Result.TaskID == "" && r.Result.Task.TaskID == "") {
		t.Fatalf("not a CreateTaskResult: %s", frame)
	}
	if r.Result.TaskID != "" {
		return r.Result.TaskID
	}
	return r.Result.Task.TaskID
}

// withID is frame with the task id id written as "T".
func withID(frame []byte, id string) []byte {
	return []byte(strings.ReplaceAll(string(frame), id, `T`))
}

func endOf(t *testing.T, ended chan *TaskRecord) *TaskRecord {
	t.Helper()
	select {
	case r := <-ended:
		return r
	case <-time.After(wait):
		t.Fatal("the task did not end")
		return nil
	}
}

func TestTaskAfterThresholdGetCancel(t *testing.T) {
	release := make(chan struct{})
	sawCancel := make(chan error, 1)
	f, ended := taskFront(t, TaskOptions{Policy: func(tool string) TaskPolicy {
		if tool == "fast" {
			return TaskPolicy{Mode: TaskAfter, After: time.Hour}
		}
		return TaskPolicy{Mode: TaskAfter, After: time.Millisecond}
	}})
	addTool(f, mcpgo.NewTool("fast"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("quick"), nil
	})
	addTool(f, mcpgo.NewTool("slow"), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		<-release
		return mcpgo.NewToolResultError("it went wrong"), nil // a tool error: completed + isError
	})
	addTool(f, mcpgo.NewTool("hang"), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		<-ctx.Done()
		sawCancel <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	ctx := taskCaller("alice")

	// Answered within its time: a plain result.
	sameJSON(t, f.HandleMessage(ctx, request(1, "tools/call", `{"name":"fast","arguments":{},`+taskMetaExt+`}`)),
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"quick"}],"resultType":"complete",`+taskServer+`}}`)

	// Not answered within its time: a task, stored before its handle.
	created := f.HandleMessage(ctx, request(2, "tools/call", `{"name":"slow","arguments":{},`+taskMetaExt+`}`))
	id := taskIDOf(t, created)
	sameJSON(t, withID(created, id), `{"jsonrpc":"2.0","id":2,"result":{"resultType":"task","taskId":"T","status":"working",`+taskTimes+`,`+taskServer+`}}`)
	sameJSON(t, withID(f.HandleMessage(ctx, request(3, "tasks/get", `{"taskId":"`+id+`",`+taskMetaExt+`}`)), id),
		`{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","taskId":"T","status":"working",`+taskTimes+`,`+taskServer+`}}`)
	close(release)
	endOf(t, ended)
	sameJSON(t, withID(f.HandleMessage(ctx, request(4, "tasks/get", `{"taskId":"`+id+`",`+taskMetaExt+`}`)), id),
		`{"jsonrpc":"2.0","id":4,"result":{"resultType":"complete","taskId":"T","status":"completed",`+taskTimes+`,`+
			`"result":{"content":[{"type":"text","text":"it went wrong"}],"isError":true,`+taskServer+`},`+taskServer+`}}`)
	// tasks/update of a task that asks nothing: an empty ack.
	sameJSON(t, f.HandleMessage(ctx, request(5, "tasks/update", `{"taskId":"`+id+`","inputResponses":{"x":{}},`+taskMetaExt+`}`)),
		`{"jsonrpc":"2.0","id":5,"result":{"resultType":"complete",`+taskServer+`}}`)

	// Cancelled while it runs: an empty ack, the handler's context ends,
	// and the task stays cancelled.
	id2 := taskIDOf(t, f.HandleMessage(ctx, request(6, "tools/call", `{"name":"hang","arguments":{},`+taskMetaExt+`}`)))
	sameJSON(t, f.HandleMessage(ctx, request(7, "tasks/cancel", `{"taskId":"`+id2+`",`+taskMetaExt+`}`)),
		`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete",`+taskServer+`}}`)
	select {
	case cause := <-sawCancel:
		if cause != errTaskCancelled {
			t.Errorf("the handler's context ended with %v, want the task's cancel", cause)
		}
	case <-time.After(wait):
		t.Fatal("tasks/cancel did not end the handler's context")
	}
	if r := endOf(t, ended); r.Status != TaskCancelled {
		t.Errorf("the task ended %s, want cancelled", r.Status)
	}
	sameJSON(t, withID(f.HandleMessage(ctx, request(8, "tasks/get", `{"taskId":"`+id2+`",`+taskMetaExt+`}`)), id2),
		`{"jsonrpc":"2.0","id":8,"result":{"resultType":"complete","taskId":"T","status":"cancelled","statusMessage":"cancelled by the client",`+
			taskTimes+`,`+taskServer+`}}`)
	// Cancelling an ended task: the same ack.
	sameJSON(t, f.HandleMessage(ctx, request(9, "tasks/cancel", `{"taskId":"`+id+`",`+taskMetaExt+`}`)),
		`{"jsonrpc":"2.0","id":9,"result":{"resultType":"complete",`+taskServer+`}}`)
}

func TestTaskRefusals(t *testing.T) {
	f, ended := taskFront(t, TaskOptions{Policy: func(tool string) TaskPolicy {
		if tool == "job" {
			return TaskPolicy{Mode: TaskRequired}
		}
		return TaskPolicy{Mode: TaskAlways}
	}})
	ran := make(chan struct{}, 4)
	h := func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		ran <- struct{}{}
		return mcpgo.NewToolResultText("done"), nil
	}
	addTool(f, mcpgo.NewTool("job"), h)
	addTool(f, mcpgo.NewTool("step"), h)
	alice, bob := taskCaller("alice"), taskCaller("bob")

	for _, c := range []struct{ method, want string }{
		{"tasks/result", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"\"tasks/result\" is not part of the tasks extension (io.modelcontextprotocol/tasks): read the result with tasks/get"}}`},
		{"tasks/list", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"\"tasks/list\" is not part of the tasks extension (io.modelcontextprotocol/tasks): read the result with tasks/get"}}`},
		{"tasks/get", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown task: \"nope\""}}`},
		{"tasks/cancel", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown task: \"nope\""}}`},
		{"tasks/update", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown task: \"nope\""}}`},
	} {
		sameJSON(t, f.HandleMessage(alice, request(1, c.method, `{"taskId":"nope","inputResponses":{},`+taskMetaExt+`}`)), c.want)
	}

	// Without the extension: a task-only tool is -32021 and does not run;
	// another tool runs as a plain call; tasks/* are -32021.
	required := `"data":{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	sameJSON(t, f.HandleMessage(alice, request(2, "tools/call", `{"name":"job","arguments":{},`+taskMetaNoExt+`}`)),
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32021,"message":"tool 'job' runs only as a task: declare the client capability extensions[\"io.modelcontextprotocol/tasks\"] in _meta",`+required+`}}`)
	select {
	case <-ran:
		t.Fatal("the task-only tool ran for a client without the extension")
	default:
	}
	sameJSON(t, f.HandleMessage(alice, request(3, "tools/call", `{"name":"step","arguments":{},`+taskMetaNoExt+`}`)),
		`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"done"}],"resultType":"complete",`+taskServer+`}}`)
	<-ran
	sameJSON(t, f.HandleMessage(alice, request(4, "tasks/get", `{"taskId":"x",`+taskMetaNoExt+`}`)),
		`{"jsonrpc":"2.0","id":4,"error":{"code":-32021,"message":"\"tasks/get\" requires the client capability extensions[\"io.modelcontextprotocol/tasks\"] in _meta",`+required+`}}`)

	// Alice's task: Bob is told it is unknown, as for one that never
	// existed, and cannot cancel it.
	id := taskIDOf(t, f.HandleMessage(alice, request(5, "tools/call", `{"name":"job","arguments":{},`+taskMetaExt+`}`)))
	<-ran
	endOf(t, ended)
	for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		sameJSON(t, withID(f.HandleMessage(bob, request(6, method, `{"taskId":"`+id+`","inputResponses":{},`+taskMetaExt+`}`)), id),
			`{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"unknown task: \"T\""}}`)
	}
	sameJSON(t, withID(f.HandleMessage(alice, request(7, "tasks/get", `{"taskId":"`+id+`",`+taskMetaExt+`}`)), id),
		`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","taskId":"T","status":"completed",`+taskTimes+`,`+
			`"result":{"content":[{"type":"text","text":"done"}],`+taskServer+`},`+taskServer+`}}`)
}

func TestTaskBounds(t *testing.T) {
	f, _ := taskFront(t, TaskOptions{MaxTasksPerPrincipal: 2, MaxTasks: 3, Policy: func(string) TaskPolicy { return TaskPolicy{Mode: TaskAlways} }})
	block := make(chan struct{})
	defer close(block)
	addTool(f, mcpgo.NewTool("wait"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return mcpgo.NewToolResultText("ok"), nil
	})
	call := func(ctx context.Context, id int) []byte {
		return f.HandleMessage(ctx, request(id, "tools/call", `{"name":"wait","arguments":{},`+taskMetaExt+`}`))
	}
	alice, bob := taskCaller("alice"), taskCaller("bob")
	taskIDOf(t, call(alice, 1))
	taskIDOf(t, call(alice, 2))
	// Alice's third: her bound, named; Bob's first still goes through.
	sameJSON(t, call(alice, 3), `{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"task refused: the bound max_tasks_per_principal (2) is reached; wait for tasks to end or expire","data":{"bound":"max_tasks_per_principal","limit":2}}}`)
	taskIDOf(t, call(bob, 4))
	// Then the bound in all.
	sameJSON(t, call(taskCaller("carol"), 5), `{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"task refused: the bound max_tasks (3) is reached; wait for tasks to end or expire","data":{"bound":"max_tasks","limit":3}}}`)
}

func TestTaskPollTooFast(t *testing.T) {
	f, _ := taskFront(t, TaskOptions{Policy: func(string) TaskPolicy { return TaskPolicy{Mode: TaskAlways} }})
	block := make(chan struct{})
	defer close(block)
	addTool(f, mcpgo.NewTool("wait"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		<-block
		return mcpgo.NewToolResultText("ok"), nil
	})
	ctx := taskCaller("alice")
	id := taskIDOf(t, f.HandleMessage(ctx, request(1, "tools/call", `{"name":"wait","arguments":{},`+taskMetaExt+`}`)))
	// The clock stands still: the burst is allowed, the next poll refused.
	for i := 0; i < TaskPollBurst; i++ {
		if b := f.HandleMessage(ctx, request(2, "tasks/get", `{"taskId":"`+id+`",`+taskMetaExt+`}`)); strings.Contains(string(b), `"error"`) {
			t.Fatalf("poll %d: %s", i+1, b)
		}
	}
	sameJSON(t, withID(f.HandleMessage(ctx, request(3, "tasks/get", `{"taskId":"`+id+`",`+taskMetaExt+`}`)), id),
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32029,"message":"task \"T\" is polled faster than its pollIntervalMs (1000): poll again later","data":{"pollIntervalMs":1000}}}`)
}

func TestTaskInputRequiredUpdate(t *testing.T) {
	f, ended := taskFront(t, TaskOptions{Policy: func(string) TaskPolicy { return TaskPolicy{Mode: TaskAlways} }})
	addTool(f, mcpgo.NewTool("ask"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		if r, ok := Resumed(ctx); ok {
			return mcpgo.NewToolResultText("answered " + string(r.Responses["a"].Action) + " and " + string(r.Responses["b"].Action)), nil
		}
		return nil, &InputRequired{Elicitations: []mcpgo.ElicitationParams{
			{ElicitationID: "a", Message: "Open", URL: "https://a.example/"},
			{ElicitationID: "b", Message: "Open", URL: "https://b.example/"}}, Text: "two pages"}
	})
	ctx := taskCaller("alice")
	id := taskIDOf(t, f.HandleMessage(ctx, request(1, "tools/call", `{"name":"ask","arguments":{},`+taskMetaExt+`}`)))
	if r := endOf(t, ended); r.Status != TaskInputRequired {
		t.Fatalf("status %s, want input_required", r.Status)
	}
	req := func(key string) string {
		return `"` + key + `":{"method":"elicitation/create","params":{"mode":"url","message":"Open","url":"https://` + key + `.example/"}}`
	}
	sameJSON(t, withID(f.HandleMessage(ctx, request(2, "tasks/get", `{"taskId":"`+id+`",`+taskMetaExt+`}`)), id),
		`{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","taskId":"T","status":"input_required","statusMessage":"two pages",`+taskTimes+
			`,"inputRequests":{`+req("a")+`,`+req("b")+`},`+taskServer+`}}`)
	// One answer (and one to nothing asked): acked; the other stays asked.
	sameJSON(t, f.HandleMessage(ctx, request(3, "tasks/update", `{"taskId":"`+id+`","inputResponses":{"a":{"action":"accept"},"zzz":{}},`+taskMetaExt+`}`)),
		`{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete",`+taskServer+`}}`)
	sameJSON(t, withID(f.HandleMessage(ctx, request(4, "tasks/get", `{"taskId":"`+id+`",`+taskMetaExt+`}`)), id),
		`{"jsonrpc":"2.0","id":4,"result":{"resultType":"complete","taskId":"T","status":"input_required","statusMessage":"two pages",`+taskTimes+
			`,"inputRequests":{`+req("b")+`},`+taskServer+`}}`)
	// The last answer resumes the handler with both.
	f.HandleMessage(ctx, request(5, "tasks/update", `{"taskId":"`+id+`","inputResponses":{"b":{"action":"decline"}},`+taskMetaExt+`}`))
	if r := endOf(t, ended); r.Status != TaskCompleted {
		t.Fatalf("status %s, want completed", r.Status)
	}
	sameJSON(t, withID(f.HandleMessage(ctx, request(6, "tasks/get", `{"taskId":"`+id+`",`+taskMetaExt+`}`)), id),
		`{"jsonrpc":"2.0","id":6,"result":{"resultType":"complete","taskId":"T","status":"completed",`+taskTimes+
			`,"result":{"content":[{"type":"text","text":"answered accept and decline"}],`+taskServer+`},`+taskServer+`}}`)
}

// The 2025-11-25 shape: capability tasks at initialize, params.task,
// tasks/get, tasks/result, tasks/list, tasks/cancel.
func TestTaskLegacyShape(t *testing.T) {
	f, ended := taskFront(t, TaskOptions{})
	release := make(chan struct{})
	addTool(f, mcpgo.NewTool("work"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		select {
		case <-release:
			return mcpgo.NewToolResultText("worked"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	ctx := taskCaller("alice")
	sameJSON(t, f.HandleMessage(ctx, request(1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}`)),
		`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},`+
			`"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"tasks-test","version":"1.0.0"}}}`)
	legacyTimes := `"createdAt":"2026-01-02T03:04:05Z","lastUpdatedAt":"2026-01-02T03:04:05Z","ttl":30000,"pollInterval":1000`
	created := f.HandleMessage(ctx, request(2, "tools/call", `{"name":"work","arguments":{},"task":{"ttl":30000}}`))
	id := taskIDOf(t, created)
	sameJSON(t, withID(created, id), `{"jsonrpc":"2.0","id":2,"result":{"task":{"taskId":"T","status":"working",`+legacyTimes+`}}}`)
	sameJSON(t, withID(f.HandleMessage(ctx, request(3, "tasks/get", `{"taskId":"`+id+`"}`)), id),
		`{"jsonrpc":"2.0","id":3,"result":{"taskId":"T","status":"working",`+legacyTimes+`}}`)
	sameJSON(t, withID(f.HandleMessage(ctx, request(4, "tasks/list", `{}`)), id),
		`{"jsonrpc":"2.0","id":4,"result":{"tasks":[{"taskId":"T","status":"working",`+legacyTimes+`}]}}`)
	sameJSON(t, withID(f.HandleMessage(taskCaller("bob"), request(5, "tasks/get", `{"taskId":"`+id+`"}`)), id),
		`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"unknown task: \"T\""}}`)
	sameJSON(t, f.HandleMessage(taskCaller("bob"), request(5, "tasks/list", `{}`)), `{"jsonrpc":"2.0","id":5,"result":{"tasks":[]}}`)
	close(release)
	endOf(t, ended)
	sameJSON(t, withID(f.HandleMessage(ctx, request(6, "tasks/result", `{"taskId":"`+id+`"}`)), id),
		`{"jsonrpc":"2.0","id":6,"result":{"content":[{"type":"text","text":"worked"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"T"}}}}`)
	sameJSON(t, withID(f.HandleMessage(ctx, request(7, "tasks/cancel", `{"taskId":"`+id+`"}`)), id),
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"task \"T\" has ended (completed): it cannot be cancelled"}}`)

	// A second task, cancelled while it works.
	addTool(f, mcpgo.NewTool("hang"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	id2 := taskIDOf(t, f.HandleMessage(ctx, request(8, "tools/call", `{"name":"hang","arguments":{},"task":{}}`)))
	sameJSON(t, withID(f.HandleMessage(ctx, request(9, "tasks/cancel", `{"taskId":"`+id2+`"}`)), id2),
		`{"jsonrpc":"2.0","id":9,"result":{"taskId":"T","status":"cancelled","statusMessage":"cancelled by the client",`+
			strings.Replace(legacyTimes, "30000", "60000", 1)+`}}`)
	endOf(t, ended)
}
