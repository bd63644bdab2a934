package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/internal/wiretest"
)

// startCommand runs one mcpotc command in process on a loopback port and
// returns its base URL; it stops with ctx or at the end of the test.
func startCommand(t *testing.T, ctx context.Context, env map[string]string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	var stderr wiretest.Buffer
	addr := make(chan string, 1)
	m := &Main{Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return env[k] }, Ready: func(a string) { addr <- a }}
	done := make(chan int, 1)
	go func() { done <- m.Run(ctx, args) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Errorf("%v did not stop", args)
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case code := <-done:
		t.Fatalf("%v exited with %d: %s", args, code, stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatalf("%v did not start: %s", args, stderr.String())
	}
	return ""
}

// waitRefused waits until connecting to addr is refused.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		} else if errors.Is(err, syscall.ECONNREFUSED) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections (last error %v)", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type httpAnswer struct {
	status int
	header http.Header
	body   string
}

func send(t *testing.T, method, url string, header map[string]string, body string) httpAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
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
	b, _ := io.ReadAll(resp.Body)
	return httpAnswer{resp.StatusCode, resp.Header, string(b)}
}

func jsonEqual(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Errorf("%s: not JSON: %q", what, got)
		return
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

// serve-mcp over HTTP answers GET /health like the OTC front: 200 when
// every upstream is listed, 503 with the reason when one is not; open
// without the bearer token, like the OTC front's.
func TestServeMCPHealth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	otcCtx, stopOTC := context.WithCancel(ctx)
	otcBase := startCommand(t, otcCtx, nil, "sample-otc", "--listen", "127.0.0.1:0", "--log-level", "error")
	env := map[string]string{"TOKEN": "s3cret-bearer"}
	for _, transport := range []string{"http", "sse"} {
		base := startCommand(t, ctx, env, "serve-mcp", "--transport", transport, "--listen", "127.0.0.1:0", "--otc", otcBase,
			"--bearer-token-env", "TOKEN", "--refresh", "50ms", "--log-level", "error")
		a := send(t, "GET", base+"/health", nil, "")
		if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: health %d %s", transport, a.status, a.header.Get("Content-Type"))
		}
		jsonEqual(t, transport+" health", a.body, `{"status":"ok","upstreams":{"`+strings.TrimPrefix(otcBase, "http://")+`":"ready"}}`)
		if a := send(t, "POST", base+"/health", nil, ""); a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != "GET" {
			t.Errorf("%s: POST /health: %d %v", transport, a.status, a.header)
		}
	}
	stopOTC()
	// Its shutdown is under way: wait until its port refuses connections
	// (a dial while the listener closes is reset instead).
	waitRefused(t, strings.TrimPrefix(otcBase, "http://"))
	base := startCommand(t, ctx, env, "serve-mcp", "--transport", "http", "--listen", "127.0.0.1:0", "--otc", otcBase,
		"--refresh", "50ms", "--log-level", "error")
	a := send(t, "GET", base+"/health", nil, "")
	var body struct {
		Status    string            `json:"status"`
		Upstreams map[string]string `json:"upstreams"`
	}
	_ = json.Unmarshal([]byte(a.body), &body)
	reason := body.Upstreams[strings.TrimPrefix(otcBase, "http://")]
	if a.status != http.StatusServiceUnavailable || body.Status != "unavailable" || len(body.Upstreams) != 1 || !strings.Contains(reason, "connection refused") {
		t.Errorf("upstream down: %d %s", a.status, a.body)
	}
}

// --cors-origin on both fronts: the listed origin's preflight is answered
// without credentials, its requests carry the headers a page needs; other
// origins get none and, on a loopback listener, 403; without the flag
// nothing changes.
func TestCORS(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const app, evil = "https://app.example.com", "https://evil.example"
	env := map[string]string{"TOKEN": "s3cret-bearer", "KEY": "s3cret-key"}
	fronts := []struct {
		name       string
		args       []string
		path       string
		method     string
		body       string
		authorized map[string]string
	}{
		{"serve-mcp", []string{"serve-mcp", "--transport", "http", "--bearer-token-env", "TOKEN"}, "/mcp", "POST",
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
			map[string]string{"Authorization": "Bearer s3cret-bearer", "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}},
		{"serve-otc", []string{"serve-otc", "--api-key-env", "KEY"}, "/tools", "GET", "",
			map[string]string{"OXP-API-Key": "s3cret-key"}},
	}
	for _, f := range fronts {
		t.Run(f.name, func(t *testing.T) {
			common := []string{"--listen", "127.0.0.1:0", "--log-level", "error"}
			withCORS := startCommand(t, ctx, env, append(append(f.args, common...), "--cors-origin", app, "--cors-origin", "http://localhost:5173")...)
			without := startCommand(t, ctx, env, append(f.args, common...)...)
			if f.name == "serve-otc" {
				// GET /tools is 503 until the sample server is listed (docs/otc-front.md, Start-up).
				for _, base := range []string{withCORS, without} {
					deadline := time.Now().Add(15 * time.Second)
					for send(t, "GET", base+"/ready", nil, "").status != http.StatusOK {
						if time.Now().After(deadline) {
							t.Fatalf("%s/ready: not 200 within 15s", base)
						}
						time.Sleep(10 * time.Millisecond)
					}
				}
			}
			preflight := func(origin string) map[string]string {
				return map[string]string{"Origin": origin, "Access-Control-Request-Method": f.method,
					"Access-Control-Request-Headers": "authorization, content-type, mcp-session-id, oxp-api-key"}
			}
			with := func(h map[string]string, origin string) map[string]string {
				out := map[string]string{"Origin": origin}
				for k, v := range h {
					out[k] = v
				}
				return out
			}

			a := send(t, "OPTIONS", withCORS+f.path, preflight(app), "")
			wantHeaders := map[string]string{
				"Access-Control-Allow-Origin":      app,
				"Access-Control-Allow-Methods":     "GET, POST, DELETE",
				"Access-Control-Allow-Headers":     "authorization, content-type, mcp-session-id, oxp-api-key",
				"Access-Control-Max-Age":           "600",
				"Access-Control-Allow-Credentials": "",
			}
			for k, v := range wantHeaders {
				if got := a.header.Get(k); got != v {
					t.Errorf("preflight: %s = %q, want %q", k, got, v)
				}
			}
			if a.status != http.StatusNoContent || !strings.Contains(strings.Join(a.header.Values("Vary"), ","), "Origin") {
				t.Errorf("preflight: %d, Vary %v", a.status, a.header.Values("Vary"))
			}

			a = send(t, "OPTIONS", withCORS+f.path, preflight(evil), "")
			if a.status != http.StatusForbidden || a.header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("preflight from another origin: %d %v", a.status, a.header)
			}
			jsonEqual(t, "preflight from another origin", a.body, `{"message":"forbidden: Origin \"https://evil.example\" is not admitted (see --cors-origin)"}`)

			a = send(t, f.method, withCORS+f.path, with(f.authorized, app), f.body)
			if a.status != http.StatusOK || a.header.Get("Access-Control-Allow-Origin") != app ||
				!strings.Contains(a.header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") {
				t.Errorf("request from the origin: %d %v %s", a.status, a.header, a.body)
			}
			a = send(t, f.method, withCORS+f.path, map[string]string{"Origin": app, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}, f.body)
			if a.status != http.StatusUnauthorized || a.header.Get("Access-Control-Allow-Origin") != app ||
				!strings.Contains(a.header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
				t.Errorf("request from the origin without credentials: %d %v", a.status, a.header)
			}
			a = send(t, f.method, withCORS+f.path, with(f.authorized, evil), f.body)
			if a.status != http.StatusForbidden || a.header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("request from another origin: %d %v", a.status, a.header)
			}
			a = send(t, f.method, withCORS+f.path, with(f.authorized, "http://localhost:5173"), f.body)
			if a.status != http.StatusOK || a.header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
				t.Errorf("request from the second origin: %d %v", a.status, a.header)
			}

			// Off by default: no CORS headers for anyone; a foreign
			// origin is refused on a loopback listener.
			a = send(t, "OPTIONS", without+f.path, preflight(app), "")
			if a.status == http.StatusNoContent || a.header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("preflight without --cors-origin: %d %v", a.status, a.header)
			}
			a = send(t, f.method, without+f.path, with(f.authorized, app), f.body)
			if a.status != http.StatusForbidden || a.header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("request without --cors-origin: %d %v", a.status, a.header)
			}
			a = send(t, f.method, without+f.path, f.authorized, f.body)
			if a.status != http.StatusOK {
				t.Errorf("request without Origin: %d %s", a.status, a.body)
			}
		})
	}
}

// --metrics-listen serves GET /metrics on a listener of its own: the
// front's metrics are there, the protocol is not; the protocol's listener
// does not serve /metrics.
func TestMetricsListen(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	otcBase := startCommand(t, ctx, nil, "sample-otc", "--listen", "127.0.0.1:0", "--log-level", "error")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	ln.Close()
	base := startCommand(t, ctx, nil, "serve-mcp", "--transport", "http", "--listen", "127.0.0.1:0", "--otc", otcBase,
		"--metrics-listen", metricsAddr, "--log-level", "error")
	upstream := strings.TrimPrefix(otcBase, "http://")
	var a httpAnswer
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		a = send(t, "GET", "http://"+metricsAddr+"/metrics", nil, "")
		if strings.Contains(a.body, `mcpotc_upstream_up{front="mcp",upstream="`+upstream+`"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /metrics: %d\n%s", a.status, a.body)
		}
	}
	for _, line := range []string{"mcpotc_mcp_sessions 0", `mcpotc_upstream_tools{front="mcp",upstream="` + upstream + `"} `, "go_goroutines "} {
		if !strings.Contains(a.body, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if a := send(t, "POST", "http://"+metricsAddr+"/mcp", nil, "{}"); a.status != http.StatusNotFound {
		t.Errorf("the metrics listener answers POST /mcp: %d", a.status)
	}
	if a := send(t, "GET", base+"/metrics", nil, ""); a.status != http.StatusNotFound {
		t.Errorf("the MCP listener serves /metrics: %d", a.status)
	}
}
