package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/mcp/mcpsample"
)

// Benchmarks of the upstream side of the OTC front's per-call path: the
// tools/call params it builds, and a call to the in-process sample server.
// No timing is asserted.

var benchSinkRaw json.RawMessage

func BenchmarkUpCallParams(b *testing.B) {
	for _, n := range []int{16, 64 << 10, 1 << 20} {
		args := json.RawMessage(`{"message":"` + strings.Repeat("x", n) + `"}`)
		meta := map[string]any{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				p, err := callParams("echo", args, meta)
				if err != nil {
					b.Fatal(err)
				}
				benchSinkRaw = p
			}
		})
	}
}

func BenchmarkUpstreamCallInProcess(b *testing.B) {
	u, err := Start(context.Background(), &Config{Name: "sample", InProcess: Piped(mcpsample.ServeStdio)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = u.Close(ctx)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := u.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"message":"hello, benchmark"}`)
	b.ReportAllocs()
	for b.Loop() {
		raw, err := u.CallTool(context.Background(), "echo", args, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		benchSinkRaw = raw
	}
}
