//go:build e2e

package main

// End-to-end tests of issue 9's operational points, against the built
// binary: shutdown order (in-flight calls drain before children close), the
// children's environment (no other upstream's secrets), the sample
// toolkit's authorization flow (OTC and through serve-mcp) and the shape of
// log lines (each key once, ids cut to 64 bytes, 401 logged once without
// the credential).
//
//	MCPOTC_E2E=1 go test -race -count=1 -tags e2e -run TestE2EHardeningOps ./cmd/mcpotc/

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2EHardeningOpsShutdownDrain: serve-otc in front of `mcpotc
// sample-mcp` as a child; SIGTERM while a 7 s call runs (longer than the
// upstream's own 5 s drain, shorter than the documented 10 s). The call gets
// its 200 answer, then the bridge exits 0 and leaves no process behind.
func TestE2EHardeningOpsShutdownDrain(t *testing.T) {
	t.Parallel()
	bin := buildMcpotc(t)
	b := otcE2EStart(t, []string{"--", bin, "sample-mcp"}, nil)
	b.waitHealthy(t, otcE2EStartTimeout)
	b.waitTools(t, []string{"mcpotc_sample.slow@1.0.0"})
	kids := otcE2EChildren(b.p.Pid())
	if len(kids) != 1 || !strings.HasSuffix(kids[0].Cmd, " sample-mcp") {
		t.Fatalf("the bridge's children: %v, want one `mcpotc sample-mcp`", kids)
	}
	child := kids[0]
	d := otcE2EDialects[2]
	req := map[string]any{"tool_id": "mcpotc_sample.slow", "call_id": "ops-drain-" + otcE2ERandom(t), "input": map[string]any{"seconds": 7, "steps": 7}}
	rchar, err := otcE2ERChar(child.Pid)
	if err != nil {
		t.Fatalf("reading the child's I/O counters: %v", err)
	}
	answer := make(chan *otcE2EResp, 1)
	go func() {
		body, hdr := d.request(t, req)
		ctx, cancel := context.WithTimeout(context.Background(), otcE2ECallTimeout)
		defer cancel()
		r, err := otcE2EDo(ctx, http.MethodPost, b.base+"/tools/call", hdr, body)
		if err != nil {
			t.Errorf("the slow call: %v", err)
		}
		answer <- r
	}()
	// SIGTERM once the child has read the call.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := otcE2ERChar(child.Pid)
		if err != nil {
			t.Fatalf("the child went away before the signal: %v", err)
		}
		if n > rchar {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child did not read the call within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.stop(t) // SIGTERM; exit 0 within the bound; no process of the tree left
	var r *otcE2EResp
	select {
	case r = <-answer:
	case <-time.After(otcE2ECallTimeout):
		t.Fatal("the in-flight call got no answer")
	}
	if r == nil {
		return
	}
	got := otcE2ECheckAnswer(t, d, req, r, http.StatusOK, map[string]any{"success": true, "value": "<any>"})
	if v, _ := got["value"].(string); !strings.Contains(v, "waited 7 seconds") {
		t.Errorf("the call in flight at SIGTERM answered %s, want the slow tool's own result", otcE2ETrunc(r.Raw))
	}
	if l := b.logs(func(m map[string]any) bool { return m["message"] == "in-flight calls abandoned at close" }); len(l) > 0 {
		t.Errorf("the upstream abandoned in-flight calls at the signal: %s", otcE2EShow(l))
	}
}

// TestE2EHardeningOpsChildEnv: two stdio servers in a config, each with an
// env entry naming its own secret variable; the bridge's own API key
// variable is set too. Each child's environment (/proc/PID/environ) holds
// its own entry and none of the other server's variables nor the key's.
func TestE2EHardeningOpsChildEnv(t *testing.T) {
	t.Parallel()
	bin := buildMcpotc(t)
	dir := t.TempDir()
	cfg := map[string]any{"mcpServers": map[string]any{
		"alpha": map[string]any{"command": bin, "args": []string{"sample-mcp"}, "toolkit": "Alpha",
			"env": map[string]string{"ALPHA_TOKEN": "${OPS_SECRET_ALPHA}"}},
		"beta": map[string]any{"command": bin, "args": []string{"sample-mcp"}, "toolkit": "Beta",
			"env": map[string]string{"BETA_TOKEN": "pre-${OPS_SECRET_BETA}"}},
	}}
	path := filepath.Join(dir, "serve-otc.json")
	raw, _ := json.Marshal(cfg)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	secretA, secretB, key := "alpha-"+otcE2ERandom(t), "beta-"+otcE2ERandom(t), "key-"+otcE2ERandom(t)
	b := otcE2EStart(t, []string{"--config", path, "--api-key-env", "OPS_BRIDGE_KEY"},
		[]string{"OPS_SECRET_ALPHA=" + secretA, "OPS_SECRET_BETA=" + secretB, "OPS_BRIDGE_KEY=" + key})
	b.auth = map[string]string{"OXP-API-Key": key}
	b.waitHealthy(t, otcE2EStartTimeout)

	kids := otcE2EChildren(b.p.Pid())
	if len(kids) != 2 {
		t.Fatalf("the bridge's children: %v, want two", kids)
	}
	envs := map[string]map[string]string{} // server → its environment
	for _, k := range kids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", k.Pid))
		if err != nil {
			t.Fatalf("reading the environment of %v: %v", k, err)
		}
		env := map[string]string{}
		for _, kv := range bytes.Split(data, []byte{0}) {
			if k, v, ok := strings.Cut(string(kv), "="); ok {
				env[k] = v
			}
		}
		switch {
		case env["ALPHA_TOKEN"] != "":
			envs["alpha"] = env
		case env["BETA_TOKEN"] != "":
			envs["beta"] = env
		}
	}
	if len(envs) != 2 {
		t.Fatalf("could not tell the two children apart by their env entries (%d told)", len(envs))
	}
	for server, want := range map[string]map[string]string{
		"alpha": {"ALPHA_TOKEN": secretA},
		"beta":  {"BETA_TOKEN": "pre-" + secretB},
	} {
		env := envs[server]
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s's child: %s is %q, want its configured value", server, k, env[k])
			}
		}
		for _, k := range []string{"OPS_BRIDGE_KEY"} {
			if _, ok := env[k]; ok {
				t.Errorf("%s's child inherited the bridge's own key variable %s", server, k)
			}
		}
		for k, v := range env {
			if strings.Contains(v, key) {
				t.Errorf("%s's child holds the bridge's key in %s", server, k)
			}
		}
	}
	for server, other := range map[string][]string{"alpha": {"OPS_SECRET_BETA", "BETA_TOKEN"}, "beta": {"OPS_SECRET_ALPHA", "ALPHA_TOKEN"}} {
		for _, k := range other {
			if _, ok := envs[server][k]; ok {
				t.Errorf("%s's child holds the other server's variable %s", server, k)
			}
		}
	}
	for k, v := range envs["alpha"] {
		if strings.Contains(v, secretB) {
			t.Errorf("alpha's child holds beta's secret in %s", k)
		}
	}
	for k, v := range envs["beta"] {
		if strings.Contains(v, secretA) {
			t.Errorf("beta's child holds alpha's secret in %s", k)
		}
	}
	b.stop(t)
	b.checkLogs(t, secretA, secretB, key)
}
