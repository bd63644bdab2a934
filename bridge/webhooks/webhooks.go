package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/metrics"
	"github.com/mcpotc/mcpotc/mcp/oauth"
)

// Type is the kind of an event, the body's "type".
type Type string

// The events of a task (MCP tasks: a task's terminal statuses and
// input_required).
const (
	TaskCompleted     Type = "task.completed"      // the tool answered (its isError in Event.IsError)
	TaskFailed        Type = "task.failed"         // the call failed for a protocol reason
	TaskInputRequired Type = "task.input_required" // the task waits for the user's answer
	TaskCancelled     Type = "task.cancelled"      // the task was cancelled
)

// Types are all the event types, in the order of their documentation.
var Types = []Type{TaskCompleted, TaskFailed, TaskInputRequired, TaskCancelled}

// ParseType reads an event type as the configuration writes it
// ("task.completed", …).
func ParseType(s string) (Type, error) {
	if t := Type(s); slices.Contains(Types, t) {
		return t, nil
	}
	names := make([]string, len(Types))
	for i, t := range Types {
		names[i] = string(t)
	}
	return "", fmt.Errorf("%q is not an event: one of %s", s, strings.Join(names, ", "))
}

// status is the MCP task status of an event type.
func (t Type) status() string { return strings.TrimPrefix(string(t), "task.") }

// Event is a change of a task, as a webhook tells it. It holds only what
// the body carries — the task's id, the tool's name, the task's times and
// whether a completed call's result is a tool error — and Share, which is
// never sent: no principal, user, token, secret, argument or result.
type Event struct {
	// Type is what happened.
	Type Type
	// TaskID is the task's id (tasks/get answers its principal only).
	TaskID string
	// Tool is the name of the tool called, as the front serves it.
	Tool string
	// CreatedAt is when the task was created. Zero: not sent.
	CreatedAt time.Time
	// UpdatedAt is when the task changed. Zero: the time of Send.
	UpdatedAt time.Time
	// IsError marks a completed task whose result is a tool error
	// (isError: true).
	IsError bool
	// Share is whom the event is on behalf of (such as a principal's
	// key), an opaque string that bounds one caller's part of each queue
	// (Options.PerShare). It is never sent nor logged. Empty: no share.
	Share string
}

// body is the JSON a delivery carries (the payload shape Standard
// Webhooks recommends: type, timestamp, data).
type body struct {
	Type      Type      `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      bodyData  `json:"data"`
}

type bodyData struct {
	TaskID        string     `json:"taskId"`
	Status        string     `json:"status"`
	Tool          string     `json:"tool,omitempty"`
	CreatedAt     *time.Time `json:"createdAt,omitempty"`
	LastUpdatedAt time.Time  `json:"lastUpdatedAt"`
	IsError       bool       `json:"isError,omitempty"`
}

// Defaults of Options and Endpoint.
const (
	DefaultQueueSize   = 1000
	DefaultPerShare    = 100
	DefaultWorkers     = 4
	DefaultTimeout     = 10 * time.Second
	DefaultRetryFor    = time.Hour
	DefaultFirstRetry  = 5 * time.Second
	DefaultMaxInterval = 10 * time.Minute
	DefaultMaxAttempts = 20
	// maxAnswer bounds what is read of a receiver's answer (to reuse the
	// connection); the rest is not read.
	maxAnswer = 64 << 10
)

// Retry is an endpoint's retry schedule. Zero values are the defaults.
type Retry struct {
	// For bounds the time from the first attempt to the last. Zero:
	// DefaultRetryFor.
	For time.Duration
	// First is the wait after the first failed attempt, doubled after
	// each next one. Zero: DefaultFirstRetry.
	First time.Duration
	// MaxInterval bounds one wait. Zero: DefaultMaxInterval.
	MaxInterval time.Duration
	// MaxAttempts bounds the attempts of one message. Zero:
	// DefaultMaxAttempts.
	MaxAttempts int
}

// Endpoint is a receiver of webhooks.
type Endpoint struct {
	// URL is where deliveries are POSTed: http or https, no user
	// information (CheckURL).
	URL string
	// Secrets sign each message, one signature each (ParseSecrets): the
	// new and the old during a rotation. At least one.
	Secrets [][]byte
	// Events are the types sent to this endpoint. Nil: all of Types.
	Events []Type
	// AllowNetworks are networks the endpoint may be reached on though
	// they are loopback, private, shared or link-local. Zero: public
	// addresses only.
	AllowNetworks []netip.Prefix
	// Timeout bounds one attempt (connecting, sending, the answer's
	// headers and the part of its body read). Zero: DefaultTimeout.
	Timeout time.Duration
	// Retry is the retry schedule.
	Retry Retry
}

// Options configure a Sender. A nil *Options is the zero value.
type Options struct {
	// Logger receives a line per failed attempt, failed or dropped
	// message (and a debug line per delivery). Zero: no logs.
	Logger zerolog.Logger
	// Metrics counts the messages (Metrics.Webhook). Nil: none.
	Metrics *metrics.Metrics
	// QueueSize bounds the messages waiting for each endpoint's workers.
	// Zero: DefaultQueueSize.
	QueueSize int
	// PerShare bounds the messages of one Event.Share queued or in
	// delivery at each endpoint. Zero: DefaultPerShare; negative: no
	// bound but QueueSize.
	PerShare int
	// Workers is how many messages are delivered (or wait for a retry)
	// at once per endpoint. Zero: DefaultWorkers.
	Workers int
	// UserAgent is the User-Agent of deliveries. Zero: "mcpotc".
	UserAgent string
	// Now is the clock of timestamps and of Retry.For. Zero: time.Now.
	Now func() time.Time
	// Sleep waits d before a retry, or less when ctx ends (then it
	// returns ctx's error). Zero: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Sender delivers events to its endpoints. Its methods may be called
// concurrently; a nil *Sender sends nothing.
type Sender struct {
	o   Options
	log zerolog.Logger
	eps []*endpoint

	mu     sync.RWMutex
	closed bool

	soft, hard             context.Context // soft: Close began; hard: Close's context ended
	softCancel, hardCancel context.CancelFunc
	wg                     sync.WaitGroup
}

// endpoint is an Endpoint with its client, queue and shares.
type endpoint struct {
	Endpoint
	origin string // scheme://host:port, for metrics
	logURL string // the URL without user information, query or fragment
	client *http.Client
	queue  chan *message

	mu     sync.Mutex
	shares map[string]int // queued or in delivery, by Event.Share
}

// message is one event for one endpoint.
type message struct {
	id     string
	typ    Type
	taskID string
	share  string
	body   []byte
}

// CheckURL checks an endpoint's URL: absolute, http or https, with a host
// and no user information (a credential belongs in a secret, not in a URL
// that logs name). The error does not repeat the URL.
func CheckURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "https" && u.Scheme != "http":
		return errors.New("not an http or https URL")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("the URL has no host")
	case u.User != nil:
		return errors.New("the URL holds user information: put no credential in it (deliveries are signed with the endpoint's secret)")
	case u.Fragment != "":
		return errors.New("the URL has a fragment")
	}
	return nil
}

// SecretPrefix begins a secret as Standard Webhooks writes it.
const SecretPrefix = "whsec_"

// ParseSecrets reads an endpoint's secrets: one or more, separated by
// white space (the new one and the old during a rotation), each
// SecretPrefix followed by the standard base64 of 24 to 64 bytes (the
// sizes Standard Webhooks asks for). The error says which one (by its
// place) and why, never its value.
func ParseSecrets(s string) ([][]byte, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, errors.New("holds no secret")
	}
	var keys [][]byte
	for i, f := range fields {
		which := fmt.Sprintf("secret %d of %d", i+1, len(fields))
		if len(fields) == 1 {
			which = "the secret"
		}
		b64, ok := strings.CutPrefix(f, SecretPrefix)
		if !ok {
			return nil, fmt.Errorf("%s does not begin with %s (a Standard Webhooks secret: %s and the base64 of 24 to 64 random bytes)", which, SecretPrefix, SecretPrefix)
		}
		key, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("%s is not %s followed by standard base64", which, SecretPrefix)
		}
		if len(key) < 24 || len(key) > 64 {
			return nil, fmt.Errorf("%s has %d key bytes: want 24 to 64", which, len(key))
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// Sign is the webhook-signature header of a message: "v1," and the
// base64 of HMAC-SHA256 over "id.timestamp.body", for each key, separated
// by spaces.
func Sign(keys [][]byte, id string, timestamp int64, body []byte) string {
	sigs := make([]string, 0, len(keys))
	for _, k := range keys {
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
		mac.Write([]byte{'.'})
		mac.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return strings.Join(sigs, " ")
}

// New returns a Sender to endpoints (none: nil, which sends nothing),
// its workers started; Close stops them.
func New(endpoints []Endpoint, o *Options) (*Sender, error) {
	if len(endpoints) == 0 {
		return nil, nil
	}
	s := &Sender{}
	if o != nil {
		s.o = *o
	}
	if s.o.QueueSize <= 0 {
		s.o.QueueSize = DefaultQueueSize
	}
	if s.o.PerShare == 0 {
		s.o.PerShare = DefaultPerShare
	}
	if s.o.Workers <= 0 {
		s.o.Workers = DefaultWorkers
	}
	if s.o.UserAgent == "" {
		s.o.UserAgent = "mcpotc"
	}
	if s.o.Now == nil {
		s.o.Now = time.Now
	}
	if s.o.Sleep == nil {
		s.o.Sleep = sleep
	}
	s.log = s.o.Logger
	for i, e := range endpoints {
		ep, err := newEndpoint(e, s.o.QueueSize)
		if err != nil {
			return nil, fmt.Errorf("webhook endpoint %d: %w", i, err)
		}
		s.eps = append(s.eps, ep)
	}
	s.soft, s.softCancel = context.WithCancel(context.Background())
	s.hard, s.hardCancel = context.WithCancel(context.Background())
	for _, ep := range s.eps {
		for range s.o.Workers {
			s.wg.Add(1)
			go s.work(ep)
		}
	}
	return s, nil
}

func newEndpoint(e Endpoint, queue int) (*endpoint, error) {
	if err := CheckURL(e.URL); err != nil {
		return nil, err
	}
	if len(e.Secrets) == 0 {
		return nil, errors.New("no secret")
	}
	for _, t := range e.Events {
		if _, err := ParseType(string(t)); err != nil {
			return nil, err
		}
	}
	if e.Events == nil {
		e.Events = Types
	}
	if e.Timeout <= 0 {
		e.Timeout = DefaultTimeout
	}
	r := &e.Retry
	if r.For <= 0 {
		r.For = DefaultRetryFor
	}
	if r.First <= 0 {
		r.First = DefaultFirstRetry
	}
	if r.MaxInterval <= 0 {
		r.MaxInterval = DefaultMaxInterval
	}
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = DefaultMaxAttempts
	}
	u, _ := url.Parse(e.URL)
	logURL := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return &endpoint{
		Endpoint: e,
		origin:   u.Scheme + "://" + u.Host,
		logURL:   logURL.String(),
		// No Hosts: the endpoint's own name earns no exception from the
		// dial guard, only AllowNetworks do.
		client: oauth.NewHTTPClient(&oauth.FetchOptions{AllowNetworks: e.AllowNetworks, Timeout: e.Timeout}),
		queue:  make(chan *message, queue),
		shares: map[string]int{},
	}, nil
}

// sleep is the default Options.Sleep.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newID is a message id: "msg_" and 144 random bits.
func newID() string {
	var b [18]byte
	_, _ = rand.Read(b[:])
	return "msg_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// Send queues ev for each endpoint that takes its type and returns at
// once: a message that does not fit (the queue or the share full, or the
// Sender closed) is dropped, counted and logged. ctx is not kept: the
// delivery outlives the caller's request.
func (s *Sender) Send(_ context.Context, ev Event) {
	if s == nil {
		return
	}
	if _, err := ParseType(string(ev.Type)); err != nil {
		s.log.Error().Str("event", string(ev.Type)).Msg("webhooks: an event of no known type: not sent")
		return
	}
	updated := ev.UpdatedAt
	if updated.IsZero() {
		updated = s.o.Now()
	}
	b := body{Type: ev.Type, Timestamp: s.o.Now().UTC(), Data: bodyData{
		TaskID: ev.TaskID, Status: ev.Type.status(), Tool: ev.Tool, LastUpdatedAt: updated.UTC(),
		IsError: ev.IsError && ev.Type == TaskCompleted,
	}}
	if !ev.CreatedAt.IsZero() {
		c := ev.CreatedAt.UTC()
		b.Data.CreatedAt = &c
	}
	data, err := json.Marshal(b)
	if err != nil {
		s.log.Error().Err(err).Msg("webhooks: encoding an event")
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, ep := range s.eps {
		if !slices.Contains(ep.Events, ev.Type) {
			continue
		}
		m := &message{id: newID(), typ: ev.Type, taskID: ev.TaskID, share: ev.Share, body: data}
		if why := s.enqueue(ep, m); why != "" {
			s.o.Metrics.Webhook(ep.origin, string(m.typ), metrics.WebhookDropped)
			s.logMsg(s.log.Warn(), ep, m).Str("reason", why).Msg("webhook dropped")
		}
	}
}

// enqueue puts m on ep's queue, "" when it did, else why not. The caller
// holds s.mu (read).
func (s *Sender) enqueue(ep *endpoint, m *message) string {
	if s.closed {
		return "the sender is closing"
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if m.share != "" && s.o.PerShare > 0 && ep.shares[m.share] >= s.o.PerShare {
		return fmt.Sprintf("this caller has %d messages queued for the endpoint (the bound per caller)", s.o.PerShare)
	}
	select {
	case ep.queue <- m:
	default:
		return fmt.Sprintf("the endpoint's queue is full (%d messages)", s.o.QueueSize)
	}
	if m.share != "" {
		ep.shares[m.share]++
	}
	return ""
}

// done ends m's part of its share.
func (ep *endpoint) done(m *message) {
	if m.share == "" {
		return
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.shares[m.share]--; ep.shares[m.share] <= 0 {
		delete(ep.shares, m.share)
	}
}

// work delivers ep's queue until Close, then what is left in it.
func (s *Sender) work(ep *endpoint) {
	defer s.wg.Done()
	for {
		select {
		case m := <-ep.queue:
			s.deliver(ep, m)
			continue
		case <-s.soft.Done():
		}
		for {
			select {
			case m := <-ep.queue:
				s.deliver(ep, m)
			default:
				return
			}
		}
	}
}

// deliver makes the attempts of m (see the package documentation).
func (s *Sender) deliver(ep *endpoint, m *message) {
	defer ep.done(m)
	if s.hard.Err() != nil {
		s.drop(ep, m, "the sender closed before its delivery")
		return
	}
	start := s.o.Now()
	for n := 1; ; n++ {
		status, reason := s.attempt(ep, m)
		if reason == "" {
			s.o.Metrics.Webhook(ep.origin, string(m.typ), metrics.WebhookDelivered)
			s.logMsg(s.log.Debug(), ep, m).Int("attempt", n).Int("status", status).Msg("webhook delivered")
			return
		}
		if s.soft.Err() != nil {
			s.drop(ep, m, "the sender closed: "+reason)
			return
		}
		wait := ep.Retry.wait(n)
		if n >= ep.Retry.MaxAttempts || s.o.Now().Add(wait).Sub(start) > ep.Retry.For {
			s.o.Metrics.Webhook(ep.origin, string(m.typ), metrics.WebhookFailed)
			s.logMsg(s.log.Error(), ep, m).Int("attempts", n).Str("reason", reason).
				Msgf("webhook failed: no attempt left within %d attempts and %s", ep.Retry.MaxAttempts, ep.Retry.For)
			return
		}
		s.o.Metrics.Webhook(ep.origin, string(m.typ), metrics.WebhookRetried)
		s.logMsg(s.log.Warn(), ep, m).Int("attempt", n).Str("reason", reason).Dur("retry_in", wait).Msg("webhook attempt failed")
		// Close ends the wait: the message gets one more attempt at once.
		_ = s.o.Sleep(s.soft, wait)
		if s.hard.Err() != nil {
			s.drop(ep, m, "the sender closed before its retry")
			return
		}
	}
}

func (s *Sender) drop(ep *endpoint, m *message, why string) {
	s.o.Metrics.Webhook(ep.origin, string(m.typ), metrics.WebhookDropped)
	s.logMsg(s.log.Warn(), ep, m).Str("reason", why).Msg("webhook dropped")
}

func (s *Sender) logMsg(e *zerolog.Event, ep *endpoint, m *message) *zerolog.Event {
	return e.Str("endpoint", ep.logURL).Str("webhook_id", m.id).Str("event", string(m.typ)).Str("task_id", m.taskID)
}

// wait is the backoff after the n-th failed attempt: First doubled n-1
// times, at most MaxInterval, drawn between half of it and all of it.
func (r Retry) wait(n int) time.Duration {
	d := r.First
	for i := 1; i < n && d < r.MaxInterval; i++ {
		d *= 2
	}
	d = min(d, r.MaxInterval)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + mrand.N(d-half+1)
}

// attempt POSTs m to ep once, signed now: the answer's status and "" when
// it was 2xx, else a reason in this package's words (no URL query, no
// answer body).
func (s *Sender) attempt(ep *endpoint, m *message) (int, string) {
	ts := s.o.Now().Unix()
	req, err := http.NewRequestWithContext(s.hard, http.MethodPost, ep.URL, bytes.NewReader(m.body))
	if err != nil {
		return 0, "the request could not be made"
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.o.UserAgent)
	req.Header.Set("webhook-id", m.id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", Sign(ep.Secrets, m.id, ts, m.body))
	resp, err := ep.client.Do(req)
	if err != nil {
		return 0, reason(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	return resp.StatusCode, ""
}

// reason describes a failed request without its URL (whose query the
// operator may not want in logs): the *url.Error's cause.
func reason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return "no answer in time"
		}
		err = ue.Err
	}
	if errors.Is(err, context.Canceled) {
		return "canceled: the sender closed"
	}
	return err.Error()
}

// Close stops taking events and delivers what is queued until ctx ends
// (see the package documentation); then it drops the rest, cancels the
// attempts under way, and returns ctx's error once every worker stopped.
func (s *Sender) Close(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.softCancel()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	defer func() {
		s.hardCancel()
		for _, ep := range s.eps {
			ep.client.CloseIdleConnections()
		}
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.hardCancel()
		<-done
		return ctx.Err()
	}
}
