package otc

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// The answers written without a second encoding pass (reply.result,
// GET /tools) must be the bytes writeJSON wrote for them.

func TestResultAnswerMatchesWriteJSON(t *testing.T) {
	retry := int64(500)
	resps := []*CallToolResponse{
		{CallID: "c", Duration: 0.25, Success: true, Value: json.RawMessage(`{"sum": 15}`)},
		{CallID: "c", Success: true, Value: json.RawMessage(` "<b>&amp;</b>" `)},
		{CallID: "c", Success: true, Value: json.RawMessage(`null`)},
		{CallID: "c", Success: true},
		{CallID: "c", Success: true, Value: json.RawMessage(`[1, 2, 123456789012345678901234567890]`), Ext: Extensions{"x-b": json.RawMessage(` {"k": "<v>"} `), "x-a": json.RawMessage(`1`)}},
		{CallID: "<id>", Error: &ToolError{Message: "a <b> & c", DeveloperMessage: "d\u2028e", CanRetry: true, RetryAfterMS: &retry,
			AdditionalPromptContent: "p", Ext: Extensions{"x-mcp-error": json.RawMessage(`{"code":-32000}`)}}},
		{CallID: "c", Success: false},
		{CallID: "c", Success: true, Value: json.RawMessage(`"` + strings.Repeat("x", 70000) + `"`)},
	}
	for _, schema := range []string{SchemaOXP10, SchemaOTC10, "https://example.com/<x>/OpenExecProtocol/Specification/http/1.0/openapi.json"} {
		for _, flat := range []bool{false, true} {
			for _, resp := range resps {
				want := httptest.NewRecorder()
				if flat {
					writeJSON(want, http.StatusOK, resp)
				} else {
					writeJSON(want, http.StatusOK, struct {
						Schema string            `json:"$schema"`
						Result *CallToolResponse `json:"result"`
					}{schema, resp})
				}
				got := httptest.NewRecorder()
				// A caller that reads every family of carriers the answers hold.
				rp := &reply{w: got, schema: schema, flat: flat, carriers: []string{"x-a", "x-b", "x-mcp"}}
				rp.result(resp)
				if got.Code != want.Code || got.Body.String() != want.Body.String() || !reflect.DeepEqual(got.Header(), want.Header()) {
					t.Errorf("flat=%v schema=%s resp=%+v:\n got %d %v %.300s\nwant %d %v %.300s", flat, schema, resp,
						got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
				}
			}
		}
	}
}

func TestToolListAnswerMatchesWriteJSON(t *testing.T) {
	h, err := NewHandler([]Tool{{
		Definition: ToolDefinition{ID: "A.B@1.0.0", Name: "A_B", Description: "<desc> & more", Version: "1.0.0",
			InputSchema: json.RawMessage(`{"parameters": {"type": "object", "properties": {"q": {"type": "string", "description": "<q>"}}}}`)},
		Func: func(context.Context, *Call) (json.RawMessage, error) { return nil, nil },
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := h.catalog.Load()
	for _, tc := range []struct {
		name   string
		header map[string]string
		body   string
		flat   bool
		schema string
		tools  json.RawMessage
	}{
		{"envelope", nil, "", false, SchemaOXP10, c.toolsPlain},
		{"otc-1.0", nil, `{"$schema":"otc://1.0"}`, false, SchemaOTC10, c.toolsWrapped},
		{"flat", map[string]string{VersionHeader: "1.0"}, "", true, "", c.toolsPlain},
	} {
		want := httptest.NewRecorder()
		if tc.flat {
			want.Header().Set(VersionHeader, HeaderVersion10)
			writeJSON(want, http.StatusOK, struct {
				Items json.RawMessage `json:"items"`
			}{tc.tools})
		} else {
			writeJSON(want, http.StatusOK, struct {
				Schema string          `json:"$schema"`
				Tools  json.RawMessage `json:"tools"`
				Items  json.RawMessage `json:"items"`
			}{tc.schema, tc.tools, tc.tools})
		}
		req := httptest.NewRequest(http.MethodGet, "/tools", strings.NewReader(tc.body))
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		got := httptest.NewRecorder()
		h.ServeHTTP(got, req)
		if got.Code != want.Code || got.Body.String() != want.Body.String() || !reflect.DeepEqual(got.Header(), want.Header()) {
			t.Errorf("%s:\n got %d %v %s\nwant %d %v %s", tc.name, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	}
}
