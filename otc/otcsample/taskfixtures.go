package otcsample

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpotc/mcpotc/otc"
)

// TaskFixtures are the tools the MCP conformance runner's tasks-*
// scenarios call (SEP-2663 fixtures), as OTC tools: greet answers at
// once; slow_compute waits its "seconds" (at most a minute) unless its
// call is cancelled; failing_job answers a tool error after about a
// second; protocol_error_job fails as a server would (an error that is no
// tool error: the OTC server answers 500). They are not part of the
// sample's Tools: a test serves them (with serve-mcp's task overrides:
// greet never, slow_compute always, failing_job and protocol_error_job
// required).
func TaskFixtures() []otc.Tool {
	return []otc.Tool{
		{Definition: def(fixtureDef("greet", "Greets a name: Hello, {name}!", `{"name":{"type":"string"}}`)), Func: greet},
		{Definition: def(fixtureDef("slow_compute", "Waits the given seconds, then answers.", `{"seconds":{"type":"number"},"label":{"type":"string"}}`)), Func: slowCompute},
		{Definition: def(fixtureDef("failing_job", "Fails with a tool error after about a second.", `{}`)), Func: failingJob},
		{Definition: def(fixtureDef("protocol_error_job", "Fails as a server error after about a second.", `{}`)), Func: protocolErrorJob},
	}
}

func fixtureDef(name, description, properties string) string {
	return `{"id": "Tasks.` + name + `@1.0.0", "name": "` + name + `", "version": "1.0.0",
  "description": "` + description + ` (Conformance fixture of mcpotc's tests.)",
  "input_schema": {"parameters": {"type": "object", "properties": ` + properties + `}}, "output_schema": null}`
}

func greet(_ context.Context, call *otc.Call) (json.RawMessage, error) {
	var in struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(call.Request.Input, &in)
	return json.Marshal("Hello, " + in.Name + "!")
}

// maxFixtureWait bounds slow_compute's wait.
const maxFixtureWait = time.Minute

func slowCompute(ctx context.Context, call *otc.Call) (json.RawMessage, error) {
	var in struct {
		Seconds float64 `json:"seconds"`
		Label   string  `json:"label"`
	}
	_ = json.Unmarshal(call.Request.Input, &in)
	d := min(time.Duration(in.Seconds*float64(time.Second)), maxFixtureWait)
	if err := wait(ctx, d); err != nil {
		return nil, err
	}
	return json.Marshal(fmt.Sprintf("computed %s after %gs", in.Label, in.Seconds))
}

func failingJob(ctx context.Context, _ *otc.Call) (json.RawMessage, error) {
	if err := wait(ctx, time.Second); err != nil {
		return nil, err
	}
	return nil, &otc.ToolError{Message: "the job failed (a fixture's tool error)"}
}

func protocolErrorJob(ctx context.Context, _ *otc.Call) (json.RawMessage, error) {
	if err := wait(ctx, time.Second); err != nil {
		return nil, err
	}
	return nil, errors.New("the job crashed (a fixture's server error)")
}

func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
