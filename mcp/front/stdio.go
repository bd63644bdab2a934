package front

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	mcpserver "github.com/mark3labs/mcp-go/server"
)

// stdioMu guards mcp-go's stdio session, of which a process has one.
var stdioMu sync.Mutex

// ServeStdio serves MCP as newline-delimited JSON-RPC read from in and
// written to out (a sidecar's stdin and stdout); out carries nothing but
// protocol frames, diagnostics go to Options.Logger.
//
// It returns once in reaches EOF or ctx ends and the tool calls in flight
// have finished; calls still running after Options.StdioGrace have
// their contexts cancelled. The result is nil then, else the read error
// that stopped it. mcp-go has one stdio session per process, so ServeStdio
// fails while another ServeStdio runs.
func (f *Front) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	if !stdioMu.TryLock() {
		return errors.New("mcp: ServeStdio is already running (mcp-go has one stdio session per process)")
	}
	defer stdioMu.Unlock()

	stop, expire := context.WithCancel(context.Background())
	defer expire()
	life := &lifecycle{stop: stop, draining: make(chan struct{})}
	drain := sync.OnceFunc(func() {
		close(life.draining)
		if f.grace < 0 {
			expire()
		} else {
			time.AfterFunc(f.grace, expire)
		}
	})

	// mcp-go stops reading and cancels every request when its context ends;
	// start the grace period first, so that the tool calls outlive that.
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, func() { drain(); cancel() })()

	st := newFrontStream(f.maxPending, false)
	lw := &lineWriter{w: out, st: st}
	srv := mcpserver.NewStdioServer(f.server)
	srv.SetErrorLogger(slog.NewLogLogger(f.log.Handler(), slog.LevelWarn))
	// mcp-go v1.2.1 runs stdio tool calls on 5 workers with a queue of 100,
	// and past the queue in the reading goroutine: a host with more calls
	// in flight waited for a worker though each call mostly waits on its
	// upstream. stdioWorkers calls run at once; the queue bounds the rest.
	mcpserver.WithWorkerPoolSize(stdioWorkers)(srv)
	mcpserver.WithQueueSize(stdioQueue)(srv)
	srv.SetContextFunc(func(c context.Context) context.Context {
		c = context.WithValue(c, streamKey{}, st)
		c = context.WithValue(c, callerKey{}, stdioCaller) // the process that started this one
		return context.WithValue(c, lifeKey{}, life)
	})
	err := srv.Listen(lctx, &endReader{r: bufio.NewReader(in), end: drain, out: lw}, lw)
	if lctx.Err() != nil {
		return nil
	}
	return err
}

// endReader hands the lines of r to mcp-go, but for the invalid
// messages the front answers itself (see checkMessage), whose error
// frames it writes to out. It calls end when reading fails (EOF included),
// before the caller sees the error.
type endReader struct {
	r       *bufio.Reader
	end     func()
	out     io.Writer
	pending []byte // the rest of the line being handed over
	err     error  // the read error to return once pending is handed over
}

func (r *endReader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.err != nil {
			r.end()
			return 0, r.err
		}
		line, err := r.r.ReadBytes('\n')
		r.err = err
		if err == nil {
			if why := checkMessage(line); why != "" {
				if _, werr := r.out.Write(append(why.frame(), '\n')); werr != nil {
					r.err = werr
				}
				continue
			}
		}
		r.pending = line
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// The stdio tool-call workers and queue (see ServeStdio). mcp-go caps the
// workers at 100.
const (
	stdioWorkers = 64
	stdioQueue   = 1024
)
