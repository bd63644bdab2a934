//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestE2EChainCallIDScopedPerCaller: an OTC client → serve-otc (JWT
// callers) → serve-mcp (its stdio child) → sample-otc. serve-otc passes a
// call's call_id on to the MCP front, which sends it to sample-otc; there
// every caller of serve-otc is one caller (serve-mcp), so two of
// serve-otc's callers that chose the same call_id would meet: the second
// would get the first's answer once serve-otc itself no longer held it.
// serve-otc scopes the call_id to its JWT caller: sample-otc sees two
// different call_ids, each the same for its own caller's repeat.
func TestE2EChainCallIDScopedPerCaller(t *testing.T) {
	ctx := context.Background()
	otcPort := freePort(t)
	sample := startSampleOTC(t, ctx, otcPort)
	bin := buildMcpotc(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "config.json")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`{"mcpServers": {"chain": {"command": %q, "args": ["serve-mcp", "--otc", "http://127.0.0.1:%d"]}}}`,
		bin, otcPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	// --idempotency-ttl 0: serve-otc keeps no answers of its own, as once
	// its TTL has passed; the OTC server behind still does.
	b := oauthBridge(t, port, config, []string{"MCPOTC_JWT_SECRET=" + oauthJWTSecret}, "--jwt-secret-env", "MCPOTC_JWT_SECRET", "--idempotency-ttl", "0")
	b.waitHealthy(t, 60*time.Second)
	d := otcfDialects[2]
	call := func(who string) *otcfResp {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, otcfCallTimeout)
		defer cancel()
		return b.call(t, cctx, d, map[string]any{"tool_id": "Calculator.Add@1.1.0", "call_id": "same-call", "input": map[string]any{"a": 2, "b": 3}},
			callerJWT(t, oauthJWTSecret, who))
	}
	for _, who := range []string{"alice", "bob", "alice"} {
		if r := call(who); r.Status != http.StatusOK || !strings.Contains(string(r.Raw), `"sum":5`) {
			t.Fatalf("%s's call: %d %s", who, r.Status, otcfTrunc(r.Raw))
		}
	}
	var seen map[string]int
	deadline := time.Now().Add(5 * time.Second)
	for {
		lines, _ := otcfLogLines(sample.Stderr())
		seen = map[string]int{}
		for _, l := range lines {
			if l["message"] == "call" {
				id, _ := l["call_id"].(string)
				seen[id]++
			}
		}
		if len(seen) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var ids []string
	for id, n := range seen {
		ids = append(ids, id+" ×"+strconv.Itoa(n))
		if id == "same-call" {
			t.Errorf("sample-otc got the callers' call_id as they sent it: two callers would meet there")
		}
		if !strings.HasSuffix(id, "-same-call") {
			t.Errorf("sample-otc got call_id %q, want the caller's call_id scoped", id)
		}
	}
	if len(seen) != 2 {
		t.Errorf("sample-otc saw call_ids %v, want two (alice's, twice: a replay there; bob's)", ids)
	}
	t.Logf("two JWT callers of serve-otc with one call_id: sample-otc, behind serve-mcp, saw %v", ids)
}
