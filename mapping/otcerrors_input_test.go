package mapping

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
)

// Input the bridge cannot give over OTC is a 200 success:false naming
// what was asked: an input_required without URLs, or a 2026-07-28
// server's -32021 for a capability the bridge did not declare (a form).
func TestOTCErrorInputNotCarried(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		message   string
		developer string
	}{
		{"input_required form", &upstream.InputRequiredError{Upstream: "u", Tool: "t", Asked: []string{`name: a form ("Your name?")`}},
			`The tool asked for input that cannot be given over OTC: name: a form ("Your name?")`,
			`mcp: upstream "u" asked for input to finish "t", which the bridge cannot give: name: a form ("Your name?")`},
		{"-32021", &upstream.Error{Code: -32021, Message: "Cannot request input 'name' (elicitation/create)",
			Data: json.RawMessage(`{"requiredCapabilities":{"elicitation":{"form":{}},"sampling":{}}}`)},
			`The tool asked for input that cannot be given over OTC: Cannot request input 'name' (elicitation/create)`,
			`MCP error -32021: Cannot request input 'name' (elicitation/create) (needs the client capability elicitation.form, sampling)`},
	} {
		var te *otc.ToolError
		if !errors.As(OTCError(tc.err), &te) || te.Message != tc.message || te.DeveloperMessage != tc.developer {
			t.Errorf("%s: %#v\nwant message %q\n developer %q", tc.name, te, tc.message, tc.developer)
		}
	}
}
