package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/mcp/mcpsample"
	"github.com/mcpotc/mcpotc/mcp/upstream"
)

// GET /ready: 200 once the upstream listed its tools and the checks pass;
// 503 naming a failing check; 503 "draining" after Drain, while /health
// still reports the upstreams.
func TestOTCFrontReady(t *testing.T) {
	var storeErr atomic.Pointer[error]
	check := func(context.Context) error {
		if e := storeErr.Load(); e != nil {
			return *e
		}
		return nil
	}
	f, err := NewOTCFront(context.Background(), []MCPServer{{Toolkit: "Sample", Config: upstream.Config{Name: "sample", InProcess: upstream.Piped(mcpsample.ServeStdio)}}},
		&OTCFrontOptions{Logger: zerolog.Nop(), Checks: map[string]func(context.Context) error{"store": check}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	get := func(path string) (int, any) {
		w := httptest.NewRecorder()
		f.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		var body any
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %v: %s", path, err, w.Body)
		}
		return w.Code, body
	}
	expect := func(path string, status int, want string) {
		t.Helper()
		var w any
		_ = json.Unmarshal([]byte(want), &w)
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, body := get(path)
			if code == status && reflect.DeepEqual(body, w) {
				return
			}
			if time.Now().After(deadline) {
				b, _ := json.Marshal(body)
				t.Fatalf("GET %s = %d %s\nwant %d %s", path, code, b, status, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	expect("/ready", 200, `{"status":"ok","upstreams":{"sample":"ready"},"checks":{"store":"ok"}}`)
	down := errors.New("redis redis://r:6379/0: connection refused")
	storeErr.Store(&down)
	expect("/ready", 503, `{"status":"unavailable","upstreams":{"sample":"ready"},"checks":{"store":"redis redis://r:6379/0: connection refused"}}`)
	expect("/health", 200, `{"status":"ok","upstreams":{"sample":"ready"}}`)
	storeErr.Store(nil)
	expect("/ready", 200, `{"status":"ok","upstreams":{"sample":"ready"},"checks":{"store":"ok"}}`)
	f.Drain()
	expect("/ready", 503, `{"status":"draining"}`)
	expect("/health", 200, `{"status":"ok","upstreams":{"sample":"ready"}}`)
}

// An upstream that cannot be reached keeps /ready at 503.
func TestOTCFrontReadyUpstreamDown(t *testing.T) {
	f, err := NewOTCFront(context.Background(), []MCPServer{{Config: upstream.Config{Name: "gone", URL: "http://127.0.0.1:1/mcp"}}}, &OTCFrontOptions{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	time.Sleep(200 * time.Millisecond)
	w := httptest.NewRecorder()
	f.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ready", nil))
	var body struct {
		Status    string            `json:"status"`
		Upstreams map[string]string `json:"upstreams"`
	}
	_ = json.Unmarshal(w.Body.Bytes(), &body)
	if w.Code != 503 || body.Status != "unavailable" || body.Upstreams["gone"] == "" || body.Upstreams["gone"] == "ready" {
		t.Fatalf("GET /ready = %d %s", w.Code, w.Body)
	}
}
