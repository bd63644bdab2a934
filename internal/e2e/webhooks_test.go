//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/bridge/webhooks"
)

// receiverRecord is a line of testdata/webhook_receiver.mjs: one request
// it got, verified (ok) or not by the npm standardwebhooks verifier.
type receiverRecord struct {
	Path      string `json:"path"`
	OK        bool   `json:"ok"`
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	TaskID    string `json:"taskId"`
	Error     string `json:"error"`
}

// startWebhookReceiver starts the Node receiver on port (secrets: path →
// the one secret it verifies that path's deliveries with) and waits for
// its ready answer.
func startWebhookReceiver(t *testing.T, ctx context.Context, port int, secrets map[string]string, redirectTo string) *proc {
	t.Helper()
	if _, err := os.Stat(filepath.Join(peersDir(t), "standardwebhooks", "package.json")); err != nil {
		missingPeer(t, "peer standardwebhooks: %v", err)
	}
	sj, _ := json.Marshal(secrets)
	script, err := filepath.Abs("testdata/webhook_receiver.mjs")
	if err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, ctx, nodeBin(t), []string{script}, append(peerEnv(t),
		"MCPOTC_PEERS="+peersDir(t), "RECEIVER_PORT="+strconv.Itoa(port), "RECEIVER_SECRETS="+string(sj), "REDIRECT_TO="+redirectTo))
	p.waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/ready", port), 30*time.Second)
	return p
}

// readRecords reads the receiver's lines until n of them are for paths.
func readRecords(t *testing.T, p *proc, n int, paths ...string) []receiverRecord {
	t.Helper()
	var out []receiverRecord
	for len(out) < n {
		line, err := p.ReadLine(60 * time.Second)
		if err != nil {
			t.Fatalf("receiver: %v (have %d of %d records: %+v)", err, len(out), n, out)
		}
		var r receiverRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("receiver line %q: %v", line, err)
		}
		if slices.Contains(paths, r.Path) {
			out = append(out, r)
		}
	}
	return out
}

// senderLog is the sender's zerolog output, its lines decoded, for a test
// to wait on.
type senderLog struct {
	mu     sync.Mutex
	lines  []map[string]any
	notify chan struct{}
}

func newSenderLog() *senderLog { return &senderLog{notify: make(chan struct{}, 1)} }

func (l *senderLog) Write(p []byte) (int, error) {
	var m map[string]any
	if json.Unmarshal(p, &m) == nil {
		l.mu.Lock()
		l.lines = append(l.lines, m)
		l.mu.Unlock()
		select {
		case l.notify <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// waitUntil waits until cond holds of the lines logged so far.
func (l *senderLog) waitUntil(t *testing.T, what string, cond func([]map[string]any) bool) []map[string]any {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		l.mu.Lock()
		lines := slices.Clone(l.lines)
		l.mu.Unlock()
		if cond(lines) {
			return lines
		}
		select {
		case <-l.notify:
		case <-timeout:
			t.Fatalf("sender log: not %s within 60 s; lines: %v", what, lines)
		}
	}
}

func newWhsec(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// Signed webhooks against the reference verifier (npm standardwebhooks,
// as the receiver): every delivery verifies, also during a secret
// rotation (the sender signs with the new and the old secret; a receiver
// that knows only one of them verifies each message); a receiver that is
// down gets every event once it is back (the retries run on a short
// schedule here, the production one is an hour); a 302 to an internal
// address is not followed.
func TestWebhooksStandardReceiver(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The redirect's target: an internal address (127.0.0.2) the
	// endpoint is not allowed to reach, which records any request.
	var stolen atomic.Int32
	tl, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	target := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { stolen.Add(1) })}
	go target.Serve(tl)
	defer target.Close()
	redirectTo := "http://" + tl.Addr().String() + "/stolen"

	oldSecret, newSecret := newWhsec(t), newWhsec(t)
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	secrets := map[string]string{"/old": oldSecret, "/new": newSecret}
	rcv := startWebhookReceiver(t, ctx, port, secrets, redirectTo)

	keys, err := webhooks.ParseSecrets(newSecret + " " + oldSecret)
	if err != nil {
		t.Fatal(err)
	}
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	retry := webhooks.Retry{First: 100 * time.Millisecond, MaxInterval: 500 * time.Millisecond, For: 2 * time.Minute, MaxAttempts: 1000}
	log := newSenderLog()
	s, err := webhooks.New([]webhooks.Endpoint{
		{URL: base + "/old", Secrets: keys, AllowNetworks: allow, Retry: retry},
		{URL: base + "/new", Secrets: keys, AllowNetworks: allow, Retry: retry},
	}, &webhooks.Options{Logger: zerolog.New(log).Level(zerolog.DebugLevel)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	send := func(from, to int) {
		for i := from; i <= to; i++ {
			s.Send(ctx, webhooks.Event{Type: webhooks.Types[i%len(webhooks.Types)], TaskID: fmt.Sprintf("task-%d", i), Tool: "report",
				CreatedAt: time.Now().Add(-time.Minute), Share: "principal-a"})
		}
	}
	// check: every record verified, each task once per path, ids unique.
	check := func(phase string, recs []receiverRecord, from, to int) {
		t.Helper()
		got := map[string][]string{}
		ids := map[string]bool{}
		for _, r := range recs {
			if !r.OK {
				t.Errorf("%s: a delivery to %s did not verify: %s", phase, r.Path, r.Error)
				continue
			}
			if ids[r.ID] {
				t.Errorf("%s: webhook-id %s delivered twice", phase, r.ID)
			}
			ids[r.ID] = true
			got[r.Path] = append(got[r.Path], r.TaskID)
		}
		var want []string
		for i := from; i <= to; i++ {
			want = append(want, fmt.Sprintf("task-%d", i))
		}
		for _, p := range []string{"/old", "/new"} {
			slices.Sort(got[p])
			if !slices.Equal(got[p], want) {
				t.Errorf("%s: %s got tasks %v, want %v", phase, p, got[p], want)
			}
		}
	}

	// 1. Rotation: /old knows only the old secret, /new only the new one.
	send(1, 4)
	check("rotation", readRecords(t, rcv, 8, "/old", "/new"), 1, 4)

	// 2. The receiver goes down; the events sent meanwhile are retried
	// (each at least twice, the log says) and delivered once it is back.
	if err := rcv.Stop(); err != nil {
		t.Logf("receiver stopped: %v", err)
	}
	send(5, 8)
	log.waitUntil(t, "every message retried twice while the receiver is down", func(lines []map[string]any) bool {
		failed := map[string]int{}
		for _, l := range lines {
			if l["message"] == "webhook attempt failed" {
				failed[fmt.Sprint(l["webhook_id"])]++
			}
		}
		n := 0
		for _, c := range failed {
			if c >= 2 {
				n++
			}
		}
		return n >= 8 // 4 events × 2 endpoints
	})
	rcv = startWebhookReceiver(t, ctx, port, secrets, redirectTo)
	check("receiver back", readRecords(t, rcv, 8, "/old", "/new"), 5, 8)
	lines := log.waitUntil(t, "every message delivered", func(lines []map[string]any) bool {
		n := 0
		for _, l := range lines {
			if l["message"] == "webhook delivered" {
				n++
			}
		}
		return n >= 16
	})
	for _, l := range lines {
		if l["level"] == "error" {
			t.Errorf("sender error: %v", l)
		}
		for _, secret := range []string{oldSecret, newSecret, strings.TrimPrefix(oldSecret, "whsec_"), strings.TrimPrefix(newSecret, "whsec_")} {
			if strings.Contains(fmt.Sprint(l), secret) {
				t.Errorf("a log line holds a secret: %v", l)
			}
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// 3. A 302 to an internal address: not followed. The attempts (2)
	// fail at the receiver; the target never sees a request.
	rlog := newSenderLog()
	rs, err := webhooks.New([]webhooks.Endpoint{{URL: base + "/redirect", Secrets: keys, AllowNetworks: allow,
		Retry: webhooks.Retry{First: 50 * time.Millisecond, MaxAttempts: 2}}}, &webhooks.Options{Logger: zerolog.New(rlog)})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(context.Background())
	rs.Send(ctx, webhooks.Event{Type: webhooks.TaskCompleted, TaskID: "task-r"})
	failed := rlog.waitUntil(t, "the redirected message failed", func(lines []map[string]any) bool {
		return slices.ContainsFunc(lines, func(l map[string]any) bool {
			return l["message"] != nil && strings.HasPrefix(fmt.Sprint(l["message"]), "webhook failed")
		})
	})
	recs := readRecords(t, rcv, 2, "/redirect")
	if recs[0].ID != recs[1].ID {
		t.Errorf("the retry is another message: %+v", recs)
	}
	if n := stolen.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
	if last := failed[len(failed)-1]; !strings.Contains(fmt.Sprint(last["reason"]), "302") {
		t.Errorf("failure reason: %v", last)
	}
}
