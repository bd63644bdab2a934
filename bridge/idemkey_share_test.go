package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/answers"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/otc"
)

// One caller cannot flush the idempotency_key answers the MCP front keeps
// for the others (issue 34, item 5). The front's store is the production
// one with its byte bound scaled down by 64 (1 MiB, a caller's share
// 128 KiB; the defaults are 64 MiB and 8 MiB): victim's call is kept;
// mallory (another address behind the trusted proxy) then stores 11
// answers of 100 kB (each just under the largest kept, a tenth of the
// bytes; together more than all the bytes). victim's retry is answered
// from the store, the same text, and the upstream does not run the tool
// again; mallory's newest answer is kept and her oldest were the ones
// evicted (their retry runs the tool again). (Before: a caller was bounded
// by its count of answers only, the store evicted the oldest answer of
// all callers, victim's, and its retry ran the tool a second time.)
func TestIdempotencyKeyShareKeepsOthersAnswers(t *testing.T) {
	const maxBytes, big = 1 << 20, 100_000
	var mu sync.Mutex
	runs := map[string]int{}
	schema := json.RawMessage(`{"type":"object","properties":{"who":{"type":"string","description":"who"},"size":{"type":"integer","description":"bytes"}},"required":["who","size"]}`)
	h, err := otc.NewHandler([]otc.Tool{{Definition: otc.ToolDefinition{ID: "Big.Make@1.0.0", Name: "Big_Make", Description: "d", Version: "1.0.0", InputSchema: schema},
		Func: func(_ context.Context, c *otc.Call) (json.RawMessage, error) {
			var in struct {
				Who  string
				Size int
			}
			_ = json.Unmarshal(c.Request.Input, &in)
			mu.Lock()
			runs[in.Who]++
			n := runs[in.Who]
			mu.Unlock()
			return json.Marshal(fmt.Sprintf("run %d %s", n, strings.Repeat("x", in.Size)))
		}}}, &otc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	client, err := otc.NewClient(up.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewMCPFront(context.Background(), []OTCServer{{Name: "u", Client: client}}, &MCPFrontOptions{CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f.idem.store = answers.New[*otc.CallToolResponse](answers.Bounds{Entries: idemMaxEntries, PrincipalEntries: idemMaxPerPrincipal,
		Bytes: maxBytes, PrincipalBytes: maxBytes / 8, Running: idemMaxRunning, PrincipalRunning: idemMaxRunningPerPrincipal}, nil)
	srv := httptest.NewServer(f.Server().StreamableHTTPHandler(&front.HTTPOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}))
	t.Cleanup(srv.Close)
	url := srv.URL + front.StreamablePath
	victim, mallory := newIdemClient(t, url, "203.0.113.5"), newIdemClient(t, url, "198.51.100.7")
	call := func(c *idemClient, who, key string, size int) string {
		text, isErr := c.call(t, "Big_Make", map[string]any{"who": who, "size": size, "idempotency_key": key})
		if isErr {
			t.Fatalf("%s's call %s: isError %.200s", who, key, text)
		}
		return text
	}
	ran := func(who string) int {
		mu.Lock()
		defer mu.Unlock()
		return runs[who]
	}
	first := call(victim, "victim", "victim-1", 10)
	for i := range 11 {
		call(mallory, "mallory", fmt.Sprintf("flood-%d", i), big)
	}
	if again := call(victim, "victim", "victim-1", 10); again != first {
		t.Errorf("victim's retry: %.40q, want the kept answer %q", again, first)
	}
	if n := ran("victim"); n != 1 {
		t.Errorf("victim's tool ran %d times, want once (the retry answered from the store)", n)
	}
	call(mallory, "mallory", "flood-10", big)
	if n := ran("mallory"); n != 11 {
		t.Errorf("mallory's newest answer was not kept: her tool ran %d times, want 11", n)
	}
	call(mallory, "mallory", "flood-0", big)
	if n := ran("mallory"); n != 12 {
		t.Errorf("mallory's oldest answer was kept: her tool ran %d times, want 12 (her oldest evicted)", n)
	}
}
