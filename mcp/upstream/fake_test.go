package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/mcp/mcpsample"

	"github.com/mcpotc/mcpotc/internal/wiretest"
)

// The fake stdio MCP server is this test binary, re-executed with
// fakeEnv set: it runs TestUpstreamFakeServerProcess only, which speaks
// raw JSON-RPC lines on stdin/stdout and exits. (A helper test rather than
// TestMain, which another file of the package may want.)
const fakeEnv = "MCPOTC_TEST_FAKE_UPSTREAM"

// Environment switches of the fake server.
const (
	fakeIgnoreTerm  = "FAKE_IGNORE_TERM"   // "1": ignore SIGTERM and the end of stdin
	fakeExitAtStart = "FAKE_EXIT_AT_START" // "1": print to stderr and exit 1 at once
	fakeBadList     = "FAKE_BAD_LIST"      // "1": tools/list answers a malformed result (until list_ok)
	// fakeEra: "modern" answers server/discover (2026-07-28 only: initialize
	// gets -32022), "silent" never answers server/discover (a legacy server
	// that ignores requests before initialize); unset: -32601, as any
	// unknown method.
	fakeEra = "FAKE_ERA"
)

func TestUpstreamFakeServerProcess(t *testing.T) {
	if os.Getenv(fakeEnv) != "1" {
		return
	}
	os.Exit(runFake(os.Stdin, os.Stdout, os.Stderr))
}

// The tools of the fake server's three tools/list pages, byte for byte as
// it sends them (odd spacing included): the upstream must keep them so.
const (
	fakeTool1 = `{"name":"echo_raw",  "description":"Echoes its raw arguments.", "inputSchema":{"type":"object","description":"top-level description","anyOf":[{"required":["a"]},{"required":["b"]}],"$defs":{"n":{"type":"integer"}},"properties":{"a":{"$ref":"#/$defs/n"},"b":{"type":"string"}}}}`
	fakeTool2 = `{"name":"errors","inputSchema":{"type":"object"} , "annotations":{"readOnlyHint":true}}`
	fakeTool3 = `{"name":"elicit","inputSchema":{"type":"object","oneOf":[{"type":"object"}]},"outputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}}`
	fakeTool4 = `{"name":"slow","inputSchema":{"type":"object","properties":{"n":{"type":"integer","maximum":123456789012345678901234567890}}}}`
	fakeTool5 = `{"name":"added_later","inputSchema":{"type":"object"}}`
	// Dropped by the upstream: no name, and a duplicate.
	fakeNoName    = `{"description":"no name"}`
	fakeDuplicate = `{"name":"echo_raw","inputSchema":{"type":"object"}}`
)

type fake struct {
	out  io.Writer
	errw io.Writer
	wmu  sync.Mutex

	mu         sync.Mutex
	waiting    map[string]chan []byte   // ids of the fake's own requests
	cancels    map[string]chan struct{} // ids of calls waiting for a cancellation
	extraTool  bool
	badList    bool
	initParams json.RawMessage
}

func runFake(in io.Reader, out, errw io.Writer) int {
	if os.Getenv(fakeExitAtStart) == "1" {
		fmt.Fprintln(errw, "fake: exiting at start")
		return 1
	}
	stubborn := os.Getenv(fakeIgnoreTerm) == "1"
	if stubborn {
		signal.Ignore(syscall.SIGTERM)
	}
	f := &fake{out: out, errw: errw, waiting: map[string]chan []byte{}, cancels: map[string]chan struct{}{}}
	f.badList = os.Getenv(fakeBadList) == "1"
	fmt.Fprintln(errw, "fake: started")
	br := bufio.NewReader(in)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			f.handle(line)
		}
		if err != nil {
			if stubborn {
				time.Sleep(time.Hour)
			}
			return 0
		}
	}
}

func (f *fake) send(line string) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	io.WriteString(f.out, line+"\n")
}

func (f *fake) reply(id json.RawMessage, result string) {
	f.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result))
}

func (f *fake) replyText(id json.RawMessage, text string) {
	b, _ := json.Marshal(text)
	f.reply(id, `{"content":[{"type":"text","text":`+string(b)+`}]}`)
}

func (f *fake) fail(id json.RawMessage, code int, msg, data string) {
	m, _ := json.Marshal(msg)
	e := fmt.Sprintf(`{"code":%d,"message":%s`, code, m)
	if data != "" {
		e += `,"data":` + data
	}
	f.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":%s}}`, id, e))
}

func (f *fake) handle(line []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return
	}
	switch {
	case m.Method == "" && m.ID != nil: // an answer to the fake's own request
		f.mu.Lock()
		ch := f.waiting[string(m.ID)]
		f.mu.Unlock()
		if ch != nil {
			ch <- bytes.TrimSpace(line)
		}
	case m.ID == nil: // a notification
		if m.Method == "notifications/cancelled" {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
				Reason    string          `json:"reason"`
			}
			_ = json.Unmarshal(m.Params, &p)
			fmt.Fprintf(f.errw, "fake: cancelled request %s (%s)\n", p.RequestID, p.Reason)
			f.mu.Lock()
			if ch := f.cancels[string(p.RequestID)]; ch != nil {
				close(ch)
				delete(f.cancels, string(p.RequestID))
			}
			f.mu.Unlock()
		}
	default:
		go f.request(m.ID, m.Method, m.Params)
	}
}

func (f *fake) request(id json.RawMessage, method string, params json.RawMessage) {
	era := os.Getenv(fakeEra)
	switch {
	case method == "server/discover" && era == "silent":
		return
	case method == "server/discover" && era == "modern":
		fmt.Fprintf(f.errw, "fake: discover %s\n", params)
		f.reply(id, `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},`+
			`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fake-modern","version":"2.0.0"}},"ttlMs":0,"cacheScope":"public"}`)
		return
	case method == "initialize" && era == "modern":
		f.fail(id, -32022, "Unsupported protocol version", `{"supported":["2026-07-28"],"requested":"2025-11-25"}`)
		return
	case method == "subscriptions/listen" && era == "modern":
		fmt.Fprintf(f.errw, "fake: listen %s\n", params)
		f.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":%s},"notifications":{"toolsListChanged":true}}}`, id))
		return // held open: never answered
	case era == "modern" && method != "tools/list" && method != "tools/call":
		f.fail(id, -32601, "method not found", "")
		return
	case era == "modern":
		var p struct {
			Meta json.RawMessage `json:"_meta"`
		}
		_ = json.Unmarshal(params, &p)
		fmt.Fprintf(f.errw, "fake: %s _meta %s\n", method, p.Meta)
	}
	switch method {
	case "initialize":
		f.mu.Lock()
		f.initParams = params
		f.mu.Unlock()
		f.reply(id, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"fake-upstream","version":"1.2.3"}}`)
	case "ping":
		f.reply(id, `{}`)
	case "tools/list":
		var p struct {
			Cursor string `json:"cursor"`
		}
		_ = json.Unmarshal(params, &p)
		f.mu.Lock()
		bad := f.badList
		f.mu.Unlock()
		switch {
		case bad:
			f.reply(id, `{"tools":"not a list"}`)
			return
		}
		switch p.Cursor {
		case "":
			f.reply(id, `{"tools":[`+fakeTool1+`,`+fakeTool2+`],"nextCursor":"page-2"}`)
		case "page-2":
			f.reply(id, `{"tools":[`+fakeTool3+`, `+fakeNoName+`],"nextCursor":"page-3"}`)
		case "page-3":
			tools := fakeTool4 + `,` + fakeDuplicate
			f.mu.Lock()
			if f.extraTool {
				tools += `,` + fakeTool5
			}
			f.mu.Unlock()
			f.reply(id, `{"tools":[`+tools+`]}`)
		default:
			f.fail(id, -32602, "bad cursor", "")
		}
	case "tools/call":
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Meta      json.RawMessage `json:"_meta"`
		}
		_ = json.Unmarshal(params, &p)
		f.call(id, p.Name, p.Arguments, p.Meta)
	default:
		f.fail(id, -32601, "method not found", "")
	}
}

// ask sends a server→client request and waits for its answer line.
func (f *fake) ask(id, method, params string) string {
	ch := make(chan []byte, 1)
	f.mu.Lock()
	f.waiting[id] = ch
	f.mu.Unlock()
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q`, id, method)
	if params != "" {
		line += `,"params":` + params
	}
	f.send(line + "}")
	select {
	case answer := <-ch:
		return string(answer)
	case <-time.After(10 * time.Second):
		return `"no answer"`
	}
}

func (f *fake) call(id json.RawMessage, name string, args, meta json.RawMessage) {
	switch name {
	case "echo_raw":
		f.replyText(id, string(args))
	case "meta":
		f.replyText(id, string(meta))
	case "invalid":
		f.fail(id, -32602, "invalid arguments: b: Must be a number", `{"parameter_errors":{"b":"Must be a number"}}`)
	case "needs_auth":
		f.fail(id, -32042, "authorization required",
			`{"elicitations":[{"mode":"url","elicitationId":"auth-1","url":"https://auth.example/start?state=xyz","message":"Sign in"}]}`)
	case "elicit":
		asks := []struct{ method, params string }{
			{"elicitation/create", `{"mode":"url","elicitationId":"el-1","url":"https://example.com/connect","message":"Connect your account"}`},
			{"elicitation/create", `{"message":"Your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}`},
			{"sampling/createMessage", `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10}`},
			{"roots/list", `{}`},
			{"ping", ``},
		}
		answers := make([]string, len(asks))
		for i, a := range asks {
			answers[i] = f.ask(fmt.Sprintf(`"srv-%d"`, i), a.method, a.params)
		}
		f.replyText(id, "["+strings.Join(answers, ",")+"]")
	case "crash":
		fmt.Fprintln(f.errw, "fake: crashing now")
		os.Exit(3)
	case "pid":
		f.replyText(id, strconv.Itoa(os.Getpid()))
	case "capabilities":
		f.mu.Lock()
		p := f.initParams
		f.mu.Unlock()
		f.replyText(id, string(p))
	case "slow":
		ch := make(chan struct{})
		f.mu.Lock()
		f.cancels[string(id)] = ch
		f.mu.Unlock()
		select {
		case <-ch: // cancelled: no answer, as the protocol says
		case <-time.After(20 * time.Second):
			f.replyText(id, "slow done")
		}
	case "sleep":
		var a struct {
			MS int `json:"ms"`
		}
		_ = json.Unmarshal(args, &a)
		time.Sleep(time.Duration(a.MS) * time.Millisecond)
		f.replyText(id, "slept")
	case "stderr":
		fmt.Fprintln(f.errw, "fake: hello on stderr")
		fmt.Fprintln(f.errw, strings.Repeat("x", 10000))
		f.replyText(id, "ok")
	case "change_tools":
		f.mu.Lock()
		f.extraTool = true
		f.mu.Unlock()
		f.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
		f.replyText(id, "changed")
	case "progress":
		var m struct {
			Token json.RawMessage `json:"progressToken"`
		}
		_ = json.Unmarshal(meta, &m)
		f.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1,"total":2}}`, m.Token))
		f.replyText(id, "progressed")
	case "bad_result":
		f.reply(id, `"not an object"`)
	case "input_url":
		f.reply(id, `{"resultType":"input_required","inputRequests":{"github":{"method":"elicitation/create","params":{"mode":"url","message":"Connect GitHub","url":"https://auth.example/github","_meta":{"carrier":{"kept":true}}}}},"requestState":"opaque"}`)
	case "input_form":
		f.reply(id, `{"resultType":"input_required","inputRequests":{"name":{"method":"elicitation/create","params":{"message":"Your name?","requestedSchema":{"type":"object"}}},"llm":{"method":"sampling/createMessage","params":{"maxTokens":5}}}}`)
	case "odd_type":
		f.reply(id, `{"resultType":"someday","content":[]}`)
	case "list_ok", "list_bad":
		f.mu.Lock()
		f.badList = name == "list_bad"
		f.mu.Unlock()
		f.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
		f.replyText(id, name)
	case "big":
		f.big(id, args)
	default:
		f.fail(id, -32602, "unknown tool "+name, "")
	}
}

// testLogs collects log output for assertions.
type testLogs struct{ wiretest.Buffer }

func (l *testLogs) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// waitLog waits until the logs contain s.
func (l *testLogs) waitLog(t *testing.T, s string, within time.Duration) {
	t.Helper()
	eventually(t, within, "log line "+strconv.Quote(s), func() bool { return strings.Contains(l.String(), s) })
}

// eventually polls cond until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startFake starts an upstream on the fake stdio server. cfg may set
// anything but Command and Args; opts.Logger is set to logs.
func startFake(t *testing.T, cfg Config, opts Options) (*Upstream, *testLogs) {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "fake-stdio"
	}
	cfg.Command = os.Args[0]
	cfg.Args = []string{"-test.run=^TestUpstreamFakeServerProcess$"}
	// A race-enabled binary sleeps 1s at exit unless told not to.
	cfg.Env = append(cfg.Env, fakeEnv+"=1", "GORACE=atexit_sleep_ms=0")
	if cfg.RestartBackoffMin == 0 {
		cfg.RestartBackoffMin, cfg.RestartBackoffMax = 20*time.Millisecond, 200*time.Millisecond
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 500 * time.Millisecond
	}
	return startLogged(t, cfg, opts, true)
}

// startLogged starts an upstream on cfg with opts.Logger set to new logs,
// and closes it (within 10s) when the test ends; with checkClose, an error
// of that Close fails the test.
func startLogged(t *testing.T, cfg Config, opts Options, checkClose bool) (*Upstream, *testLogs) {
	t.Helper()
	logs := &testLogs{}
	opts.Logger = logs.logger()
	u, err := Start(context.Background(), &cfg, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := u.Close(ctx); err != nil && checkClose {
			t.Errorf("Close: %v", err)
		}
	})
	return u, logs
}

func waitReady(t *testing.T, u *Upstream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := u.WaitReady(ctx); err != nil {
		t.Fatalf("upstream not ready: %v (%+v)", err, u.Status())
	}
}

// waitTools waits until the upstream lists n tools and returns them.
func waitTools(t *testing.T, u *Upstream, n int) []json.RawMessage {
	t.Helper()
	var tools []json.RawMessage
	eventually(t, 10*time.Second, fmt.Sprintf("%d tools", n), func() bool {
		tools = u.Tools()
		return len(tools) == n
	})
	return tools
}

// callTool calls a tool with a bounded context.
func callTool(t *testing.T, u *Upstream, name, args string) (json.RawMessage, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return u.CallTool(ctx, name, json.RawMessage(args), nil, nil)
}

// resultText returns the text of the first content block of a raw result.
func resultText(t *testing.T, result json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(result, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s has no text content (%v)", result, err)
	}
	return r.Content[0].Text
}

// sampleEnv makes the test binary serve the sample server over stdio.
const sampleEnv = "MCPOTC_TEST_SAMPLE_STDIO"

func TestUpstreamSampleServerProcess(t *testing.T) {
	if os.Getenv(sampleEnv) != "1" {
		return
	}
	if err := mcpsample.ServeStdio(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sample:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// big writes one line of about mb MiB in the shape args.shape asks for,
// streamed in 64 KiB pieces (never held whole), then answers the call when
// the line was not the answer itself. It answers with the total size of the
// line it wrote ("wrote N") when the big line was not the answer.
func (f *fake) big(id json.RawMessage, args json.RawMessage) {
	var a struct {
		MB    int    `json:"mb"`
		Shape string `json:"shape"`
	}
	_ = json.Unmarshal(args, &a)
	var head, tail string
	switch a.Shape {
	case "id_first": // mcp-go, Python SDK
		head, tail = `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"content":[{"type":"text","text":"`, `"}]}}`
	case "id_last": // TypeScript SDK
		head, tail = `{"result":{"content":[{"type":"text","text":"`, `"}],"_meta":{"id":"nested \\\"id\\\":9}"}},"jsonrpc":"2.0", "id" : `+string(id)+` }`
	case "notification":
		head, tail = `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`, `"}}`
	case "request":
		head, tail = `{"jsonrpc":"2.0","id":"srv-big","method":"sampling/createMessage","params":{"x":"`, `"}}`
	case "no_id":
		head, tail = `{"jsonrpc":"2.0","result":{"text":"`, `"}}`
	}
	ch := make(chan []byte, 1)
	if a.Shape == "request" {
		f.mu.Lock()
		f.waiting[`"srv-big"`] = ch
		f.mu.Unlock()
	}
	piece := bytes.Repeat([]byte("a"), 64<<10)
	f.wmu.Lock()
	total := len(head) + len(tail)
	io.WriteString(f.out, head)
	for range a.MB * 16 {
		f.out.Write(piece)
		total += len(piece)
	}
	io.WriteString(f.out, tail+"\n")
	f.wmu.Unlock()
	switch a.Shape {
	case "notification":
		f.replyText(id, fmt.Sprintf("wrote %d", total))
	case "request":
		select {
		case answer := <-ch:
			f.replyText(id, string(answer))
		case <-time.After(10 * time.Second):
			f.replyText(id, "no answer")
		}
	}
	fmt.Fprintf(f.errw, "fake: big line of %d bytes written\n", total)
}
