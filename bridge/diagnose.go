package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/mcpotc/mcpotc/otc"
)

// Wrong URLs are the commonest first-hour mistake: an OTC server's
// endpoint given as its base URL, an MCP endpoint given to the MCP front as
// an OTC server, an MCP server's root instead of its /mcp path. When an
// upstream fails in a way that suggests one, the bridge asks the URL and its
// usual neighbours what they are, once per failure, and says what to type
// (docs/mcp-front.md, MCP front; docs/otc-front.md, OTC front). Probes send no credentials and read at most
// probeBodyBytes of each answer, within probeTimeout.
const (
	probeTimeout   = 3 * time.Second
	probeBodyBytes = 64 << 10
)

// probeClient sends the probes: no redirects (a redirect is an answer).
var probeClient = &http.Client{
	Timeout:       probeTimeout,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// mcpInitialize is the JSON-RPC initialize a probe sends.
const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcpotc-probe","version":"1"}}}`

// probeMCP tells whether target answers an MCP initialize (streamable
// HTTP). A session it opened is ended.
func probeMCP(ctx context.Context, target string) bool {
	resp, body, ok := probeDo(ctx, http.MethodPost, target, mcpInitialize, "application/json, text/event-stream")
	if !ok {
		return false
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		del, err := http.NewRequestWithContext(ctx, http.MethodDelete, target, nil)
		if err == nil {
			del.Header.Set("Mcp-Session-Id", sid)
			if r, err := probeClient.Do(del); err == nil {
				r.Body.Close()
			}
		}
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized {
		return false
	}
	if resp.StatusCode == http.StatusUnauthorized {
		// An MCP server behind OAuth answers initialize 401 with its
		// resource metadata (MCP authorization, RFC 9728).
		return strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata")
	}
	return bytes.Contains(body, []byte(`"jsonrpc"`)) && bytes.Contains(body, []byte(`"protocolVersion"`))
}

// probeSSE tells whether target is a legacy MCP SSE endpoint: GET answers
// an event stream whose first event is "endpoint".
func probeSSE(ctx context.Context, target string) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return false
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := probeClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return false
	}
	buf := make([]byte, 512)
	n, _ := io.ReadAtLeast(resp.Body, buf, len("event: endpoint"))
	return bytes.Contains(buf[:n], []byte("event: endpoint")) || bytes.Contains(buf[:n], []byte("event:endpoint"))
}

// probeOTC tells whether base is an OTC tool server: GET base/tools answers
// a tool list (or asks for credentials).
func probeOTC(ctx context.Context, base string) bool {
	resp, body, ok := probeDo(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/tools", "", "application/json")
	if !ok || resp.StatusCode != http.StatusOK {
		return false
	}
	var list struct {
		Tools []json.RawMessage `json:"tools"`
		Items []json.RawMessage `json:"items"`
	}
	return json.Unmarshal(body, &list) == nil && (list.Tools != nil || list.Items != nil)
}

// probeDo sends one probe, a JSON body unless body is "", and returns the
// answer with the first probeBodyBytes of its body (closed); false when no
// answer came.
func probeDo(ctx context.Context, method, target, body, accept string) (*http.Response, []byte, bool) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, nil, false
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	resp, err := probeClient.Do(req)
	if err != nil {
		return nil, nil, false
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, probeBodyBytes))
	resp.Body.Close()
	return resp, b, true
}

// neighbour is target with path appended to its path ("" when target
// already ends in it).
func neighbour(target, path string) string {
	u, err := url.Parse(target)
	if err != nil || strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), path) {
		return ""
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}

// explainOTCListing adds what to do to a failed GET /tools of the OTC
// server at base, as the MCP front reports it in its log and /health.
func explainOTCListing(ctx context.Context, base string, err error) error {
	var se *otc.StatusError
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w; nothing listens at %s: start the OTC server there (the built-in sample: `mcpotc sample-otc`), or give its URL to --otc (url in the config file)", err, redactURL(base))
	}
	if !errors.As(err, &se) {
		return err
	}
	switch {
	case se.StatusCode == http.StatusUnauthorized || se.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w; the OTC server refused the bridge's credentials: give them with api_key_env (or jwt_secret_env, headers) in the config file, or --otc-api-key-env VAR / --header with --otc", err)
	case se.StatusCode >= 400 && se.StatusCode < 500:
	default:
		return err
	}
	if probeMCP(ctx, base) || probeSSE(ctx, base) {
		return fmt.Errorf("%w; %s is an MCP server, not an OTC one: MCP hosts use it directly, and `mcpotc serve-otc --mcp %s` serves it to OTC clients", err, redactURL(base), redactURL(base))
	}
	for _, path := range []string{"/mcp", "/sse"} {
		if n := neighbour(base, path); n != "" && (path == "/mcp" && probeMCP(ctx, n) || path == "/sse" && probeSSE(ctx, n)) {
			return fmt.Errorf("%w; %s is an MCP server's address (MCP answers at %s), not an OTC one: `mcpotc serve-otc --mcp %s` serves it to OTC clients", err, redactURL(base), redactURL(n), redactURL(n))
		}
	}
	if se.StatusCode == http.StatusNotFound {
		if up := otcAncestor(ctx, base); up != "" {
			return fmt.Errorf("%w; the OTC server's base URL is %s (it answers GET %s/tools): give that to --otc (url in the config file); the bridge appends /tools and /tools/call to it", err, up, up)
		}
		return fmt.Errorf("%w; is %s the OTC server's base URL? The bridge appends /tools and /tools/call to it, and no shorter path of it answers GET /tools", err, redactURL(base))
	}
	return err
}

// maxAncestors bounds how many shorter paths of a URL otcAncestor probes.
const maxAncestors = 4

// otcAncestor is the nearest URL above base (its path cut one segment at a
// time, up to the root; at most maxAncestors probes) that answers as an OTC
// server, redacted; "" when none does.
func otcAncestor(ctx context.Context, base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.Fragment, u.RawPath = nil, "", "", ""
	p := strings.TrimSuffix(u.Path, "/")
	for range maxAncestors {
		if p == "" {
			return ""
		}
		p = p[:strings.LastIndex(p, "/")]
		u.Path = p
		if probeOTC(ctx, u.String()) {
			return u.String()
		}
	}
	return ""
}

// diagnoseMCPURL says what answers near an MCP URL whose initialize got an
// HTTP 4xx (upstream.Options.Diagnose).
func diagnoseMCPURL(ctx context.Context, target string, status int) string {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return ""
	}
	if n := neighbour(target, "/mcp"); n != "" && probeMCP(ctx, n) {
		return fmt.Sprintf("MCP answers at %s: use that URL", redactURL(n))
	}
	if probeSSE(ctx, target) {
		return fmt.Sprintf("%s is a legacy SSE endpoint: set \"type\": \"sse\" in the config file, or --mcp-sse", redactURL(target))
	}
	if n := neighbour(target, "/sse"); n != "" && probeSSE(ctx, n) {
		return fmt.Sprintf("a legacy SSE server answers at %s: use that URL (\"type\": \"sse\", or --mcp-sse)", redactURL(n))
	}
	if probeOTC(ctx, target) {
		return fmt.Sprintf("%s is an OTC tool server, not an MCP one: OTC clients call it directly, and `mcpotc serve-mcp --otc %s` serves it to MCP clients", redactURL(target), redactURL(target))
	}
	return "is it the server's MCP endpoint? Streamable HTTP servers usually answer at /mcp, legacy SSE servers at /sse"
}

// redactURL drops credentials, query and fragment from a URL for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
