package otc

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Carriers (x- members) reach only a caller that names their family in
// Mcpotc-Carriers: GET /tools, 200 answers, tool errors, 400 / 422 bodies,
// and idempotent replays. Every other caller gets plain OTC.

func carriersHandler(t *testing.T, ran *[]bool) *Handler {
	t.Helper()
	fn := func(_ context.Context, c *Call) (json.RawMessage, error) {
		*ran = append(*ran, c.ReadsCarriers("x-mcp"))
		var in struct{ Mode string }
		_ = json.Unmarshal(c.Request.Input, &in)
		switch in.Mode {
		case "tool-error":
			return nil, &ToolError{Message: "failed", Ext: Extensions{"x-mcp-error": json.RawMessage(`{"code":-32000,"message":"m"}`)}}
		case "400":
			return nil, &ServerErrorResponse{Message: "refused", Ext: Extensions{"x-mcp-error": json.RawMessage(`{"code":-32601,"message":"m"}`)}}
		case "422":
			return nil, &ValidationErrorResponse{Message: "bad", ParameterErrors: map[string]string{"mode": "bad"},
				Ext: Extensions{"x-mcp-error": json.RawMessage(`{"code":-32602,"message":"m"}`)}}
		}
		c.Ext = Extensions{"x-mcp-result": json.RawMessage(`{"content":[{"type":"text","text":"big"}]}`), "x-other": json.RawMessage(`1`)}
		return json.RawMessage(`"big"`), nil
	}
	h, err := NewHandler([]Tool{{
		Definition: ToolDefinition{ID: "Files.Read@1.0.0", Name: "Files_Read", Description: "Reads.", Version: "1.0.0",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"mode":{"type":"string","description":"what to answer"}}}`)},
		Func:           fn,
		SchemaCarriers: Extensions{"x-mcp-tool": json.RawMessage(`{"name":"read_file"}`)},
	}}, &Options{IdempotencyTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func carriersDo(t *testing.T, h *Handler, method, path, body string, header map[string]string) (int, map[string]any, string) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("%s %s: %d %s: %v", method, path, w.Code, w.Body, err)
	}
	return w.Code, m, w.Body.String()
}

func TestCarriersOnlyForCallersThatReadThem(t *testing.T) {
	var ran []bool
	h := carriersHandler(t, &ran)
	read := map[string]string{CarriersHeader: "x-mcp"}

	t.Run("GET /tools", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			header map[string]string
			body   string
			want   bool
		}{
			{"plain OTC client", nil, "", false},
			{"plain, otc-1.0", nil, `{"$schema":"otc://1.0"}`, false},
			{"x-mcp", read, "", true},
			{"x-mcp, otc-1.0", read, `{"$schema":"otc://1.0"}`, true},
			{"the key itself, other case, in a list", map[string]string{CarriersHeader: "x-foo, X-MCP-Tool"}, "", true},
			{"another family", map[string]string{CarriersHeader: "x-foo"}, "", false},
			{"a prefix that is not a family", map[string]string{CarriersHeader: "x-mc"}, "", false},
			{"x- alone is no family", map[string]string{CarriersHeader: "x-"}, "", false},
			{"not an x- name", map[string]string{CarriersHeader: "mcp"}, "", false},
		} {
			code, _, body := carriersDo(t, h, http.MethodGet, "/tools", tc.body, tc.header)
			if code != http.StatusOK {
				t.Fatalf("%s: %d %s", tc.name, code, body)
			}
			if got := strings.Count(body, `"x-mcp-tool":{"name":"read_file"}`); got != map[bool]int{true: 2, false: 0}[tc.want] {
				t.Errorf("%s: the carrier is listed %d times (tools and items): %s", tc.name, got, body)
			}
			// The schema itself is the same either way.
			if !strings.Contains(body, `"properties":{"mode":{"type":"string","description":"what to answer"}}`) {
				t.Errorf("%s: the input schema is not listed: %s", tc.name, body)
			}
		}
	})

	t.Run("POST /tools/call", func(t *testing.T) {
		call := func(mode, callID string, header map[string]string) (int, map[string]any, string) {
			t.Helper()
			b, _ := json.Marshal(map[string]any{"tool_id": "Files.Read", "call_id": callID, "input": map[string]any{"mode": mode}})
			hdr := map[string]string{VersionHeader: "1.0"}
			for k, v := range header {
				hdr[k] = v
			}
			return carriersDo(t, h, http.MethodPost, "/tools/call", string(b), hdr)
		}
		carried := func(m map[string]any) []string {
			var keys []string
			for _, obj := range []map[string]any{m, func() map[string]any { e, _ := m["error"].(map[string]any); return e }()} {
				for k := range obj {
					if strings.HasPrefix(k, "x-") {
						keys = append(keys, k)
					}
				}
			}
			return keys
		}
		for _, tc := range []struct {
			mode   string
			status int
			want   []string // with Mcpotc-Carriers: x-mcp
		}{
			{"value", 200, []string{"x-mcp-result"}},
			{"tool-error", 200, []string{"x-mcp-error"}},
			{"400", 400, []string{"x-mcp-error"}},
			{"422", 422, []string{"x-mcp-error"}},
		} {
			ran = nil
			code, plain, body := call(tc.mode, "", nil)
			if code != tc.status || len(carried(plain)) != 0 {
				t.Errorf("%s, plain OTC client: %d %s: want %d without x- members", tc.mode, code, body, tc.status)
			}
			code, with, body := call(tc.mode, "", read)
			if got := carried(with); code != tc.status || strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("%s, Mcpotc-Carriers: x-mcp: %d %s: want %d with %v (x-other is another family)", tc.mode, code, body, tc.status, tc.want)
			}
			if len(ran) != 2 || ran[0] || !ran[1] {
				t.Errorf("%s: Call.ReadsCarriers told the tool %v, want [false true]", tc.mode, ran)
			}
		}

		// A call_id's answer, kept with its carriers for the caller that
		// read them, is replayed plain to a plain repeat, and in full to
		// a repeat that reads them: the tool runs once.
		ran = nil
		_, first, _ := call("value", "c-1", read)
		_, again, body := call("value", "c-1", nil)
		if len(ran) != 1 || first["value"] != "big" || again["value"] != "big" || len(carried(again)) != 0 {
			t.Errorf("plain repeat of a carried answer: ran %v; %s", ran, body)
		}
		_, third, body := call("value", "c-1", read)
		if len(ran) != 1 || len(carried(third)) != 1 {
			t.Errorf("carried repeat: ran %v; %s", ran, body)
		}
	})
}

func TestCarrierFamiliesBounded(t *testing.T) {
	h := http.Header{}
	h.Set(CarriersHeader, strings.Repeat("x-a,", 1000)+"x-mcp")
	if got := carrierFamilies(h); len(got) != maxCarrierFamilies {
		t.Errorf("%d families read of a list of 1001, want at most %d", len(got), maxCarrierFamilies)
	}
	h.Set(CarriersHeader, "x-"+strings.Repeat("m", maxCarrierFamilyLen))
	if got := carrierFamilies(h); len(got) != 0 {
		t.Errorf("a family longer than %d bytes was read: %q", maxCarrierFamilyLen, got)
	}
	h.Set(CarriersHeader, " X-MCP ,x-")
	if got := carrierFamilies(h); len(got) != 1 || got[0] != "x-mcp" {
		t.Errorf(`" X-MCP ,x-" reads as %q, want [x-mcp]`, got)
	}
}
