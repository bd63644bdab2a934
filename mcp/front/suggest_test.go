package front

import (
	"context"
	"fmt"
	"strings"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// An unknown tool's message names what the call most likely meant: the
// MCP name of an OTC id, the prefixed name of an unprefixed one, a near
// typo; never a tool the caller may not see, nothing for a name near no
// tool, and nothing past the bounds.
func TestUnknownToolDidYouMean(t *testing.T) {
	t.Parallel()
	f := New("suggest-test", "1.0.0", &Options{Visibility: func(ctx context.Context) *ToolFilter {
		if ctx.Value(whoKey{}) == "bob" {
			return &ToolFilter{Key: "bob", Allows: func(name string) bool { return name != "Secret_Tool" }}
		}
		return nil
	}})
	var tools []Tool
	for _, name := range []string{"Calculator_Add", "calc_Doorbell_Ring", "Gmail_GetEmails", "Secret_Tool"} {
		tools = append(tools, Tool{Tool: mcpgo.NewTool(name), Handler: func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText("ran"), nil
		}})
	}
	f.SetTools(tools...)
	call := func(ctx context.Context, name string) string {
		return string(f.HandleMessage(ctx, request(1, "tools/call", `{"name":"`+name+`","arguments":{}}`)))
	}
	alice, bob := asWho("alice"), asWho("bob")
	for _, tc := range []struct {
		ctx        context.Context
		name, want string
	}{
		{alice, "Calculator.Add@1.1.0", "; did you mean 'Calculator_Add'?"},
		{alice, "calculator-add", "; did you mean 'Calculator_Add'?"},
		{alice, "Doorbell_Ring", "; did you mean 'calc_Doorbell_Ring'?"},
		{alice, "Gmail_GetEmail", "; did you mean 'Gmail_GetEmails'?"},
		{alice, "Secret_Tol", "; did you mean 'Secret_Tool'?"},
		{bob, "Secret_Tol", ""}, // bob may not see it: not named
		{alice, "Weather_Forecast", ""},
		{alice, strings.Repeat("x", suggestMaxLen+1), ""},
	} {
		want := fmt.Sprintf(`"tool '%s' not found: tool not found%s"`, tc.name, tc.want)
		if got := call(tc.ctx, tc.name); !strings.Contains(got, want) {
			t.Errorf("%s: %s, want the message %s", tc.name, got, want)
		}
	}
	// A hidden tool's answer is an unknown one's: bob calling Secret_Tool
	// gets what he gets for a name that was never served.
	if got := call(bob, "Secret_Tool"); !strings.Contains(got, `"tool 'Secret_Tool' not found: tool not found"`) {
		t.Errorf("bob's call of the hidden tool: %s", got)
	}
	if got := call(alice, "Calculator_Add"); !strings.Contains(got, `"ran"`) {
		t.Errorf("an honest call: %s", got)
	}
}
