package otc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// testTool is a tool whose function the test chooses.
func testTool(id string, f ToolFunc) Tool {
	key, version, _ := strings.Cut(id, "@")
	return Tool{
		Definition: ToolDefinition{
			ID: id, Name: strings.ReplaceAll(key, ".", "_"), Description: "test tool", Version: version,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer","description":"x"}}}`),
		},
		Func: f,
	}
}

func newTestHandler(t *testing.T, opts *Options, tools ...Tool) *Handler {
	t.Helper()
	h, err := NewHandler(tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// do sends one request to h and returns the status, headers and decoded body.
func do(t *testing.T, h http.Handler, method, path string, header map[string]string, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("%s %s: body %q is not a JSON object: %v", method, path, rec.Body.String(), err)
	}
	return rec.Code, rec.Header(), got
}

func flatCall(tool, input string) string {
	return `{"tool_id":"` + tool + `","call_id":"c1","input":` + input + `}`
}

var flatHeader = map[string]string{"OXP-Version": "1.0", "Content-Type": "application/json"}

func TestPanickingToolIsAToolError(t *testing.T) {
	h := newTestHandler(t, nil, testTool("T.Panic@1.0.0", func(context.Context, *Call) (json.RawMessage, error) {
		panic("boom")
	}))
	status, _, body := do(t, h, "POST", "/tools/call", flatHeader, flatCall("T.Panic", `{}`))
	if status != 200 || body["success"] != false {
		t.Fatalf("status %d body %v; want 200 success:false", status, body)
	}
	e := body["error"].(map[string]any)
	if e["message"] != "The tool failed unexpectedly" || e["developer_message"] != "panic: boom" {
		t.Errorf("error = %v", e)
	}
	// The server still serves.
	if status, _, _ := do(t, h, "GET", "/health", nil, ""); status != 200 {
		t.Errorf("health after panic: %d", status)
	}
}

func TestToolErrorsMapToStatus(t *testing.T) {
	retry := int64(10)
	tests := []struct {
		name   string
		err    error
		status int
		want   map[string]any
	}{
		{"tool error", &ToolError{Message: "nope", DeveloperMessage: "dev", CanRetry: true, RetryAfterMS: &retry}, 200,
			map[string]any{"call_id": "c1", "success": false, "error": map[string]any{"message": "nope", "developer_message": "dev", "can_retry": true, "retry_after_ms": 10.0}}},
		{"wrapped tool error", errors.Join(errors.New("ctx"), &ToolError{Message: "wrapped"}), 200,
			map[string]any{"call_id": "c1", "success": false, "error": map[string]any{"message": "wrapped"}}},
		{"plain error", errors.New("secret internals"), 200,
			map[string]any{"call_id": "c1", "success": false, "error": map[string]any{"message": "The tool failed", "developer_message": "secret internals"}}},
		{"server error", &ServerErrorResponse{Message: "tool server temporarily unavailable"}, 400,
			map[string]any{"message": "tool server temporarily unavailable"}},
		{"validation error", &ValidationErrorResponse{Message: "bad", ParameterErrors: map[string]string{"x": "Must be even"}}, 422,
			map[string]any{"message": "bad", "parameter_errors": map[string]any{"x": "Must be even"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newTestHandler(t, nil, testTool("T.Fail@1.0.0", func(context.Context, *Call) (json.RawMessage, error) { return nil, tt.err }))
			status, _, body := do(t, h, "POST", "/tools/call", flatHeader, flatCall("T.Fail", `{}`))
			delete(body, "duration")
			if status != tt.status || !reflect.DeepEqual(body, tt.want) {
				t.Errorf("got %d %v; want %d %v", status, body, tt.status, tt.want)
			}
		})
	}
}

func TestValueAbsentNullAndExact(t *testing.T) {
	for _, tt := range []struct {
		value    json.RawMessage
		wantBody string
	}{
		{nil, `{"call_id":"c1","duration":0,"success":true}`},
		{json.RawMessage(`null`), `{"call_id":"c1","duration":0,"success":true,"value":null}`},
		{json.RawMessage(`12345678901234567890123`), `{"call_id":"c1","duration":0,"success":true,"value":12345678901234567890123}`},
		{json.RawMessage(`"text"`), `{"call_id":"c1","duration":0,"success":true,"value":"text"}`},
	} {
		h := newTestHandler(t, &Options{Now: func() time.Time { return time.Unix(0, 0) }},
			testTool("T.V@1.0.0", func(context.Context, *Call) (json.RawMessage, error) { return tt.value, nil }))
		req := httptest.NewRequest("POST", "/tools/call", strings.NewReader(flatCall("T.V", `{}`)))
		req.Header.Set("OXP-Version", "1.0")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := strings.TrimSpace(rec.Body.String()); got != tt.wantBody {
			t.Errorf("value %s: body %s, want %s", tt.value, got, tt.wantBody)
		}
	}
}

func TestInputReachesToolExactly(t *testing.T) {
	var got string
	h := newTestHandler(t, nil, testTool("T.Echo@1.0.0", func(_ context.Context, c *Call) (json.RawMessage, error) {
		got = string(c.Request.Input)
		return nil, nil
	}))
	in := `{"x": 123456789012345678901234567890}`
	if status, _, body := do(t, h, "POST", "/tools/call", flatHeader, flatCall("T.Echo", in)); status != 200 {
		t.Fatalf("status %d: %v", status, body)
	}
	if got != in {
		t.Errorf("tool got input %s, want %s", got, in)
	}
}

func TestBodyLimit(t *testing.T) {
	h := newTestHandler(t, &Options{MaxBodyBytes: 100}, testTool("T.X@1.0.0", func(context.Context, *Call) (json.RawMessage, error) {
		t.Error("tool ran for an oversized body")
		return nil, nil
	}))
	big := flatCall("T.X", `{"pad":"`+strings.Repeat("a", 200)+`"}`)
	status, _, body := do(t, h, "POST", "/tools/call", flatHeader, big)
	if status != 400 || body["message"] != "Request body is too large" || !strings.Contains(body["developer_message"].(string), "100 bytes") {
		t.Errorf("got %d %v", status, body)
	}
}

func TestMalformedRequests(t *testing.T) {
	h := newTestHandler(t, nil, testTool("T.X@1.0.0", func(context.Context, *Call) (json.RawMessage, error) {
		t.Error("tool ran for a malformed request")
		return nil, nil
	}))
	env := map[string]string{"Content-Type": "application/json"}
	tests := []struct {
		name, body string
		header     map[string]string
		dev        string
	}{
		{"empty", ``, env, "the body is empty"},
		{"syntax", `{"request":`, env, "invalid JSON"},
		{"trailing", `{"request":{"tool_id":"T.X"}} {}`, env, "unexpected data"},
		{"array", `[]`, env, "expected a JSON object"},
		{"null", `null`, env, "the body is null"},
		{"request not object", `{"request":"T.X"}`, env, "request must be an object"},
		{"tool_id number", `{"request":{"tool_id":5}}`, env, "request.tool_id must be a string"},
		{"no tool_id", `{"request":{"input":{}}}`, env, "request.tool_id is required"},
		{"input and inputs", `{"request":{"tool_id":"T.X","input":{},"inputs":{}}}`, env, "send one"},
		{"context malformed", `{"request":{"tool_id":"T.X","context":{"secrets":"x"}}}`, env, "context is malformed"},
		{"schema not string", `{"$schema":1,"request":{"tool_id":"T.X"}}`, env, "$schema must be a string"},
		{"schema unknown", `{"$schema":"urn:oxp:2.0","request":{"tool_id":"T.X"}}`, env, `"urn:oxp:2.0" is not supported`},
		{"no shape", `{"hello":1}`, env, "expected"},
		{"header version", flatCall("T.X", `{}`), map[string]string{"OXP-Version": "2.0"}, `"2.0" is not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := do(t, h, "POST", "/tools/call", tt.header, tt.body)
			dev, _ := body["developer_message"].(string)
			if status != 400 || body["message"] == "" || !strings.Contains(dev, tt.dev) {
				t.Errorf("got %d %v; want 400 with developer_message containing %q", status, body, tt.dev)
			}
		})
	}
}

func TestAPIKeyAuth(t *testing.T) {
	h := newTestHandler(t, &Options{APIKey: "s3cret"}, testTool("T.X@1.0.0", func(context.Context, *Call) (json.RawMessage, error) { return nil, nil }))
	tests := []struct {
		header map[string]string
		want   int
	}{
		{map[string]string{}, 401},
		{map[string]string{"OXP-API-Key": "s3cret"}, 200},
		{map[string]string{"OTC-API-Key": "s3cret"}, 200},
		{map[string]string{"X-API-Key": "s3cret"}, 200},
		{map[string]string{"Authorization": "Bearer s3cret"}, 200},
		{map[string]string{"OXP-API-Key": "s3cre"}, 401},
		{map[string]string{"OXP-API-Key": "wrong", "Authorization": "Bearer s3cret"}, 401},
		{map[string]string{"Authorization": "Basic s3cret"}, 401},
	}
	for _, tt := range tests {
		status, _, body := do(t, h, "GET", "/tools", tt.header, "")
		if status != tt.want {
			t.Errorf("headers %v: status %d (%v), want %d", tt.header, status, body, tt.want)
		}
		if status == 401 && strings.Contains(body["message"].(string), "s3cret") {
			t.Errorf("401 body echoes the key: %v", body)
		}
	}
	// /health needs no auth.
	if status, _, _ := do(t, h, "GET", "/health", nil, ""); status != 200 {
		t.Errorf("health: %d", status)
	}
	// Calls are guarded too.
	if status, _, _ := do(t, h, "POST", "/tools/call", flatHeader, flatCall("T.X", `{}`)); status != 401 {
		t.Errorf("call without key: %d", status)
	}
}

func TestJWTAuth(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	secret := []byte("jwt-secret")
	h := newTestHandler(t, &Options{JWTSecret: secret, JWTAudiences: []string{"otcserver"}, Now: func() time.Time { return now }},
		testTool("T.X@1.0.0", func(context.Context, *Call) (json.RawMessage, error) { return nil, nil }))
	sign := func(method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(method, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	exp := now.Add(10 * time.Minute).Unix()
	tests := []struct {
		name  string
		token string
		want  int
	}{
		{"valid", sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"exp": exp}), 200},
		{"valid aud", sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"exp": exp, "aud": "otcserver"}), 200},
		{"aud list", sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"exp": exp, "aud": []string{"x", "otcserver"}}), 200},
		{"bad aud", sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"exp": exp, "aud": "other"}), 401},
		{"no exp", sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "x"}), 401},
		{"expired", sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"exp": now.Add(-time.Hour).Unix()}), 401},
		{"wrong secret", sign(jwt.SigningMethodHS256, []byte("other"), jwt.MapClaims{"exp": exp}), 401},
		{"HS512", sign(jwt.SigningMethodHS512, secret, jwt.MapClaims{"exp": exp}), 401},
		{"none", sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"exp": exp}), 401},
		{"garbage", "not.a.jwt", 401},
	}
	for _, tt := range tests {
		status, _, body := do(t, h, "GET", "/tools", map[string]string{"Authorization": "Bearer " + tt.token}, "")
		if status != tt.want {
			t.Errorf("%s: status %d (%v), want %d", tt.name, status, body, tt.want)
		}
	}
}

func TestSetToolsRejectsBadDefinitions(t *testing.T) {
	ok := func(context.Context, *Call) (json.RawMessage, error) { return nil, nil }
	good := testTool("T.X@1.0.0", ok)
	tests := []struct {
		name string
		mod  func(*Tool)
		want string
	}{
		{"bad id", func(t *Tool) { t.Definition.ID = "T-X@1.0.0" }, "does not match"},
		{"bad name", func(t *Tool) { t.Definition.Name = "has space" }, "name"},
		{"version mismatch", func(t *Tool) { t.Definition.Version = "2.0.0" }, "match the id"},
		{"bad schema", func(t *Tool) { t.Definition.InputSchema = json.RawMessage(`{"type":"nope"}`) }, "input schema"},
		{"no func", func(t *Tool) { t.Func = nil }, "no function"},
	}
	for _, tt := range tests {
		tool := good
		tt.mod(&tool)
		if _, err := NewHandler([]Tool{tool}, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
	if _, err := NewHandler([]Tool{good, good}, nil); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate: err = %v", err)
	}
	// A failed SetTools keeps the old catalog.
	h := newTestHandler(t, nil, good)
	bad := good
	bad.Definition.Name = "bad name"
	if err := h.SetTools([]Tool{bad}); err == nil {
		t.Fatal("SetTools accepted a bad tool")
	}
	if status, _, body := do(t, h, "POST", "/tools/call", flatHeader, flatCall("T.X", `{}`)); status != 200 {
		t.Errorf("old catalog lost: %d %v", status, body)
	}
}

// TestSetToolsConcurrentWithCalls runs calls while the catalog is swapped (run with -race).
func TestSetToolsConcurrentWithCalls(t *testing.T) {
	ok := func(context.Context, *Call) (json.RawMessage, error) { return json.RawMessage(`1`), nil }
	h := newTestHandler(t, nil, testTool("T.X@1.0.0", ok))
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				req := httptest.NewRequest("POST", "/tools/call", strings.NewReader(flatCall("T.X", `{"x":1}`)))
				req.Header.Set("OXP-Version", "1.0")
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					t.Errorf("call during swap: %d %s", rec.Code, rec.Body)
					return
				}
			}
		}()
	}
	for j := 0; j < 50; j++ {
		if err := h.SetTools([]Tool{testTool("T.X@1.0.0", ok), testTool("T.X@1.0.1", ok)}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

func TestHealthOption(t *testing.T) {
	h := newTestHandler(t, &Options{Health: func(context.Context) (bool, any) {
		return false, map[string]any{"status": "unavailable", "not_ready": []string{"everything"}}
	}})
	status, _, body := do(t, h, "GET", "/health", nil, "")
	if status != 503 || !reflect.DeepEqual(body["not_ready"], []any{"everything"}) {
		t.Errorf("got %d %v", status, body)
	}
}

func TestCancelledClientCancelsTool(t *testing.T) {
	started := make(chan struct{})
	stopped := make(chan error, 1)
	h := newTestHandler(t, nil, testTool("T.Slow@1.0.0", func(ctx context.Context, _ *Call) (json.RawMessage, error) {
		close(started)
		select {
		case <-ctx.Done():
			stopped <- ctx.Err()
		case <-time.After(10 * time.Second):
			stopped <- errors.New("not cancelled")
		}
		return nil, ctx.Err()
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/tools/call", strings.NewReader(flatCall("T.Slow", `{}`)))
	req.Header.Set("OXP-Version", "1.0")
	req.Header.Set("Content-Type", "application/json")
	go func() {
		<-started
		cancel()
	}()
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Errorf("tool context: %v, want context.Canceled", err)
	}
}

// FuzzDecodeCall feeds arbitrary bodies to the call endpoint: the handler must
// answer 200, 400 or 422 with a JSON body, and never panic or reach the tool
// with input that is not a JSON object.
func FuzzDecodeCall(f *testing.F) {
	for _, seed := range []string{
		`{"$schema":"otc://1.0","request":{"tool_id":"T.X@1.0.0","input":{"x":1}}}`,
		`{"$schema":"urn:oxp:1.0","request":{"tool_id":"T.X","inputs":{"x":"y"}}}`,
		`{"tool_id":"T.X@1","call_id":"c","context":{"authorization":[{"id":"g","token":"t"}]}}`,
		`{"request":{"tool_id":"T.X","input":[1,2]}}`,
		`{"request":null}`, `{}`, `[]`, `"x"`, `{"request":{"tool_id":"T.X","input":{"x":1e400}}}`,
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	h, err := NewHandler([]Tool{testTool("T.X@1.0.0", func(_ context.Context, c *Call) (json.RawMessage, error) {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(c.Request.Input, &obj); err != nil {
			panic("tool reached with input that is not an object: " + string(c.Request.Input))
		}
		return c.Request.Input, nil
	})}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string, flat bool) {
		req := httptest.NewRequest("POST", "/tools/call", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if flat {
			req.Header.Set("OXP-Version", "1.0")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 400, 422:
		default:
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("answer is not JSON: %q", rec.Body.String())
		}
		if rec.Code == 200 && strings.Contains(rec.Body.String(), "The tool failed unexpectedly") {
			t.Fatalf("tool panicked for %q: %s", body, rec.Body.String())
		}
	})
}

func TestJWTSourceIsAcceptedAndReused(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	secret := []byte("shared")
	h := newTestHandler(t, &Options{JWTSecret: secret, JWTAudiences: []string{"tools"}, Now: clock})
	src := NewJWTSource(secret, "tools", 3*time.Minute, clock)
	first, err := src(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := do(t, h, "GET", "/tools", map[string]string{"Authorization": "Bearer " + first}, ""); status != 200 {
		t.Fatalf("minted token refused: %d %v", status, body)
	}
	now = now.Add(time.Minute)
	if again, _ := src(context.Background()); again != first {
		t.Error("token not reused while fresh")
	}
	now = now.Add(time.Minute + time.Second) // less than a third of 3 min left
	if renewed, _ := src(context.Background()); renewed == first {
		t.Error("token not renewed near expiry")
	}
}

func TestIdempotentCallID(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	runs := 0
	release := make(chan struct{})
	h := newTestHandler(t, &Options{IdempotencyTTL: 10 * time.Minute, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }},
		testTool("T.Count@1.0.0", func(_ context.Context, c *Call) (json.RawMessage, error) {
			mu.Lock()
			runs++
			n := runs
			mu.Unlock()
			if strings.Contains(string(c.Request.Input), "slow") {
				<-release
			}
			if strings.Contains(string(c.Request.Input), "refuse") {
				return nil, &ServerErrorResponse{Message: "unavailable"}
			}
			return json.RawMessage(strconv.Itoa(n)), nil
		}))
	call := func(callID, input string) (int, map[string]any) {
		body := `{"tool_id":"T.Count","call_id":"` + callID + `","input":` + input + `}`
		status, _, got := do(t, h, "POST", "/tools/call", flatHeader, body)
		return status, got
	}
	runsNow := func() int { mu.Lock(); defer mu.Unlock(); return runs }

	_, first := call("a", `{"x":1}`)
	_, again := call("a", `{ "x" : 1 }`) // same call, other spacing
	if first["value"] != 1.0 || again["value"] != 1.0 || runsNow() != 1 {
		t.Errorf("repeat ran the tool: first %v again %v runs %d", first, again, runsNow())
	}
	if status, got := call("a", `{"x":2}`); status != 400 || !strings.Contains(got["message"].(string), "already used") {
		t.Errorf("reuse for another input: %d %v", status, got)
	}
	// Calls without a caller call_id are never deduplicated.
	for i := 0; i < 2; i++ {
		do(t, h, "POST", "/tools/call", flatHeader, `{"tool_id":"T.Count","input":{}}`)
	}
	if runsNow() != 3 {
		t.Errorf("runs = %d, want 3", runsNow())
	}
	// A refused call (400) is not remembered: the repeat runs again.
	call("r", `{"refuse":1}`)
	call("r", `{"refuse":1}`)
	if runsNow() != 5 {
		t.Errorf("runs after two refused calls = %d, want 5", runsNow())
	}
	// A repeat while the first runs waits for it and gets its answer.
	results := make(chan float64, 3)
	for i := 0; i < 3; i++ {
		go func() {
			_, got := call("s", `{"slow":1}`)
			v, _ := got["value"].(float64)
			results <- v
		}()
	}
	time.Sleep(50 * time.Millisecond) // let the three arrive; correctness does not depend on it
	close(release)
	var vals []float64
	for i := 0; i < 3; i++ {
		vals = append(vals, <-results)
	}
	if runsNow() != 6 || vals[0] != 6 || vals[1] != 6 || vals[2] != 6 {
		t.Errorf("concurrent repeats: runs %d, values %v", runsNow(), vals)
	}
	// After the TTL the call_id is free again.
	mu.Lock()
	now = now.Add(11 * time.Minute)
	mu.Unlock()
	if _, got := call("a", `{"x":1}`); got["value"] != 7.0 {
		t.Errorf("after TTL: %v", got)
	}
}

func TestIdempotencyBounded(t *testing.T) {
	c := newIdempotency(time.Hour, 3, 0, 0, time.Now)
	keep := func(outcome) time.Duration { return time.Hour }
	for i := 0; i < 10; i++ {
		id := strconv.Itoa(i)
		c.do(context.Background(), idemKey{caller: "caller-" + id, callID: id}, fingerprint("T", json.RawMessage(id), nil), func() outcome {
			return outcome{status: 200, resp: &CallToolResponse{CallID: id, Success: true}}
		}, keep)
	}
	if n, _ := c.stats(); n != 3 || c.store.Len() != 3 {
		t.Errorf("kept %d entries, want 3", n)
	}
	if e, first, _ := c.store.Begin("9", "caller-9", [32]byte{}); first || e.Value().resp.CallID != "9" {
		t.Error("newest entry dropped")
	}
}

func TestUnknownToolHook(t *testing.T) {
	h := newTestHandler(t, &Options{Unknown: func(id ToolID) *ServerErrorResponse {
		if id.Toolkit == "Starting" {
			return &ServerErrorResponse{Message: "Tool server temporarily unavailable"}
		}
		return nil
	}}, testTool("T.X@1.0.0", func(context.Context, *Call) (json.RawMessage, error) { return nil, nil }))
	if status, _, body := do(t, h, "POST", "/tools/call", flatHeader, flatCall("Starting.Tool", `{}`)); status != 400 || body["message"] != "Tool server temporarily unavailable" {
		t.Errorf("starting toolkit: %d %v", status, body)
	}
	if status, _, body := do(t, h, "POST", "/tools/call", flatHeader, flatCall("Other.Tool", `{}`)); status != 400 || body["message"] != "Tool 'Other.Tool' was not found" {
		t.Errorf("other toolkit: %d %v", status, body)
	}
}

func TestExtensionsRoundTrip(t *testing.T) {
	in := `{"message":"m","can_retry":true,"x-mcp-error":{"code":-32000,"message":"boom","data":{"n":12345678901234567890123}},"x-other":[1]}`
	var e ToolError
	if err := json.Unmarshal([]byte(in), &e); err != nil {
		t.Fatal(err)
	}
	if e.Message != "m" || !e.CanRetry || len(e.Ext) != 2 {
		t.Fatalf("decoded %+v", e)
	}
	out, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"message":"m","can_retry":true,"x-mcp-error":{"code":-32000,"message":"boom","data":{"n":12345678901234567890123}},"x-other":[1]}` {
		t.Errorf("re-encoded %s", out)
	}
	resp := CallToolResponse{CallID: "c", Success: true, Value: json.RawMessage(`1`), Ext: Extensions{"x-mcp-result": json.RawMessage(`{"content":[]}`)}}
	if out, _ := json.Marshal(resp); string(out) != `{"call_id":"c","duration":0,"success":true,"value":1,"x-mcp-result":{"content":[]}}` {
		t.Errorf("response %s", out)
	}
	empty := ServerErrorResponse{Ext: Extensions{"x-a": json.RawMessage(`1`)}}
	if out, _ := json.Marshal(empty); string(out) != `{"message":"","x-a":1}` {
		t.Errorf("server error %s", out)
	}
}
