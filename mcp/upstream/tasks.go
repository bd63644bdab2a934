package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Task-augmented tool calls (MCP 2025-11-25, "Tasks"; docs/otc-front.md, MCP tasks).
//
// A tool whose execution.taskSupport is "required" answers a plain
// tools/call with -32601: it must be called with params.task. The server
// then answers at once with a CreateTaskResult {task: {taskId, status,
// pollInterval, …}}; the requestor polls tasks/get until the status is
// terminal (completed, failed, cancelled) or input_required, and then
// calls tasks/result, which blocks until the task is terminal and returns
// exactly what the plain tools/call would have returned (a CallToolResult
// or a JSON-RPC error). Requests the server needs answered during the task
// (elicitation/create with related-task _meta) are delivered while
// tasks/result is pending; the bridge answers them as during a plain call.
//
// The bridge augments only calls of tools listed with taskSupport
// "required", and only when the server declared
// capabilities.tasks.requests.tools.call (the spec forbids augmenting
// otherwise). "optional" tools are called plainly, which the spec allows.
// To the caller the call stays one synchronous exchange bounded by
// CallTimeout: when it passes or the caller goes away, tasks/cancel is
// sent and the call fails like a timed-out plain call (ErrLost).

// Bounds of the polling.
const (
	taskPollDefault = time.Second           // when the server gives no pollInterval
	taskPollMin     = 50 * time.Millisecond // never faster, whatever the server asks
	taskPollMax     = 5 * time.Second       // never slower: a caller is waiting
	taskRelatedMeta = "io.modelcontextprotocol/related-task"
	taskStatusNote  = "notifications/tasks/status"
	taskMaxIDLength = 1024 // a longer taskId is not a task this bridge follows
)

// taskObject is the Task object of CreateTaskResult, tasks/get and
// notifications/tasks/status (the fields the bridge reads).
type taskObject struct {
	TaskID        string   `json:"taskId"`
	Status        string   `json:"status"`
	StatusMessage string   `json:"statusMessage"`
	PollInterval  *float64 `json:"pollInterval"`
}

func (t *taskObject) terminal() bool {
	return t.Status == "completed" || t.Status == "failed" || t.Status == "cancelled"
}

// interval is how long to wait before the next tasks/get.
func (t *taskObject) interval() time.Duration {
	if t.PollInterval == nil || *t.PollInterval <= 0 {
		return taskPollDefault
	}
	d := time.Duration(*t.PollInterval * float64(time.Millisecond))
	return min(max(d, taskPollMin), taskPollMax)
}

// taskState is what a connection knows about tasks: whether the server
// takes task-augmented tools/call, which tools require it (from the last
// tools/list), and the waiters of tasks in progress (woken early by
// notifications/tasks/status).
type taskState struct {
	mu       sync.Mutex
	capable  bool
	required map[string]bool
	waiters  map[string]chan struct{}
}

// setCapable records capabilities.tasks.requests.tools.call of initialize.
func (s *taskState) setCapable(initResult json.RawMessage) {
	var r struct {
		Capabilities struct {
			Tasks *struct {
				Requests *struct {
					Tools *struct {
						Call json.RawMessage `json:"call"`
					} `json:"tools"`
				} `json:"requests"`
			} `json:"tasks"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(initResult, &r)
	t := r.Capabilities.Tasks
	capable := t != nil && t.Requests != nil && t.Requests.Tools != nil && isJSONObject(t.Requests.Tools.Call)
	s.mu.Lock()
	s.capable = capable
	s.mu.Unlock()
}

// setRequired records the tools listed with execution.taskSupport "required".
func (s *taskState) setRequired(names map[string]bool) {
	s.mu.Lock()
	s.required = names
	s.mu.Unlock()
}

// toolCallTasks reports whether the server declared
// capabilities.tasks.requests.tools.call.
func (s *taskState) toolCallTasks() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.capable
}

// needsTask reports whether a call of tool name is sent task-augmented.
func (s *taskState) needsTask(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.capable && s.required[name]
}

// wait registers a waiter for task id; the returned func unregisters it.
func (s *taskState) wait(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	if s.waiters == nil {
		s.waiters = map[string]chan struct{}{}
	}
	s.waiters[id] = ch
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		if s.waiters[id] == ch {
			delete(s.waiters, id)
		}
		s.mu.Unlock()
	}
}

// notified wakes the waiter of the task a notifications/tasks/status names.
// It never blocks (the transport's reading goroutine calls it).
func (s *taskState) notified(params json.RawMessage) {
	var t taskObject
	if json.Unmarshal(params, &t) != nil || t.TaskID == "" {
		return
	}
	s.mu.Lock()
	ch := s.waiters[t.TaskID]
	s.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func isJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// taskParams adds "task": {"ttl": ttl in ms} to tools/call params made
// by callParams (a JSON object). A zero ttl asks for none.
func taskParams(params json.RawMessage, ttl time.Duration) json.RawMessage {
	task := `{}`
	if ms := ttl.Milliseconds(); ms > 0 {
		task = fmt.Sprintf(`{"ttl":%d}`, ms)
	}
	out := make([]byte, 0, len(params)+len(task)+10)
	out = append(out, params[:len(params)-1]...)
	out = append(out, `,"task":`...)
	out = append(out, task...)
	return append(out, '}')
}

// sendTask sends tools/call task-augmented and follows the task to its
// end. Its sendResult is read by CallTool as that of a plain call: resp is
// the answer of tasks/result (or of tools/call, when the server answered
// without creating a task); once the task exists, every failure is sent
// (the tool may be running) and no longer a session error, so that the
// call is never sent twice; when ctx ends, tasks/cancel is sent.
func (c *connection) sendTask(ctx context.Context, name string, params json.RawMessage, header http.Header) sendResult {
	r := c.send(ctx, string(mcpgo.MethodToolsCall), taskParams(params, c.u.cfg.CallTimeout), header)
	if r.err != nil || r.resp.Error != nil {
		return r
	}
	var created struct {
		Task *taskObject `json:"task"`
	}
	if json.Unmarshal(r.resp.Result, &created) != nil || created.Task == nil {
		// Not a CreateTaskResult: the server ran the call plainly, or
		// answered something CallTool reports as malformed.
		return r
	}
	task := *created.Task
	if task.TaskID == "" || len(task.TaskID) > taskMaxIDLength {
		return c.taskLost(r.id, fmt.Sprintf("the server answered the task-augmented call of %q with a task without a usable taskId", name))
	}
	idParams, _ := json.Marshal(map[string]string{"taskId": task.TaskID})
	woken, unwait := c.tasks.wait(task.TaskID)
	defer unwait()
	last := r.id
	for !task.terminal() && task.Status != "input_required" {
		t := time.NewTimer(task.interval())
		select {
		case <-ctx.Done():
			t.Stop()
			c.cancelTask(ctx, header, idParams)
			return sendResult{id: last, sent: true, err: ctx.Err()}
		case <-woken:
		case <-t.C:
		}
		t.Stop()
		g := c.send(ctx, string(mcpgo.MethodTasksGet), idParams, header)
		last = g.id
		switch {
		case ctx.Err() != nil:
			c.cancelTask(ctx, header, idParams)
			return sendResult{id: last, sent: true, err: ctx.Err()}
		case g.err != nil:
			c.cancelTask(ctx, header, idParams)
			return c.taskLost(last, fmt.Sprintf("polling task %q of %q failed: %s", task.TaskID, name, safeError(g.err)))
		case g.resp.Error != nil:
			// Unknown task (expired, or the server lost it): nothing to cancel.
			return c.taskLost(last, fmt.Sprintf("tasks/get of task %q of %q answered %d %s", task.TaskID, name, g.resp.Error.Code, g.resp.Error.Message))
		}
		var next taskObject
		if json.Unmarshal(g.resp.Result, &next) != nil || next.Status == "" {
			c.cancelTask(ctx, header, idParams)
			return c.taskLost(last, fmt.Sprintf("tasks/get of task %q of %q answered a malformed task", task.TaskID, name))
		}
		next.TaskID = task.TaskID
		task = next
	}

	// Terminal, or input_required: tasks/result delivers what the server
	// needs answered and blocks until the task is terminal.
	res := c.send(ctx, string(mcpgo.MethodTasksResult), idParams, header)
	switch {
	case ctx.Err() != nil:
		c.cancelTask(ctx, header, idParams)
		return sendResult{id: res.id, sent: true, err: ctx.Err()}
	case res.err != nil:
		if !task.terminal() {
			c.cancelTask(ctx, header, idParams)
		}
		return c.taskLost(res.id, fmt.Sprintf("tasks/result of task %q of %q failed: %s", task.TaskID, name, safeError(res.err)))
	case res.resp.Error != nil:
		switch task.Status {
		case "cancelled":
			// Cancelled by the server or another client, not by this call:
			// the tool did not finish; a retry may.
			return c.taskLost(res.id, fmt.Sprintf("task %q of %q was cancelled upstream: %s", task.TaskID, name, taskMessage(task, res.resp.Error)))
		case "failed":
			if task.StatusMessage != "" {
				e := *res.resp.Error
				e.Message = "task failed: " + task.StatusMessage
				res.resp.Error = &e
			}
		}
		return sendResult{resp: res.resp, id: res.id, sent: true}
	}
	res.resp.Result = withoutRelatedTask(res.resp.Result)
	return sendResult{resp: res.resp, id: res.id, sent: true}
}

func taskMessage(t taskObject, e *mcpgo.JSONRPCErrorDetails) string {
	if t.StatusMessage != "" {
		return t.StatusMessage
	}
	return fmt.Sprintf("%d %s", e.Code, e.Message)
}

// taskLost is the outcome of a task the bridge could not follow to its
// end: sent (the tool may have run) and not a session error, so CallTool
// reports ErrLost and never sends the call again.
func (c *connection) taskLost(id int64, msg string) sendResult {
	return sendResult{id: id, sent: true, err: errors.New(msg)}
}

// cancelTask sends tasks/cancel in the background, bounded by
// cancelTimeout and the connection's life; the answer (the cancelled
// task, or -32602 for a task already terminal) is only logged. It keeps
// the values of ctx, the call's, but not its end: the cancel goes with the
// call's identity (the user an Authorizer reads from it, the forwarded
// header), never the bridge's own.
func (c *connection) cancelTask(ctx context.Context, header http.Header, idParams json.RawMessage) {
	ctx = context.WithoutCancel(ctx)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, cancelTimeout)
		defer cancel()
		stop := context.AfterFunc(c.ctx, cancel)
		defer stop()
		r := c.send(ctx, string(mcpgo.MethodTasksCancel), idParams, header)
		switch {
		case r.err != nil:
			c.u.log.Debug("tasks/cancel not sent", "error", safeError(r.err))
		case r.resp.Error != nil:
			c.u.log.Debug("tasks/cancel refused", "code", r.resp.Error.Code, "message", r.resp.Error.Message)
		}
	}()
}

// withoutRelatedTask removes the related-task key from a task result's
// _meta (and _meta when nothing else is left): it names the bridge's own
// upstream task, which the caller never sees, and would make the result
// differ from that of a plain call.
func withoutRelatedTask(result json.RawMessage) json.RawMessage {
	if !bytes.Contains(result, []byte(taskRelatedMeta)) {
		return result
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(result, &top) != nil {
		return result
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(top["_meta"], &meta) != nil || meta[taskRelatedMeta] == nil {
		return result
	}
	delete(meta, taskRelatedMeta)
	if len(meta) == 0 {
		delete(top, "_meta")
	} else {
		b, err := json.Marshal(meta)
		if err != nil {
			return result
		}
		top["_meta"] = b
	}
	b, err := json.Marshal(top)
	if err != nil {
		return result
	}
	return b
}
