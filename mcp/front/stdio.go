package front

import (
	"bufio"
	"context"
	"io"
	"sync"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// The stdio tool-call workers and queue (see ServeStdio).
const (
	stdioWorkers = 64
	stdioQueue   = 1024
	// stdioMaxLine bounds one message read from stdin.
	stdioMaxLine = 64 << 20
)

// ServeStdio serves MCP as newline-delimited JSON-RPC read from in and
// written to out (a sidecar's stdin and stdout); out carries nothing but
// protocol frames, diagnostics go to Options.Logger.
//
// Up to 64 tool calls run at once and 1,024 more wait; past that the next
// message is read only when a call ends. Other requests are answered in
// the order they come. It returns once in reaches EOF or ctx ends and the
// tool calls in flight have finished; calls still running after
// Options.StdioGrace have their contexts cancelled. The result is nil
// then, else the read error that stopped it.
func (f *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	life, expire := context.WithCancel(context.Background())
	defer expire()
	// A subscriptions/listen stream ends with the input: no one reads it.
	streams, endStreams := context.WithCancel(context.WithoutCancel(ctx))
	defer endStreams()
	var once sync.Once
	drain := func() {
		once.Do(func() {
			endStreams()
			if f.grace < 0 {
				expire()
			} else {
				time.AfterFunc(f.grace, expire)
			}
		})
	}
	defer context.AfterFunc(ctx, drain)()

	w := &frameWriter{w: out}
	p := &peer{}
	x := &exchange{p: p, calls: &callRegistry{}, life: life, notify: w.write, stream: true}
	defer f.changes.add(func(frame []byte) { w.write(frame) })()

	work := make(chan func(), stdioQueue)
	var calls sync.WaitGroup
	for range stdioWorkers {
		calls.Go(func() {
			for job := range work {
				job()
			}
		})
	}
	defer calls.Wait()
	defer close(work)

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := readLine(r)
			if len(line) > 0 {
				lines <- line
			}
			if err != nil {
				readErr <- err
				close(lines)
				return
			}
		}
	}()
	for {
		var line []byte
		select {
		case l, ok := <-lines:
			if !ok {
				drain()
				if err := <-readErr; err != io.EOF && ctx.Err() == nil {
					return err
				}
				return nil
			}
			line = l
		case <-ctx.Done():
			return nil
		}
		m, failure := decode(line)
		if failure != nil {
			w.write(errorFrame(nil, failure))
			continue
		}
		switch method := mcpgo.MCPMethod(m.method); method {
		case mcpgo.MethodToolsCall, mcpgo.MethodSubscriptionsListen:
			jobCtx := context.WithoutCancel(ctx)
			if method == mcpgo.MethodSubscriptionsListen {
				jobCtx = streams
			}
			job := func() {
				if frame := f.serve(jobCtx, m, x.forMessage()); frame != nil {
					w.write(frame)
				}
			}
			select {
			case work <- job:
			case <-ctx.Done():
				return nil
			}
		default:
			if frame := f.serve(ctx, m, x.forMessage()); frame != nil {
				w.write(frame)
			}
		}
	}
}

// forMessage is a copy of the connection's exchange for one message (its
// 2026-07-28 _meta is the message's own).
func (x *exchange) forMessage() *exchange {
	c := *x
	c.modern = nil
	return &c
}

// readLine reads one line, without its line ending, bounded by
// stdioMaxLine (a longer one is dropped whole and answered as unparsable).
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) <= stdioMaxLine {
			line = append(line, chunk...)
		} else {
			line = append(line[:0], '?') // not JSON: a parse error answers it
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		for len(line) > 0 && (line[len(line)-1] == '\n' || line[len(line)-1] == '\r') {
			line = line[:len(line)-1]
		}
		return line, err
	}
}

// frameWriter writes whole frames, one line each, one at a time.
type frameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

func (fw *frameWriter) write(frame []byte) bool {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.err != nil {
		return false
	}
	_, fw.err = fw.w.Write(append(frame, '\n'))
	return fw.err == nil
}
