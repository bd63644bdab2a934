package otc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func suggestHandler(t *testing.T, ids ...string) *Handler {
	t.Helper()
	var tools []Tool
	for _, id := range ids {
		key, version, _ := strings.Cut(id, "@")
		tools = append(tools, Tool{
			Definition: ToolDefinition{ID: id, Name: strings.ReplaceAll(key, ".", "_"), Description: "d", Version: version, InputSchema: json.RawMessage(`{"type":"object"}`)},
			Func:       func(context.Context, *Call) (json.RawMessage, error) { return json.RawMessage(`1`), nil },
		})
	}
	h, err := NewHandler(tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func suggestCall(t *testing.T, h *Handler, toolID string) (int, ServerErrorResponse) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"tool_id": toolID, "input": map[string]any{}})
	r := httptest.NewRequest(http.MethodPost, "/tools/call", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(VersionHeader, "1.0")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var e ServerErrorResponse
	_ = json.Unmarshal(w.Body.Bytes(), &e)
	return w.Code, e
}

// A call to a tool id nobody serves names the ids it most likely meant:
// the same id spelt as a name or with other separators or case, the same
// tool in another toolkit (the sample is Sample.add in one front and
// mcpotc_sample.add in another), a typo; nothing far off is offered, and a
// known tool at an unknown version lists the versions instead.
func TestUnknownToolDidYouMean(t *testing.T) {
	h := suggestHandler(t, "mcpotc_sample.add@1.0.0", "mcpotc_sample.echo@1.0.0", "Calculator.Add@1.0.0", "Calculator.Add@1.1.0", "Other.echo@2.0.0")
	for _, tc := range []struct{ id, message string }{
		{"Sample.add", "Tool 'Sample.add' was not found; did you mean 'mcpotc_sample.add'?"},
		{"Sample.add@1.0.0", "Tool 'Sample.add@1.0.0' was not found; did you mean 'mcpotc_sample.add'?"},
		{"mcpotc_sample_add", "Tool 'mcpotc_sample_add' was not found; did you mean 'mcpotc_sample.add'?"},
		{"calculator.add", "Tool 'calculator.add' was not found; did you mean 'Calculator.Add'?"},
		{"Calculator_Add", "Tool 'Calculator_Add' was not found; did you mean 'Calculator.Add'?"},
		{"get-sum", "Tool 'get-sum' was not found"},
		{"Sample.echo", "Tool 'Sample.echo' was not found; did you mean 'mcpotc_sample.echo'?"},
		{"echo", "Tool 'echo' was not found; did you mean 'Other.echo' or 'mcpotc_sample.echo'?"},
		{"mcpotc_sample.ad", "Tool 'mcpotc_sample.ad' was not found; did you mean 'mcpotc_sample.add'?"},
		{"Calculatr.Add", "Tool 'Calculatr.Add' was not found; did you mean 'Calculator.Add'?"},
		{"Weather.GetForecast", "Tool 'Weather.GetForecast' was not found"},
		{"calc.sub", "Tool 'calc.sub' was not found"},
		{"Calculator.Add@9.0.0", "Tool 'Calculator.Add@9.0.0' was not found"},
	} {
		code, e := suggestCall(t, h, tc.id)
		if code != http.StatusBadRequest || e.Message != tc.message {
			t.Errorf("tool_id %q: %d %q\nwant 400 %q", tc.id, code, e.Message, tc.message)
		}
	}
	if _, e := suggestCall(t, h, "Calculator.Add@9.0.0"); e.DeveloperMessage != "Calculator.Add@9.0.0 is not available; available versions of Calculator.Add: 1.0.0, 1.1.0" {
		t.Errorf("unknown version: developer_message %q", e.DeveloperMessage)
	}
	// The honest call still runs.
	if code, _ := suggestCall(t, h, "mcpotc_sample.add"); code != http.StatusOK {
		t.Errorf("mcpotc_sample.add: %d", code)
	}
}

// Over a catalog too large for the typo pass, the lookups by spelling and
// by tool still answer, and a long id is not scanned at all.
func TestUnknownToolDidYouMeanBounded(t *testing.T) {
	var ids []string
	for i := range suggestScanMax + 1 {
		ids = append(ids, fmt.Sprintf("Kit%d.tool_%d@1.0.0", i, i))
	}
	h := suggestHandler(t, ids...)
	for _, tc := range []struct{ id, message string }{
		{"kit7_tool_7", "Tool 'kit7_tool_7' was not found; did you mean 'Kit7.tool_7'?"},
		{"Other.tool_9", "Tool 'Other.tool_9' was not found; did you mean 'Kit9.tool_9'?"},
		{"Kit7.tool_77", "Tool 'Kit7.tool_77' was not found; did you mean 'Kit77.tool_77'?"},
		{"Kit7.tool_7x", "Tool 'Kit7.tool_7x' was not found"}, // a typo away from Kit7.tool_7: not scanned
		{"K." + strings.Repeat("x", suggestMaxLen), "Tool 'K." + strings.Repeat("x", suggestMaxLen) + "' was not found"},
	} {
		if _, e := suggestCall(t, h, tc.id); e.Message != tc.message {
			t.Errorf("tool_id %.40q: %q\nwant %.200q", tc.id, e.Message, tc.message)
		}
	}
}
