package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "authclient:", err)
		os.Exit(1)
	}
}

// maxChallenges bounds how many challenges one tool call may answer.
const maxChallenges = 5

func run() error {
	if len(os.Args) < 2 {
		return errors.New("usage: authclient SERVER_URL")
	}
	serverURL := os.Args[len(os.Args)-1]
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	var sctx map[string]any
	if c := os.Getenv("MCP_CONFORMANCE_CONTEXT"); c != "" {
		if err := json.Unmarshal([]byte(c), &sctx); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	bin := os.Getenv("MCPOTC_BIN")
	if bin == "" {
		return errors.New("MCPOTC_BIN is not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	dir, err := os.MkdirTemp("", "authclient")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The scenarios' authorization servers that accept client ID metadata
	// documents expect this one (the runner does not fetch it).
	oauthCfg := map[string]any{"client_metadata_url": "https://conformance-test.local/client-metadata.json"}
	env := os.Environ()
	if id, _ := sctx["client_id"].(string); id != "" {
		oauthCfg["client_id"] = id
		if s, _ := sctx["client_secret"].(string); s != "" {
			oauthCfg["client_secret_env"] = "AUTHCLIENT_SECRET"
			env = append(env, "AUTHCLIENT_SECRET="+s)
		}
		if k, _ := sctx["private_key_pem"].(string); k != "" {
			oauthCfg["client_private_key_env"] = "AUTHCLIENT_KEY"
			env = append(env, "AUTHCLIENT_KEY="+k)
		}
	}
	if strings.HasPrefix(scenario, "auth/client-credentials") {
		oauthCfg["grant"] = "client_credentials"
	}
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"conformance": map[string]any{"url": serverURL, "oauth": oauthCfg}}})
	cfgPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	cmd := exec.Command(bin, "serve-otc", "--config", cfgPath, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--log-level", "debug", "--log-format", "json")
	cmd.Env = env
	cmd.Stdout = os.Stderr
	logs, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	urls := operatorURLs(logs)
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	}()

	// Wait until the bridge is ready, authorizing it when its log asks
	// (each URL once: after its authorization the bridge reconnects).
	authorized := 0
	for {
		var h struct {
			Status string `json:"status"`
		}
		code, err := getJSON(ctx, base+"/health", &h)
		if err == nil && code == http.StatusOK {
			break
		}
		select {
		case u := <-urls:
			if authorized++; authorized > maxChallenges {
				return fmt.Errorf("the bridge still asks for an authorization after %d", maxChallenges)
			}
			if err := authorize(ctx, u, strings.Replace(u, "/oauth/authorize/", "/oauth/check/", 1)); err != nil {
				return err
			}
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("the bridge did not get ready: last /health %d %s (%v)", code, h.Status, err)
		}
	}

	var tools struct {
		Tools []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if _, err := getJSON(ctx, base+"/tools", &tools); err != nil {
		return err
	}
	if len(tools.Tools) == 0 {
		return errors.New("the bridge lists no tool")
	}
	plan, err := scenarioCalls(scenario, sctx)
	if err != nil {
		return err
	}
	if plan == nil { // the auth scenarios: their one tool (test-tool), no arguments
		id := tools.Tools[0].ID
		for _, t := range tools.Tools {
			if strings.HasSuffix(t.Name, "test-tool") || strings.HasSuffix(t.Name, "test_tool") {
				id = t.ID
			}
		}
		return callTool(ctx, base, id, map[string]any{}, urls)
	}
	// Every planned call is made, whatever the one before did.
	var errs []error
	for i, c := range plan {
		id := ""
		for _, t := range tools.Tools {
			if before, _, _ := strings.Cut(t.ID, "@"); strings.HasSuffix(before, "."+otcName(c.Name)) {
				id = t.ID
			}
		}
		if id == "" {
			errs = append(errs, fmt.Errorf("the bridge lists no tool for the MCP tool %s (call %d)", c.Name, i+1))
			continue
		}
		if err := callTool(ctx, base, id, c.Arguments, urls); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
		}
	}
	return errors.Join(errs...)
}

// plannedCall is one tool call a scenario expects of its client.
type plannedCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

// scenarioCalls is what the scenario expects the client to call: the
// runner's context names the calls for some (toolCalls: http-custom-headers);
// others say it in their description only. Nil: the first tool, no
// arguments (the auth scenarios and the rest).
func scenarioCalls(scenario string, sctx map[string]any) ([]plannedCall, error) {
	if raw, ok := sctx["toolCalls"]; ok {
		b, _ := json.Marshal(raw)
		var calls []plannedCall
		if err := json.Unmarshal(b, &calls); err != nil {
			return nil, fmt.Errorf("MCP_CONFORMANCE_CONTEXT toolCalls: %w", err)
		}
		return calls, nil
	}
	switch scenario {
	case "tools_call":
		return []plannedCall{{Name: "add_numbers", Arguments: map[string]any{"a": 5, "b": 3}}}, nil
	case "http-invalid-tool-headers": // the one valid tool among invalid ones
		return []plannedCall{{Name: "valid_tool", Arguments: map[string]any{"region": "us-west1"}}}, nil
	case "sep-2322-client-request-state": // its four tools, as a host would call them
		return []plannedCall{{Name: "test_mrtr_echo_state"}, {Name: "test_mrtr_no_state"}, {Name: "test_mrtr_unrelated"}, {Name: "test_mrtr_no_result_type"}}, nil
	}
	return nil, nil
}

// otcName is an MCP tool name as serve-otc spells it in an OTC id (docs/mapping.md,
// How MCP names become OTC ids; names under 64 characters).
func otcName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// callTool calls the tool id over OTC with input; a call told to wait for
// the operator (a step-up) is authorized from the log and retried, a
// bounded number of times.
func callTool(ctx context.Context, base, id string, input map[string]any, urls <-chan string) error {
	if input == nil {
		input = map[string]any{}
	}
	for challenges := 0; ; challenges++ {
		body, _ := json.Marshal(map[string]any{"call_id": fmt.Sprintf("authclient-%s-%d", id, challenges), "tool_id": id, "input": input})
		var res struct {
			Success             bool            `json:"success"`
			Message             string          `json:"message"`
			DeveloperMessage    string          `json:"developer_message"`
			Result              json.RawMessage `json:"result"`
			MissingRequirements *struct {
				Authorization []struct {
					ID       string `json:"id"`
					URL      string `json:"url"`
					CheckURL string `json:"check_url"`
				} `json:"authorization"`
			} `json:"missing_requirements"`
		}
		code, err := postJSON(ctx, base+"/tools/call", body, &res)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "authclient: call %s: HTTP %d success=%v %s %s\n", id, code, res.Success, res.Message, res.DeveloperMessage)
		if code == http.StatusOK && res.Success {
			return nil
		}
		if challenges >= maxChallenges {
			return fmt.Errorf("still refused after %d authorizations", maxChallenges)
		}
		// The operator's authorization (a step-up): its URL is in the log,
		// never in the answer.
		if code != http.StatusBadRequest || !strings.Contains(res.Message, "waits for its operator") {
			return fmt.Errorf("the call failed: HTTP %d %s %s", code, res.Message, res.DeveloperMessage)
		}
		select {
		case u := <-urls:
			if err := authorize(ctx, u, strings.Replace(u, "/oauth/authorize/", "/oauth/check/", 1)); err != nil {
				return err
			}
		case <-ctx.Done():
			return errors.New("the bridge asked for the operator's authorization and logged no URL")
		}
	}
}

// operatorURLs copies serve-otc's log (JSON lines) to stderr and sends each
// authorization URL it logs for the operator.
func operatorURLs(logs io.Reader) <-chan string {
	urls := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(logs)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			fmt.Fprintf(os.Stderr, "%s\n", line)
			var l struct {
				Message string `json:"message"`
				URL     string `json:"url"`
			}
			if json.Unmarshal(line, &l) == nil && l.Message == "upstream needs an authorization: open this URL in a browser" && l.URL != "" {
				select {
				case urls <- l.URL:
				default:
				}
			}
		}
	}()
	return urls
}

// authorize opens url as a browser would (following redirects to the
// bridge's callback), then polls checkURL until it is no longer pending.
func authorize(ctx context.Context, url, checkURL string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	jar, _ := cookiejar.New(nil) // a browser: the bridge binds the flow to it
	resp, err := (&http.Client{Jar: jar}).Do(req)
	if err != nil {
		return fmt.Errorf("opening the authorization URL: %w", err)
	}
	page, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	fmt.Fprintf(os.Stderr, "authclient: authorization ended at %s: HTTP %d\n", resp.Request.URL.Path, resp.StatusCode)
	for {
		var c struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		if _, err := getJSON(ctx, checkURL, &c); err != nil {
			return err
		}
		switch c.Status {
		case "completed":
			return nil
		case "failed":
			return fmt.Errorf("authorization failed: %s (%s)", c.Error, bytes.TrimSpace(page))
		}
		if ctx.Err() != nil {
			return errors.New("authorization still pending")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func getJSON(ctx context.Context, url string, v any) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	return do(req, v)
}

func postJSON(ctx context.Context, url string, body []byte, v any) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return do(req, v)
}

func do(req *http.Request, v any) (int, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: HTTP %d: %.200s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	return resp.StatusCode, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
