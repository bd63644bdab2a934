package front

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// TaskRecord is one task as a TaskStore keeps it (tasks.go): what every
// replica needs to answer tasks/get, tasks/update and tasks/cancel for it,
// and, for a store shared by replicas, who runs it (Owner, LeaseUntil).
type TaskRecord struct {
	ID        string `json:"id"`
	Principal string `json:"principal"` // who created it: only they see it
	Tool      string `json:"tool"`
	// Status is working, input_required, completed, failed or cancelled.
	Status        string        `json:"status"`
	StatusMessage string        `json:"statusMessage,omitempty"`
	CreatedAt     time.Time     `json:"createdAt"`
	UpdatedAt     time.Time     `json:"updatedAt"`
	TTL           time.Duration `json:"ttl"`          // kept this long after its creation
	PollInterval  time.Duration `json:"pollInterval"` // what clients are told to respect
	// Result is the CallToolResult of a completed task, encoded for the
	// task's era; Error the JSON-RPC error object of a failed one.
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
	// InputRequests are the questions still unanswered of an
	// input_required task (a JSON object by key); Responses the answers
	// given so far, by key; Round counts the input_required rounds;
	// AskState is the handler's InputRequired.State of the last round.
	InputRequests json.RawMessage            `json:"inputRequests,omitempty"`
	Responses     map[string]json.RawMessage `json:"responses,omitempty"`
	Round         int                        `json:"round,omitempty"`
	AskState      []byte                     `json:"askState,omitempty"`
	// Legacy: created by a 2025-11-25 client (params.task): its result is
	// encoded for that era.
	Legacy bool `json:"legacy,omitempty"`
	// Owner names the process that runs the task, and LeaseUntil until
	// when its claim holds: a store shared by replicas lets another one
	// take a task over once the lease lapsed. The memory store keeps them
	// only.
	Owner      string    `json:"owner,omitempty"`
	LeaseUntil time.Time `json:"leaseUntil,omitempty"`
	// LastPoll is when tasks/get last read it (polling faster than
	// PollInterval may be refused).
	LastPoll time.Time `json:"lastPoll,omitempty"`
}

// Terminal reports whether the task has ended (completed, failed,
// cancelled): nothing changes it any more.
func (t *TaskRecord) Terminal() bool {
	return t.Status == "completed" || t.Status == "failed" || t.Status == "cancelled"
}

// size is what the record counts against the stored-bytes bounds.
func (t *TaskRecord) size() int64 {
	n := len(t.ID) + len(t.Principal) + len(t.Tool) + len(t.StatusMessage) + len(t.Result) + len(t.Error) +
		len(t.InputRequests) + len(t.AskState) + 256
	for k, v := range t.Responses {
		n += len(k) + len(v)
	}
	return int64(n)
}

// TaskStore keeps tasks: the front stores a task before it returns the
// task's handle, and reads and changes it by principal and id. A task of
// another principal, or an expired one, is ErrUnknownTask: a caller never
// learns that another's task exists. Implementations are safe for
// concurrent use. A store shared by replicas (bridge/state's Redis, for
// one) makes every replica answer for every task; Owner and LeaseUntil
// are there for its take-over of a task whose owner died.
type TaskStore interface {
	// Create stores t (its Principal set), refusing it with a
	// *TaskBoundError when a bound would be passed.
	Create(ctx context.Context, t *TaskRecord) error
	// Get returns a copy of principal's task id.
	Get(ctx context.Context, principal, id string) (*TaskRecord, error)
	// Update applies change to principal's task id, atomically, and
	// stores it unless change returns an error (returned as it is); it
	// returns the stored copy. change may refuse growth past the bounds
	// by returning a *TaskBoundError.
	Update(ctx context.Context, principal, id string, change func(*TaskRecord) error) (*TaskRecord, error)
	// List returns principal's tasks, oldest first (2025-11-25 tasks/list).
	List(ctx context.Context, principal string) ([]*TaskRecord, error)
}

// ErrUnknownTask: no such task for this caller (-32602).
var ErrUnknownTask = errors.New("unknown task")

// TaskBoundError refuses a task (or its growth) that a bound of the store
// would pass: Bound names it (a TaskBound… constant), Limit is its value.
type TaskBoundError struct {
	Bound string
	Limit int64
}

func (e *TaskBoundError) Error() string {
	return fmt.Sprintf("task refused: the bound %s (%d) is reached; wait for tasks to end or expire", e.Bound, e.Limit)
}

// The bounds a TaskStore enforces (TaskBoundError.Bound).
const (
	TaskBoundTasks             = "max_tasks"
	TaskBoundTasksPerPrincipal = "max_tasks_per_principal"
	TaskBoundBytes             = "max_task_bytes"
	TaskBoundBytesPerPrincipal = "max_task_bytes_per_principal"
)

// Default bounds of the memory store (TaskOptions).
const (
	DefaultMaxTasks                 = 10000
	DefaultMaxTasksPerPrincipal     = 100
	DefaultMaxTaskBytes             = 256 << 20
	DefaultMaxTaskBytesPerPrincipal = 16 << 20
)

// memoryTasks is this process's TaskStore: bounded in tasks and bytes,
// in all and per principal; a task expires TTL after its creation.
type memoryTasks struct {
	mu          sync.Mutex
	now         func() time.Time
	tasks       map[string]*TaskRecord // by principal + "\x00" + id
	count       map[string]int         // tasks per principal
	bytes       map[string]int64       // bytes per principal
	total       int64
	maxTasks    int
	maxPer      int
	maxBytes    int64
	maxBytesPer int64
}

// NewMemoryTaskStore is a TaskStore in this process's memory with these
// bounds (zero: the Default… bound).
func NewMemoryTaskStore(maxTasks, maxPerPrincipal int, maxBytes, maxBytesPerPrincipal int64, now func() time.Time) TaskStore {
	if maxTasks <= 0 {
		maxTasks = DefaultMaxTasks
	}
	if maxPerPrincipal <= 0 {
		maxPerPrincipal = DefaultMaxTasksPerPrincipal
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxTaskBytes
	}
	if maxBytesPerPrincipal <= 0 {
		maxBytesPerPrincipal = DefaultMaxTaskBytesPerPrincipal
	}
	if now == nil {
		now = time.Now
	}
	return &memoryTasks{now: now, tasks: map[string]*TaskRecord{}, count: map[string]int{}, bytes: map[string]int64{},
		maxTasks: maxTasks, maxPer: maxPerPrincipal, maxBytes: maxBytes, maxBytesPer: maxBytesPerPrincipal}
}

func taskKey(principal, id string) string { return principal + "\x00" + id }

// sweep drops expired tasks, under mu.
func (s *memoryTasks) sweep() {
	now := s.now()
	for k, t := range s.tasks {
		if t.TTL > 0 && now.After(t.CreatedAt.Add(t.TTL)) {
			s.drop(k, t)
		}
	}
}

func (s *memoryTasks) drop(k string, t *TaskRecord) {
	delete(s.tasks, k)
	s.count[t.Principal]--
	if s.count[t.Principal] <= 0 {
		delete(s.count, t.Principal)
	}
	sz := t.size()
	s.bytes[t.Principal] -= sz
	if s.bytes[t.Principal] <= 0 {
		delete(s.bytes, t.Principal)
	}
	s.total -= sz
}

// fits reports the bound that growing principal's tasks by n tasks and
// by bytes would pass, under mu.
func (s *memoryTasks) fits(principal string, n int, bytes int64) error {
	switch {
	case n > 0 && len(s.tasks)+n > s.maxTasks:
		return &TaskBoundError{Bound: TaskBoundTasks, Limit: int64(s.maxTasks)}
	case n > 0 && s.count[principal]+n > s.maxPer:
		return &TaskBoundError{Bound: TaskBoundTasksPerPrincipal, Limit: int64(s.maxPer)}
	case bytes > 0 && s.total+bytes > s.maxBytes:
		return &TaskBoundError{Bound: TaskBoundBytes, Limit: s.maxBytes}
	case bytes > 0 && s.bytes[principal]+bytes > s.maxBytesPer:
		return &TaskBoundError{Bound: TaskBoundBytesPerPrincipal, Limit: s.maxBytesPer}
	}
	return nil
}

func (s *memoryTasks) Create(_ context.Context, t *TaskRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep()
	k := taskKey(t.Principal, t.ID)
	if _, dup := s.tasks[k]; dup {
		return fmt.Errorf("task %q exists", t.ID)
	}
	sz := t.size()
	if err := s.fits(t.Principal, 1, sz); err != nil {
		return err
	}
	c := copyTask(t)
	s.tasks[k] = c
	s.count[t.Principal]++
	s.bytes[t.Principal] += sz
	s.total += sz
	return nil
}

func (s *memoryTasks) Get(_ context.Context, principal, id string) (*TaskRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.live(principal, id)
	if t == nil {
		return nil, ErrUnknownTask
	}
	return copyTask(t), nil
}

// live is principal's unexpired task id, under mu.
func (s *memoryTasks) live(principal, id string) *TaskRecord {
	k := taskKey(principal, id)
	t := s.tasks[k]
	if t != nil && t.TTL > 0 && s.now().After(t.CreatedAt.Add(t.TTL)) {
		s.drop(k, t)
		return nil
	}
	return t
}

func (s *memoryTasks) Update(_ context.Context, principal, id string, change func(*TaskRecord) error) (*TaskRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.live(principal, id)
	if t == nil {
		return nil, ErrUnknownTask
	}
	c := copyTask(t)
	if err := change(c); err != nil {
		return nil, err
	}
	before, after := t.size(), c.size()
	if after > before {
		if err := s.fits(principal, 0, after-before); err != nil {
			return nil, err
		}
	}
	s.tasks[taskKey(principal, id)] = c
	s.bytes[principal] += after - before
	s.total += after - before
	return copyTask(c), nil
}

func (s *memoryTasks) List(_ context.Context, principal string) ([]*TaskRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep()
	var out []*TaskRecord
	for _, t := range s.tasks {
		if t.Principal == principal {
			out = append(out, copyTask(t))
		}
	}
	sortTasks(out)
	return out, nil
}

func copyTask(t *TaskRecord) *TaskRecord {
	c := *t
	if t.Responses != nil {
		c.Responses = make(map[string]json.RawMessage, len(t.Responses))
		for k, v := range t.Responses {
			c.Responses[k] = v
		}
	}
	return &c
}
