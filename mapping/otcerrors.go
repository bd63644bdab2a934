package mapping

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpotc/mcpotc/otc"
)

// What OTCError reads of an MCP upstream's failure, by its methods (as
// net.Error is read): mapping imports no transport package, and the errors
// of mcp/upstream and mcp/oauth have these methods.
type (
	// rpcFailure is a JSON-RPC error the MCP server answered.
	rpcFailure interface {
		error
		RPCError() (code int, message string, data json.RawMessage)
	}
	// limitFailure is an answer over the bridge's message limit.
	limitFailure interface {
		error
		MessageLimit() int64
	}
	// authorizationFailure is the bridge's OAuth client waiting for a
	// user (or, operator true, the bridge's operator) to open a URL.
	authorizationFailure interface {
		error
		Authorization() (upstream, url, checkURL string, operator bool)
	}
	// inputFailure is a 2026-07-28 input_required: the URL requests in
	// it, and a description of each request.
	inputFailure interface {
		error
		InputAsked() (urls int, asked []string)
	}
	// kindFailure is a failure of a kind: FailureUnavailable,
	// FailureUnauthorized or FailureLost.
	kindFailure interface {
		error
		Failure() string
	}
)

// The kinds of a kindFailure.
const (
	// FailureUnavailable: not sent (the server is down, restarting or
	// unreachable): safe to retry.
	FailureUnavailable = "unavailable"
	// FailureUnauthorized: the server refused the bridge's credentials.
	FailureUnauthorized = "unauthorized"
	// FailureLost: sent, and its outcome is unknown (the server died or
	// timed out).
	FailureLost = "lost"
)

// isFailure reports whether err's chain holds a failure of kind.
func isFailure(err error, kind string) bool {
	for err != nil {
		if k, ok := err.(kindFailure); ok && k.Failure() == kind {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if isFailure(e, kind) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// rpcError is an rpcFailure's fields.
type rpcError struct {
	Code    int
	Message string
	Data    json.RawMessage
}

// OTCError maps a failed MCP upstream call to what the OTC client receives,
// as an error the otc.Handler writes (see otc.ToolFunc):
//
//	MCP upstream says                      OTC client gets
//	-32602                                 422, parameter_errors from data when present
//	-32601, or -32602 "tool not found"     400
//	-32042 URL elicitation required        400, missing_requirements.authorization [{id, url}]
//	input_required, URL elicitations only  the same (the bridge adds check_url and keeps the requestState)
//	input_required asking for anything else 200 success:false naming what was asked (OTC carries no form)
//	-32021 missing client capability       the same, naming the capability (a form, which the bridge does not declare)
//	other JSON-RPC codes                   200 success:false, developer_message code + message
//	OAuth authorization needed (mcp/oauth) 400, missing_requirements.authorization [{id, url, check_url}]
//	  … the operator's (shared mode)     400 "temporarily unavailable", no URL (it is in the log)
//	unreachable before the call was sent   400 "tool server temporarily unavailable", Retry-After
//	HTTP 401/403 from the upstream         400 "rejected the bridge's credentials"
//	died or timed out after it was sent    200 success:false, can_retry, retry_after_ms
//	answer over the message limit          200 success:false, can_retry false, naming the limit and how to raise it
//
// An answer over the message limit (upstream.ErrTooLarge) is a 200: the tool
// ran, only its answer could not be carried, and a retry would run it again
// to the same end.
//
// "Died or timed out after it was sent" is a call whose outcome is
// unknown: it may have run.
// retry_after_ms is how long the upstream may still be running it (it was
// sent notifications/cancelled, or it died): otc.Handler replays that
// answer to a repeat of the call_id for that long, then lets a repeat run
// again. A -32042 without a URL is a ToolError marked NotRun: the tool did
// not run, so a repeat of its call_id must reach it.
func OTCError(err error) error {
	var rf rpcFailure
	var tooLarge limitFailure
	var af authorizationFailure
	var ir inputFailure
	var authz struct {
		Upstream, URL, CheckURL string
		Operator                bool
	}
	if errors.As(err, &af) {
		authz.Upstream, authz.URL, authz.CheckURL, authz.Operator = af.Authorization()
	}
	switch {
	case errors.As(err, &ir) && inputURLs(ir) == 0:
		_, asked := ir.InputAsked()
		return InputNotCarried(asked, err.Error())
	case af != nil && authz.Operator:
		// The bridge's own identity waits for the operator: the URL is the
		// operator's (in the bridge's log), never a caller's to open.
		return &otc.ServerErrorResponse{
			Message: "Tool server temporarily unavailable: the bridge waits for its operator to authorize it",
			DeveloperMessage: fmt.Sprintf("MCP server %s needs the bridge's operator to authorize the bridge (OAuth): the URL to open is in serve-otc's log",
				authz.Upstream),
		}
	case af != nil:
		// The bridge's own OAuth client needs a user's authorization: the
		// upstream's name is the challenge id.
		return &otc.ServerErrorResponse{
			Message:          "Authorization is required: open the authorization URL, then call the tool again",
			DeveloperMessage: err.Error(),
			MissingRequirements: &otc.MissingRequirements{Authorization: []otc.ToolAuthorizationChallenge{
				{ID: authz.Upstream, URL: authz.URL, CheckURL: authz.CheckURL},
			}},
		}
	case errors.As(err, &tooLarge):
		return &otc.ToolError{
			Message: fmt.Sprintf("The tool's answer is larger than the bridge's limit of %d bytes per message", tooLarge.MessageLimit()),
			DeveloperMessage: err.Error() + "; raise the limit with serve-otc --max-message-bytes, " +
				"or max_message_bytes of this server in the config file",
		}
	case errors.As(err, &rf):
		ue := &rpcError{}
		ue.Code, ue.Message, ue.Data = rf.RPCError()
		if restored := otcResponseFromRPC(ue); restored != nil {
			return restored // an OTC server's own answer, through an MCP front
		}
		return withMCPError(otcErrorFromRPC(ue), ue)
	case isFailure(err, FailureUnauthorized):
		return &otc.ServerErrorResponse{Message: "The tool server rejected the bridge's credentials", DeveloperMessage: err.Error()}
	case isFailure(err, FailureUnavailable):
		return &otc.ServerErrorResponse{Message: msgUnavailableToolServe, DeveloperMessage: err.Error(), RetryAfter: UnavailableRetryAfter}
	case isFailure(err, FailureLost), errors.Is(err, context.DeadlineExceeded):
		retry := LostRetryAfter.Milliseconds()
		return &otc.ToolError{
			Message:          "The tool server did not answer; the call may or may not have run",
			DeveloperMessage: err.Error(),
			CanRetry:         true,
			RetryAfterMS:     &retry,
			TimedOut:         errors.Is(err, context.DeadlineExceeded),
		}
	default:
		return &otc.ToolError{Message: "The tool failed", DeveloperMessage: err.Error()}
	}
}

// InputNotCarried is the answer to a call whose MCP server asked for input
// OTC cannot carry (a form, a sampling, the roots): success:false naming
// each request asked (asked) so that a user or a model learns what the
// tool wanted; detail goes to developer_message.
func InputNotCarried(asked []string, detail string) *otc.ToolError {
	return &otc.ToolError{
		Message:          "The tool asked for input that cannot be given over OTC: " + strings.Join(asked, "; "),
		DeveloperMessage: detail,
	}
}

// UnavailableRetryAfter is the Retry-After of a 400 "temporarily
// unavailable": the upstream was not reached, and a stdio child restarts
// at once after a crash.
const UnavailableRetryAfter = time.Second

// LostRetryAfter is retry_after_ms of a call whose outcome is unknown: the
// upstream died (nothing runs any more) or timed out and was sent
// notifications/cancelled, after which a conforming server stops.
const LostRetryAfter = time.Second

// inputURLs is the number of URL requests of an input_required.
func inputURLs(ir inputFailure) int {
	n, _ := ir.InputAsked()
	return n
}

func otcErrorFromRPC(ue *rpcError) error {
	switch ue.Code {
	case CodeMethodNotFound:
		return &otc.ServerErrorResponse{Message: "Tool was not found", DeveloperMessage: rpcDetail(ue)}
	case CodeInvalidParams:
		lower := strings.ToLower(ue.Message)
		if strings.Contains(lower, "unknown tool") || (strings.Contains(lower, "tool") && strings.Contains(lower, "not found") && len(ue.Data) == 0) {
			return &otc.ServerErrorResponse{Message: "Tool was not found", DeveloperMessage: rpcDetail(ue)}
		}
		var data struct {
			ParameterErrors map[string]string `json:"parameter_errors"`
		}
		_ = json.Unmarshal(ue.Data, &data)
		return &otc.ValidationErrorResponse{Message: orText(ue.Message, "Some input parameters are invalid"), ParameterErrors: data.ParameterErrors}
	case CodeURLElicitationReq:
		var data struct {
			Elicitations []struct {
				ElicitationID string `json:"elicitationId"`
				URL           string `json:"url"`
			} `json:"elicitations"`
		}
		_ = json.Unmarshal(ue.Data, &data)
		mr := &otc.MissingRequirements{}
		for _, e := range data.Elicitations {
			if e.URL != "" {
				mr.Authorization = append(mr.Authorization, otc.ToolAuthorizationChallenge{ID: e.ElicitationID, URL: e.URL})
			}
		}
		if len(mr.Authorization) == 0 {
			return &otc.ToolError{Message: "The tool requires an authorization the server did not describe", DeveloperMessage: rpcDetail(ue), NotRun: true}
		}
		return &otc.ServerErrorResponse{
			Message:             "Authorization is required: open the authorization URL, then call the tool again",
			DeveloperMessage:    rpcDetail(ue),
			MissingRequirements: mr,
		}
	case codeMissingCapability:
		// A 2026-07-28 server that would ask for input the bridge did not
		// declare it can give (a form): it says so instead of asking.
		detail := rpcDetail(ue)
		if caps := capabilityPaths(ue.Data); len(caps) > 0 {
			detail += " (needs the client capability " + strings.Join(caps, ", ") + ")"
		}
		return InputNotCarried([]string{ue.Message}, detail)
	}
	return &otc.ToolError{Message: "The tool failed", DeveloperMessage: rpcDetail(ue)}
}

// codeMissingCapability is MCP 2026-07-28's -32021: the request lacks a
// client capability the server needs for it (data.requiredCapabilities).
const codeMissingCapability = -32021

// capabilityPaths names the capabilities of a -32021's
// data.requiredCapabilities as dotted paths ("elicitation.form"), sorted.
func capabilityPaths(data json.RawMessage) []string {
	var d struct {
		Required map[string]any `json:"requiredCapabilities"`
	}
	if json.Unmarshal(data, &d) != nil {
		return nil
	}
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			sub, ok := v.(map[string]any)
			if ok && len(sub) > 0 && len(prefix) < 200 {
				walk(prefix+k+".", sub)
				continue
			}
			out = append(out, prefix+k)
		}
	}
	walk("", d.Required)
	slices.Sort(out)
	return out
}

// rpcDetail is "MCP error CODE: message", for developer_message (the
// message is not prefixed twice when the upstream already did).
func rpcDetail(ue *rpcError) string {
	prefix := fmt.Sprintf("MCP error %d: ", ue.Code)
	return prefix + strings.TrimPrefix(ue.Message, prefix)
}

// withMCPError attaches the upstream's JSON-RPC error to an OTC error as
// the XMCPError carrier, so that an MCP front further on answers it as is.
func withMCPError(err error, ue *rpcError) error {
	carrier := MCPErrorCarrier{Code: ue.Code, Message: ue.Message, Data: ue.Data}
	b, merr := json.Marshal(carrier)
	if merr != nil {
		return err
	}
	ext := otc.Extensions{XMCPError: b}
	switch e := err.(type) {
	case *otc.ServerErrorResponse:
		e.Ext = ext
	case *otc.ValidationErrorResponse:
		e.Ext = ext
	case *otc.ToolError:
		e.Ext = ext
	}
	return err
}

// otcResponseFromRPC gives back the OTC 400 / 422 answer an MCP front
// carried in the error's data (DataOTCResponse), or in the first URL
// elicitation's _meta for -32042; nil when there is none.
func otcResponseFromRPC(ue *rpcError) error {
	var data struct {
		Carrier      json.RawMessage `json:"mcpotc/otc-response"`
		Elicitations []struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"elicitations"`
	}
	if json.Unmarshal(ue.Data, &data) != nil {
		return nil
	}
	raw := data.Carrier
	if raw == nil && len(data.Elicitations) > 0 {
		raw = data.Elicitations[0].Meta[DataOTCResponse]
	}
	c, ok := otcResponseCarrier(raw)
	if !ok {
		return nil
	}
	if c.Status == 422 {
		var v otc.ValidationErrorResponse
		if json.Unmarshal(c.Body, &v) != nil || v.Message == "" {
			return nil
		}
		v.Schema = ""
		return &v
	}
	var e otc.ServerErrorResponse
	if json.Unmarshal(c.Body, &e) != nil || e.Message == "" {
		return nil
	}
	e.Schema = ""
	return &e
}
