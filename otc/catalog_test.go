package otc

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A catalog change compiles only the schemas that changed: the validators
// of unchanged tools are kept, a changed schema is compiled and enforced.
func TestSetToolsKeepsOnlyUnchangedValidators(t *testing.T) {
	ok := func(context.Context, *Call) (json.RawMessage, error) { return json.RawMessage(`1`), nil }
	tool := func(id, schema string) Tool {
		return Tool{Definition: ToolDefinition{ID: id, Name: "T", Description: "d", InputSchema: json.RawMessage(schema)}, Func: ok}
	}
	number := `{"type":"object","properties":{"a":{"type":"number","description":"a"}},"required":["a"]}`
	text := `{"type":"object","properties":{"a":{"type":"string","description":"a"}},"required":["a"]}`
	h, err := NewHandler([]Tool{tool("K.T@1.0.0", number), tool("K.U@1.0.0", number)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	status := func(id, input string) int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/tools/call",
			strings.NewReader(`{"$schema":"urn:oxp:1.0","request":{"tool_id":"`+id+`","input":`+input+`}}`))
		r.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(w, r)
		return w.Code
	}
	before := h.catalog.Load().byKey["K.U"].byVer["1.0.0"].validator
	if err := h.SetTools([]Tool{tool("K.T@1.0.0", text), tool("K.U@1.0.0", number)}); err != nil {
		t.Fatal(err)
	}
	if got := status("K.T@1.0.0", `{"a":1}`); got != http.StatusUnprocessableEntity {
		t.Errorf("a changed schema is not enforced: %d", got)
	}
	if got := status("K.T@1.0.0", `{"a":"x"}`); got != http.StatusOK {
		t.Errorf("the changed schema refuses valid input: %d", got)
	}
	if after := h.catalog.Load().byKey["K.U"].byVer["1.0.0"].validator; after != before {
		t.Error("an unchanged tool's schema was compiled again")
	}
	// The same schema under another id is compiled for that id.
	if err := h.SetTools([]Tool{tool("K.T@2.0.0", text)}); err != nil {
		t.Fatal(err)
	}
	if got := status("K.T@2.0.0", `{"a":1}`); got != http.StatusUnprocessableEntity {
		t.Errorf("K.T@2.0.0: %d", got)
	}

	// CheckInputSchema on the handler: errors as the package's, and a checked
	// schema is not compiled again by SetTools.
	bad := `{"type":"object","properties":{"a":{"type":12}}}`
	if err, want := h.CheckInputSchema("K.V@1.0.0", json.RawMessage(bad)), CheckInputSchema("K.V@1.0.0", json.RawMessage(bad)); err == nil || err.Error() != want.Error() {
		t.Errorf("CheckInputSchema(bad) = %v, want %v", err, want)
	}
	if err := h.CheckInputSchema("K.V@1.0.0", json.RawMessage(number)); err != nil {
		t.Fatal(err)
	}
	checked := h.checked[validatorKey{"K.V@1.0.0", number}]
	if checked == nil {
		t.Fatal("the checked validator was not kept")
	}
	if err := h.SetTools([]Tool{tool("K.V@1.0.0", number)}); err != nil {
		t.Fatal(err)
	}
	if got := h.catalog.Load().byKey["K.V"].byVer["1.0.0"].validator; got != checked {
		t.Error("SetTools compiled a checked schema again")
	}
	if h.checked != nil {
		t.Error("SetTools kept the checked validators")
	}
	if err := h.CheckInputSchema("K.V@1.0.0", json.RawMessage(number)); err != nil || h.checked != nil {
		t.Errorf("a served schema was compiled again: %v, %v", err, h.checked)
	}
}
