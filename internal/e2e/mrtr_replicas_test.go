//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestE2EMCPFrontRequestStateOnceAcrossReplicas: two serve-mcp replicas
// sharing --request-state-key-env (each continues the other's calls) and
// a redis-server (--state), in front of one sample-otc (issue 34, item
// 12). A caller's call is challenged on replica A; its retry on replica B
// is served (resumed); the same requestState sent again to A is refused
// (HTTP 400, -32602 "used already"), as it is to B: the used-once mark is
// shared.
func TestE2EMCPFrontRequestStateOnceAcrossReplicas(t *testing.T) {
	redisURL, _ := startRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := buildMcpotc(t)
	samplePort := strconv.Itoa(freePort(t))
	sample := startProcess(t, context.Background(), bin, []string{"sample-otc", "--listen", "127.0.0.1:" + samplePort}, nil)
	sample.waitHTTP(t, "http://127.0.0.1:"+samplePort+"/health", 30*time.Second)
	cfgPath := filepath.Join(t.TempDir(), "serve-mcp.json")
	if err := os.WriteFile(cfgPath, []byte(`{"upstreams": [{"name": "tools", "url": "http://127.0.0.1:`+samplePort+`"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"MCPOTC_STATE_KEY=a-key-both-replicas-share-32-bytes-or-more"}
	var urls []string
	for range 2 {
		port := strconv.Itoa(freePort(t))
		startProcess(t, context.Background(), bin, []string{"serve-mcp", "--transport", "http", "--stateless", "--listen", "127.0.0.1:" + port,
			"--state", redisURL, "--request-state-key-env", "MCPOTC_STATE_KEY", "--config", cfgPath}, env)
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if resp, err := http.Get("http://127.0.0.1:" + port + "/ready"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve-mcp on %s is not ready", port)
			}
		}
		urls = append(urls, "http://127.0.0.1:"+port+"/mcp")
	}
	status, body := modernPost(t, urls[0], "", 1, "Gmail_GetEmails", `{"query":"inbox"}`, "")
	var first struct {
		Result struct {
			InputRequests map[string]struct {
				Params struct {
					URL string `json:"url"`
				} `json:"params"`
			} `json:"inputRequests"`
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &first) != nil || first.Result.RequestState == "" || len(first.Result.InputRequests) != 1 {
		t.Fatalf("the call on replica A: %d %s, want input_required", status, truncate(body, 2000))
	}
	var key, url string
	for k, ir := range first.Result.InputRequests {
		key, url = k, ir.Params.URL
	}
	if err := openURL(ctx, url); err != nil {
		t.Fatal(err)
	}
	retry := fmt.Sprintf(`,"inputResponses":{%q:{"action":"accept"}},"requestState":%q`, key, first.Result.RequestState)
	status, body = modernPost(t, urls[1], "", 2, "Gmail_GetEmails", `{"query":"inbox"}`, retry)
	// Served: resumed (the sample, which ties a grant to a user this
	// caller does not name, asks again: the next round).
	if status != http.StatusOK || !strings.Contains(body, `"result":`) || strings.Contains(body, `"error":`) {
		t.Fatalf("the retry on replica B: %d %s, want it served", status, truncate(body, 2000))
	}
	const used = `{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"invalid tools/call params: requestState refused: it was used already (each one answers its input_required result once); answer the latest input_required result, or call the tool again without inputResponses and requestState"}}`
	for i, u := range urls {
		status, body = modernPost(t, u, "", 2, "Gmail_GetEmails", `{"query":"inbox"}`, retry)
		if status != http.StatusBadRequest {
			t.Errorf("the state sent again to replica %c: HTTP %d, want 400", 'A'+i, status)
		}
		sameJSON(t, fmt.Sprintf("the state sent again to replica %c", 'A'+i), body, used)
	}
	t.Log("2 serve-mcp replicas, one Redis: a requestState answered on B is refused on A and on B (400, -32602)")
}
