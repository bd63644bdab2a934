package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	transport := flag.String("transport", "http", "http or stdio")
	era := flag.String("era", "modern", "modern (2026-07-28 only) or dual")
	listen := flag.String("listen", "127.0.0.1:0", "HTTP listen address (loopback)")
	flag.Parse()

	opts := &sdk.ServerOptions{}
	switch *era {
	case "modern":
		opts.SupportedProtocolVersions = []string{"2026-07-28"}
	case "dual":
	default:
		fmt.Fprintln(os.Stderr, "gosdkpeer: -era must be modern or dual")
		os.Exit(2)
	}
	server := sdk.NewServer(&sdk.Implementation{Name: "era-go-sdk", Version: "1.8.0"}, opts)
	addTools(server)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	switch *transport {
	case "stdio":
		if err := server.Run(ctx, &sdk.StdioTransport{}); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "gosdkpeer:", err)
			os.Exit(1)
		}
	case "http":
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gosdkpeer:", err)
			os.Exit(1)
		}
		mux := http.NewServeMux()
		mux.Handle("/mcp", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server },
			&sdk.StreamableHTTPOptions{Stateless: true}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		fmt.Fprintf(os.Stderr, "listening on %s\n", ln.Addr())
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			fmt.Fprintln(os.Stderr, "gosdkpeer:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "gosdkpeer: -transport must be http or stdio")
		os.Exit(2)
	}
}

// addTools registers the tools of testdata/era_server.mjs, from the same
// JSON Schemas.
func addTools(s *sdk.Server) {
	text := func(t string, isError bool) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: t}}, IsError: isError}
	}
	args := func(req *sdk.CallToolRequest) map[string]any {
		var m map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &m)
		return m
	}
	s.AddTool(&sdk.Tool{Name: "echo", Description: "Echoes its message.", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"message":{"type":"string","description":"The text to echo"}},"required":["message"]}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text(fmt.Sprint(args(req)["message"]), false), nil
		})
	s.AddTool(&sdk.Tool{Name: "add", Description: "Adds two numbers.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"a":{"type":"number","description":"First addend"},"b":{"type":"number","description":"Second addend"}},"required":["a","b"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"sum":{"type":"number","description":"a + b"}},"required":["sum"]}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			a := args(req)
			x, _ := a["a"].(float64)
			y, _ := a["b"].(float64)
			sum := map[string]any{"sum": x + y}
			b, _ := json.Marshal(sum)
			res := text(string(b), false)
			res.StructuredContent = sum
			return res, nil
		})
	s.AddTool(&sdk.Tool{Name: "fail", Description: "Always fails.", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text("this tool always fails", true), nil
		})
	s.AddTool(&sdk.Tool{Name: "region", Description: "Answers with its region, an x-mcp-header parameter.", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"region":{"type":"string","description":"Where to run","x-mcp-header":"Region"}},"required":["region"]}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text(fmt.Sprint(args(req)["region"]), false), nil
		})
}
