package front

import (
	"context"
	"encoding/json"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// The front declares no tasks capability and ignores params.task (MCP
// 2025-11-25, Tasks): a tool whose execution.taskSupport is "optional"
// answers its plain result, a "required" one -32601 without running, and
// no task is created.
func TestFrontIgnoresTaskAugmentation(t *testing.T) {
	f := New("tasks-test", "1.0.0", nil)
	ran := 0
	handler := func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		ran++
		return mcpgo.NewToolResultText("ran"), nil
	}
	for name, support := range map[string]mcpgo.TaskSupport{"optional": mcpgo.TaskSupportOptional, "required": mcpgo.TaskSupportRequired} {
		tool := mcpgo.NewTool(name)
		tool.Execution = &mcpgo.ToolExecution{TaskSupport: support}
		addTool(f, tool, handler)
	}
	ctx := context.Background()
	raw := f.HandleMessage(ctx, request(1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}`))
	var ir struct {
		Result struct {
			Capabilities map[string]any `json:"capabilities"`
		} `json:"result"`
	}
	if json.Unmarshal(raw, &ir) != nil || ir.Result.Capabilities == nil || ir.Result.Capabilities["tasks"] != nil {
		t.Fatalf("initialize: %s; want capabilities without tasks", raw)
	}

	call := func(name string) []byte {
		return f.HandleMessage(ctx, request(2, "tools/call", `{"name":"`+name+`","arguments":{},"task":{"ttl":60000}}`))
	}
	sameJSON(t, call("optional"), `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"ran"}]}}`)
	if ran != 1 {
		t.Errorf("the optional tool ran %d times, want 1 (as a plain call)", ran)
	}
	var e struct {
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if b := call("required"); json.Unmarshal(b, &e) != nil || e.Error.Code != mcpgo.METHOD_NOT_FOUND {
		t.Errorf("task-augmented call of a required tool: %s, want -32601", b)
	}
	if ran != 1 {
		t.Errorf("the required tool ran: %d runs", ran)
	}
}
