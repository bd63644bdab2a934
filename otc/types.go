package otc

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"time"
)

// ToolDefinition describes one version of one tool (GET /tools).
//
// InputSchema and OutputSchema are kept as raw JSON so that nothing a peer
// sent is lost: InputSchema may be a plain JSON Schema or the OTC 1.0
// {"parameters": <schema>} wrapper (see PlainInputSchema), and OutputSchema
// distinguishes absent (nil), JSON null ("null": the tool returns nothing)
// and {} (any value).
type ToolDefinition struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Version      string          `json:"version"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Requirements *Requirements   `json:"requirements,omitempty"`
}

// Requirements are what a tool needs in the call's context besides its input.
type Requirements struct {
	Authorization []AuthorizationRequirement `json:"authorization,omitempty"`
	Secrets       []SecretRequirement        `json:"secrets,omitempty"`
	UserID        bool                       `json:"user_id,omitempty"`
}

// AuthorizationRequirement names an authorization provider a tool needs a token for.
type AuthorizationRequirement struct {
	ID     string         `json:"id"`
	OAuth2 *OAuth2Details `json:"oauth2,omitempty"`
}

// OAuth2Details are the OAuth 2.0 specifics of an authorization requirement.
type OAuth2Details struct {
	Scopes []string `json:"scopes,omitempty"`
}

// SecretRequirement names a secret a tool needs in context.secrets.
type SecretRequirement struct {
	ID string `json:"id"`
}

// CallToolRequest is the body of POST /tools/call (inside the envelope's
// "request" for the envelope dialects). Input is kept raw so that numbers
// pass through exactly.
type CallToolRequest struct {
	ToolID  string          `json:"tool_id"`
	CallID  string          `json:"call_id,omitempty"`
	TraceID string          `json:"trace_id,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	Context *CallContext    `json:"context,omitempty"`
}

// CallContext carries what satisfies a tool's requirements.
type CallContext struct {
	Authorization []AuthorizationToken `json:"authorization,omitempty"`
	Secrets       []Secret             `json:"secrets,omitempty"`
	UserID        string               `json:"user_id,omitempty"`
}

// AuthorizationToken is a token for one authorization provider.
type AuthorizationToken struct {
	ID    string `json:"id"`
	Token string `json:"token"`
}

// Secret is the value of one secret.
type Secret struct {
	ID    string `json:"id"`
	Value string `json:"value"`
}

// Token returns the token given for provider id, or "".
func (c *CallContext) Token(id string) string {
	if c == nil {
		return ""
	}
	for _, a := range c.Authorization {
		if a.ID == id {
			return a.Token
		}
	}
	return ""
}

// Secret returns the value given for secret id and whether it was given.
func (c *CallContext) Secret(id string) (string, bool) {
	if c == nil {
		return "", false
	}
	for _, s := range c.Secrets {
		if s.ID == id {
			return s.Value, true
		}
	}
	return "", false
}

// CallToolResponse is the answer to a call that reached the tool (HTTP 200).
//
// Value is raw JSON: nil means absent, "null" means JSON null. Exactly one
// of Value and Error is meaningful, as Success says.
type CallToolResponse struct {
	CallID   string          `json:"call_id"`
	Duration float64         `json:"duration"`
	Success  bool            `json:"success"`
	Value    json.RawMessage `json:"value,omitempty"`
	Error    *ToolError      `json:"error,omitempty"`
	// Ext holds the response's "x-" members (carriers).
	Ext Extensions `json:"-"`
}

// MarshalJSON writes "value": null when Value is JSON null (the default
// encoder would drop it with omitempty only when nil, which is what absent
// means) and never writes a value on failure.
func (r CallToolResponse) MarshalJSON() ([]byte, error) {
	type plain CallToolResponse
	p := plain(r)
	if !p.Success {
		p.Value = nil
	} else {
		p.Error = nil
	}
	return marshalWith(p, r.Ext)
}

// ToolError is the error a tool reports when it ran and failed (HTTP 200,
// success:false). It implements error so that tool functions can return it.
type ToolError struct {
	// Message may be shown to the user and the model.
	Message string `json:"message"`
	// DeveloperMessage is for logs only, never for a user or a model.
	DeveloperMessage        string `json:"developer_message,omitempty"`
	CanRetry                bool   `json:"can_retry,omitempty"`
	AdditionalPromptContent string `json:"additional_prompt_content,omitempty"`
	RetryAfterMS            *int64 `json:"retry_after_ms,omitempty"`
	// Ext holds the error's "x-" members (carriers).
	Ext Extensions `json:"-"`
	// NotRun, set by a tool function, says the call never reached the
	// tool (a bridge whose upstream refused it before running it): the
	// answer is not kept for the call_id, and a repeat runs again. Not on
	// the wire.
	NotRun bool `json:"-"`
	// TimedOut, set by a tool function, says the call ran out of time (a
	// bridge's upstream call timeout): its outcome is "timeout" in the
	// metrics. Not on the wire.
	TimedOut bool `json:"-"`
}

func (e *ToolError) Error() string { return "tool error: " + e.Message }

// ServerErrorResponse is the body of a 400 answer: the call did not reach the
// tool. It implements error so that tool functions can refuse a call before
// it runs (for example when their upstream is unavailable).
type ServerErrorResponse struct {
	Schema              string               `json:"$schema,omitempty"`
	Message             string               `json:"message"`
	DeveloperMessage    string               `json:"developer_message,omitempty"`
	MissingRequirements *MissingRequirements `json:"missing_requirements,omitempty"`
	// Ext holds the body's "x-" members (carriers).
	Ext Extensions `json:"-"`
	// RetryAfter, when positive, marks a temporary refusal (the tool
	// server is down or restarting, too many calls run): the 400 carries
	// Retry-After (whole seconds, at least 1) and x-should-retry: true,
	// which the OXP clients retry on. Not in the body.
	RetryAfter time.Duration `json:"-"`
}

func (e *ServerErrorResponse) Error() string { return "server error: " + e.Message }

// MissingRequirements says which of a tool's requirements the call lacked.
type MissingRequirements struct {
	Authorization []ToolAuthorizationChallenge `json:"authorization,omitempty"`
	Secrets       []SecretRequirement          `json:"secrets,omitempty"`
	UserID        bool                         `json:"user_id,omitempty"`
}

// ToolAuthorizationChallenge tells the client where the user can authorize
// a provider (URL) and where to poll for completion (CheckURL).
type ToolAuthorizationChallenge struct {
	ID       string `json:"id"`
	URL      string `json:"url"`
	CheckURL string `json:"check_url,omitempty"`
}

// ValidationErrorResponse is the body of a 422 answer: the input does not
// match the tool's input schema. It implements error so that tool functions
// can report an upstream's own validation failure.
type ValidationErrorResponse struct {
	Schema          string            `json:"$schema,omitempty"`
	Message         string            `json:"message"`
	ParameterErrors map[string]string `json:"parameter_errors,omitempty"`
	// Ext holds the body's "x-" members (carriers).
	Ext Extensions `json:"-"`
}

func (e *ValidationErrorResponse) Error() string { return "validation error: " + e.Message }

// Challenge statuses of AuthorizationCheckResponse.
const (
	ChallengePending   = "pending"
	ChallengeCompleted = "completed"
	ChallengeFailed    = "failed"
)

// AuthorizationCheckResponse is the answer of a challenge's check_url.
type AuthorizationCheckResponse struct {
	Status string `json:"status"`
}

// isJSONNull reports whether raw is the JSON literal null.
func isJSONNull(raw []byte) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

var traceparentPattern = regexp.MustCompile(`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// IsTraceparent reports whether s is a valid W3C traceparent
// (version-traceid-parentid-flags; version ff and all-zero ids are
// invalid), as a trace_id may be.
func IsTraceparent(s string) bool {
	return traceparentPattern.MatchString(s) && s[:2] != "ff" &&
		s[3:35] != strings.Repeat("0", 32) && s[36:52] != strings.Repeat("0", 16)
}
