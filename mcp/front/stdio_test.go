package front

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"
)

// stdio runs ServeStdio on pipes and is its client. The tests that use
// it do not run in parallel: mcp-go has one stdio session per process.
type stdio struct {
	framedClient // frames are written to in
	in           *io.PipeWriter
	mu           sync.Mutex    // one frame per write
	done         chan error    // ServeStdio's result
	read         chan struct{} // closed when stdout has ended
	stray        chan string   // anything on stdout that is not a frame
}

func startFrontStdio(t *testing.T, ctx context.Context, f *Server) *stdio {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &stdio{in: inW, done: make(chan error, 1),
		read: make(chan struct{}), stray: make(chan string, 16)}
	c.framedClient = framedClient{d: newFrontDispatcher(), put: c.write}
	go func() {
		c.done <- f.ServeStdio(ctx, inR, outW)
		outW.Close()
	}()
	go func() {
		defer close(c.read)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if err := c.d.deliver(sc.Bytes()); err != nil {
				c.stray <- err.Error()
			}
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-c.done:
		case <-time.After(wait):
			t.Error("ServeStdio did not return after EOF")
		}
		<-c.read
		select {
		case s := <-c.stray:
			t.Errorf("stdout carried a non-frame: %s", s)
		default:
		}
	})
	return c
}

func (c *stdio) write(t *testing.T, frame []byte) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.in.Write(append(frame, '\n')); err != nil {
		t.Fatal(err)
	}
}

func TestFrontStdio(t *testing.T) {
	f, p := testFront(t, nil)
	c := startFrontStdio(t, context.Background(), f)
	initialize(t, c)
	runScenarios(t, c, p)
	t.Run("replacing tools notifies the client", func(t *testing.T) { listChanged(t, f, c.d) })
}

// Input ends while a call runs: the call finishes, its answer is written,
// then ServeStdio returns nil.
func TestFrontStdioEOFLetsCallsFinish(t *testing.T) {
	f, p := testFront(t, nil)
	c := startFrontStdio(t, context.Background(), f)
	initialize(t, c)
	ch := c.send(t, 7, "tools/call", callParams("wait", `{"tag":"w7"}`))
	expectTag(t, p.started, "w7")
	c.in.Close()
	select {
	case err := <-c.done:
		t.Fatalf("ServeStdio returned %v with a call in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(p.release)
	sameJSON(t, await(t, ch), `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"released w7"}]}}`)
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
		c.done <- nil // for the cleanup
	case <-time.After(wait):
		t.Fatal("ServeStdio did not return")
	}
}

// ctx ends while a call runs past the grace period: its context is
// cancelled, it is answered "shutting down" (CodeShuttingDown, retryAfter),
// and ServeStdio returns nil.
func TestFrontStdioGraceEnds(t *testing.T) {
	f, p := testFront(t, &Options{StdioGrace: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	c := startFrontStdio(t, ctx, f)
	initialize(t, c)
	ch := c.send(t, 8, "tools/call", callParams("wait", `{"tag":"w8"}`))
	expectTag(t, p.started, "w8")
	start := time.Now()
	cancel()
	select {
	case tag := <-p.cancelled:
		if d := time.Since(start); tag != "w8" || d < 90*time.Millisecond {
			t.Fatalf("cancelled %q after %v, before the grace period", tag, d)
		}
	case <-time.After(wait):
		t.Fatal("the call was never cancelled")
	}
	sameJSON(t, await(t, ch), shuttingDownFrame(8))
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
		c.done <- nil
	case <-time.After(wait):
		t.Fatal("ServeStdio did not return")
	}
}

// The front owns its stdio transport: two runs serve side by side, each
// its own client (mcp-go v1.2.1 had one stdio session per process).
func TestFrontStdioRunsSideBySide(t *testing.T) {
	f, _ := testFront(t, nil)
	g, _ := testFront(t, nil)
	c, d := startFrontStdio(t, context.Background(), f), startFrontStdio(t, context.Background(), g)
	initialize(t, c)
	initialize(t, d)
	sameJSON(t, await(t, c.send(t, 2, "tools/call", callParams("add", `{"a":1,"b":2}`))),
		`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"3"}],"structuredContent":{"sum":3}}}`)
	sameJSON(t, await(t, d.send(t, 2, "tools/call", callParams("add", `{"a":2,"b":2}`))),
		`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"4"}],"structuredContent":{"sum":4}}}`)
}

// Tool calls over stdio run side by side: 32 calls that each wait until
// released all start (mcp-go's default of 5 workers held the others back
// until a worker was free), and all are answered.
func TestFrontStdioCallsRunSideBySide(t *testing.T) {
	f, p := testFront(t, nil)
	c := startFrontStdio(t, context.Background(), f)
	initialize(t, c)
	const n = 32
	var answers []<-chan json.RawMessage
	for i := range n {
		answers = append(answers, c.send(t, 100+i, "tools/call", callParams("wait", fmt.Sprintf(`{"tag":"s%d"}`, i))))
	}
	for i := range n {
		select {
		case <-p.started:
		case <-time.After(wait):
			t.Fatalf("%d of %d calls started; the others wait for a worker", i, n)
		}
	}
	close(p.release)
	for i, ch := range answers {
		select {
		case <-ch:
		case <-time.After(wait):
			t.Fatalf("call %d not answered", 100+i)
		}
	}
}

// A 2026-07-28 subscriptions/listen stream over stdio ends with the
// input: ServeStdio returns at EOF without waiting for the grace period
// (an hour here), and the stream's listener is gone.
func TestFrontStdioListenEndsAtEOF(t *testing.T) {
	f, _ := testFront(t, &Options{StdioGrace: time.Hour})
	c := startFrontStdio(t, context.Background(), f)
	c.send(t, 1, "subscriptions/listen", `{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`)
	for deadline := time.Now().Add(wait); len(c.d.notifications()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no notifications/subscriptions/acknowledged")
		}
	}
	c.in.Close()
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
		c.done <- nil // for the cleanup
	case <-time.After(wait):
		t.Fatal("ServeStdio still runs after EOF: the listen stream held it")
	}
	f.changes.mu.Lock()
	defer f.changes.mu.Unlock()
	if n := len(f.changes.set); n != 0 {
		t.Errorf("%d listeners left", n)
	}
}

// A cancel that arrives before its request is in flight (the request
// still queued for a worker) ends the request when it begins: the handler
// runs cancelled, and the request is not answered. A cancel of a request
// that never comes is forgotten: a later request with that id runs.
func TestFrontStdioCancelBeforeTheCallBegins(t *testing.T) {
	f, p := testFront(t, nil)
	c := startFrontStdio(t, context.Background(), f)
	initialize(t, c)
	// Both lines written at once: the read loop queues the call, then reads
	// the cancel, usually before a worker has taken the call.
	c.write(t, append(append(request(600, "tools/call", callParams("block", `{"tag":"e600"}`)), '\n'),
		notification("notifications/cancelled", `{"requestId":600}`)...))
	expectTag(t, p.started, "e600")
	expectTag(t, p.cancelled, "e600")

	reg := &callRegistry{}
	reg.cancel("7", errClientCancelled)
	ctx, cancel := context.WithCancelCause(context.Background())
	reg.begin("7", cancel)
	if context.Cause(ctx) != errClientCancelled {
		t.Error("a cancel kept before its request did not end it")
	}
	reg.end("7")
	reg.early["8"] = time.Now().Add(-earlyCancelTTL)
	ctx, cancel = context.WithCancelCause(context.Background())
	reg.begin("8", cancel)
	if ctx.Err() != nil {
		t.Error("an expired early cancel ended a request")
	}
	for i := range earlyCancels + 10 {
		reg.cancel(fmt.Sprint("flood", i), errClientCancelled)
	}
	if len(reg.early) > earlyCancels || len(reg.order) > earlyCancels {
		t.Errorf("%d early cancels kept, bound %d", len(reg.early), earlyCancels)
	}
}

// shuttingDownFrame is the answer to call id that a shutdown ended.
func shuttingDownFrame(id int) string {
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"error":{"code":-32006,"message":"The bridge is shutting down: the call was ended before it finished; retry it (another replica, or this one once it is back, will take it)","data":{"retryAfter":2}}}`
}
