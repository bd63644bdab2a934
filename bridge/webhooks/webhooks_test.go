package webhooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/metrics"
)

// The test vector Standard Webhooks publishes with its reference
// libraries (libraries/go/webhook_symmetric_test.go,
// TestSymmetricWebhookSign): the same secret, id, timestamp and body give
// the same signature.
func TestSignVector(t *testing.T) {
	t.Parallel()
	keys, err := ParseSecrets("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := Sign(keys, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
}

// Secrets: whsec_ and standard base64 of 24 to 64 bytes, several
// separated by white space; an error never repeats the value.
func TestParseSecrets(t *testing.T) {
	t.Parallel()
	k24 := base64.StdEncoding.EncodeToString(make([]byte, 24))
	k64 := base64.StdEncoding.EncodeToString(make([]byte, 64))
	for _, tc := range []struct {
		in   string
		keys int
		err  string
	}{
		{"whsec_" + k24, 1, ""},
		{" whsec_" + k24 + "\twhsec_" + k64 + " ", 2, ""},
		{"", 0, "holds no secret"},
		{k24, 0, "does not begin with whsec_"},
		{"whsec_not*base64", 0, "standard base64"},
		{"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 16)), 0, "16 key bytes"},
		{"whsec_" + k24 + " whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 65)), 0, "secret 2 of 2 has 65 key bytes"},
	} {
		keys, err := ParseSecrets(tc.in)
		switch {
		case tc.err == "" && (err != nil || len(keys) != tc.keys):
			t.Errorf("ParseSecrets(%q) = %d keys, %v; want %d", tc.in, len(keys), err, tc.keys)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseSecrets(%q) error %v; want %q", tc.in, err, tc.err)
		case err != nil && strings.TrimSpace(tc.in) != "" && strings.Contains(err.Error(), strings.TrimPrefix(strings.Fields(tc.in)[0], "whsec_")):
			t.Errorf("the error repeats the secret: %v", err)
		}
	}
}

// A URL with credentials, another scheme, or no host is refused.
func TestCheckURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://hooks.example.com/x?a=b": "",
		"http://10.0.0.1:8080/hook":       "",
		"https://user:pw@hooks.example":   "user information",
		"ftp://hooks.example.com/":        "not an http or https URL",
		"/relative":                       "not an http or https URL",
		"https:///nohost":                 "no host",
		"https://hooks.example/#frag":     "fragment",
	} {
		err := CheckURL(in)
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("CheckURL(%q) = %v, want %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("the error repeats the URL: %v", err)
		}
	}
}

// delivery is a request a test receiver got.
type delivery struct {
	header http.Header
	body   []byte
}

// receiver is an HTTP server that records each delivery and answers with
// answer(n) for the n-th (from 1).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []delivery
	arrive chan int // the count after each delivery
	answer func(n int, w http.ResponseWriter)
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter)) *receiver {
	t.Helper()
	r := &receiver{arrive: make(chan int, 1000), answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, delivery{req.Header.Clone(), b})
		n := len(r.got)
		r.mu.Unlock()
		if r.answer != nil {
			r.answer(n, w)
		}
		r.arrive <- n
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// waitFor waits until the receiver has n deliveries.
func (r *receiver) waitFor(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case got := <-r.arrive:
			if got >= n {
				return
			}
		case <-timeout:
			t.Fatalf("the receiver has %d deliveries, want %d", len(r.deliveries()), n)
		}
	}
}

// verify checks a delivery as a Standard Webhooks receiver does: one of
// the v1 signatures is the HMAC of id.timestamp.body with key.
func verify(d delivery, key []byte) error {
	id, ts := d.header.Get("webhook-id"), d.header.Get("webhook-timestamp")
	if id == "" || ts == "" {
		return errors.New("missing webhook-id or webhook-timestamp")
	}
	if _, err := strconv.ParseInt(ts, 10, 64); err != nil {
		return errors.New("webhook-timestamp is not an integer")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(d.body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(d.header.Get("webhook-signature")) {
		v, b64, _ := strings.Cut(sig, ",")
		got, err := base64.StdEncoding.DecodeString(b64)
		if v == "v1" && err == nil && subtle.ConstantTimeCompare(got, want) == 1 {
			return nil
		}
	}
	return errors.New("no signature verifies")
}

// clock is an Options.Now and Options.Sleep that never wait: a sleep
// records its duration and moves the time on by it.
type clock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func newClock() *clock { return &clock{now: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

func (c *clock) slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.waits)
}

// logLines is a zerolog writer whose lines a test waits for.
type logLines struct{ ch chan string }

func newLogLines() *logLines { return &logLines{ch: make(chan string, 1000)} }

func (l *logLines) Write(p []byte) (int, error) {
	select {
	case l.ch <- string(p):
	default:
	}
	return len(p), nil
}

// waitFor returns the first line that contains msg.
func (l *logLines) waitFor(t *testing.T, msg string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line := <-l.ch:
			if strings.Contains(line, msg) {
				return line
			}
		case <-timeout:
			t.Fatalf("no log line %q", msg)
		}
	}
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

func testKey(t *testing.T, b byte) []byte {
	t.Helper()
	k := make([]byte, 32)
	for i := range k {
		k[i] = b
	}
	return k
}

// count reads mcpotc_webhook_deliveries_total{endpoint, event, result}.
func count(m *metrics.Metrics, origin, event, result string) int {
	fams, err := m.Registry().Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range fams {
		if f.GetName() != "mcpotc_webhook_deliveries_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["endpoint"] == origin && labels["event"] == event && labels["result"] == result {
				return int(mt.GetCounter().GetValue())
			}
		}
	}
	return 0
}

func closeSender(t *testing.T, s *Sender) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// A delivery is a POST of the event's JSON with the three headers, its
// signature verifies with the endpoint's secret, and the body holds the
// task's fields only (never Share). During a rotation, the header holds
// one signature per secret, and a receiver that knows either the new or
// the old one verifies it; one that knows neither does not. An endpoint
// gets only the events it takes.
func TestDeliverySignedAndRotated(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	other := newReceiver(t, nil)
	oldKey, newKey := testKey(t, 1), testKey(t, 2)
	s, err := New([]Endpoint{
		{URL: rc.srv.URL + "/hook?k=v", Secrets: [][]byte{newKey, oldKey}, AllowNetworks: loopback},
		{URL: other.srv.URL, Secrets: [][]byte{newKey}, AllowNetworks: loopback, Events: []Type{TaskFailed}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	s.Send(t.Context(), Event{Type: TaskCompleted, TaskID: "task-1", Tool: "report", CreatedAt: created,
		UpdatedAt: created.Add(time.Minute), IsError: true, Share: "alice@issuer"})
	s.Send(t.Context(), Event{Type: TaskFailed, TaskID: "task-2", Tool: "report"})
	rc.waitFor(t, 2)
	other.waitFor(t, 1)
	closeSender(t, s)

	got := rc.deliveries()
	if got[0].header.Get("webhook-id") == got[1].header.Get("webhook-id") {
		t.Error("two messages share a webhook-id")
	}
	for _, d := range got {
		if sigs := strings.Fields(d.header.Get("webhook-signature")); len(sigs) != 2 {
			t.Errorf("webhook-signature %q: want two signatures", sigs)
		}
		if err := verify(d, newKey); err != nil {
			t.Errorf("with the new secret: %v", err)
		}
		if err := verify(d, oldKey); err != nil {
			t.Errorf("with the old secret: %v", err)
		}
		if verify(d, testKey(t, 3)) == nil {
			t.Error("a delivery verifies with a secret it was not signed with")
		}
		if ct := d.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
	}
	// Workers deliver concurrently: in any order.
	if strings.Contains(string(got[0].body), "task-2") {
		got[0], got[1] = got[1], got[0]
	}
	var first map[string]any
	if err := json.Unmarshal(got[0].body, &first); err != nil {
		t.Fatal(err)
	}
	data, _ := first["data"].(map[string]any)
	if first["type"] != "task.completed" || data["taskId"] != "task-1" || data["status"] != "completed" ||
		data["tool"] != "report" || data["isError"] != true || data["createdAt"] != "2026-05-01T10:00:00Z" ||
		data["lastUpdatedAt"] != "2026-05-01T10:01:00Z" || len(data) != 6 || len(first) != 3 {
		t.Errorf("body %s", got[0].body)
	}
	if strings.Contains(string(got[0].body), "alice") {
		t.Errorf("the body carries the share: %s", got[0].body)
	}
	if o := other.deliveries(); len(o) != 1 || !strings.Contains(string(o[0].body), `"task.failed"`) {
		t.Errorf("the endpoint that takes task.failed only got %d deliveries", len(o))
	}
}

// A receiver that fails (503, then a connection cut) gets the message
// again after a backoff that doubles, with jitter, under the same
// webhook-id and a fresh timestamp and signature; once it answers 2xx
// the message is delivered. Counted: 3 retries, 1 delivery.
func TestRetryBackoff(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, func(n int, w http.ResponseWriter) {
		switch n {
		case 1, 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 3:
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
		}
	})
	c := newClock()
	mt := metrics.New()
	key := testKey(t, 1)
	s, err := New([]Endpoint{{URL: rc.srv.URL, Secrets: [][]byte{key}, AllowNetworks: loopback,
		Retry: Retry{First: 10 * time.Second, MaxInterval: 30 * time.Second}}},
		&Options{Now: c.Now, Sleep: c.Sleep, Metrics: mt})
	if err != nil {
		t.Fatal(err)
	}
	s.Send(t.Context(), Event{Type: TaskCompleted, TaskID: "t"})
	rc.waitFor(t, 4)
	closeSender(t, s)

	waits := c.slept()
	bounds := []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second}
	if len(waits) != len(bounds) {
		t.Fatalf("waits %v, want 3", waits)
	}
	for i, w := range waits {
		if w < bounds[i]/2 || w > bounds[i] {
			t.Errorf("wait %d = %s, want between %s and %s", i+1, w, bounds[i]/2, bounds[i])
		}
	}
	got := rc.deliveries()
	for i, d := range got {
		if err := verify(d, key); err != nil {
			t.Errorf("attempt %d: %v", i+1, err)
		}
		if d.header.Get("webhook-id") != got[0].header.Get("webhook-id") || string(d.body) != string(got[0].body) {
			t.Errorf("attempt %d is another message", i+1)
		}
	}
	if got[0].header.Get("webhook-timestamp") == got[3].header.Get("webhook-timestamp") {
		t.Error("the retry 30 s on has the first attempt's timestamp")
	}
	origin := "http://" + strings.TrimPrefix(rc.srv.URL, "http://")
	if r, d := count(mt, origin, "task.completed", "retried"), count(mt, origin, "task.completed", "delivered"); r != 3 || d != 1 {
		t.Errorf("retried %d, delivered %d; want 3, 1", r, d)
	}
}

// Retries are bounded: by MaxAttempts, and by Retry.For (no attempt is
// scheduled past it). Then the message has failed, counted and logged.
func TestRetryBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		retry Retry
		want  int
	}{
		{"attempts", Retry{First: time.Second, MaxAttempts: 3}, 3},
		// Waits of 8-16 s, then 15-30 s each: 3 to 5 attempts fit in a
		// minute, far fewer than the default 20: the time bounds them.
		{"time", Retry{First: 16 * time.Second, MaxInterval: 30 * time.Second, For: time.Minute}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rc := newReceiver(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
			c := newClock()
			mt := metrics.New()
			logs := newLogLines()
			s, err := New([]Endpoint{{URL: rc.srv.URL, Secrets: [][]byte{testKey(t, 1)}, AllowNetworks: loopback, Retry: tc.retry}},
				&Options{Now: c.Now, Sleep: c.Sleep, Metrics: mt, Logger: zerolog.New(logs)})
			if err != nil {
				t.Fatal(err)
			}
			start := c.Now()
			s.Send(t.Context(), Event{Type: TaskFailed, TaskID: "t"})
			line := logs.waitFor(t, "webhook failed")
			closeSender(t, s)
			n := len(rc.deliveries())
			if tc.want > 0 && n != tc.want {
				t.Errorf("%d attempts, want %d", n, tc.want)
			}
			if spent := c.Now().Sub(start); tc.retry.For > 0 && (spent > tc.retry.For || n < 3 || n >= 20) {
				t.Errorf("%d attempts over %s, want within %s", n, spent, tc.retry.For)
			}
			origin := "http://" + strings.TrimPrefix(rc.srv.URL, "http://")
			if f, r := count(mt, origin, "task.failed", "failed"), count(mt, origin, "task.failed", "retried"); f != 1 || r != n-1 {
				t.Errorf("failed %d, retried %d; want 1, %d", f, r, n-1)
			}
			if !strings.Contains(line, "HTTP 500") {
				t.Errorf("log line: %s", line)
			}
		})
	}
}

// A receiver that answers 302 (to a server the endpoint may reach) does
// not get the message followed to the redirect's target: the 302 is a
// failed attempt, retried at the same URL, and the target never sees a
// request.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	target := newReceiver(t, nil)
	rc := newReceiver(t, func(_ int, w http.ResponseWriter) {
		w.Header().Set("Location", target.srv.URL+"/stolen")
		w.WriteHeader(http.StatusFound)
	})
	c := newClock()
	logs := newLogLines()
	s, err := New([]Endpoint{{URL: rc.srv.URL, Secrets: [][]byte{testKey(t, 1)}, AllowNetworks: loopback, Retry: Retry{MaxAttempts: 2}}},
		&Options{Now: c.Now, Sleep: c.Sleep, Logger: zerolog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	s.Send(t.Context(), Event{Type: TaskCompleted, TaskID: "t"})
	line := logs.waitFor(t, "webhook failed")
	closeSender(t, s)
	if n := len(rc.deliveries()); n != 2 {
		t.Errorf("the receiver got %d attempts, want 2", n)
	}
	if n := len(target.deliveries()); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
	if !strings.Contains(line, "302") || strings.Contains(line, "stolen") {
		t.Errorf("log line: %s", line)
	}
}

// An endpoint on loopback is refused by the dial guard — the receiver
// never sees a request — unless its network is in AllowNetworks.
func TestInternalAddressRefused(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	c := newClock()
	logs := newLogLines()
	mt := metrics.New()
	s, err := New([]Endpoint{
		{URL: rc.srv.URL + "/refused", Secrets: [][]byte{testKey(t, 1)}, Retry: Retry{MaxAttempts: 2}},
		{URL: rc.srv.URL + "/other-net", Secrets: [][]byte{testKey(t, 1)}, Retry: Retry{MaxAttempts: 2},
			AllowNetworks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
	}, &Options{Now: c.Now, Sleep: c.Sleep, Logger: zerolog.New(logs), Metrics: mt})
	if err != nil {
		t.Fatal(err)
	}
	s.Send(t.Context(), Event{Type: TaskCompleted, TaskID: "t"})
	line := logs.waitFor(t, "webhook failed")
	logs.waitFor(t, "webhook failed")
	closeSender(t, s)
	if n := len(rc.deliveries()); n != 0 {
		t.Fatalf("the loopback receiver got %d requests", n)
	}
	if !strings.Contains(line, "loopback") {
		t.Errorf("log line: %s", line)
	}
	origin := "http://" + strings.TrimPrefix(rc.srv.URL, "http://")
	if f := count(mt, origin, "task.completed", "failed"); f != 2 {
		t.Errorf("failed %d, want 2", f)
	}

	// The honest flow: the operator allowed loopback for this endpoint.
	s, err = New([]Endpoint{{URL: rc.srv.URL + "/allowed", Secrets: [][]byte{testKey(t, 1)}, AllowNetworks: loopback}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Send(t.Context(), Event{Type: TaskCompleted, TaskID: "t"})
	rc.waitFor(t, 1)
	closeSender(t, s)
}

// The queue is bounded per endpoint, and one share (one caller) holds at
// most PerShare of it: past either, Send drops (counted) and returns at
// once; what was queued is delivered.
func TestQueueBounds(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	held := make(chan struct{}, 10)
	rc := newReceiver(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			held <- struct{}{}
			<-release
		}
	})
	mt := metrics.New()
	s, err := New([]Endpoint{{URL: rc.srv.URL, Secrets: [][]byte{testKey(t, 1)}, AllowNetworks: loopback}},
		&Options{Workers: 1, QueueSize: 3, PerShare: 2, Metrics: mt})
	if err != nil {
		t.Fatal(err)
	}
	origin := "http://" + strings.TrimPrefix(rc.srv.URL, "http://")
	dropped := func() int { return count(mt, origin, "task.completed", "dropped") }
	send := func(share string) { s.Send(t.Context(), Event{Type: TaskCompleted, TaskID: "t", Share: share}) }

	send("a") // in delivery, held by the receiver
	<-held
	send("a") // queued: a has 2, its share
	if send("a"); dropped() != 1 {
		t.Fatalf("a's third message: dropped %d, want 1", dropped())
	}
	send("b") // queued
	send("")  // queued: the queue holds 3
	if send("c"); dropped() != 2 {
		t.Fatalf("past the queue: dropped %d, want 2", dropped())
	}
	close(release)
	rc.waitFor(t, 4)
	closeSender(t, s)
	if d := count(mt, origin, "task.completed", "delivered"); d != 4 {
		t.Errorf("delivered %d, want 4", d)
	}
	send("d") // after Close
	if dropped() != 3 {
		t.Errorf("after Close: dropped %d, want 3", dropped())
	}
}

// Close delivers what is queued, ending a retry's wait at once; with a
// receiver that does not answer, it returns when its context ends and
// drops what is left.
func TestCloseDrains(t *testing.T) {
	t.Parallel()
	up := make(chan struct{})
	rc := newReceiver(t, func(n int, w http.ResponseWriter) {
		select {
		case <-up:
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	logs := newLogLines()
	// The real sleep, an hour long: only Close ends it.
	s, err := New([]Endpoint{{URL: rc.srv.URL, Secrets: [][]byte{testKey(t, 1)}, AllowNetworks: loopback, Retry: Retry{First: time.Hour}}},
		&Options{Workers: 1, Logger: zerolog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	s.Send(t.Context(), Event{Type: TaskCompleted, TaskID: "t1"})
	logs.waitFor(t, "webhook attempt failed")
	s.Send(t.Context(), Event{Type: TaskCompleted, TaskID: "t2"})
	close(up)
	closeSender(t, s)
	if n := len(rc.deliveries()); n != 3 {
		t.Errorf("%d requests, want 3 (a failed attempt, its retry, the queued one)", n)
	}

	// A receiver that never answers: Close is bounded by its context.
	hang := make(chan struct{})
	defer close(hang)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang })}
	go srv.Serve(ln)
	defer srv.Close()
	mt := metrics.New()
	s, err = New([]Endpoint{{URL: "http://" + ln.Addr().String(), Secrets: [][]byte{testKey(t, 1)}, AllowNetworks: loopback}},
		&Options{Workers: 1, Metrics: mt})
	if err != nil {
		t.Fatal(err)
	}
	s.Send(t.Context(), Event{Type: TaskCompleted, TaskID: "t1"})
	s.Send(t.Context(), Event{Type: TaskCompleted, TaskID: "t2"})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the context's deadline", err)
	}
	if d := count(mt, "http://"+ln.Addr().String(), "task.completed", "dropped"); d != 2 {
		t.Errorf("dropped %d, want 2", d)
	}
}

// A nil Sender sends nothing and closes.
func TestNilSender(t *testing.T) {
	s, err := New(nil, nil)
	if s != nil || err != nil {
		t.Fatalf("New(nil) = %v, %v", s, err)
	}
	s.Send(t.Context(), Event{Type: TaskCompleted})
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}
