package otcsample

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpotc/mcpotc/otc"
)

// Paths of the sample authorization flow served beside the OTC endpoints.
const (
	AuthorizePath = "/sample/oauth/authorize"
	CheckPath     = "/sample/oauth/check"
)

// Bounds of the authorization state: the challenges remembered at once and
// the grants kept (one per user and provider); the oldest go first.
const (
	maxChallenges = 1024
	maxGrants     = 1024
)

// Toolkit is the sample toolkit with its authorization state: the open
// challenges, and the grants users completed, kept as a real tool server
// keeps them (keyed by context.user_id and the provider).
type Toolkit struct {
	now func() time.Time

	mu         sync.Mutex
	challenges map[string]*challenge // state → challenge
	order      []string              // challenge insertion order, for eviction
	grants     map[grantKey]bool     // what users authorized
	grantOrder []grantKey            // grant insertion order, for eviction
}

// challenge is one authorization the sample offered.
type challenge struct {
	user      string // context.user_id of the call that got it; "" when none
	provider  string
	completed bool
}

// grantKey is one user's authorization of one provider.
type grantKey struct{ user, provider string }

// New returns the sample toolkit. now is the clock (nil: time.Now).
func New(now func() time.Time) *Toolkit {
	if now == nil {
		now = time.Now
	}
	return &Toolkit{now: now, challenges: map[string]*challenge{}, grants: map[grantKey]bool{}}
}

// Handler serves the sample toolkit over OTC, with its authorization pages.
func (t *Toolkit) Handler(opts *otc.Options) (http.Handler, error) {
	h, err := otc.NewHandler(t.Tools(), opts)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+AuthorizePath, t.serveAuthorize)
	mux.HandleFunc("GET "+CheckPath, t.serveCheck)
	mux.Handle("/", h)
	return mux, nil
}

// Tools returns the six sample tool versions.
func (t *Toolkit) Tools() []otc.Tool {
	return []otc.Tool{
		{Definition: def(calculatorAdd100), Func: add(false)},
		{Definition: def(calculatorAdd110), Func: add(true)},
		{Definition: def(doorbellRing), Func: ring},
		{Definition: def(systemGetTimestamp), Func: t.timestamp},
		// The sample checks Gmail's authorization itself: a call without a
		// token runs for a user who completed the sample's authorization.
		{Definition: def(gmailGetEmails), Func: t.authorized(getEmails), DeferRequirements: true},
		{Definition: def(smsSend), Func: sendSMS},
	}
}

func def(raw string) otc.ToolDefinition {
	var d otc.ToolDefinition
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		panic("sample tool definition: " + err.Error())
	}
	return d
}

// The definitions are the spec's examples, with descriptions that say they are samples.
const (
	calculatorAdd100 = `{
  "id": "Calculator.Add@1.0.0",
  "name": "Calculator_Add",
  "description": "Adds two numbers together and returns the sum as a number. (Sample tool built into mcpotc; it touches nothing real.)",
  "version": "1.0.0",
  "input_schema": {"parameters": {"type": "object", "properties": {
    "a": {"type": "number", "description": "The first number to add."},
    "b": {"type": "number", "description": "The second number to add."}},
    "required": ["a", "b"]}},
  "output_schema": {"type": "number", "description": "The sum of the two numbers."}
}`
	calculatorAdd110 = `{
  "id": "Calculator.Add@1.1.0",
  "name": "Calculator_Add",
  "description": "Adds two numbers together and returns {\"sum\": a+b}. (Sample tool built into mcpotc; it touches nothing real.)",
  "version": "1.1.0",
  "input_schema": {"parameters": {"type": "object", "properties": {
    "a": {"type": "number", "description": "The first number to add."},
    "b": {"type": "number", "description": "The second number to add."}},
    "required": ["a", "b"]}},
  "output_schema": {"type": "object", "properties": {
    "sum": {"type": "number", "description": "The sum of the two numbers."}},
    "required": ["sum"]}
}`
	doorbellRing = `{
  "id": "Doorbell.Ring@0.1.0",
  "name": "Doorbell_Ring",
  "description": "Rings a doorbell given a doorbell ID (known sample doorbells: doorbell42, doorbell84). (Sample tool built into mcpotc; no real doorbell rings.)",
  "version": "0.1.0",
  "input_schema": {"parameters": {"type": "object", "properties": {
    "doorbell_id": {"type": "string", "description": "The ID of the doorbell to ring."}},
    "required": ["doorbell_id"]}},
  "output_schema": null
}`
	systemGetTimestamp = `{
  "id": "System.GetTimestamp@1.0.0",
  "name": "System_GetTimestamp",
  "description": "Retrieves the current system timestamp (RFC 3339). (Sample tool built into mcpotc; it touches nothing real.)",
  "version": "1.0.0",
  "input_schema": {"parameters": {"type": "object"}},
  "output_schema": {"type": "object", "properties": {
    "timestamp": {"type": "string", "format": "date-time", "description": "The current system timestamp."}},
    "required": ["timestamp"]}
}`
	gmailGetEmails = `{
  "id": "Gmail.GetEmails@1.2.0",
  "name": "Gmail_GetEmails",
  "description": "Retrieves emails using OAuth 2.0 authorization. (Sample tool built into mcpotc: it reads no mailbox and returns two fixed sample emails for any token; its authorization page authorizes nothing real.)",
  "version": "1.2.0",
  "input_schema": {"parameters": {"type": "object", "properties": {
    "query": {"type": "string", "description": "Search query for filtering emails."}},
    "required": []}},
  "output_schema": {"type": "object", "properties": {
    "emails": {"type": "array", "items": {"type": "object", "properties": {
      "id": {"type": "string"}, "subject": {"type": "string"}, "snippet": {"type": "string"}},
      "required": ["id", "subject", "snippet"]},
      "description": "List of retrieved emails."}},
    "required": ["emails"]},
  "requirements": {"authorization": [{"id": "google", "oauth2": {"scopes": ["https://www.googleapis.com/auth/gmail.readonly"]}}]}
}`
	smsSend = `{
  "id": "SMS.Send@0.1.2",
  "name": "SMS_Send",
  "description": "Sends SMS messages. Requires the TWILIO_API_KEY secret. (Sample tool built into mcpotc: nothing is sent anywhere and the secret is not used.)",
  "version": "0.1.2",
  "input_schema": {"parameters": {"type": "object", "properties": {
    "to": {"type": "string", "description": "Recipient phone number."},
    "message": {"type": "string", "description": "Message content to send."}},
    "required": ["to", "message"]}},
  "output_schema": {"type": "object", "properties": {
    "status": {"type": "string", "description": "Status of the SMS sending operation."}},
    "required": ["status"]},
  "requirements": {"secrets": [{"id": "TWILIO_API_KEY"}]}
}`
)

func add(object bool) otc.ToolFunc {
	return func(_ context.Context, call *otc.Call) (json.RawMessage, error) {
		var in struct{ A, B json.Number }
		dec := json.NewDecoder(strings.NewReader(string(call.Request.Input)))
		dec.UseNumber()
		if err := dec.Decode(&in); err != nil {
			return nil, &otc.ToolError{Message: "a and b must be numbers", DeveloperMessage: err.Error()}
		}
		sum, err := addNumbers(in.A, in.B)
		if err != nil {
			return nil, &otc.ToolError{Message: "The sum is out of range", DeveloperMessage: err.Error()}
		}
		if object {
			return json.RawMessage(`{"sum":` + sum + `}`), nil
		}
		return json.RawMessage(sum), nil
	}
}

// addNumbers adds two JSON numbers: integers exactly (any size), others as float64.
func addNumbers(a, b json.Number) (string, error) {
	isInt := func(n json.Number) bool { return !strings.ContainsAny(string(n), ".eE") }
	if isInt(a) && isInt(b) {
		x, okx := new(big.Int).SetString(string(a), 10)
		y, oky := new(big.Int).SetString(string(b), 10)
		if okx && oky {
			return x.Add(x, y).String(), nil
		}
	}
	x, errx := strconv.ParseFloat(string(a), 64)
	y, erry := strconv.ParseFloat(string(b), 64)
	if errx != nil || erry != nil || math.IsInf(x+y, 0) || math.IsNaN(x+y) {
		return "", fmt.Errorf("%s + %s does not fit a 64-bit float", a, b)
	}
	return strconv.FormatFloat(x+y, 'g', -1, 64), nil
}

func ring(_ context.Context, call *otc.Call) (json.RawMessage, error) {
	var in struct {
		DoorbellID string `json:"doorbell_id"`
	}
	_ = json.Unmarshal(call.Request.Input, &in)
	switch in.DoorbellID {
	case "doorbell42", "doorbell84":
		return json.RawMessage("null"), nil
	}
	retry := int64(500)
	return nil, &otc.ToolError{
		Message:                 "Doorbell ID not found",
		DeveloperMessage:        fmt.Sprintf("The doorbell with ID '%s' does not exist.", in.DoorbellID),
		CanRetry:                true,
		AdditionalPromptContent: "ids: doorbell42,doorbell84",
		RetryAfterMS:            &retry,
	}
}

func (t *Toolkit) timestamp(context.Context, *otc.Call) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"timestamp": t.now().UTC().Format(time.RFC3339)})
}

func getEmails(context.Context, *otc.Call) (json.RawMessage, error) {
	return json.RawMessage(`{"emails":[` +
		`{"id":"email_1","subject":"Welcome to Gmail","snippet":"Hello, welcome to your inbox!"},` +
		`{"id":"email_2","subject":"Your Receipt","snippet":"Thank you for your purchase..."}]}`), nil
}

func sendSMS(context.Context, *otc.Call) (json.RawMessage, error) {
	return json.RawMessage(`{"status":"queued"}`), nil
}

// authorized runs f when every authorization the tool requires is
// satisfied: by a token in context.authorization (any token, for the
// sample), or by a grant the user named in context.user_id completed
// through the sample's authorization URL. Otherwise it answers the 400 the
// otc handler answers for missing requirements, with a challenge per
// provider bound to that user.
func (t *Toolkit) authorized(f otc.ToolFunc) otc.ToolFunc {
	return func(ctx context.Context, call *otc.Call) (json.RawMessage, error) {
		req := call.Tool.Requirements
		if req == nil {
			return f(ctx, call)
		}
		cc := call.Request.Context
		var user string
		if cc != nil {
			user = cc.UserID
		}
		var named []string
		var missing otc.MissingRequirements
		for _, a := range req.Authorization {
			if cc.Token(a.ID) != "" || t.granted(user, a.ID) {
				continue
			}
			named = append(named, "authorization '"+a.ID+"'")
			missing.Authorization = append(missing.Authorization, *t.challenge(call.HTTP, user, a.ID))
		}
		if len(named) == 0 {
			return f(ctx, call)
		}
		return nil, &otc.ServerErrorResponse{
			Message:             "Authorization is required: open the authorization URL, then call the tool again",
			DeveloperMessage:    fmt.Sprintf("%s requires %s; context lacks it", call.Tool.ID, strings.Join(named, ", ")),
			MissingRequirements: &missing,
		}
	}
}

// granted reports whether user completed the authorization of provider.
// Without a user id there is nobody to hold a grant.
func (t *Toolkit) granted(user, provider string) bool {
	if user == "" {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.grants[grantKey{user, provider}]
}

// challenge opens a sample authorization challenge served by this toolkit
// for user (possibly "") and provider.
func (t *Toolkit) challenge(r *http.Request, user, provider string) *otc.ToolAuthorizationChallenge {
	// The challenge's id is the provider's, so that a client knows which
	// context.authorization entry to send; the URLs carry a fresh state.
	state := otc.NewCallID()
	t.mu.Lock()
	if len(t.order) >= maxChallenges {
		delete(t.challenges, t.order[0])
		t.order = t.order[1:]
	}
	t.challenges[state] = &challenge{user: user, provider: provider}
	t.order = append(t.order, state)
	t.mu.Unlock()
	base := baseURL(r)
	return &otc.ToolAuthorizationChallenge{
		ID:       provider,
		URL:      base + AuthorizePath + "?state=" + state,
		CheckURL: base + CheckPath + "?state=" + state,
	}
}

// grantLocked records user's grant of provider, dropping the oldest grant
// beyond maxGrants. t.mu must be held.
func (t *Toolkit) grantLocked(user, provider string) {
	k := grantKey{user, provider}
	if t.grants[k] {
		return
	}
	if len(t.grantOrder) >= maxGrants {
		delete(t.grants, t.grantOrder[0])
		t.grantOrder = t.grantOrder[1:]
	}
	t.grants[k] = true
	t.grantOrder = append(t.grantOrder, k)
}

// baseURL is the scheme and host the caller used to reach this server.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func (t *Toolkit) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("state")
	t.mu.Lock()
	ch, known := t.challenges[id]
	var user, provider string
	if known {
		ch.completed = true
		user, provider = ch.user, ch.provider
		if user != "" {
			t.grantLocked(user, provider)
		}
	}
	t.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	switch {
	case !known:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintln(w, "Unknown or expired sample authorization challenge.")
	case user != "":
		fmt.Fprintf(w, "Sample authorization completed. Nothing real was authorized: this is mcpotc's built-in sample. "+
			"Call the tool again with the same user_id: the sample now holds the grant for provider '%s'.\n", provider)
	default:
		fmt.Fprintf(w, "Sample authorization completed. Nothing real was authorized: this is mcpotc's built-in sample. "+
			"Call the tool again with any token for provider '%s'.\n", provider)
	}
}

func (t *Toolkit) serveCheck(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("state")
	t.mu.Lock()
	ch, known := t.challenges[id]
	done := known && ch.completed
	t.mu.Unlock()
	status := otc.ChallengePending
	code := http.StatusOK
	switch {
	case !known:
		status, code = otc.ChallengeFailed, http.StatusNotFound
	case done:
		status = otc.ChallengeCompleted
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(otc.AuthorizationCheckResponse{Status: status})
}
