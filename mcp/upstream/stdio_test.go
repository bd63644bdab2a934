//go:build unix

package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestUpstreamStdioToolsAllPagesRaw(t *testing.T) {
	u, logs := startFake(t, Config{}, Options{})
	waitReady(t, u)
	tools := waitTools(t, u, 4)
	want := []string{fakeTool1, fakeTool2, fakeTool3, fakeTool4}
	for i, w := range want {
		if string(tools[i]) != w {
			t.Errorf("tool %d:\n got %s\nwant %s", i, tools[i], w)
		}
	}
	if got := u.ServerInfo(); got.Name != "fake-upstream" || got.Version != "1.2.3" {
		t.Errorf("ServerInfo = %+v", got)
	}
	st := u.Status()
	if !st.Ready || st.Reason != "" || st.ProtocolVersion != "2025-11-25" {
		t.Errorf("Status = %+v", st)
	}
	// The tools that were dropped are logged.
	logs.waitLog(t, "not an object with a name", time.Second)
	logs.waitLog(t, "duplicate tool name", time.Second)
}

func TestUpstreamStdioInitializeDeclaresURLElicitation(t *testing.T) {
	u, _ := startFake(t, Config{}, Options{ClientName: "bridge-test", ClientVersion: "9.9.9"})
	waitReady(t, u)
	res, err := callTool(t, u, "capabilities", "")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
		ClientInfo      map[string]string          `json:"clientInfo"`
	}
	if err := json.Unmarshal([]byte(resultText(t, res)), &p); err != nil {
		t.Fatal(err)
	}
	if p.ProtocolVersion != "2025-11-25" {
		t.Errorf("protocolVersion = %q", p.ProtocolVersion)
	}
	if got := string(p.Capabilities["elicitation"]); got != `{"url":{}}` {
		t.Errorf("capabilities.elicitation = %s, want {\"url\":{}}", got)
	}
	if _, ok := p.Capabilities["sampling"]; ok {
		t.Errorf("sampling declared: %v", p.Capabilities)
	}
	if p.ClientInfo["name"] != "bridge-test" || p.ClientInfo["version"] != "9.9.9" {
		t.Errorf("clientInfo = %v", p.ClientInfo)
	}
}

func TestUpstreamStdioArgumentsExact(t *testing.T) {
	u, _ := startFake(t, Config{}, Options{})
	waitReady(t, u)
	args := `{ "big": 123456789012345678901234567890, "small": -0.000000000000000000000001,
		"float": 1.50, "huge": 1e400, "nested": {"a": [1, 2, {"b": -0.0}]}, "s": "h\u00e9llo \"q\"" }`
	var want bytes.Buffer
	if err := json.Compact(&want, []byte(args)); err != nil {
		t.Fatal(err)
	}
	res, err := callTool(t, u, "echo_raw", args)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); got != want.String() {
		t.Errorf("arguments at the server:\n got %s\nwant %s", got, want.String())
	}
	// No arguments: an empty object.
	res, err = callTool(t, u, "echo_raw", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); got != `{}` {
		t.Errorf("no arguments arrived as %s", got)
	}
	// Not an object: refused before anything is sent.
	if _, err := callTool(t, u, "echo_raw", `[1]`); err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrLost) {
		t.Errorf("array arguments: err = %v", err)
	}
}

func TestUpstreamStdioMetaAndProgress(t *testing.T) {
	var mu sync.Mutex
	var got []string
	u, _ := startFake(t, Config{}, Options{OnNotification: func(method string, params json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, method+" "+string(params))
	}})
	waitReady(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := u.CallTool(ctx, "meta", nil, map[string]any{"progressToken": "tok-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); got != `{"progressToken":"tok-1"}` {
		t.Errorf("_meta at the server = %s", got)
	}
	if _, err := u.CallTool(ctx, "progress", nil, map[string]any{"progressToken": 7}, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// The notification is read before the response on the same stream.
	if len(got) != 1 || !strings.HasPrefix(got[0], "notifications/progress ") || !strings.Contains(got[0], `"progressToken":7`) {
		t.Errorf("notifications = %q", got)
	}
}

func TestUpstreamStdioErrorsTyped(t *testing.T) {
	u, _ := startFake(t, Config{}, Options{})
	waitReady(t, u)

	_, err := callTool(t, u, "invalid", `{"b":"x"}`)
	var ue *Error
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want *Error", err)
	}
	if ue.Code != -32602 || ue.Message != "invalid arguments: b: Must be a number" ||
		string(ue.Data) != `{"parameter_errors":{"b":"Must be a number"}}` {
		t.Errorf("Error = %d %q %s", ue.Code, ue.Message, ue.Data)
	}
	if errors.Is(err, ErrLost) || errors.Is(err, ErrUnavailable) {
		t.Errorf("an upstream error is classed as %v", err)
	}

	_, err = callTool(t, u, "needs_auth", "")
	if !errors.As(err, &ue) || ue.Code != -32042 {
		t.Fatalf("err = %v, want -32042", err)
	}
	var data, want any
	_ = json.Unmarshal(ue.Data, &data)
	_ = json.Unmarshal([]byte(`{"elicitations":[{"mode":"url","elicitationId":"auth-1","url":"https://auth.example/start?state=xyz","message":"Sign in"}]}`), &want)
	if !reflect.DeepEqual(data, want) {
		t.Errorf("-32042 data = %s", ue.Data)
	}

	_, err = callTool(t, u, "bad_result", "")
	if !errors.Is(err, ErrLost) {
		t.Errorf("malformed result: err = %v, want ErrLost", err)
	}
}

func TestUpstreamStdioServerRequestsAnswered(t *testing.T) {
	var mu sync.Mutex
	var elicitations []Elicitation
	u, logs := startFake(t, Config{}, Options{OnElicitation: func(e Elicitation) {
		mu.Lock()
		defer mu.Unlock()
		elicitations = append(elicitations, e)
	}})
	waitReady(t, u)
	res, err := callTool(t, u, "elicit", "")
	if err != nil {
		t.Fatal(err)
	}
	var answers []struct {
		ID     string          `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(resultText(t, res)), &answers); err != nil {
		t.Fatalf("answers %s: %v", resultText(t, res), err)
	}
	if len(answers) != 5 {
		t.Fatalf("answers = %s", resultText(t, res))
	}
	for i, want := range []string{`{"action":"cancel"}`, `{"action":"decline"}`, "", `{"roots":[]}`, `{}`} {
		a := answers[i]
		if a.ID != fmt.Sprintf("srv-%d", i) {
			t.Errorf("answer %d has id %q", i, a.ID)
		}
		if want == "" {
			if a.Error == nil || a.Error.Code != -32601 {
				t.Errorf("sampling answer %d: %+v %s, want error -32601", i, a.Error, a.Result)
			}
			continue
		}
		if string(a.Result) != want || a.Error != nil {
			t.Errorf("answer %d = %s %+v, want %s", i, a.Result, a.Error, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	wantE := []Elicitation{
		{Upstream: "fake-stdio", Mode: "url", ElicitationID: "el-1", URL: "https://example.com/connect", Message: "Connect your account", Action: "cancel"},
		{Upstream: "fake-stdio", Mode: "form", Message: "Your name?", Action: "decline"},
	}
	if !reflect.DeepEqual(elicitations, wantE) {
		t.Errorf("elicitations reported:\n got %+v\nwant %+v", elicitations, wantE)
	}
	logs.waitLog(t, "url=https://example.com/connect", time.Second)
}

func TestUpstreamStdioStderrLogged(t *testing.T) {
	u, logs := startFake(t, Config{StderrLineMax: 100}, Options{})
	waitReady(t, u)
	if _, err := callTool(t, u, "stderr", ""); err != nil {
		t.Fatal(err)
	}
	logs.waitLog(t, `line="fake: hello on stderr"`, 5*time.Second)
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `line="fake: hello on stderr"`) && !strings.Contains(l, `msg="child stderr" upstream=fake-stdio `) {
			t.Errorf("stderr line logged as %s", l)
		}
	}
	cut := `line="` + strings.Repeat("x", 100) + " …[line truncated]\""
	logs.waitLog(t, cut, 5*time.Second)
	if strings.Contains(logs.String(), strings.Repeat("x", 101)) {
		t.Error("a stderr line was logged beyond StderrLineMax")
	}
}

func TestUpstreamStdioCrashLostThenRestart(t *testing.T) {
	// Crashing soon after it is ready: restarted after the backoff.
	u, logs := startFake(t, Config{StableAfter: time.Hour, RestartBackoffMin: 400 * time.Millisecond, RestartBackoffMax: 400 * time.Millisecond}, Options{})
	waitReady(t, u)
	pid1 := childPID(t, u)

	_, err := callTool(t, u, "crash", "")
	if !errors.Is(err, ErrLost) {
		t.Fatalf("crash mid-call: err = %v, want ErrLost", err)
	}
	// While it restarts (at least 200ms of backoff): not ready, with the
	// reason, and calls are refused without being sent.
	eventually(t, 2*time.Second, "not ready", func() bool { return !u.Ready() })
	st := u.Status()
	if !strings.HasPrefix(st.Reason, "restarting after exit status 3 (restart 1)") || st.Restarts != 1 {
		t.Errorf("status while restarting = %+v", st)
	}
	if _, err := callTool(t, u, "pid", ""); !errors.Is(err, ErrUnavailable) {
		t.Errorf("call while restarting: err = %v, want ErrUnavailable", err)
	}
	logs.waitLog(t, `line="fake: crashing now"`, 2*time.Second)

	waitReady(t, u)
	pid2 := childPID(t, u)
	if pid2 == pid1 {
		t.Errorf("same pid %d after restart", pid1)
	}
	assertGone(t, pid1)
	waitTools(t, u, 4) // listed again after the restart
}

func TestUpstreamStdioConcurrentCalls(t *testing.T) {
	u, _ := startFake(t, Config{}, Options{})
	waitReady(t, u)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			name, args := "echo_raw", fmt.Sprintf(`{"i":%d}`, i)
			if i%4 == 0 {
				name, args = "sleep", `{"ms":50}`
			}
			res, err := callTool(t, u, name, args)
			switch {
			case err != nil:
				errs <- err
			case name == "echo_raw" && resultText(t, res) != args:
				errs <- fmt.Errorf("call %d got %s", i, resultText(t, res))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestUpstreamStdioCancelSendsNotification(t *testing.T) {
	u, logs := startFake(t, Config{}, Options{})
	waitReady(t, u)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := u.CallTool(ctx, "slow", nil, nil, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancelled call returned after %s", d)
	}
	logs.waitLog(t, "fake: cancelled request", 5*time.Second)
	logs.waitLog(t, "(cancelled by the client)", time.Second)
	// The connection is still good.
	if _, err := callTool(t, u, "echo_raw", `{}`); err != nil {
		t.Fatal(err)
	}
}

func TestUpstreamStdioCallTimeout(t *testing.T) {
	u, logs := startFake(t, Config{CallTimeout: 300 * time.Millisecond}, Options{})
	waitReady(t, u)
	start := time.Now()
	_, err := callTool(t, u, "slow", "")
	if !errors.Is(err, ErrLost) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrLost and DeadlineExceeded", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
		t.Errorf("timed out after %s", d)
	}
	logs.waitLog(t, "(timed out)", 5*time.Second)
}

func TestUpstreamStdioListChanged(t *testing.T) {
	lists := make(chan []json.RawMessage, 10)
	u, _ := startFake(t, Config{}, Options{OnToolsChanged: func(tools []json.RawMessage) { lists <- tools }})
	waitReady(t, u)
	select {
	case tools := <-lists:
		if len(tools) != 4 {
			t.Fatalf("first list has %d tools", len(tools))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no tool list after connecting")
	}
	if _, err := callTool(t, u, "change_tools", ""); err != nil {
		t.Fatal(err)
	}
	select {
	case tools := <-lists:
		if len(tools) != 5 || string(tools[4]) != fakeTool5 {
			t.Fatalf("list after list_changed: %s", tools)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no tool list after notifications/tools/list_changed")
	}
	if n := len(u.Tools()); n != 5 {
		t.Errorf("Tools() has %d tools", n)
	}
}

func TestUpstreamStdioCloseKillsStubbornChild(t *testing.T) {
	const grace = 300 * time.Millisecond
	u, logs := startFake(t, Config{KillGrace: grace, Env: []string{fakeIgnoreTerm + "=1"}}, Options{})
	waitReady(t, u)
	pid := childPID(t, u)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := u.Close(ctx); err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	// stdin closed, grace, SIGTERM (ignored), grace, SIGKILL.
	if d < 2*grace-50*time.Millisecond || d > 2*grace+3*time.Second {
		t.Errorf("Close took %s", d)
	}
	assertGone(t, pid)
	for _, s := range []string{"sending SIGTERM", "killing its process group"} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("log lacks %q", s)
		}
	}
	if st := u.Status(); st.Ready || st.Reason != "closed" {
		t.Errorf("status after Close = %+v", st)
	}
	if _, err := callTool(t, u, "echo_raw", ""); !errors.Is(err, ErrUnavailable) {
		t.Errorf("call after Close: err = %v", err)
	}
}

func TestUpstreamStdioCloseWithExpiredContextKillsAtOnce(t *testing.T) {
	u, _ := startFake(t, Config{KillGrace: 5 * time.Second, Env: []string{fakeIgnoreTerm + "=1"}}, Options{})
	waitReady(t, u)
	pid := childPID(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := u.Close(ctx)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %s with a 100ms context", d)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close: %v", err)
	}
	assertGone(t, pid)
}

func TestUpstreamStdioCloseDrainsInFlightCalls(t *testing.T) {
	u, _ := startFake(t, Config{DrainTimeout: 3 * time.Second}, Options{})
	waitReady(t, u)
	done, _ := closeDuringCall(t, u, "sleep", `{"ms":300}`)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("in-flight call: %v", err)
		}
	default:
		t.Error("Close returned before the in-flight call")
	}
}

func TestUpstreamStdioCloseAbandonsLongCalls(t *testing.T) {
	u, _ := startFake(t, Config{DrainTimeout: 200 * time.Millisecond}, Options{})
	waitReady(t, u)
	done, d := closeDuringCall(t, u, "slow", "")
	if d > 3*time.Second {
		t.Errorf("Close took %s", d)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrLost) {
			t.Errorf("abandoned call: err = %v, want ErrLost", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the abandoned call did not return")
	}
}

// closeDuringCall calls tool with args in the background and, once the
// call is in flight, closes u (within 10s; an error fails the test). It
// returns the channel of the call's error and how long Close took.
func closeDuringCall(t *testing.T, u *Upstream, tool, args string) (<-chan error, time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := callTool(t, u, tool, args)
		done <- err
	}()
	eventually(t, 5*time.Second, "the call in flight", func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.inflight == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := u.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return done, time.Since(start)
}

func TestUpstreamStdioCannotStart(t *testing.T) {
	logs := &testLogs{}
	u, err := Start(context.Background(), &Config{
		Name:              "missing",
		Command:           "/nonexistent/mcp-server",
		RestartBackoffMin: 50 * time.Millisecond,
	}, &Options{Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close(context.Background())
	eventually(t, 5*time.Second, "a start failure", func() bool {
		return strings.HasPrefix(u.Status().Reason, "cannot start: ")
	})
	start := time.Now()
	_, err = callTool(t, u, "x", "")
	if !errors.Is(err, ErrUnavailable) || time.Since(start) > 100*time.Millisecond {
		t.Errorf("err = %v after %s, want ErrUnavailable at once", err, time.Since(start))
	}
	if !strings.Contains(err.Error(), "cannot start") {
		t.Errorf("error lacks the reason: %v", err)
	}
}

func TestUpstreamStdioExitAtStart(t *testing.T) {
	u, logs := startFake(t, Config{Env: []string{fakeExitAtStart + "=1"}, RestartBackoffMin: time.Second, RestartBackoffMax: time.Second}, Options{})
	eventually(t, 10*time.Second, "an exit during initialize", func() bool {
		return u.Status().Reason == "exited during initialize: exit status 1"
	})
	logs.waitLog(t, `line="fake: exiting at start"`, 2*time.Second)
	if u.Ready() {
		t.Error("ready")
	}
}

func TestUpstreamConfigErrors(t *testing.T) {
	for _, cfg := range []*Config{
		nil,
		{Name: "none"},
		{Name: "two", Command: "x", URL: "http://h/mcp"},
		{Name: "scheme", URL: "ftp://h/mcp"},
		{Name: "nohost", URL: "http:///mcp"},
		{Name: "timeout", URL: "http://h/mcp", HTTPClient: &http.Client{Timeout: time.Second}},
	} {
		if u, err := Start(context.Background(), cfg, nil); err == nil {
			u.Close(context.Background())
			t.Errorf("%+v: no error", cfg)
		}
	}
	// A token in the URL's query stays out of the error.
	_, err := Start(context.Background(), &Config{URL: "ftp://h/mcp?token=SECRET"}, nil)
	if err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("err = %v", err)
	}
}

func childPID(t *testing.T, u *Upstream) int {
	t.Helper()
	res, err := callTool(t, u, "pid", "")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(resultText(t, res))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// assertGone checks that pid and its process group no longer exist (a
// zombie would still answer kill 0: it must have been reaped too).
func assertGone(t *testing.T, pid int) {
	t.Helper()
	eventually(t, 5*time.Second, fmt.Sprintf("process %d to be gone", pid), func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) && errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH)
	})
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		t.Errorf("/proc/%d still exists", pid)
	}
}

func TestUpstreamStdioToolListBounds(t *testing.T) {
	u, logs := startFake(t, Config{MaxToolPages: 2}, Options{})
	waitReady(t, u)
	if tools := waitTools(t, u, 3); string(tools[2]) != fakeTool3 {
		t.Errorf("tools = %s", tools)
	}
	logs.waitLog(t, "more pages than allowed", time.Second)

	u, logs = startFake(t, Config{MaxTools: 2}, Options{})
	waitReady(t, u)
	waitTools(t, u, 2)
	logs.waitLog(t, "more tools than allowed", time.Second)
}

func TestUpstreamStdioStartContextCloses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cfg := Config{
		Name:    "ctx",
		Command: os.Args[0],
		Args:    []string{"-test.run=^TestUpstreamFakeServerProcess$"},
		Env:     []string{fakeEnv + "=1", "GORACE=atexit_sleep_ms=0"},
	}
	u, err := Start(ctx, &cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, u)
	pid := childPID(t, u)
	cancel()
	eventually(t, 5*time.Second, "closed", func() bool { return u.Status().Reason == "closed" })
	assertGone(t, pid)
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	if err := u.Close(cctx); err != nil {
		t.Error(err)
	}
}

// TestUpstreamStdioSampleChild runs the sample server as a real child:
// mcp-go's stdio server at the other end of the pipes.
func TestUpstreamStdioSampleChild(t *testing.T) {
	var mu sync.Mutex
	progress := 0
	logs := &testLogs{}
	u, err := Start(context.Background(), &Config{
		Name:    "sample-child",
		Command: os.Args[0],
		Args:    []string{"-test.run=^TestUpstreamSampleServerProcess$"},
		Env:     []string{sampleEnv + "=1", "GORACE=atexit_sleep_ms=0"},
	}, &Options{Logger: logs.logger(), OnNotification: func(method string, _ json.RawMessage) {
		if method == "notifications/progress" {
			mu.Lock()
			progress++
			mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		if err := u.Close(ctx); err != nil {
			t.Error(err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Close took %s: the sample did not exit at the end of its stdin", d)
		}
	}()
	waitReady(t, u)
	waitTools(t, u, 4)
	res, err := callTool(t, u, "add", `{"a":40,"b":2}`)
	if err != nil || !strings.Contains(string(res), `"structuredContent":{"sum":42}`) {
		t.Fatalf("add: %s, %v", res, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := u.CallTool(ctx, "slow", json.RawMessage(`{"seconds":0.1,"steps":2}`), map[string]any{"progressToken": 1}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "progress", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return progress == 2
	})
	cctx, ccancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, ccancel)
	start := time.Now()
	if _, err := u.CallTool(cctx, "slow", json.RawMessage(`{"seconds":20}`), nil, nil); !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Errorf("cancelled: %v after %s", err, time.Since(start))
	}
	// Many calls at once through the child's worker pool.
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			res, err := callTool(t, u, "echo", fmt.Sprintf(`{"message":"m%d"}`, i))
			if err != nil || resultText(t, res) != fmt.Sprintf("m%d", i) {
				t.Errorf("echo %d: %s, %v", i, res, err)
			}
		})
	}
	wg.Wait()
}

func TestUpstreamBackoff(t *testing.T) {
	u := &Upstream{cfg: Config{RestartBackoffMin: 100 * time.Millisecond, RestartBackoffMax: time.Second}}
	for n, nominal := range []time.Duration{100, 200, 400, 800, 1000, 1000, 1000} {
		nominal *= time.Millisecond
		for range 50 {
			if d := u.backoff(n); d < nominal/2 || d > nominal {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", n, d, nominal/2, nominal)
			}
		}
	}
	if d := u.backoff(1000); d > time.Second {
		t.Errorf("backoff(1000) = %s", d)
	}
}
