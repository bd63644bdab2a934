package upstream

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Canary for lineBounder (mcp-go v1.2.1): the stdio transport skips a line it
// cannot decode and goes on reading, which is how the cut start of a line
// over the limit ("…\x00\n") is discarded, and it delivers the synthetic
// error answer that follows to the request waiting for that id. Should a
// later mcp-go close the connection on such a line instead, this fails.
func TestUpstreamCanaryMCPGoStdioSkipsUndecodableLine(t *testing.T) {
	outR, outW := io.Pipe()
	inR, inW := io.Pipe()
	tr := mcptransport.NewIO(outR, inW, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	defer outW.Close() // ends mcp-go's reader
	// The "child": read the request, answer with a cut line, then the
	// bridge's synthetic answer.
	go func() {
		buf := make([]byte, 4096)
		_, _ = inR.Read(buf)
		u := &Upstream{name: "canary", nonce: "N", cfg: Config{MaxMessageBytes: 8}}
		_, _ = io.WriteString(outW, `{"jsonrpc":"2.0","id":7,"result":{"text":"aaaa`+"\x00\n")
		_, _ = outW.Write(append(u.tooLargeAnswer([]byte("7"), 99), '\n'))
	}()
	resp, err := tr.SendRequest(ctx, mcptransport.JSONRPCRequest{JSONRPC: "2.0", ID: mcpgo.NewRequestId(int64(7)), Method: "tools/call"})
	if err != nil {
		t.Fatalf("mcp-go did not go on after an undecodable line: %v", err)
	}
	u := &Upstream{name: "canary", nonce: "N", cfg: Config{MaxMessageBytes: 8}}
	if resp.Error == nil || u.tooLargeFrom(resp.Error.Data) == nil {
		t.Fatalf("answer %+v is not the synthetic too-large error", resp)
	}
	if tl := u.tooLargeFrom(resp.Error.Data); tl.Size != 99 || !strings.Contains(tl.Error(), "8-byte message limit") {
		t.Errorf("too-large error %+v", tl)
	}
	// A server cannot forge one: another nonce is an ordinary error.
	if (&Upstream{nonce: "other"}).tooLargeFrom(resp.Error.Data) != nil {
		t.Error("a synthetic answer with another nonce was taken for the bridge's own")
	}
}
