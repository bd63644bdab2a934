package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb syncBuffer
	m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code = m.Run(context.Background(), args)
	return code, out.String(), errb.String()
}

func TestCommandLine(t *testing.T) {
	tests := []struct {
		args       []string
		code       int
		stdout     string // substring
		stderr     string // substring
		noStdout   bool
		emptyError bool
	}{
		{args: nil, code: 2, stderr: "Usage: mcpotc <command>", noStdout: true},
		{args: []string{"-h"}, code: 0, stdout: "sample-otc", emptyError: true},
		{args: []string{"help"}, code: 0, stdout: "Commands:", emptyError: true},
		{args: []string{"help", "sample-otc"}, code: 0, stdout: "-listen", emptyError: true},
		{args: []string{"sample-otc", "-h"}, code: 0, stdout: "Usage: mcpotc sample-otc", emptyError: true},
		{args: []string{"version"}, code: 0, stdout: "mcpotc ", emptyError: true},
		{args: []string{"version", "-h"}, code: 0, stdout: "Usage: mcpotc version", emptyError: true},
		{args: []string{"bogus"}, code: 2, stderr: `unknown command "bogus"`, noStdout: true},
		{args: []string{"sample-otc", "--bogus"}, code: 2, stderr: "flag provided but not defined: -bogus", noStdout: true},
		{args: []string{"sample-otc", "extra"}, code: 2, stderr: `unexpected argument "extra"`, noStdout: true},
		{args: []string{"sample-otc", "--log-level", "loud"}, code: 2, stderr: "--log-level", noStdout: true},
		{args: []string{"sample-otc", "--listen", "256.0.0.1:1"}, code: 1, stderr: "mcpotc sample-otc:", noStdout: true},
	}
	for _, tt := range tests {
		code, stdout, stderr := run(t, tt.args...)
		if code != tt.code || !strings.Contains(stdout, tt.stdout) || !strings.Contains(stderr, tt.stderr) ||
			(tt.noStdout && stdout != "") || (tt.emptyError && stderr != "") {
			t.Errorf("mcpotc %q: code %d\nstdout: %s\nstderr: %s", tt.args, code, stdout, stderr)
		}
	}
}

// TestSampleOTC runs `mcpotc sample-otc` and checks the acceptance
// requests over real HTTP, then stops it like a signal would.
func TestSampleOTC(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	addr := make(chan string, 1)
	m := &Main{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }, Ready: func(a string) { addr <- a }}
	done := make(chan int, 1)
	go func() { done <- m.Run(ctx, []string{"sample-otc", "--listen", "127.0.0.1:0"}) }()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case code := <-done:
		t.Fatalf("sample-otc exited with %d: %s", code, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("sample-otc did not start")
	}

	type answer struct {
		status int
		header http.Header
		body   map[string]any
	}
	send := func(method, path string, header map[string]string, body string) answer {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return answer{resp.StatusCode, resp.Header, got}
	}
	jsonCT := map[string]string{"Content-Type": "application/json"}
	envelope := func(req string) string { return `{"$schema":"urn:oxp:1.0","request":` + req + `}` }

	if a := send("GET", "/health", nil, ""); a.status != 200 {
		t.Errorf("health: %d", a.status)
	}
	if a := send("GET", "/tools", nil, ""); a.status != 200 || len(a.body["tools"].([]any)) != 6 || len(a.body["items"].([]any)) != 6 {
		t.Errorf("tools: %d %v", a.status, a.body)
	}
	a := send("POST", "/tools/call", jsonCT, envelope(`{"tool_id":"Calculator.Add@1.0.0","call_id":"123e4567-e89b-12d3-a456-426614174000","input":{"a":10,"b":5}}`))
	if result, _ := a.body["result"].(map[string]any); a.status != 200 || result["value"] != 15.0 || result["call_id"] != "123e4567-e89b-12d3-a456-426614174000" {
		t.Errorf("envelope add: %d %v", a.status, a.body)
	}
	a = send("POST", "/tools/call", map[string]string{"Content-Type": "application/json", "OXP-Version": "1.0"}, `{"tool_id":"Calculator.Add@1.0.0","input":{"a":10,"b":5}}`)
	if a.status != 200 || a.body["value"] != 15.0 || a.header.Get("OXP-Version") != "1.0" {
		t.Errorf("flat add: %d %v %v", a.status, a.header, a.body)
	}
	if a = send("POST", "/tools/call", jsonCT, envelope(`{"tool_id":"Calculator.Add@2.0.0","input":{"a":10,"b":5}}`)); a.status != 400 {
		t.Errorf("2.0.0: %d %v", a.status, a.body)
	}
	a = send("POST", "/tools/call", jsonCT, envelope(`{"tool_id":"Calculator.Add@1.0.0","input":{"a":10,"b":"infinity"}}`))
	if pe, _ := a.body["parameter_errors"].(map[string]any); a.status != 422 || pe["b"] == nil {
		t.Errorf("infinity: %d %v", a.status, a.body)
	}
	a = send("POST", "/tools/call", jsonCT, envelope(`{"tool_id":"Doorbell.Ring@0.1.0","input":{"doorbell_id":"doorbell1"}}`))
	if r, _ := a.body["result"].(map[string]any); a.status != 200 || r["success"] != false || r["error"].(map[string]any)["retry_after_ms"] != 500.0 {
		t.Errorf("doorbell1: %d %v", a.status, a.body)
	}
	a = send("POST", "/tools/call", jsonCT, envelope(`{"tool_id":"Gmail.GetEmails@1.2.0","input":{}}`))
	if mr, _ := a.body["missing_requirements"].(map[string]any); a.status != 400 || mr == nil ||
		!strings.HasPrefix(mr["authorization"].([]any)[0].(map[string]any)["url"].(string), base+"/") {
		t.Errorf("gmail: %d %v", a.status, a.body)
	}
	a = send("POST", "/tools/call", jsonCT, envelope(`{"tool_id":"SMS.Send@0.1.2","input":{"to":"+1234567890","message":"hi"},"context":{"secrets":[{"id":"TWILIO_API_KEY","value":"TWILIO_SECRET_VALUE"}]}}`))
	if r, _ := a.body["result"].(map[string]any); a.status != 200 || r["success"] != true {
		t.Errorf("sms: %d %v", a.status, a.body)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code %d after shutdown: %s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("sample-otc did not stop")
	}
	logs := stderr.String()
	if strings.Contains(logs, "TWILIO_SECRET_VALUE") {
		t.Error("a secret reached the log")
	}
	for _, want := range []string{`"call_id":"123e4567-e89b-12d3-a456-426614174000"`, `"tool_id":"Calculator.Add@1.0.0"`, `"status":422`, `"message":"shutting down"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
}
