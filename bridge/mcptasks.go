package bridge

import (
	"context"
	"encoding/json"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/bridge/webhooks"
	"github.com/mcpotc/mcpotc/mcp/front"
)

// MCP tasks on the MCP front (docs/long-running.md, MCP tasks).
//
// The front (mcp/front, tasks.go) answers a tools/call with a task handle
// when the host can take one (the io.modelcontextprotocol/tasks extension
// declared in the request's _meta, or a 2025-11-25 params.task) and the
// OTC call has not answered within the tool's time; the handler goes on
// in the background, its OTC request carrying the call_id the handler
// made for it (an OTC server that keeps call_ids runs it at most once),
// and is recorded once, by mcpCall.finish, when it ends — whether the
// host polls for it or not. A tool error (success false) is a completed
// task with isError; only a JSON-RPC error (a timeout, an unreachable
// server) is a failed one.

// TaskOptions configure the MCP front's tasks (MCPFrontOptions.Tasks).
type TaskOptions struct {
	// After is how long a call may go unanswered before it becomes a task,
	// for a tool without a task override. Zero: front.DefaultTaskAfter;
	// negative: never (only tools whose override says so become tasks).
	After time.Duration
	// TTL is how long a task and its result are kept (ttlMs). Zero:
	// front.DefaultTaskTTL.
	TTL time.Duration
	// PollInterval is the pollIntervalMs hosts are told. Zero:
	// front.DefaultTaskPollInterval.
	PollInterval time.Duration
	// MaxTasks, MaxTasksPerPrincipal, MaxBytes and MaxBytesPerPrincipal
	// bound the tasks kept (zero: front's defaults).
	MaxTasks, MaxTasksPerPrincipal int
	MaxBytes, MaxBytesPerPrincipal int64
	// Store keeps the tasks. Nil: this process's memory.
	Store front.TaskStore
}

// setTasks turns the front's tasks on, each tool's policy read from the
// catalog served when the call comes.
func (f *MCPFront) setTasks() {
	o := f.opts.Tasks
	after := o.After
	if after < 0 {
		after = 0
	}
	f.front.SetTasks(&front.TaskOptions{Store: o.Store, After: after, TTL: o.TTL, PollInterval: o.PollInterval,
		MaxTasks: o.MaxTasks, MaxTasksPerPrincipal: o.MaxTasksPerPrincipal, MaxTaskBytes: o.MaxBytes, MaxTaskBytesPerPrincipal: o.MaxBytesPerPrincipal,
		Policy: f.taskPolicy, OnTaskStatus: f.taskStatus})
}

// taskStatus sends the webhook of a task's new status (docs/long-running.md,
// Webhooks): input_required, and its end. The event names the task, its
// tool, its times and whether its result is a tool error; the principal
// only bounds its share of the queue, never sent.
func (f *MCPFront) taskStatus(t *front.TaskRecord) {
	if f.opts.Webhooks == nil {
		return
	}
	ev := webhooks.Event{TaskID: t.ID, Tool: t.Tool, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Share: t.Principal}
	switch t.Status {
	case front.TaskCompleted:
		ev.Type = webhooks.TaskCompleted
		var r struct {
			IsError bool `json:"isError"`
		}
		_ = json.Unmarshal(t.Result, &r)
		ev.IsError = r.IsError
	case front.TaskFailed:
		ev.Type = webhooks.TaskFailed
	case front.TaskInputRequired:
		ev.Type = webhooks.TaskInputRequired
	case front.TaskCancelled:
		ev.Type = webhooks.TaskCancelled
	default:
		return
	}
	f.opts.Webhooks.Send(context.Background(), ev)
}

// taskPolicy is the tool name's: its override's, else After's.
func (f *MCPFront) taskPolicy(name string) front.TaskPolicy {
	if t := f.toolNamed(name); t != nil && t.task.Mode != "" {
		return t.task
	}
	if f.opts.Tasks.After < 0 {
		return front.TaskPolicy{Mode: front.TaskNever}
	}
	return front.TaskPolicy{Mode: front.TaskAfter}
}

// ParseTaskPolicy reads an override's task ("never", "always",
// "required", or a duration); ok false when it is none of those.
func ParseTaskPolicy(s string) (front.TaskPolicy, bool) {
	switch s {
	case "":
		return front.TaskPolicy{}, true
	case front.TaskNever, front.TaskAlways, front.TaskRequired:
		return front.TaskPolicy{Mode: s}, true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return front.TaskPolicy{}, false
	}
	return front.TaskPolicy{Mode: front.TaskAfter, After: d}, true
}

// setTaskPolicy sets t's task policy from its override's task, and the
// execution.taskSupport its definition shows hosts.
func (t *frontTool) setTaskPolicy(s string) {
	p, ok := ParseTaskPolicy(s)
	if !ok || p.Mode == "" {
		return
	}
	t.task = p
	switch p.Mode {
	case front.TaskRequired:
		t.Tool.Execution = &mcpgo.ToolExecution{TaskSupport: mcpgo.TaskSupportRequired}
	case front.TaskAlways, front.TaskAfter:
		t.Tool.Execution = &mcpgo.ToolExecution{TaskSupport: mcpgo.TaskSupportOptional}
	}
}
