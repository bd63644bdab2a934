package otctest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcpotc/mcpotc/otc"
)

// Bench.Echo, served and called with PostCall, answers its message.
func TestBenchEcho(t *testing.T) {
	h, err := otc.NewHandler([]otc.Tool{BenchEcho()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	status, got := PostCall(t, srv.URL, []byte(`{"tool_id":"Bench.Echo@1.0.0","call_id":"c1","input":{"message":"hello"}}`))
	if status != http.StatusOK || got["success"] != true || got["value"] != "hello" || got["call_id"] != "c1" {
		t.Errorf("Bench.Echo answered %d %v, want 200 success with the value hello", status, got)
	}
}

// PostCall sends the body as is to /tools/call, with the OTC 1.0 headers.
func TestPostCall(t *testing.T) {
	const body = `{"tool_id":"T","input":{}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/tools/call" || string(got) != body ||
			r.Header.Get("Content-Type") != "application/json" || r.Header.Get("OXP-Version") != "1.0" {
			t.Errorf("got %s %s %v %q", r.Method, r.URL.Path, r.Header, got)
		}
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, `{"a":1}`)
	}))
	defer srv.Close()
	if status, got := PostCall(t, srv.URL, []byte(body)); status != http.StatusTeapot || len(got) != 1 || got["a"] != 1.0 {
		t.Errorf("PostCall = %d %v, want 418 map[a:1]", status, got)
	}
}
