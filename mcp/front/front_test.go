package front

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// wait bounds every wait in these tests.
const wait = 5 * time.Second

// probe lets a test watch the tools of testFront.
type probe struct {
	started   chan string // a blocking tool started: its "tag" argument
	cancelled chan string // a blocking tool's context ended: its tag
	release   chan struct{}
}

// testFront is a Server with tools that answer in every way the bridge
// needs.
func testFront(t *testing.T, opts *Options) (*Server, *probe) {
	t.Helper()
	p := &probe{started: make(chan string, 16), cancelled: make(chan string, 16), release: make(chan struct{})}
	f := New("front-test", "1.0.0", opts)
	var tools []Tool
	tool := func(name string, h ToolHandler) {
		tools = append(tools, Tool{Tool: mcpgo.NewTool(name, mcpgo.WithString("tag")), Handler: func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			// The front hands over the arguments as sent; the tools here
			// read them as a map.
			var args map[string]any
			_ = json.Unmarshal(req.Params.RawArguments, &args)
			req.Params.Arguments = args
			return h(ctx, req)
		}})
	}
	defer func() { f.SetTools(tools...) }()
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
			if !Notify(ctx, "notifications/progress", map[string]any{
				"progressToken": req.Params.Meta.ProgressToken, "progress": 1, "total": 2}) {
				return nil, errors.New("the progress notification was not delivered")
			}
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
		// On a shared stream (stdio, legacy SSE) a cancelled request is not
		// answered; a streamable HTTP POST gets its own answer, the error.
		_, ownStream := c.(*httpTestClient)
		select {
		case frame := <-ch:
			if !ownStream {
				t.Errorf("the cancelled call was answered: %s", frame)
			} else if !bytes.Contains(frame, []byte(`"id":500,"error"`)) {
				t.Errorf("the cancelled call's POST got %s, want its error", frame)
			}
		case <-time.After(300 * time.Millisecond):
			if ownStream {
				t.Error("the cancelled call's POST got no answer")
			}
		}
	})
}

// listChanged checks that replacing tools tells the client.
func listChanged(t *testing.T, f *Server, d *dispatcher) {
	t.Helper()
	var keep []Tool
	for name, tl := range f.cat.Load().byName {
		if name != "timeout" {
			keep = append(keep, *tl)
		}
	}
	f.SetTools(keep...)
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
	d.waiting[testIDKey(id)] = ch
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
	if ch, ok := d.waiting[testIDKey(id)]; ok {
		delete(d.waiting, testIDKey(id))
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

// testIDKey is an id as the tests match them (a decoded id's JSON).
func testIDKey(id any) string {
	b, _ := json.Marshal(id)
	return string(b)
}

func TestRPCErrorThroughWrapping(t *testing.T) {
	err := fmt.Errorf("a: %w", fmt.Errorf("b: %w", &RPCError{Code: -32602, Message: "m"}))
	var rpcErr *RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 || !strings.HasSuffix(err.Error(), "m") {
		t.Fatal(err)
	}
}

// addTool adds a tool to f's catalog.
func addTool(f *Server, tool mcpgo.Tool, h ToolHandler) {
	var tools []Tool
	for _, t := range f.cat.Load().byName {
		tools = append(tools, *t)
	}
	f.SetTools(append(tools, Tool{Tool: tool, Handler: h})...)
}
