package front

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/internal/principal"
	"github.com/mcpotc/mcpotc/internal/shutdown"
)

// Tasks: long-running tools/calls
//
// With SetTasks, a tools/call may be answered with a task handle instead
// of its result, and the call goes on in the background, its handler
// under a context detached from the request's (the tool's values stay:
// the caller, its token, its trace), which tasks/cancel and the
// transport's shutdown end. The task is stored (TaskStore) before its
// handle is returned, under the caller's principal (Principal): another
// caller is told "unknown task", as for a task that never existed.
//
// Two shapes are served over one store:
//
//   - the extension io.modelcontextprotocol/tasks (SEP-2663), to
//     2026-07-28 requests whose _meta client capabilities list it: the
//     front decides (TaskPolicy): a call that has not answered within
//     After becomes a task, answered with CreateTaskResult (resultType
//     "task" and the Task's fields, flat); tasks/get answers the
//     DetailedTask (result when completed, error when failed,
//     inputRequests when input_required); tasks/update gives answers;
//     tasks/cancel is cooperative; tasks/result and tasks/list are
//     -32601; an unknown taskId is -32602; a tool that runs only as a task
//     (TaskRequired) called without the extension is -32021 with
//     data.requiredCapabilities. The server declares the extension in
//     server/discover.
//   - the 2025-11-25 experimental shape: capability tasks in initialize;
//     a tools/call with params.task runs as a task at once
//     (CreateTaskResult {task}); tasks/get, tasks/result (waits for the
//     end), tasks/list, tasks/cancel.
//
// A tool error is completed with isError; failed is only for a JSON-RPC
// error of the handler. A handler asking for input (InputRequired) puts
// the task in input_required; once tasks/update answered every request,
// the handler runs again with the answers (Resumed), as a retry would.

// TasksExtension is the tasks extension's identifier (SEP-2663).
const TasksExtension = "io.modelcontextprotocol/tasks"

// The statuses of a task.
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// The modes of a TaskPolicy.
const (
	// TaskNever: the call always answers its result.
	TaskNever = "never"
	// TaskAfter: the call becomes a task when it has not answered within
	// TaskPolicy.After (the default mode).
	TaskAfter = "after"
	// TaskAlways: the call becomes a task at once, when the client can
	// take one.
	TaskAlways = "always"
	// TaskRequired: as TaskAlways, and a client that cannot take a task
	// is refused (-32021, or -32601 before 2026-07-28) without running it.
	TaskRequired = "required"
)

// TaskPolicy says when a call of a tool becomes a task.
type TaskPolicy struct {
	Mode  string        // TaskNever, TaskAfter (or ""), TaskAlways, TaskRequired
	After time.Duration // TaskAfter: zero means TaskOptions.After
}

// Defaults of TaskOptions.
const (
	DefaultTaskAfter        = 5 * time.Second
	DefaultTaskTTL          = time.Hour
	DefaultTaskPollInterval = time.Second
	// TaskPollBurst is how many tasks/get of one task may come faster than
	// its poll interval before they are refused (-32029): each poll
	// interval gives four back.
	TaskPollBurst = 20
	// MaxTaskAnswerWait bounds a 2025-11-25 tasks/result's wait for the
	// task's end, per request.
	MaxTaskAnswerWait = 5 * time.Minute
)

// CodeTaskPollTooFast answers a tasks/get that polls a task much faster
// than its pollIntervalMs (implementation-defined).
const CodeTaskPollTooFast = -32029

// TaskOptions turn tasks on (SetTasks).
type TaskOptions struct {
	// Store keeps the tasks. Nil: this process's memory, bounded by the
	// Max… fields.
	Store TaskStore
	// Policy is a tool's policy. Nil: TaskAfter for every tool.
	Policy func(tool string) TaskPolicy
	// After is TaskAfter's default wait. Zero: DefaultTaskAfter.
	After time.Duration
	// TTL is how long a task (and its result) is kept after its creation
	// (ttlMs). Zero: DefaultTaskTTL.
	TTL time.Duration
	// PollInterval is the pollIntervalMs clients are told. Zero:
	// DefaultTaskPollInterval.
	PollInterval time.Duration
	// Bounds of the memory store (zero: the Default… bound).
	MaxTasks, MaxTasksPerPrincipal         int
	MaxTaskBytes, MaxTaskBytesPerPrincipal int64
	// OnTaskStatus, when set, is told of each status a task's run
	// reaches (its record as stored): input_required, and its end
	// (completed, failed, cancelled), once. It must not block.
	OnTaskStatus func(t *TaskRecord)
}

// tasks is a Server's task machinery (nil: tasks are off).
type tasks struct {
	opts  TaskOptions
	store TaskStore
	now   func() time.Time
	owner string // this process, as TaskRecord.Owner

	mu      sync.Mutex
	running map[string]*taskRun // by principal key: the tasks this process runs
	changed map[string]chan struct{}
}

// taskRun is a task this process runs.
type taskRun struct {
	cancel context.CancelCauseFunc
	ctx    context.Context // the handler's context (detached from the request)
	tool   *Tool
	req    mcpgo.CallToolRequest
}

// errTaskCancelled is the cause of a task ended by tasks/cancel.
var errTaskCancelled = fmt.Errorf("mcp front: the task was cancelled: %w", context.Canceled)

// SetTasks turns tasks on with opts (nil: the defaults); call it before
// serving.
func (f *Server) SetTasks(opts *TaskOptions) {
	if opts == nil {
		opts = &TaskOptions{}
	}
	o := *opts
	if o.After <= 0 {
		o.After = DefaultTaskAfter
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTaskTTL
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultTaskPollInterval
	}
	t := &tasks{opts: o, store: o.Store, now: time.Now, owner: randomTaskID(),
		running: map[string]*taskRun{}, changed: map[string]chan struct{}{}}
	if t.store == nil {
		t.store = NewMemoryTaskStore(o.MaxTasks, o.MaxTasksPerPrincipal, o.MaxTaskBytes, o.MaxTaskBytesPerPrincipal, nil)
	}
	f.tasks = t
}

// policy is tool's policy.
func (t *tasks) policy(tool string) TaskPolicy {
	p := TaskPolicy{Mode: TaskAfter}
	if t.opts.Policy != nil {
		p = t.opts.Policy(tool)
	}
	if p.Mode == "" {
		p.Mode = TaskAfter
	}
	if p.Mode == TaskAfter && p.After <= 0 {
		p.After = t.opts.After
	}
	return p
}

// taskRequired reports whether tool runs only as a task: its policy says
// so, or its definition (execution.taskSupport "required").
func (f *Server) taskRequired(t *Tool) bool {
	if f.tasks != nil && f.tasks.policy(t.Tool.Name).Mode == TaskRequired {
		return true
	}
	return t.Tool.Execution != nil && t.Tool.Execution.TaskSupport == mcpgo.TaskSupportRequired
}

// taskCapable reports whether the client of x can take a task handle of
// the extension: a 2026-07-28 request whose capabilities list it.
func taskCapable(x *exchange) bool {
	if x.modern == nil || x.modern.caps == nil {
		return false
	}
	_, ok := x.modern.caps.Extensions[TasksExtension]
	return ok
}

// legacyTaskParam is a 2025-11-25 tools/call's params.task (nil: none).
func legacyTaskParam(params json.RawMessage) json.RawMessage {
	v := memberOf(params, "task")
	if v == nil || v[0] != '{' {
		return nil
	}
	return v
}

// missingTasksCapability is -32021 for a call of a tool that runs only as
// a task, from a client that did not declare the extension.
func missingTasksCapability(tool string) *RPCError {
	return &RPCError{Code: mcpgo.MISSING_REQUIRED_CLIENT_CAPABILITY,
		Message: fmt.Sprintf("tool '%s' runs only as a task: declare the client capability extensions[%q] in _meta", tool, TasksExtension),
		Data:    map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}}}
}

// taskGate answers a call of t that cannot run as the client asked
// (nil: it may run): a task-only tool without a task, or a call the front
// cannot make a task of.
func (f *Server) taskGate(m *message, x *exchange, t *Tool) *RPCError {
	if !f.taskRequired(t) {
		return nil
	}
	if f.tasks != nil {
		if taskCapable(x) || (x.modern == nil && legacyTaskParam(m.params) != nil) {
			return nil
		}
		if x.modern != nil {
			return missingTasksCapability(t.Tool.Name)
		}
	}
	return &RPCError{Code: mcpgo.METHOD_NOT_FOUND,
		Message: fmt.Sprintf("tool '%s' requires task augmentation (taskSupport %q): send params.task", t.Tool.Name, mcpgo.TaskSupportRequired)}
}

// runCall runs t's handler for req: as a plain call, or, when the client
// can take a task and the tool's policy says so, as a task: then the
// frame (CreateTaskResult, or a refusal) is returned, and res and err are
// unused.
func (f *Server) runCall(ctx context.Context, m *message, x *exchange, t *Tool, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, []byte, error) {
	ts := f.tasks
	if ts == nil {
		res, err := runHandler(ctx, t.Handler, req)
		return res, nil, err
	}
	legacy := x.modern == nil && legacyTaskParam(m.params) != nil
	if !legacy && !taskCapable(x) {
		res, err := runHandler(ctx, t.Handler, req)
		return res, nil, err
	}
	wait := time.Duration(0)
	if !legacy {
		switch p := ts.policy(t.Tool.Name); p.Mode {
		case TaskNever:
			res, err := runHandler(ctx, t.Handler, req)
			return res, nil, err
		case TaskAfter:
			wait = p.After
		}
	}
	// The handler runs detached from the request: it may outlive it.
	hctx, hcancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { hcancel(context.Cause(ctx)) })
	type answer struct {
		res *mcpgo.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := runHandler(hctx, t.Handler, req)
		done <- answer{res, err}
	}()
	if wait > 0 {
		timer := time.NewTimer(wait)
		select {
		case a := <-done:
			timer.Stop()
			stop()
			hcancel(nil)
			return a.res, nil, a.err
		case <-timer.C:
		}
	}
	// A task now: the request's end no longer ends the handler.
	stop()
	if x.life != nil {
		context.AfterFunc(x.life, func() { hcancel(errFrontShutdown) })
	}
	rec, failure := ts.create(ctx, t.Tool.Name, legacy, m.params)
	if failure != nil {
		hcancel(failure)
		return nil, f.answer(m, nil, failure), nil
	}
	run := &taskRun{cancel: hcancel, ctx: hctx, tool: t, req: req}
	ts.track(rec, run)
	go func() {
		a := <-done
		f.taskEnded(rec.Principal, rec.ID, run, a.res, a.err)
	}()
	return nil, f.answer(m, f.createTaskResult(rec), nil), nil
}

// create stores a new working task of the caller of ctx.
func (ts *tasks) create(ctx context.Context, tool string, legacy bool, params json.RawMessage) (*TaskRecord, *RPCError) {
	now := ts.now().UTC()
	ttl := ts.opts.TTL
	if legacy {
		// The client's ttl (milliseconds) when shorter than the front's.
		var p struct {
			TTL *int64 `json:"ttl"`
		}
		if json.Unmarshal(legacyTaskParam(params), &p) == nil && p.TTL != nil && *p.TTL > 0 && time.Duration(*p.TTL)*time.Millisecond < ttl {
			ttl = time.Duration(*p.TTL) * time.Millisecond
		}
	}
	rec := &TaskRecord{ID: randomTaskID(), Principal: taskPrincipal(ctx), Tool: tool, Status: TaskWorking,
		CreatedAt: now, UpdatedAt: now, TTL: ttl, PollInterval: ts.opts.PollInterval, Legacy: legacy,
		Owner: ts.owner, LeaseUntil: now.Add(ttl)}
	if err := ts.store.Create(ctx, rec); err != nil {
		var bound *TaskBoundError
		if errors.As(err, &bound) {
			return nil, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: bound.Error(), Data: map[string]any{"bound": bound.Bound, "limit": bound.Limit}}
		}
		return nil, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "the task could not be stored: " + err.Error()}
	}
	return rec, nil
}

// taskPrincipal names the caller as tasks are bound to it.
func taskPrincipal(ctx context.Context) string {
	if p := Principal(ctx); p != "" {
		return p
	}
	return principal.Local
}

func (ts *tasks) track(rec *TaskRecord, run *taskRun) {
	ts.mu.Lock()
	ts.running[taskKey(rec.Principal, rec.ID)] = run
	ts.mu.Unlock()
}

func (ts *tasks) runOf(principal, id string) *taskRun {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.running[taskKey(principal, id)]
}

// notify wakes the waiters of a task's change (2025-11-25 tasks/result).
func (ts *tasks) notify(principal, id string) {
	ts.mu.Lock()
	k := taskKey(principal, id)
	if ch := ts.changed[k]; ch != nil {
		close(ch)
		delete(ts.changed, k)
	}
	ts.mu.Unlock()
}

// changes is a channel closed at the task's next change.
func (ts *tasks) changes(principal, id string) <-chan struct{} {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	k := taskKey(principal, id)
	ch := ts.changed[k]
	if ch == nil {
		ch = make(chan struct{})
		ts.changed[k] = ch
	}
	return ch
}

// taskEnded stores what the handler of a task answered: its result
// (completed), its JSON-RPC error (failed), or its request for input
// (input_required). A task already cancelled stays so.
func (f *Server) taskEnded(principalName, id string, run *taskRun, res *mcpgo.CallToolResult, err error) {
	ts := f.tasks
	ctx := context.WithoutCancel(run.ctx)
	var ask *InputRequired
	status, result, rpcErr := TaskCompleted, json.RawMessage(nil), (*RPCError)(nil)
	switch {
	case errors.Is(context.Cause(run.ctx), errTaskCancelled):
		status = TaskCancelled
	case shutdown.Is(run.ctx):
		status, rpcErr = TaskFailed, shuttingDown()
	case err != nil:
		var coded CodedError
		if a, ok := inputRequest(err); ok {
			ask, status = a, TaskInputRequired
		} else if errors.As(err, &coded) && coded != nil {
			status, rpcErr = TaskFailed, &RPCError{Code: coded.RPCCode(), Message: coded.Error(), Data: coded.RPCData()}
		} else {
			status, rpcErr = TaskFailed, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: err.Error()}
		}
	case res == nil:
		status, rpcErr = TaskFailed, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: fmt.Sprintf("tool '%s' returned no result", run.req.Params.Name)}
	}
	var inputs json.RawMessage
	if ask != nil {
		inputs = taskInputRequests(ask)
	}
	rec, serr := ts.store.Update(ctx, principalName, id, func(t *TaskRecord) error {
		if t.Terminal() {
			return errTaskSettled
		}
		if status == TaskCompleted {
			b, encErr := f.callResult(res, !t.Legacy)
			if encErr != nil {
				status, rpcErr = TaskFailed, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "Internal error: the result could not be encoded: " + encErr.Error()}
			} else {
				result = taskInlineResult(b)
			}
		}
		t.Status, t.UpdatedAt, t.Result, t.Error, t.InputRequests = status, ts.now().UTC(), result, nil, nil
		t.StatusMessage = ""
		if rpcErr != nil {
			t.Error, _ = encode(rpcErr.object())
			t.StatusMessage = rpcErr.Message
		}
		if ask != nil {
			t.InputRequests, t.Responses, t.AskState = inputs, nil, ask.State
			t.Round++
			t.StatusMessage = ask.text()
		}
		return nil
	})
	if errors.Is(serr, errTaskSettled) {
		rec, _ = ts.store.Get(ctx, principalName, id) // cancelled meanwhile: its end is told here
	} else if serr != nil {
		var bound *TaskBoundError
		if errors.As(serr, &bound) {
			// The result does not fit: the task fails, saying which bound.
			rec, serr = ts.store.Update(ctx, principalName, id, func(t *TaskRecord) error {
				t.Status, t.UpdatedAt, t.Result, t.StatusMessage = TaskFailed, ts.now().UTC(), nil, bound.Error()
				t.Error, _ = encode((&RPCError{Code: mcpgo.INTERNAL_ERROR, Message: bound.Error()}).object())
				return nil
			})
		}
		if serr != nil {
			f.log.Error("mcp front: a task's end could not be stored", "task", id, "error", serr)
		}
	}
	if ask == nil {
		run.cancel(nil)
		ts.mu.Lock()
		delete(ts.running, taskKey(principalName, id))
		ts.mu.Unlock()
	}
	ts.notify(principalName, id)
	if rec != nil && ts.opts.OnTaskStatus != nil {
		ts.opts.OnTaskStatus(rec)
	}
}

var errTaskSettled = errors.New("the task has ended")

// object is e as a JSON-RPC error object.
func (e *RPCError) object() map[string]any {
	o := map[string]any{"code": e.Code, "message": e.Message}
	if e.Code == 0 {
		o["code"] = mcpgo.INTERNAL_ERROR
	}
	if e.Data != nil {
		if _, err := encode(e.Data); err == nil {
			o["data"] = e.Data
		}
	}
	return o
}

// taskInlineResult is a result as a task inlines it: without resultType
// (the tasks/get answer has its own).
func taskInlineResult(b json.RawMessage) json.RawMessage {
	members := map[string]json.RawMessage{}
	if json.Unmarshal(b, &members) != nil {
		return b
	}
	delete(members, "resultType")
	out, _ := encode(members)
	return out
}

// taskInputRequests is the inputRequests map of ask.
func taskInputRequests(ask *InputRequired) json.RawMessage {
	type params struct {
		Meta    *mcpgo.Meta `json:"_meta,omitempty"`
		Mode    string      `json:"mode"`
		Message string      `json:"message"`
		URL     string      `json:"url"`
	}
	type inputRequest struct {
		Method string `json:"method"`
		Params params `json:"params"`
	}
	requests := make(map[string]inputRequest, len(ask.Elicitations))
	for i, e := range ask.Elicitations {
		key := e.ElicitationID
		if key == "" {
			key = "elicitation-" + strconv.Itoa(i)
		}
		if _, dup := requests[key]; dup {
			key += "-" + strconv.Itoa(i)
		}
		requests[key] = inputRequest{Method: string(mcpgo.MethodElicitationCreate),
			Params: params{Meta: e.Meta, Mode: mcpgo.ElicitationModeURL, Message: e.Message, URL: e.URL}}
	}
	b, _ := encode(requests)
	return b
}

// taskFields is the Task of rec, as the extension writes it.
func taskFields(rec *TaskRecord) map[string]any {
	o := map[string]any{
		"taskId":         rec.ID,
		"status":         rec.Status,
		"createdAt":      rec.CreatedAt.Format(time.RFC3339Nano),
		"lastUpdatedAt":  rec.UpdatedAt.Format(time.RFC3339Nano),
		"ttlMs":          rec.TTL.Milliseconds(),
		"pollIntervalMs": rec.PollInterval.Milliseconds(),
	}
	if rec.StatusMessage != "" {
		o["statusMessage"] = rec.StatusMessage
	}
	return o
}

// legacyTaskFields is the Task of rec in the 2025-11-25 shape.
func legacyTaskFields(rec *TaskRecord) map[string]any {
	o := map[string]any{
		"taskId":        rec.ID,
		"status":        rec.Status,
		"createdAt":     rec.CreatedAt.Format(time.RFC3339Nano),
		"lastUpdatedAt": rec.UpdatedAt.Format(time.RFC3339Nano),
		"ttl":           rec.TTL.Milliseconds(),
		"pollInterval":  rec.PollInterval.Milliseconds(),
	}
	if rec.StatusMessage != "" {
		o["statusMessage"] = rec.StatusMessage
	}
	return o
}

// createTaskResult is the answer to the tools/call that created rec.
func (f *Server) createTaskResult(rec *TaskRecord) any {
	if rec.Legacy {
		return map[string]any{"task": legacyTaskFields(rec)}
	}
	o := taskFields(rec)
	o["resultType"] = "task"
	return f.modernResult(o, "", nil)
}

// detailedTask is the extension's DetailedTask of rec (tasks/get,
// notifications/tasks).
func detailedTask(rec *TaskRecord) map[string]any {
	o := taskFields(rec)
	switch rec.Status {
	case TaskCompleted:
		if rec.Result != nil {
			o["result"] = rec.Result
		}
	case TaskFailed:
		if rec.Error != nil {
			o["error"] = rec.Error
		}
	case TaskInputRequired:
		if rec.InputRequests != nil {
			o["inputRequests"] = rec.InputRequests
		}
	}
	return o
}

// taskMethod answers tasks/get, tasks/update, tasks/cancel, tasks/result
// and tasks/list, for each era.
func (f *Server) taskMethod(ctx context.Context, m *message, x *exchange) []byte {
	if f.tasks == nil {
		return f.answer(m, nil, &RPCError{Code: mcpgo.METHOD_NOT_FOUND, Message: "Method " + m.method + " not found"})
	}
	if x.modern != nil {
		return f.modernTaskMethod(ctx, m, x)
	}
	return f.legacyTaskMethod(ctx, m, x)
}

func taskIDParam(params json.RawMessage) (string, *RPCError) {
	id, ok := jsonString(memberOf(params, "taskId"))
	if !ok || id == "" {
		return "", &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "invalid params: taskId must be a non-empty string"}
	}
	return id, nil
}

func unknownTask(id string) *RPCError {
	return &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "unknown task: " + strconv.Quote(id)}
}

// lookup reads the caller's task id, a refusal when there is none.
func (f *Server) lookupTask(ctx context.Context, id string) (*TaskRecord, *RPCError) {
	rec, err := f.tasks.store.Get(ctx, taskPrincipal(ctx), id)
	switch {
	case errors.Is(err, ErrUnknownTask):
		return nil, unknownTask(id)
	case err != nil:
		return nil, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "the task store failed: " + err.Error()}
	}
	return rec, nil
}

func (f *Server) modernTaskMethod(ctx context.Context, m *message, x *exchange) []byte {
	switch m.method {
	case "tasks/result", "tasks/list":
		return f.answer(m, nil, &RPCError{Code: mcpgo.METHOD_NOT_FOUND,
			Message: strconv.Quote(m.method) + " is not part of the tasks extension (" + TasksExtension + "): read the result with tasks/get"})
	case "tasks/get", "tasks/update", "tasks/cancel":
	default:
		return f.answer(m, nil, &RPCError{Code: mcpgo.METHOD_NOT_FOUND, Message: "Method " + m.method + " not found"})
	}
	if !taskCapable(x) {
		e := missingTasksCapability("")
		e.Message = strconv.Quote(m.method) + " requires the client capability extensions[" + strconv.Quote(TasksExtension) + "] in _meta"
		return f.answer(m, nil, e)
	}
	id, failure := taskIDParam(m.params)
	if failure != nil {
		return f.answer(m, nil, failure)
	}
	pr := taskPrincipal(ctx)
	switch m.method {
	case "tasks/get":
		rec, failure := f.pollTask(ctx, pr, id)
		if failure != nil {
			return f.answer(m, nil, failure)
		}
		return f.answer(m, f.modernResult(detailedTask(rec), "", nil), nil)
	case "tasks/update":
		if failure := f.updateTask(ctx, pr, id, m.params); failure != nil {
			return f.answer(m, nil, failure)
		}
		return f.answer(m, f.modernResult(map[string]any{}, "", nil), nil)
	default: // tasks/cancel
		if _, failure := f.cancelTask(ctx, pr, id); failure != nil {
			return f.answer(m, nil, failure)
		}
		return f.answer(m, f.modernResult(map[string]any{}, "", nil), nil)
	}
}

// pollTask reads principal's task id for tasks/get, refusing a poll much
// faster than its interval (TaskPollBurst).
func (f *Server) pollTask(ctx context.Context, pr, id string) (*TaskRecord, *RPCError) {
	ts := f.tasks
	var tooFast bool
	rec, err := ts.store.Update(ctx, pr, id, func(t *TaskRecord) error {
		now := ts.now()
		// A bucket of TaskPollBurst polls, four back each interval: kept
		// as the time the bucket would be full again.
		step := max(t.PollInterval/4, time.Millisecond)
		full := t.LastPoll
		if full.Before(now) {
			full = now
		}
		if full.Sub(now) > step*(TaskPollBurst-1) {
			tooFast = true
			return errPollTooFast
		}
		t.LastPoll = full.Add(step)
		return nil
	})
	switch {
	case tooFast:
		return nil, &RPCError{Code: CodeTaskPollTooFast, Message: fmt.Sprintf("task %q is polled faster than its pollIntervalMs (%d): poll again later",
			id, ts.opts.PollInterval.Milliseconds()), Data: map[string]any{"pollIntervalMs": ts.opts.PollInterval.Milliseconds()}}
	case errors.Is(err, ErrUnknownTask):
		return nil, unknownTask(id)
	case err != nil:
		return nil, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "the task store failed: " + err.Error()}
	}
	return rec, nil
}

var errPollTooFast = errors.New("polled too fast")

// updateTask records answers to an input_required task's requests (keys
// it did not ask are ignored); once all are answered, the handler runs
// again with them.
func (f *Server) updateTask(ctx context.Context, pr, id string, params json.RawMessage) *RPCError {
	var p struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if raw := memberOf(params, "inputResponses"); raw == nil || raw[0] != '{' || json.Unmarshal(params, &p) != nil {
		return &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "invalid params: inputResponses must be an object"}
	}
	ts := f.tasks
	resume := false
	var rec *TaskRecord
	rec, err := ts.store.Update(ctx, pr, id, func(t *TaskRecord) error {
		resume = false
		if t.Status != TaskInputRequired {
			return nil // eventually consistent: answers to nothing asked are dropped
		}
		pending := map[string]json.RawMessage{}
		_ = json.Unmarshal(t.InputRequests, &pending)
		for k, v := range p.InputResponses {
			if _, asked := pending[k]; !asked {
				continue
			}
			if t.Responses == nil {
				t.Responses = map[string]json.RawMessage{}
			}
			t.Responses[k] = v
			delete(pending, k)
		}
		t.UpdatedAt = ts.now().UTC()
		if len(pending) == 0 {
			t.Status, t.InputRequests, t.StatusMessage = TaskWorking, nil, ""
			resume = true
			return nil
		}
		t.InputRequests, _ = encode(pending)
		return nil
	})
	switch {
	case errors.Is(err, ErrUnknownTask):
		return unknownTask(id)
	case err != nil:
		return &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "the task could not be updated: " + err.Error()}
	}
	ts.notify(pr, id)
	if resume {
		run := ts.runOf(pr, id)
		if run == nil {
			// Not run here (another process, or this one restarted): it
			// cannot resume.
			f.taskEnded(pr, id, &taskRun{cancel: func(error) {}, ctx: context.WithoutCancel(ctx), req: mcpgo.CallToolRequest{}},
				nil, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "the task cannot resume: the process that ran it is gone"})
			return nil
		}
		responses := make(map[string]mcpgo.ElicitationResponse, len(rec.Responses))
		for k, v := range rec.Responses {
			var r mcpgo.ElicitationResponse
			_ = json.Unmarshal(v, &r)
			responses[k] = r
		}
		rctx := context.WithValue(run.ctx, resumedKey{}, &Resumption{Round: rec.Round, State: rec.AskState, Responses: responses})
		go func() {
			res, err := runHandler(rctx, run.tool.Handler, run.req)
			f.taskEnded(pr, id, run, res, err)
		}()
	}
	return nil
}

// cancelTask ends principal's task id: cancelled, unless it had ended
// (then unchanged); the handler's context is cancelled.
func (f *Server) cancelTask(ctx context.Context, pr, id string) (*TaskRecord, *RPCError) {
	ts := f.tasks
	was := ""
	rec, err := ts.store.Update(ctx, pr, id, func(t *TaskRecord) error {
		was = t.Status
		if t.Terminal() {
			return nil
		}
		t.Status, t.UpdatedAt, t.StatusMessage = TaskCancelled, ts.now().UTC(), "cancelled by the client"
		t.InputRequests = nil
		return nil
	})
	switch {
	case errors.Is(err, ErrUnknownTask):
		return nil, unknownTask(id)
	case err != nil:
		return nil, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "the task could not be cancelled: " + err.Error()}
	}
	if run := ts.runOf(pr, id); run != nil {
		run.cancel(errTaskCancelled)
		if was == TaskInputRequired {
			// No handler runs: the task's end is told here.
			ts.mu.Lock()
			delete(ts.running, taskKey(pr, id))
			ts.mu.Unlock()
			if ts.opts.OnTaskStatus != nil {
				ts.opts.OnTaskStatus(rec)
			}
		}
	}
	ts.notify(pr, id)
	rec.Status = TaskCancelled
	if was == TaskCompleted || was == TaskFailed || was == TaskCancelled {
		rec.Status = was
	}
	return rec, nil
}

// legacyTaskMethod serves the 2025-11-25 task methods.
func (f *Server) legacyTaskMethod(ctx context.Context, m *message, _ *exchange) []byte {
	pr := taskPrincipal(ctx)
	if m.method == "tasks/list" {
		recs, err := f.tasks.store.List(ctx, pr)
		if err != nil {
			return f.answer(m, nil, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "the task store failed: " + err.Error()})
		}
		list := make([]map[string]any, 0, len(recs))
		for _, r := range recs {
			if r.Legacy {
				list = append(list, legacyTaskFields(r))
			}
		}
		return f.answer(m, map[string]any{"tasks": list}, nil)
	}
	switch m.method {
	case "tasks/get", "tasks/result", "tasks/cancel":
	default:
		return f.answer(m, nil, &RPCError{Code: mcpgo.METHOD_NOT_FOUND, Message: "Method " + m.method + " not found"})
	}
	id, failure := taskIDParam(m.params)
	if failure != nil {
		return f.answer(m, nil, failure)
	}
	switch m.method {
	case "tasks/get":
		rec, failure := f.pollTask(ctx, pr, id)
		if failure != nil {
			return f.answer(m, nil, failure)
		}
		return f.answer(m, legacyTaskFields(rec), nil)
	case "tasks/cancel":
		rec, failure := f.lookupTask(ctx, id)
		if failure != nil {
			return f.answer(m, nil, failure)
		}
		if rec.Terminal() {
			return f.answer(m, nil, &RPCError{Code: mcpgo.INVALID_PARAMS, Message: fmt.Sprintf("task %q has ended (%s): it cannot be cancelled", id, rec.Status)})
		}
		if rec, failure = f.cancelTask(ctx, pr, id); failure != nil {
			return f.answer(m, nil, failure)
		}
		return f.answer(m, legacyTaskFields(rec), nil)
	}
	// tasks/result: wait (bounded) for the end.
	wait, cancel := context.WithTimeout(ctx, MaxTaskAnswerWait)
	defer cancel()
	for {
		changed := f.tasks.changes(pr, id)
		rec, failure := f.lookupTask(ctx, id)
		if failure != nil {
			return f.answer(m, nil, failure)
		}
		if rec.Terminal() {
			meta := map[string]any{"io.modelcontextprotocol/related-task": map[string]any{"taskId": id}}
			switch rec.Status {
			case TaskCompleted:
				members := map[string]json.RawMessage{}
				_ = json.Unmarshal(rec.Result, &members)
				members["_meta"], _ = encode(meta)
				return f.answer(m, members, nil)
			case TaskFailed:
				var e struct {
					Code    int             `json:"code"`
					Message string          `json:"message"`
					Data    json.RawMessage `json:"data"`
				}
				_ = json.Unmarshal(rec.Error, &e)
				failure := &RPCError{Code: e.Code, Message: e.Message}
				if e.Data != nil {
					failure.Data = e.Data
				}
				return f.answer(m, nil, failure)
			default:
				return f.answer(m, nil, &RPCError{Code: mcpgo.INVALID_PARAMS, Message: fmt.Sprintf("task %q was cancelled: it has no result", id)})
			}
		}
		select {
		case <-changed:
		case <-wait.Done():
			if ctx.Err() != nil {
				return f.answer(m, nil, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "the request ended"})
			}
			return f.answer(m, nil, &RPCError{Code: CodeRequestTimeout, Message: fmt.Sprintf("task %q has not ended within %s: ask tasks/result again", id, MaxTaskAnswerWait)})
		}
	}
}

// randomTaskID is a fresh task id: 128 random bits.
func randomTaskID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// sortTasks orders tasks oldest first.
func sortTasks(ts []*TaskRecord) {
	sort.Slice(ts, func(i, j int) bool {
		if !ts[i].CreatedAt.Equal(ts[j].CreatedAt) {
			return ts[i].CreatedAt.Before(ts[j].CreatedAt)
		}
		return strings.Compare(ts[i].ID, ts[j].ID) < 0
	})
}

// tasksCapability is the 2025-11-25 capability tasks the front declares
// at initialize when tasks are on.
var tasksCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// taskNameHeader checks a 2026-07-28 tasks/* request's Mcp-Name header
// against its params.taskId (SEP-2663, Streamable HTTP routing headers):
// a header that names another task is -32020. A request without the
// header is let through (no balancer routed it by name).
func taskNameHeader(method string, params json.RawMessage, get func(string) (string, bool)) *RPCError {
	if method != "tasks/get" && method != "tasks/update" && method != "tasks/cancel" {
		return nil
	}
	v, ok := get(mcpgo.HeaderName)
	if !ok {
		return nil
	}
	decoded, ok := mcpgo.DecodeHeaderValue(strings.TrimSpace(v))
	id, _ := jsonString(memberOf(params, "taskId"))
	if !ok || decoded != id {
		return &RPCError{Code: mcpgo.HEADER_MISMATCH, Message: fmt.Sprintf("%s header %q does not match params.taskId %q", mcpgo.HeaderName, v, id)}
	}
	return nil
}

// withLegacyTasks is res declaring the 2025-11-25 capability tasks.
func (f *Server) withLegacyTasks(res mcpgo.InitializeResult) any {
	b, err := encode(res)
	if err != nil {
		return res
	}
	members := map[string]json.RawMessage{}
	_ = json.Unmarshal(b, &members)
	caps := map[string]json.RawMessage{}
	_ = json.Unmarshal(members["capabilities"], &caps)
	caps["tasks"] = tasksCapability
	members["capabilities"], _ = encode(caps)
	return members
}

// discoverCapabilities are the capabilities server/discover declares: the
// tasks extension when tasks are on.
func (f *Server) discoverCapabilities() mcpgo.ServerCapabilities {
	caps := serverCapabilities
	if f.tasks != nil {
		caps.Extensions = map[string]any{TasksExtension: map[string]any{}}
	}
	return caps
}
