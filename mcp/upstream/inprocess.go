package upstream

import (
	"context"
	"io"

	mcptransport "github.com/mark3labs/mcp-go/client/transport"
)

// InProcess makes the client transport of one connection to an MCP server
// in this process. requests answers the server's requests to the client
// for a transport that takes handlers when it is made (mcp-go's
// in-process transport: mcptransport.WithElicitationHandler(requests) …);
// a transport with a SetRequestHandler method is given the connection's
// own handler instead. Each connection (a reconnection too) calls it
// again.
type InProcess func(requests ServerRequests) mcptransport.Interface

// Piped is the InProcess of a server that serves newline-delimited
// JSON-RPC on a pair of streams, as a stdio server does (front.Server's
// ServeStdio): each connection runs serve on a goroutine of its own, joined
// to the client by two pipes; closing the connection ends serve's input
// and its context.
func Piped(serve func(ctx context.Context, in io.Reader, out io.Writer) error) InProcess {
	return func(ServerRequests) mcptransport.Interface {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			_ = serve(ctx, inR, outW)
			// The client reads EOF (mcp-go's stdio transport logs any other
			// read error through slog's default logger, outside the
			// upstream's), and its writes fail.
			_ = outW.Close()
			_ = inR.Close()
		}()
		return &piped{Stdio: mcptransport.NewIO(outR, inW, nil), cancel: cancel}
	}
}

// piped is the client end of a Piped connection.
type piped struct {
	*mcptransport.Stdio
	cancel context.CancelFunc
}

// Close closes the server's input, then ends its context.
func (p *piped) Close() error {
	err := p.Stdio.Close()
	p.cancel()
	return err
}
