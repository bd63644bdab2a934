package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/otc"
)

// protocolVersion is the MCP revision every MCP client of the bench speaks:
// the newest with the initialize handshake, which every peer supports.
const protocolVersion = "2025-11-25"

// newHTTPClient is the bench's HTTP client: enough idle connections per
// host for the largest burst, so that no row measures connection churn.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 2048,
		IdleConnTimeout:     2 * time.Minute,
		DisableCompression:  true,
	}}
}

// otcCaller calls one OTC tool with one input, each call with a fresh
// call_id (as OTC clients do), and requires success.
func otcCaller(c *otc.Client, toolID string, input json.RawMessage, check func(json.RawMessage) error) callFunc {
	return func(ctx context.Context) error {
		resp, err := c.Call(ctx, &otc.CallToolRequest{ToolID: toolID, CallID: otc.NewCallID(), Input: input})
		if err != nil {
			return err
		}
		if !resp.Success {
			msg := "no error"
			if resp.Error != nil {
				msg = resp.Error.Message
			}
			return fmt.Errorf("%s answered success:false: %s", toolID, msg)
		}
		if check != nil {
			return check(resp.Value)
		}
		return nil
	}
}

func newOTCClient(base string, hc *http.Client) (*otc.Client, error) {
	return otc.NewClient(base, &otc.ClientOptions{Dialect: otc.DialectOXP10, HTTPClient: hc})
}

// mcpConn is an initialized MCP client.
type mcpConn struct {
	c    *mcpclient.Client
	proc *proc // the server it started (stdio), else nil
}

func (m *mcpConn) close() {
	if m != nil && m.c != nil {
		_ = m.c.Close()
	}
}

func initialize(ctx context.Context, c *mcpclient.Client) error {
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.Start(ictx); err != nil {
		return err
	}
	req := mcpgo.InitializeRequest{}
	req.Params.ProtocolVersion = protocolVersion
	req.Params.ClientInfo = mcpgo.Implementation{Name: "mcpotc-bench", Version: "1.0.0"}
	_, err := c.Initialize(ictx, req)
	return err
}

// dialMCPHTTP connects an MCP client over streamable HTTP.
func dialMCPHTTP(ctx context.Context, url string, hc *http.Client) (*mcpConn, error) {
	t, err := mcptransport.NewStreamableHTTP(url, mcptransport.WithHTTPBasicClient(hc))
	if err != nil {
		return nil, err
	}
	c := mcpclient.NewClient(t, mcpclient.WithProtocolVersion(protocolVersion))
	if err := initialize(ctx, c); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("initialize %s: %w", url, err)
	}
	return &mcpConn{c: c}, nil
}

// dialMCPStdio starts argv as a stdio MCP server (its stderr to the work
// dir, its own process group) and connects an MCP client to it.
func dialMCPStdio(ctx context.Context, ps *procs, name string, argv []string, env []string) (*mcpConn, error) {
	var mu sync.Mutex
	var started *exec.Cmd
	var logPath string
	t := mcptransport.NewStdioWithOptions(argv[0], env, argv[1:],
		mcptransport.WithCommandFunc(func(_ context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
			cmd, lp, err := ps.command(name, append([]string{command}, args...)...)
			if err != nil {
				return nil, err
			}
			if len(env) > 0 {
				cmd.Env = append(cmd.Environ(), env...)
			}
			mu.Lock()
			started, logPath = cmd, lp
			mu.Unlock()
			return cmd, nil
		}))
	c := mcpclient.NewClient(t, mcpclient.WithProtocolVersion(protocolVersion))
	err := initialize(ctx, c)
	mu.Lock()
	cmd := started
	mu.Unlock()
	var p *proc
	if cmd != nil && cmd.Process != nil {
		p = ps.track(name, cmd, logPath, false)
	}
	if err != nil {
		_ = c.Close()
		detail := ""
		if p != nil {
			detail = "\n" + tail(p.log, 20)
		}
		return nil, fmt.Errorf("initialize %s: %w%s", name, err, detail)
	}
	if p == nil {
		_ = c.Close()
		return nil, fmt.Errorf("%s: no process", name)
	}
	return &mcpConn{c: c, proc: p}, nil
}

// mcpCaller calls one MCP tool with one set of arguments and requires a
// result that is not an error.
func mcpCaller(m *mcpConn, tool string, args json.RawMessage, check func(*mcpgo.CallToolResult) error) callFunc {
	return func(ctx context.Context) error {
		req := mcpgo.CallToolRequest{}
		req.Params.Name = tool
		req.Params.Arguments = args
		res, err := m.c.CallTool(ctx, req)
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("%s answered isError: %s", tool, resultText(res))
		}
		if check != nil {
			return check(res)
		}
		return nil
	}
}

// resultText is the text of a result's text blocks.
func resultText(res *mcpgo.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(mcpgo.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// postCaller POSTs body and requires a 200 whose body is echo (the bare
// loopback HTTP round trip).
func postCaller(hc *http.Client, url string, body []byte) callFunc {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || len(got) != len(body) {
			return fmt.Errorf("echo answered %d with %d bytes (sent %d)", resp.StatusCode, len(got), len(body))
		}
		return nil
	}
}

// rawSession is a streamable HTTP MCP session driven with plain HTTP
// requests: for the idle-session and tools/list rows, where the client's
// own decoding must not be part of the figure.
type rawSession struct {
	hc  *http.Client
	url string
	id  string
	seq int
	buf bytes.Buffer // listTools reads into it, reused: the client's own allocation is not the front's time
}

func (s *rawSession) post(ctx context.Context, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", protocolVersion)
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	return s.hc.Do(req)
}

// openRawSession initializes a session (initialize, then
// notifications/initialized) and leaves it idle.
func openRawSession(ctx context.Context, hc *http.Client, url string) (*rawSession, error) {
	s := &rawSession{hc: hc, url: url}
	resp, err := s.post(ctx, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+protocolVersion+
		`","capabilities":{},"clientInfo":{"name":"mcpotc-bench","version":"1.0.0"}}}`)
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"protocolVersion"`)) {
		return nil, fmt.Errorf("initialize answered %d: %.200s", resp.StatusCode, body)
	}
	s.id = resp.Header.Get("Mcp-Session-Id")
	if s.id == "" {
		return nil, errors.New("initialize answered no Mcp-Session-Id")
	}
	resp, err = s.post(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("notifications/initialized answered %d", resp.StatusCode)
	}
	return s, nil
}

// listTools sends tools/list and reads the whole answer; it returns its
// size and checks that it holds want tools (any number when want < 0).
func (s *rawSession) listTools(ctx context.Context, want int) (int, error) {
	s.seq++
	resp, err := s.post(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, s.seq))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	s.buf.Reset()
	if _, err := s.buf.ReadFrom(resp.Body); err != nil {
		return 0, err
	}
	body := s.buf.Bytes()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("tools/list answered %d: %.200s", resp.StatusCode, body)
	}
	if want >= 0 {
		if n := bytes.Count(body, []byte(`"inputSchema"`)); n != want {
			return 0, fmt.Errorf("tools/list listed %d tools, want %d", n, want)
		}
	}
	return len(body), nil
}

// getBody GETs url and reads the whole answer, requiring a 200.
func getBody(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	return getInto(ctx, hc, url, nil)
}

// getInto is getBody reading into buf (reset first) when it is not nil:
// rows that read a large answer many times reuse one buffer, so that they
// time the server and the transfer, not the client's allocations.
func getInto(ctx context.Context, hc *http.Client, url string, buf *bytes.Buffer) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, err
	}
	body := buf.Bytes()
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("GET %s answered %d: %.200s", url, resp.StatusCode, body)
	}
	return body, nil
}

// waitHealthy polls GET /health until it answers 200.
func waitHealthy(ctx context.Context, hc *http.Client, base string, p *proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := getBody(rctx, hc, base+"/health")
		cancel()
		if err == nil {
			return nil
		}
		if p != nil && p.exited() {
			return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, tail(p.log, 20))
		}
		if time.Now().After(deadline) {
			detail := ""
			if p != nil {
				detail = "\n" + tail(p.log, 20)
			}
			return fmt.Errorf("%s not healthy within %s: %v%s", base, timeout, err, detail)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
