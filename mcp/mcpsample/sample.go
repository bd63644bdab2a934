package mcpsample

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/mcp/front"
)

// The serverInfo the sample server answers initialize with.
const (
	Name    = "mcpotc-sample"
	Version = "1.0.0"
)

// Bounds of the slow tool.
const (
	MaxSlowSeconds = 30
	MaxSlowSteps   = 100
)

// NewServer returns a new sample MCP server with these tools:
//
//	echo {message}         one text block: the message
//	add {a, b}             structuredContent {"sum": a+b} (declared in outputSchema) and the same JSON as text
//	fail {}                an isError result with a text block
//	slow {seconds, steps}  waits seconds (≤ 30) in steps (≤ 100), sending notifications/progress after
//	                       each step when the request has a progressToken; returns early when cancelled
func NewServer() *front.Server {
	f := front.New(Name, Version, nil)
	tools := []front.Tool{
		{Tool: mcpgo.NewTool("echo",
			mcpgo.WithDescription("Sample tool (built into mcpotc): returns the message it is given."),
			mcpgo.WithString("message", mcpgo.Required(), mcpgo.Description("The text to send back.")),
		), Handler: echo},
		{Tool: mcpgo.NewTool("add",
			mcpgo.WithDescription("Sample tool (built into mcpotc): adds two numbers and returns {\"sum\": a + b} as structured content."),
			mcpgo.WithNumber("a", mcpgo.Required(), mcpgo.Description("The first number.")),
			mcpgo.WithNumber("b", mcpgo.Required(), mcpgo.Description("The second number.")),
			mcpgo.WithRawOutputSchema(json.RawMessage(`{"type":"object","properties":{"sum":{"type":"number","description":"a + b"}},"required":["sum"]}`)),
		), Handler: add},
		{Tool: mcpgo.NewTool("fail",
			mcpgo.WithDescription("Sample tool (built into mcpotc): always fails, returning an error result (isError)."),
		), Handler: fail},
		{Tool: mcpgo.NewTool("slow",
			mcpgo.WithDescription(fmt.Sprintf("Sample tool (built into mcpotc): waits the given number of seconds (at most %d) in steps, "+
				"reporting progress after each step when asked for it; stops early when cancelled.", MaxSlowSeconds)),
			mcpgo.WithNumber("seconds", mcpgo.Description(fmt.Sprintf("How long to wait, 0 to %d. Default 1.", MaxSlowSeconds)),
				mcpgo.Min(0), mcpgo.Max(MaxSlowSeconds)),
			mcpgo.WithInteger("steps", mcpgo.Description(fmt.Sprintf("How many steps (progress notifications), 1 to %d. Default 5.", MaxSlowSteps)),
				mcpgo.Min(1), mcpgo.Max(MaxSlowSteps)),
		), Handler: slow},
	}
	for i := range tools {
		tools[i].Handler = withArguments(tools[i].Handler)
	}
	f.SetTools(tools...)
	return f
}

// withArguments decodes the arguments the front hands over as sent into
// req.Params.Arguments, which mcp-go's accessors (RequireString …) read.
func withArguments(h front.ToolHandler) front.ToolHandler {
	return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		var args map[string]any
		if err := json.Unmarshal(req.Params.RawArguments, &args); err != nil {
			return mcpgo.NewToolResultError("arguments: " + err.Error()), nil
		}
		req.Params.Arguments = args
		return h(ctx, req)
	}
}

func echo(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	msg, err := req.RequireString("message")
	if err != nil {
		return mcpgo.NewToolResultError("message: must be a string"), nil
	}
	return mcpgo.NewToolResultText(msg), nil
}

func add(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	a, errA := req.RequireFloat("a")
	b, errB := req.RequireFloat("b")
	switch {
	case errA != nil:
		return mcpgo.NewToolResultError("a: must be a number"), nil
	case errB != nil:
		return mcpgo.NewToolResultError("b: must be a number"), nil
	}
	sum := a + b
	if math.IsInf(sum, 0) || math.IsNaN(sum) {
		return mcpgo.NewToolResultError("the sum is out of range"), nil
	}
	structured := map[string]any{"sum": sum}
	text, _ := json.Marshal(structured)
	return mcpgo.NewToolResultStructured(structured, string(text)), nil
}

func fail(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	return mcpgo.NewToolResultError("this sample tool always fails"), nil
}

func slow(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	seconds := req.GetFloat("seconds", 1)
	steps := req.GetInt("steps", 5)
	switch {
	case math.IsNaN(seconds) || seconds < 0 || seconds > MaxSlowSeconds:
		return mcpgo.NewToolResultError(fmt.Sprintf("seconds: must be between 0 and %d", MaxSlowSeconds)), nil
	case steps < 1 || steps > MaxSlowSteps:
		return mcpgo.NewToolResultError(fmt.Sprintf("steps: must be between 1 and %d", MaxSlowSteps)), nil
	}
	var token mcpgo.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	step := time.Duration(seconds * float64(time.Second) / float64(steps))
	timer := time.NewTimer(step)
	defer timer.Stop()
	for i := 1; i <= steps; i++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		}
		if token != nil {
			// Best effort: a client that went away does not stop the tool.
			_ = front.Notify(ctx, string(mcpgo.MethodNotificationProgress), map[string]any{
				"progressToken": token,
				"progress":      i,
				"total":         steps,
				"message":       fmt.Sprintf("step %d of %d", i, steps),
			})
		}
		timer.Reset(step)
	}
	return mcpgo.NewToolResultText(fmt.Sprintf("waited %g seconds in %d steps", seconds, steps)), nil
}

// ServeStdio serves a new sample server over newline-delimited JSON-RPC on
// in and out until in ends or ctx does (see front.Server's ServeStdio).
func ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	return NewServer().ServeStdio(ctx, in, out)
}
