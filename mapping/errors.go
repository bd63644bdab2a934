package mapping

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/otc"
)

// JSON-RPC codes the fronts send or read.
const (
	CodeInvalidParams       = -32602
	CodeMethodNotFound      = -32601
	CodeInternal            = -32603
	CodeRequestTimeout      = -32001
	CodeURLElicitationReq   = -32042
	msgUpstreamCredentials  = "upstream rejected the bridge's credentials"
	msgUnavailableToolServe = "Tool server temporarily unavailable"
)

// MCPOptions choose among the MCP front's documented alternatives.
type MCPOptions struct {
	// InputErrorsAsResult answers an OTC 422 with an isError result
	// (SEP-1303 style) instead of JSON-RPC -32602. Zero: -32602.
	InputErrorsAsResult bool
	// URLElicitation says the MCP client declared URL-mode elicitation, so
	// authorization challenges can be sent as -32042. Zero: an isError
	// result that names the URL.
	URLElicitation bool
}

// MCPError maps a failed OTC call (anything but a 200) to what the MCP host
// receives: either a result (isError) or an error for the tool handler to
// return (*RPCError or mcpgo.URLElicitationRequiredError).
//
//	OTC upstream says                   MCP host gets
//	422 ValidationErrorResponse         -32602 "invalid arguments: b: Must be a number; …",
//	                                    data {"parameter_errors"} (or isError, InputErrorsAsResult)
//	400/404 unknown tool or version     -32602 "unknown tool …"
//	400 missing authorization           -32042 URL elicitation (client supports it), else isError with the URL
//	400 other (secret, user id, …)      -32603 naming what to configure; data keeps message
//	401 / 403                           -32603 "upstream rejected the bridge's credentials"
//	5xx, unreachable, malformed         -32603 with a short message
//	call timeout (deadline exceeded)    -32001 "request timed out"
func MCPError(err error, tool string, opts MCPOptions) (*mcpgo.CallToolResult, error) {
	res, rpcErr := mcpError(err, tool, opts)
	var se *otc.StatusError
	if rpcErr == nil || !errors.As(err, &se) || !isObject(se.Body) {
		return res, rpcErr
	}
	// The OTC answer as it was, for an OTC front further on (DataOTCResponse).
	// developer_message stays out: hosts may show error data to users.
	carrier := OTCResponseCarrier{Status: se.StatusCode, Body: withoutKeyword(se.Body, "developer_message")}
	if carrier.Status != 400 && carrier.Status != 422 {
		return res, rpcErr
	}
	var rpc *RPCError
	var elicit mcpgo.URLElicitationRequiredError
	switch {
	case errors.As(rpcErr, &rpc):
		data, ok := rpc.Data.(map[string]any)
		if !ok && rpc.Data != nil {
			return res, rpcErr
		}
		if data == nil {
			data = map[string]any{}
		}
		data[DataOTCResponse] = carrier
		rpc.Data = data
	case errors.As(rpcErr, &elicit) && len(elicit.Elicitations) > 0:
		first := &elicit.Elicitations[0]
		if first.Meta == nil {
			first.Meta = &mcpgo.Meta{AdditionalFields: map[string]any{}}
		}
		first.Meta.AdditionalFields[DataOTCResponse] = carrier
		return res, elicit
	}
	return res, rpcErr
}

func mcpError(err error, tool string, opts MCPOptions) (*mcpgo.CallToolResult, error) {
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, &RPCError{Code: CodeRequestTimeout, Message: "request timed out"}
	}
	if errors.Is(err, context.Canceled) {
		return nil, &RPCError{Code: CodeInternal, Message: "request cancelled"}
	}
	var se *otc.StatusError
	if errors.As(err, &se) {
		if c, ok := mcpErrorCarrier(se.Ext); ok {
			return nil, c.rpcError() // an MCP server's own error, through an OTC front
		}
	}
	if !errors.As(err, &se) {
		if errors.Is(err, otc.ErrMalformedResponse) || errors.Is(err, otc.ErrResponseTooLarge) {
			return nil, &RPCError{Code: CodeInternal, Message: "the OTC tool server sent an unreadable answer"}
		}
		return nil, &RPCError{Code: CodeInternal, Message: "the OTC tool server is unreachable"}
	}
	switch {
	case errors.Is(se, otc.ErrValidation):
		msg := invalidArguments(se)
		if opts.InputErrorsAsResult {
			return mcpgo.NewToolResultError(msg), nil
		}
		return nil, &RPCError{Code: CodeInvalidParams, Message: msg, Data: map[string]any{"parameter_errors": orEmpty(se.ParameterErrors)}}
	case errors.Is(se, otc.ErrUnauthorized):
		return nil, &RPCError{Code: CodeInternal, Message: msgUpstreamCredentials}
	case errors.Is(se, otc.ErrServerFailure):
		return nil, &RPCError{Code: CodeInternal, Message: fmt.Sprintf("the OTC tool server failed (HTTP %d)", se.StatusCode)}
	case errors.Is(se, otc.ErrBadRequest) && len(se.ParameterErrors) > 0:
		// A loose server's 400 with per-parameter errors (FastAPI's detail
		// list) is an input validation failure like a 422.
		msg := invalidArguments(se)
		if opts.InputErrorsAsResult {
			return mcpgo.NewToolResultError(msg), nil
		}
		return nil, &RPCError{Code: CodeInvalidParams, Message: msg, Data: map[string]any{"parameter_errors": se.ParameterErrors}}
	case errors.Is(se, otc.ErrBadRequest):
		if mr := se.MissingRequirements; mr != nil && len(mr.Authorization) > 0 {
			return authorizationRequired(mr.Authorization, tool, opts.URLElicitation)
		}
		if mr := se.MissingRequirements; mr != nil && (len(mr.Secrets) > 0 || mr.UserID) {
			return nil, &RPCError{Code: CodeInternal, Message: configureMessage(se), Data: map[string]any{"message": se.Message}}
		}
		if unknownTool(se) {
			return nil, &RPCError{Code: CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q: %s", tool, orText(se.Message, "the OTC tool server does not serve it"))}
		}
		return nil, &RPCError{Code: CodeInternal, Message: configureMessage(se), Data: map[string]any{"message": se.Message}}
	default:
		// 3xx that was not followed, or another status without a class.
		return nil, &RPCError{Code: CodeInternal, Message: fmt.Sprintf("the OTC tool server answered HTTP %d", se.StatusCode)}
	}
}

// invalidArguments puts every parameter error in the message, because many
// hosts show only the message.
func invalidArguments(se *otc.StatusError) string {
	if len(se.ParameterErrors) == 0 {
		return "invalid arguments: " + orText(se.Message, "the input does not match the tool's input schema")
	}
	keys := make([]string, 0, len(se.ParameterErrors))
	for k := range se.ParameterErrors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + se.ParameterErrors[k]
	}
	return "invalid arguments: " + strings.Join(parts, "; ")
}

// unknownTool recognises a 400/404 that says the tool id or version is not
// served (there is no code for it in OTC: the text and 404 are all there is).
// UnknownToolError reports whether an OTC server's error says it does not
// serve the tool (404, or a 400 whose message says so).
func UnknownToolError(se *otc.StatusError) bool { return unknownTool(se) }

func unknownTool(se *otc.StatusError) bool {
	if se.StatusCode == 404 {
		return true
	}
	text := strings.ToLower(se.Message + " " + se.DeveloperMessage)
	for _, s := range []string{"not found", "not available", "unknown tool", "no such tool", "does not match toolkit"} {
		if strings.Contains(text, s) {
			return true
		}
	}
	return false
}

// configureMessage names what the bridge's configuration must provide.
func configureMessage(se *otc.StatusError) string {
	if mr := se.MissingRequirements; mr != nil {
		var need []string
		for _, s := range mr.Secrets {
			need = append(need, fmt.Sprintf("secret %q (config: secrets.%s)", s.ID, s.ID))
		}
		if mr.UserID {
			need = append(need, "a user id (config: user_id)")
		}
		if len(need) > 0 {
			return "the OTC tool needs " + strings.Join(need, " and ") + ": configure it for this upstream"
		}
	}
	return "the OTC tool server refused the call: " + orText(se.Message, "bad request")
}

func authorizationRequired(chs []otc.ToolAuthorizationChallenge, tool string, urlElicitation bool) (*mcpgo.CallToolResult, error) {
	if urlElicitation {
		e := mcpgo.URLElicitationRequiredError{}
		for _, ch := range chs {
			e.Elicitations = append(e.Elicitations, mcpgo.ElicitationParams{
				Mode:          mcpgo.ElicitationModeURL,
				ElicitationID: ch.ID,
				URL:           ch.URL,
				Message:       fmt.Sprintf("Authorize %s for the tool %s, then call it again.", ch.ID, tool),
			})
		}
		return nil, e
	}
	var b strings.Builder
	b.WriteString("Authorization is required before this tool can run. Ask the user to open ")
	for i, ch := range chs {
		if i > 0 {
			b.WriteString(" and ")
		}
		fmt.Fprintf(&b, "%s (to authorize %s)", ch.URL, ch.ID)
	}
	b.WriteString(", then call the tool again.")
	return mcpgo.NewToolResultError(b.String()), nil
}

func orText(s, fallback string) string {
	if strings.TrimSpace(s) == "" {
		return fallback
	}
	return s
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
