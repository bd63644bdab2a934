package otc

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// Options.ListNotReady: GET /tools answers 503 with its body and
// Retry-After, in the caller's dialect, until it answers nil; then the
// catalog.
func TestListNotReady(t *testing.T) {
	var ready atomic.Bool
	h := newTestHandler(t, &Options{ListNotReady: func(context.Context) *ServerErrorResponse {
		if ready.Load() {
			return nil
		}
		return &ServerErrorResponse{Message: "not complete", DeveloperMessage: "still connecting: a", RetryAfter: time.Second}
	}}, testTool("T.one@1.0.0", func(context.Context, *Call) (json.RawMessage, error) { return nil, nil }))
	status, header, body := do(t, h, http.MethodGet, "/tools", map[string]string{"OXP-Version": "1.0"}, "")
	if status != 503 || header.Get("Retry-After") != "1" || body["message"] != "not complete" || body["developer_message"] != "still connecting: a" {
		t.Errorf("flat: %d %v %v", status, header, body)
	}
	status, _, body = do(t, h, http.MethodGet, "/tools", nil, "")
	if status != 503 || body["$schema"] == nil || body["message"] != "not complete" {
		t.Errorf("envelope: %d %v", status, body)
	}
	ready.Store(true)
	status, _, body = do(t, h, http.MethodGet, "/tools", map[string]string{"OXP-Version": "1.0"}, "")
	if items, _ := body["items"].([]any); status != 200 || len(items) != 1 {
		t.Errorf("ready: %d %v", status, body)
	}
}

// Call.CallIDGiven tells a caller's call_id from a generated one.
func TestCallIDGiven(t *testing.T) {
	var given []bool
	h := newTestHandler(t, nil, testTool("T.one@1.0.0", func(_ context.Context, c *Call) (json.RawMessage, error) {
		given = append(given, c.CallIDGiven)
		return nil, nil
	}))
	do(t, h, http.MethodPost, "/tools/call", flatHeader, `{"tool_id":"T.one","call_id":"mine","input":{}}`)
	do(t, h, http.MethodPost, "/tools/call", flatHeader, `{"tool_id":"T.one","input":{}}`)
	if len(given) != 2 || !given[0] || given[1] {
		t.Errorf("CallIDGiven = %v, want [true false]", given)
	}
}
