package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/otc"
)

// mcpPost sends one JSON-RPC request to a streamable HTTP endpoint and
// returns the response frame (from a JSON body or an event stream) and the
// session id.
func mcpPost(t *testing.T, url, session, method string, params any) (map[string]any, string) {
	t.Helper()
	return mcpPostWith(t, url, session, method, params, nil)
}

// mcpPostWith is mcpPost with extra request headers.
func mcpPostWith(t *testing.T, url, session, method string, params any, extra http.Header) (map[string]any, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for k, v := range extra {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	frame := raw
	for _, line := range strings.Split(string(raw), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			frame = []byte(d)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(frame, &m); err != nil {
		t.Fatalf("%s: %d %s", method, resp.StatusCode, raw)
	}
	return m, resp.Header.Get("Mcp-Session-Id")
}

// A call refused for a secret the upstream was not given says how to give
// it: OTCServer.Configure when set (the built-in sample, which takes no
// configuration), else "configure it for upstream NAME"; given the secret,
// the same call runs.
func TestMissingSecretSaysHowToGiveIt(t *testing.T) {
	const how = "the built-in sample toolkit takes no configuration; to try this tool, run `mcpotc sample-otc`"
	for _, tc := range []struct {
		name string
		up   func(*OTCServer)
		want string
	}{
		{"built-in", func(u *OTCServer) { u.Configure = how }, `the OTC tool SMS.Send@0.1.2 needs secret "TWILIO_API_KEY" (config: secrets.TWILIO_API_KEY): ` + how},
		{"configured upstream", func(*OTCServer) {}, `the OTC tool SMS.Send@0.1.2 needs secret "TWILIO_API_KEY" (config: secrets.TWILIO_API_KEY): configure it for upstream u`},
		{"given the secret", func(u *OTCServer) { u.Configure = how; u.Secrets = map[string]string{"TWILIO_API_KEY": "anything"} }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := realOTCServer(t, nil)
			client, err := otc.NewClient(srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			u := OTCServer{Name: "u", Client: client, UserID: "local-user"}
			tc.up(&u)
			f, err := NewMCPFront(context.Background(), []OTCServer{u}, &MCPFrontOptions{CallTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			mcp := httptest.NewServer(f.Server().StreamableHTTPHandler(nil))
			t.Cleanup(mcp.Close)
			url := mcp.URL + front.StreamablePath
			_, session := mcpPost(t, url, "", "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "t", "version": "0"}})
			got, _ := mcpPost(t, url, session, "tools/call", map[string]any{"name": "SMS_Send", "arguments": map[string]any{"to": "+15550100", "message": "hi"}})
			e, _ := got["error"].(map[string]any)
			switch {
			case tc.want == "":
				res, _ := got["result"].(map[string]any)
				sc, _ := res["structuredContent"].(map[string]any)
				if e != nil || sc["status"] != "queued" {
					t.Errorf("with the secret: %v", got)
				}
			case e == nil || e["code"] != float64(-32603) || e["message"] != tc.want:
				t.Errorf("got %v\nwant -32603 %q", got, tc.want)
			}
		})
	}
}
