package front

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/mcpotc/mcpotc/internal/wiretest"
)

// wait bounds every wait in these tests.
const wait = 5 * time.Second

// probe lets a test watch the tools of testFront.
type probe struct {
	started   chan string // a blocking tool started: its "tag" argument
	cancelled chan string // a blocking tool's context ended: its tag
	release   chan struct{}
}

// testFront is a Front with tools that answer in every way the bridge
// needs.
func testFront(t *testing.T, opts *Options) (*Front, *probe) {
	t.Helper()
	p := &probe{started: make(chan string, 16), cancelled: make(chan string, 16), release: make(chan struct{})}
	f := New("front-test", "1.0.0", opts)
	s := f.Server()
	tool := func(name string, h mcpserver.ToolHandlerFunc) {
		s.AddTool(mcpgo.NewTool(name, mcpgo.WithString("tag")), h)
	}
	tool("add", func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		sum := req.GetFloat("a", 0) + req.GetFloat("b", 0)
		return &mcpgo.CallToolResult{
			Content:           []mcpgo.Content{mcpgo.NewTextContent(fmt.Sprint(sum))},
			StructuredContent: map[string]any{"sum": sum},
		}, nil
	})
	tool("invalid", func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return nil, fmt.Errorf("calling upstream: %w", &RPCError{
			Code:    mcpgo.INVALID_PARAMS,
			Message: "invalid arguments: b: Must be a number",
			Data:    map[string]any{"parameter_errors": map[string]string{"b": "Must be a number"}},
		})
	})
	tool("fail", func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return nil, errors.New("upstream exploded")
	})
	tool("timeout", func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return nil, &RPCError{Code: CodeRequestTimeout, Message: "request timed out"}
	})
	tool("internal", func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return nil, &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "upstream rejected the bridge's credentials",
			Data: map[string]any{"message": "401 from upstream"}}
	})
	tool("bad_data", func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return nil, &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "data that does not marshal", Data: func() {}}
	})
	tool("authorize", func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		if !ClientSupportsURLElicitation(ctx) {
			return mcpgo.NewToolResultError("open https://auth.example/google, then retry"), nil
		}
		return nil, mcpgo.URLElicitationRequiredError{Elicitations: []mcpgo.ElicitationParams{{
			Mode: mcpgo.ElicitationModeURL, ElicitationID: "google",
			URL: "https://auth.example/google", Message: "Authorize Google",
		}}}
	})
	tool("coded", func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		time.Sleep(time.Duration(req.GetInt("delay_ms", 0)) * time.Millisecond)
		code := req.GetInt("code", 0)
		return nil, &RPCError{Code: code, Message: fmt.Sprintf("code %d for %s", code, req.GetString("tag", "")),
			Data: map[string]any{"tag": req.GetString("tag", "")}}
	})
	tool("block", func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		tag := req.GetString("tag", "")
		p.started <- tag
		<-ctx.Done()
		p.cancelled <- tag
		return nil, ctx.Err()
	})
	tool("wait", func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		tag := req.GetString("tag", "")
		p.started <- tag
		select {
		case <-p.release:
			return mcpgo.NewToolResultText("released " + tag), nil
		case <-ctx.Done():
			p.cancelled <- tag
			return nil, ctx.Err()
		}
	})
	tool("progress_then_invalid", func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
			err := s.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
				"progressToken": req.Params.Meta.ProgressToken, "progress": 1, "total": 2})
			if err != nil {
				return nil, err
			}
			// mcp-go's streamable HTTP drops a notification its forwarder
			// has not written when the handler returns: give it time.
			time.Sleep(20 * time.Millisecond)
		}
		return nil, &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "invalid arguments: b: Must be a number",
			Data: map[string]any{"parameter_errors": map[string]string{"b": "Must be a number"}}}
	})
	tool("whoami", func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		if token, ok := CallerBearerToken(ctx); ok {
			return mcpgo.NewToolResultText("token " + token), nil
		}
		return mcpgo.NewToolResultText("no token"), nil
	})
	tool("whois", func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		if id, ok := CallerIdentity(ctx); ok {
			return mcpgo.NewToolResultText("subject " + id.Subject), nil
		}
		return mcpgo.NewToolResultText("no identity"), nil
	})
	tool("caps", func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText(fmt.Sprint(ClientSupportsURLElicitation(ctx))), nil
	})
	return f, p
}

// client speaks raw JSON-RPC over one transport, in one session.
type client interface {
	// send writes a request (id is an int or a string); the channel
	// yields its response frame.
	send(t *testing.T, id any, method, params string) <-chan json.RawMessage
	// notify writes a notification.
	notify(t *testing.T, method, params string)
}

// request is a JSON-RPC request as bytes.
func request(id any, method, params string) []byte {
	rawID, _ := json.Marshal(id)
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, rawID, method, params)
}

func notification(method, params string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":%q,"params":%s}`, method, params)
}

const initParams = `{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}}},` +
	`"clientInfo":{"name":"front-test","version":"1.0.0"}}`

func callTool(t *testing.T, c client, id any, method, params string) json.RawMessage {
	t.Helper()
	return await(t, c.send(t, id, method, params))
}

func await(t *testing.T, ch <-chan json.RawMessage) json.RawMessage {
	t.Helper()
	select {
	case frame := <-ch:
		return frame
	case <-time.After(wait):
		t.Fatal("no response")
		return nil
	}
}

// initialize runs the handshake and checks the tools capability.
func initialize(t *testing.T, c client) {
	t.Helper()
	var init struct {
		Result struct {
			Capabilities struct {
				Tools *struct {
					ListChanged bool `json:"listChanged"`
				} `json:"tools"`
			} `json:"capabilities"`
		} `json:"result"`
	}
	frame := callTool(t, c, 1, "initialize", initParams)
	if err := json.Unmarshal(frame, &init); err != nil || init.Result.Capabilities.Tools == nil ||
		!init.Result.Capabilities.Tools.ListChanged {
		t.Fatalf("initialize: %s", frame)
	}
	c.notify(t, "notifications/initialized", `{}`)
}

// sameJSON compares two JSON texts as data (numbers exactly).
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	if !jsonEqual(got, []byte(want)) {
		t.Errorf("frame differs\n got: %s\nwant: %s", got, want)
	}
}

func jsonEqual(a, b []byte) bool {
	decode := func(b []byte) (any, bool) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		return v, dec.Decode(&v) == nil && !dec.More()
	}
	va, oka := decode(a)
	vb, okb := decode(b)
	return oka && okb && reflect.DeepEqual(va, vb)
}

func callParams(name, args string) string {
	return fmt.Sprintf(`{"name":%q,"arguments":%s}`, name, args)
}

// scenarios is what every transport must answer identically: the
// frames as data, with nothing added or lost.
var scenarios = []struct {
	name, params, want string // want has %s for the id's JSON
}{
	{"success", callParams("add", `{"a":1,"b":2}`),
		`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"3"}],"structuredContent":{"sum":3}}}`},
	{"invalid params", callParams("invalid", `{"a":1,"b":"x"}`),
		`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"invalid arguments: b: Must be a number","data":{"parameter_errors":{"b":"Must be a number"}}}}`},
	{"plain error", callParams("fail", `{}`),
		`{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"upstream exploded"}}`},
	{"unknown tool", callParams("nope", `{}`),
		`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"tool 'nope' not found: tool not found"}}`},
	{"timeout", callParams("timeout", `{}`),
		`{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":"request timed out"}}`},
	{"internal with data", callParams("internal", `{}`),
		`{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"upstream rejected the bridge's credentials","data":{"message":"401 from upstream"}}}`},
	{"data that does not marshal", callParams("bad_data", `{}`),
		`{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"data that does not marshal"}}`},
	{"url elicitation", callParams("authorize", `{}`),
		`{"jsonrpc":"2.0","id":%s,"error":{"code":-32042,"message":"URL elicitation required: 1 elicitation(s) needed","data":{"elicitations":[{"mode":"url","message":"Authorize Google","elicitationId":"google","url":"https://auth.example/google"}]}}}`},
	{"client capabilities", callParams("caps", `{}`),
		`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"true"}]}}`},
}

// runScenarios runs scenarios, concurrency and cancellation on an
// initialized client.
func runScenarios(t *testing.T, c client, p *probe) {
	for i, sc := range scenarios {
		for _, id := range []any{100 + i, fmt.Sprintf("call-%d", i)} {
			t.Run(fmt.Sprintf("%s id %v", sc.name, id), func(t *testing.T) {
				rawID, _ := json.Marshal(id)
				sameJSON(t, callTool(t, c, id, "tools/call", sc.params), fmt.Sprintf(sc.want, rawID))
			})
		}
	}
	t.Run("concurrent calls each get their own error", func(t *testing.T) {
		concurrent(t, c, 1000)
	})
	t.Run("cancellation reaches the handler", func(t *testing.T) {
		ch := c.send(t, 500, "tools/call", callParams("block", `{"tag":"c500"}`))
		expectTag(t, p.started, "c500")
		c.notify(t, "notifications/cancelled", `{"requestId":500,"reason":"user gave up"}`)
		expectTag(t, p.cancelled, "c500")
		// mcp-go answers anyway; whatever it says must not be a stale rewrite.
		select {
		case frame := <-ch:
			if bytes.Contains(frame, []byte("Must be a number")) {
				t.Errorf("cancelled call got another call's error: %s", frame)
			}
		case <-time.After(wait):
		}
	})
}

// listChanged checks that replacing tools tells the client.
func listChanged(t *testing.T, f *Front, d *dispatcher) {
	t.Helper()
	f.Server().DeleteTools("timeout")
	for deadline := time.Now().Add(wait); ; time.Sleep(5 * time.Millisecond) {
		for _, note := range d.notifications() {
			var m struct{ Method string }
			if json.Unmarshal(note, &m) == nil && m.Method == "notifications/tools/list_changed" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no notifications/tools/list_changed")
		}
	}
}

// concurrent sends many calls at once on one session: coded errors
// with different codes and delays, mixed with successes and plain errors.
func concurrent(t *testing.T, c client, base int) {
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := base + i
			tag := fmt.Sprintf("t%d", id)
			var params, want string
			switch i % 4 {
			case 0, 1:
				code := -32000 - i
				params = callParams("coded", fmt.Sprintf(`{"code":%d,"delay_ms":%d,"tag":%q}`, code, (n-i)%7, tag))
				want = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":%d,"message":"code %d for %s","data":{"tag":%q}}}`,
					id, code, code, tag, tag)
			case 2:
				params = callParams("add", fmt.Sprintf(`{"a":%d,"b":1}`, i))
				want = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"%d"}],"structuredContent":{"sum":%d}}}`,
					id, i+1, i+1)
			default:
				params = callParams("fail", `{}`)
				want = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32603,"message":"upstream exploded"}}`, id)
			}
			sameJSON(t, callTool(t, c, id, "tools/call", params), want)
		})
	}
	wg.Wait()
}

func expectTag(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	case <-time.After(wait):
		t.Fatalf("waited for %q", want)
	}
}

// dispatcher routes frames read from a stream to the calls waiting
// for them, by id.
type dispatcher struct {
	mu      sync.Mutex
	waiting map[string]chan json.RawMessage
	notes   []json.RawMessage // frames that are not responses
}

func newFrontDispatcher() *dispatcher {
	return &dispatcher{waiting: make(map[string]chan json.RawMessage)}
}

func (d *dispatcher) expect(id any) <-chan json.RawMessage {
	ch := make(chan json.RawMessage, 1)
	d.mu.Lock()
	d.waiting[idKey(id)] = ch
	d.mu.Unlock()
	return ch
}

func (d *dispatcher) deliver(frame []byte) error {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		JSON   string          `json:"jsonrpc"`
	}
	if err := json.Unmarshal(frame, &m); err != nil || m.JSON != "2.0" {
		return fmt.Errorf("not a JSON-RPC frame: %q", frame)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if m.Method != "" || m.ID == nil {
		d.notes = append(d.notes, append(json.RawMessage(nil), frame...))
		return nil
	}
	var id any
	_ = json.Unmarshal(m.ID, &id)
	if ch, ok := d.waiting[idKey(id)]; ok {
		delete(d.waiting, idKey(id))
		ch <- append(json.RawMessage(nil), frame...)
	}
	return nil
}

func (d *dispatcher) notifications() []json.RawMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]json.RawMessage(nil), d.notes...)
}

// framedClient is the client side of a transport that carries frames out
// with put and brings the answers back through d.
type framedClient struct {
	d   *dispatcher
	put func(t *testing.T, frame []byte)
}

func (c framedClient) send(t *testing.T, id any, method, params string) <-chan json.RawMessage {
	ch := c.d.expect(id)
	c.put(t, request(id, method, params))
	return ch
}

func (c framedClient) notify(t *testing.T, method, params string) {
	c.put(t, notification(method, params))
}

// ---- unit tests of the rewrite ----

func expectPending(t *testing.T, st *streamBook, id any, code int, msg string, data any) {
	t.Helper()
	obj, err := json.Marshal(mcpgo.JSONRPCErrorDetails{Code: code, Message: msg, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	st.put(idKey(id), coded{obj: obj, code: code})
}

// expectUntouched fails t unless process passes frame on as it is; why
// says why it should.
func expectUntouched(t *testing.T, st *streamBook, frame []byte, why string) {
	t.Helper()
	if got, c := st.process(frame); c != nil || !bytes.Equal(got, frame) {
		t.Errorf("%s: rewrote %s into %s (coded %v)", why, frame, got, c)
	}
}

func TestFrontProcessSplicesOnlyTheErrorValue(t *testing.T) {
	st := newFrontStream(8, false)
	expectPending(t, st, 7.0, -32602, "bad", map[string]any{"parameter_errors": map[string]string{"b": "x"}})
	frame := []byte(`{ "jsonrpc" : "2.0",  "x-extra":[1, 2],"error" : {"code":-32603,"message":"bad"} , "id":7 }`)
	got, c := st.process(frame)
	want := `{ "jsonrpc" : "2.0",  "x-extra":[1, 2],"error" : {"code":-32602,"message":"bad","data":{"parameter_errors":{"b":"x"}}} , "id":7 }`
	if c == nil || string(got) != want {
		t.Fatalf("got %s (coded %v), want %s", got, c, want)
	}
	expectUntouched(t, st, frame, "entry used twice")
	if st.busy.Load() != 0 {
		t.Fatalf("busy = %d after use", st.busy.Load())
	}
}

func TestFrontProcessMatchesIDsExactly(t *testing.T) {
	st := newFrontStream(8, false)
	expectPending(t, st, "7", -32001, "late", nil)
	expectPending(t, st, 8.0, -32001, "late", nil)
	untouched := [][]byte{
		[]byte(`{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"x"}}`),   // number 7, not "7"
		[]byte(`{"jsonrpc":"2.0","id":"8","error":{"code":-32603,"message":"x"}}`), // string "8", not 8
		[]byte(`{"jsonrpc":"2.0","id":8,"method":"elicitation/create","params":{}}`),
		[]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"error":1}}`),
		[]byte(`[{"jsonrpc":"2.0","id":8,"error":{"code":-32603,"message":"x"}}]`),
		[]byte(`not json`),
	}
	for _, frame := range untouched {
		expectUntouched(t, st, frame, "not an error for a pending id")
	}
	got, c := st.process([]byte(`{"jsonrpc":"2.0","id":"7","error":{"code":-32603,"message":"x"}}`))
	if c == nil {
		t.Fatalf("string id not matched: %s", got)
	}
	sameJSON(t, got, `{"jsonrpc":"2.0","id":"7","error":{"code":-32001,"message":"late"}}`)
	// A success for id 8 is its response: the entry goes with it.
	expectUntouched(t, st, []byte(`{"jsonrpc":"2.0","id":8,"result":{}}`), "a result")
	if st.busy.Load() != 0 {
		t.Errorf("busy = %d", st.busy.Load())
	}
}

func TestFrontStreamIsBounded(t *testing.T) {
	st := newFrontStream(4, true)
	for i := range 10 {
		expectPending(t, st, float64(i), -32001, "x", nil)
		st.open(idKey(float64(i)))
	}
	if len(st.pending) != 4 || len(st.opened) != 4 || st.busy.Load() != 8 {
		t.Fatalf("pending %d, opened %d, busy %d", len(st.pending), len(st.opened), st.busy.Load())
	}
	for i := 6; i < 10; i++ { // the newest survive
		if _, ok := st.pending[idKey(float64(i))]; !ok {
			t.Errorf("entry %d evicted", i)
		}
	}
}

func TestFrontProcessEvent(t *testing.T) {
	st := newFrontStream(8, false)
	for _, tc := range []struct{ name, in, want string }{
		{"mcp-go event", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32603,\"message\":\"m\"}}\n\n",
			"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"m\"}}\n\n"},
		{"crlf, id field, no space", "id: 9\r\nevent: message\r\ndata:{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32603,\"message\":\"m\"}}\r\n\r\n",
			"id: 9\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"m\"}}\r\n\r\n"},
		{"data over lines", "data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\"error\":{\"code\":-32603,\"message\":\"m\"}}\n\n",
			"data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\"error\":{\"code\":-32602,\"message\":\"m\"}}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectPending(t, st, 1.0, -32602, "m", nil)
			if got := st.processEvent([]byte(tc.in)); string(got) != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
	expectPending(t, st, 1.0, -32602, "m", nil)
	for _, ev := range []string{
		"event: endpoint\ndata: /message?sessionId=1\r\n\r\n",
		"event: message\ndata:{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\n",
		": comment\n\n",
	} {
		if got := st.processEvent([]byte(ev)); string(got) != ev {
			t.Errorf("changed %q into %q", ev, got)
		}
	}
}

// Frames written in pieces, or several in one write, come out whole and
// rewritten; everything else byte for byte.
func TestFrontLineWriter(t *testing.T) {
	var out bytes.Buffer
	st := newFrontStream(8, false)
	lw := &lineWriter{w: &out, st: st}
	other := `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}` + "\n"
	if _, err := lw.Write([]byte(other)); err != nil {
		t.Fatal(err)
	}
	expectPending(t, st, 1.0, -32001, "request timed out", nil)
	in := `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"request timed out"}}` + "\n"
	for _, piece := range []string{in[:10], in[10:70], in[70:]} {
		if _, err := lw.Write([]byte(piece)); err != nil {
			t.Fatal(err)
		}
	}
	want := other + `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"request timed out"}}` + "\n"
	if out.String() != want {
		t.Errorf("got %q\nwant %q", out.String(), want)
	}
}

func TestRPCErrorThroughWrapping(t *testing.T) {
	err := fmt.Errorf("a: %w", fmt.Errorf("b: %w", &RPCError{Code: -32602, Message: "m"}))
	var rpcErr *RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 || !strings.HasSuffix(err.Error(), "m") {
		t.Fatal(err)
	}
}

// A request that did not come through a Front transport (here straight to
// HandleMessage) still gets mcp-go's -32603, and the front says why.
func TestFrontOutsideTransportLogs(t *testing.T) {
	var logs wiretest.Buffer
	f, _ := testFront(t, &Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	resp := f.Server().HandleMessage(context.Background(), request(1, "tools/call", callParams("invalid", `{}`)))
	frame, _ := json.Marshal(resp)
	sameJSON(t, frame, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"calling upstream: invalid arguments: b: Must be a number"}}`)
	if !strings.Contains(logs.String(), "coded error sent as -32603") {
		t.Errorf("not logged: %q", logs.String())
	}
}

// A WithHooks of the caller keeps its hooks and gets the front's added.
func TestFrontKeepsCallerHooks(t *testing.T) {
	t.Parallel()
	hooks := &mcpserver.Hooks{}
	errs := make(chan error, 1)
	hooks.AddOnError(func(_ context.Context, _ any, _ mcpgo.MCPMethod, _ any, err error) { errs <- err })
	f := New("front-test", "1.0.0", nil, mcpserver.WithHooks(hooks))
	f.Server().AddTool(mcpgo.NewTool("invalid"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return nil, &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "invalid arguments: b: Must be a number"}
	})
	_, _, c := startFrontSession(t, f, nil)
	sameJSON(t, callTool(t, c, 2, "tools/call", callParams("invalid", `{}`)),
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"invalid arguments: b: Must be a number"}}`)
	select {
	case err := <-errs:
		var rpcErr *RPCError
		if !errors.As(err, &rpcErr) {
			t.Errorf("caller's hook got %v", err)
		}
	default:
		t.Error("the caller's hook did not run")
	}
}
