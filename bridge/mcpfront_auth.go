package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/mapping"
	"github.com/mcpotc/mcpotc/mcp/front"
	"github.com/mcpotc/mcpotc/mcp/oauth"
	"github.com/mcpotc/mcpotc/otc"
)

// An OTC authorization challenge, asked of a 2026-07-28 MCP client (docs/mcp-front.md,
// What MCP hosts see)
//
// An OTC tool server answers a call whose user has not authorized a
// provider with 400 missing_requirements.authorization [{id, url,
// check_url}]. To a 2026-07-28 client that declared URL elicitation the
// call answers input_required, one URL request per challenge, with the
// challenges (their check_url included) as the handler's State, which the
// MCP front seals into the requestState (mcp/front, inputstate.go: bound
// to the caller, the tool and the arguments, expiring; nothing is kept
// here, so any replica continues the call). The sealing lives in the front
// because the front owns the wire fields, knows the caller and the
// arguments as the client sent them, and refuses a forged or replayed
// state before any handler runs; the bridge decides what an answer means:
//
//   - decline or cancel: an isError result naming the URL and what the
//     user did; the tool is not called again, nobody is asked again.
//   - accept: the user agreed to open the URL, and may or may not have
//     finished. Each challenge's check_url is asked (at most
//     DefaultAuthorizationWait, or MCPFrontOptions.AuthorizationWait, in
//     all; at most authWaitsPerCaller such waits at once per caller and
//     authWaitsMax in all, beyond which check_url is asked once): once it
//     says "completed" the OTC tool is called again — the OTC server holds
//     the user's grant now; "failed", or no check_url, or one that cannot
//     be asked: called again too (its answer says). Still "pending": the
//     same URL is asked once more, then (the user accepted twice without
//     finishing) an isError result saying the authorization is not
//     complete. A call again that is challenged again asks once more the
//     same way, with the new URL.
//
// So a user is asked once per action: at most twice per call, and never
// again after declining.
//
// A retry relayed by an OTC front (serve-otc: the call carries
// mapping.MetaOTCRequest) is its OTC client's retry, and that client has
// the challenge's own url and check_url (in the result's
// mapping.DataOTCResponse carrier): OTC's rule applies, as with the OTC
// server directly. The tool is called again at once, no check_url watched,
// and a challenge again goes back as a challenge again, each retry being
// its user's next action (the front bounds the rounds of one call). check_url is a URL the OTC server gave: it is
// fetched with mcp/oauth's hardened client (no credentials, bounded in
// time and size, a dial guard that admits public addresses and those of
// the configured OTC servers' own hosts).

// Bounds of the waits for a challenge's check_url.
const (
	// DefaultAuthorizationWait is MCPFrontOptions.AuthorizationWait when
	// zero: how long an accepted challenge's check_url is watched for the
	// user to finish, before asking again.
	DefaultAuthorizationWait = 10 * time.Second
	// authWaitsPerCaller and authWaitsMax bound the waits under way, per
	// caller and in all: beyond them check_url is asked once, no wait.
	authWaitsPerCaller = 2
	authWaitsMax       = 64
	// authPrompts is how often one call asks its user for the same
	// authorization: once, and once more when the user accepted without
	// finishing.
	authPrompts = 2
	// checkTimeout bounds one check_url request; checkBodyMax its answer.
	checkTimeout = 5 * time.Second
	checkBodyMax = 4 << 10
	// checkPollMin and checkPollMax are the pause between two asks of a
	// check_url: from the first, doubling up to the second.
	checkPollMin = 200 * time.Millisecond
	checkPollMax = time.Second
)

// authState is the handler's State of a challenged call's input_required.
type authState struct {
	Challenges []otc.ToolAuthorizationChallenge `json:"c"`
}

// authChecks watches the check_url of accepted challenges.
type authChecks struct {
	client *http.Client
	wait   time.Duration

	mu     sync.Mutex
	caller map[string]int // waits under way per caller
	all    int
}

func newAuthChecks(upstreams []OTCServer, wait time.Duration) *authChecks {
	hosts := make([]string, 0, len(upstreams))
	for _, u := range upstreams {
		if u.Client != nil {
			hosts = append(hosts, u.Client.BaseURL())
		}
	}
	switch {
	case wait == 0:
		wait = DefaultAuthorizationWait
	case wait < 0:
		wait = 0
	}
	return &authChecks{client: oauth.NewHTTPClient(&oauth.FetchOptions{Hosts: hosts, Timeout: checkTimeout}), wait: wait, caller: map[string]int{}}
}

// Results of watching check_urls.
const (
	watchCompleted = "completed" // every challenge with a check_url says so
	watchPending   = "pending"   // one still waits for its user
	watchUnknown   = "unknown"   // none to ask, one failed, or one could not be asked
)

// status watches the check_url of chs for caller: until every one says
// completed, one says failed, or the wait ends (ctx, the configured wait,
// the bound of waits under way).
func (c *authChecks) status(ctx context.Context, caller string, chs []otc.ToolAuthorizationChallenge) string {
	wait := c.wait
	c.mu.Lock()
	if c.caller[caller] >= authWaitsPerCaller || c.all >= authWaitsMax {
		wait = 0
	} else {
		c.caller[caller]++
		c.all++
		defer func() {
			c.mu.Lock()
			if c.caller[caller]--; c.caller[caller] <= 0 {
				delete(c.caller, caller)
			}
			c.all--
			c.mu.Unlock()
		}()
	}
	c.mu.Unlock()
	deadline := time.Now().Add(wait)
	pause := checkPollMin
	for {
		result := watchCompleted
		for _, ch := range chs {
			if ch.CheckURL == "" {
				return watchUnknown
			}
			switch c.ask(ctx, ch.CheckURL) {
			case otc.ChallengeCompleted:
			case otc.ChallengePending:
				result = watchPending
			default:
				return watchUnknown
			}
		}
		if result == watchCompleted || time.Now().Add(pause).After(deadline) {
			return result
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return result
		case <-t.C:
		}
		pause = min(2*pause, checkPollMax)
	}
}

// ask is what checkURL says: pending, completed or failed ("" when it
// cannot be asked or answers something else). A 404 is failed: the OTC
// server no longer knows the challenge.
func (c *authChecks) ask(ctx context.Context, checkURL string) string {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, checkURL, nil)
	if err != nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") {
		return ""
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return otc.ChallengeFailed
	}
	var body otc.AuthorizationCheckResponse
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, checkBodyMax)).Decode(&body) != nil {
		return ""
	}
	switch body.Status {
	case otc.ChallengePending, otc.ChallengeCompleted, otc.ChallengeFailed:
		return body.Status
	}
	return ""
}

// authOutcome ends a call without calling the OTC tool: an isError result,
// or a request for input.
type authOutcome struct {
	res     *mcpgo.CallToolResult
	err     error
	outcome string // for the log line
}

// resumeAuthorization reads the user's answer to the challenges of a
// call's input_required (r): an outcome that ends the call here, or nil
// to call the OTC tool again. See the comment at the top of this file.
func (f *MCPFront) resumeAuthorization(ctx context.Context, t *frontTool, r *front.Resumption, relayed bool) *authOutcome {
	var st authState
	if json.Unmarshal(r.State, &st) != nil || len(st.Challenges) == 0 {
		return nil // not a challenge of this bridge: a call like any
	}
	var declined, cancelled []otc.ToolAuthorizationChallenge
	for i, ch := range st.Challenges {
		switch r.Responses[challengeKey(i, ch)].Action {
		case mcpgo.ElicitationResponseActionDecline:
			declined = append(declined, ch)
		case mcpgo.ElicitationResponseActionCancel:
			cancelled = append(cancelled, ch)
		}
	}
	if len(declined)+len(cancelled) > 0 {
		var parts []string
		if len(declined) > 0 {
			parts = append(parts, "The user declined to authorize "+challengeList(declined)+".")
		}
		if len(cancelled) > 0 {
			parts = append(parts, "The user dismissed (cancelled) the authorization of "+challengeList(cancelled)+".")
		}
		parts = append(parts, fmt.Sprintf("The tool %s did not run; call it again to be asked again.", t.Tool.Name))
		return &authOutcome{res: mcpgo.NewToolResultError(strings.Join(parts, " ")), outcome: "authorization declined"}
	}
	if relayed {
		return nil // an OTC client's retry: the OTC server's answer says
	}
	switch f.checks.status(ctx, idemPrincipal(ctx), st.Challenges) {
	case watchPending:
		if r.Round >= authPrompts {
			return &authOutcome{res: notComplete(t, st.Challenges, false), outcome: "authorization not complete"}
		}
		return &authOutcome{err: askAuthorization(t, st.Challenges, nil, true), outcome: "authorization pending: asked again"}
	}
	return nil // completed, failed, or cannot tell: the OTC server's answer says
}

// challenged turns the error MCPError made of a challenge (err: the URL
// elicitations of se's challenges) into the request the front sends: with
// the challenges as State (2026-07-28 clients, for resumeAuthorization)
// and a text content. A call that was asked authPrompts times already ends
// with an isError result instead, unless an OTC front relays it. Anything
// else is returned as it is.
func challenged(ctx context.Context, t *frontTool, callErr error, res *mcpgo.CallToolResult, err error, relayed bool) (*mcpgo.CallToolResult, error) {
	var elicit mcpgo.URLElicitationRequiredError
	var se *otc.StatusError
	if !errors.As(err, &elicit) || !errors.As(callErr, &se) || se.MissingRequirements == nil || len(se.MissingRequirements.Authorization) == 0 {
		return res, err
	}
	if !front.Modern(ctx) {
		return res, err // -32042: the client calls again, a new call
	}
	chs := se.MissingRequirements.Authorization
	if r, ok := front.Resumed(ctx); ok && r.Round >= authPrompts && !relayed {
		return notComplete(t, chs, true), nil
	}
	var meta *mcpgo.Meta
	if len(elicit.Elicitations) > 0 {
		meta = elicit.Elicitations[0].Meta // the OTC answer (mapping.DataOTCResponse), for an OTC front further on
	}
	return nil, askAuthorization(t, chs, meta, false)
}

// askAuthorization asks the user to open the URL of each challenge
// (again: the user accepted without finishing).
func askAuthorization(t *frontTool, chs []otc.ToolAuthorizationChallenge, meta *mcpgo.Meta, again bool) *front.InputRequired {
	state, _ := json.Marshal(authState{Challenges: chs})
	ask := &front.InputRequired{State: state}
	var text strings.Builder
	if again {
		fmt.Fprintf(&text, "The authorization is not complete yet: finish it in the browser, then continue. The tool %s runs once it is complete.", t.Tool.Name)
	} else {
		fmt.Fprintf(&text, "Authorization is required before the tool %s can run: open the URL, finish there, then continue (declining ends the call).", t.Tool.Name)
	}
	for i, ch := range chs {
		msg := fmt.Sprintf("Open this URL to authorize %s for the tool %s, and finish there before you continue.", ch.ID, t.Tool.Name)
		if again {
			msg = fmt.Sprintf("Finish authorizing %s for the tool %s at this URL, then continue.", ch.ID, t.Tool.Name)
		}
		e := mcpgo.ElicitationParams{Mode: mcpgo.ElicitationModeURL, ElicitationID: challengeKey(i, ch), URL: ch.URL, Message: msg}
		if i == 0 {
			e.Meta = meta
		}
		ask.Elicitations = append(ask.Elicitations, e)
		fmt.Fprintf(&text, "\n%s: %s", ch.ID, ch.URL)
	}
	ask.Text = text.String()
	return ask
}

// notComplete is the isError result of a call whose user was asked
// authPrompts times: accepted without finishing (check_url still pending),
// or the OTC server still asks (rechallenged: chs are its new challenges).
func notComplete(t *frontTool, chs []otc.ToolAuthorizationChallenge, rechallenged bool) *mcpgo.CallToolResult {
	why := fmt.Sprintf("the user was asked %d times and accepted without finishing it", authPrompts)
	if rechallenged {
		why = fmt.Sprintf("the user was asked %d times, and the tool server still asks for it", authPrompts)
	}
	return mcpgo.NewToolResultError(fmt.Sprintf("The authorization of %s is not complete: %s. "+
		"The tool %s did not run; finish the authorization in the browser, then call the tool again.", challengeList(chs), why, t.Tool.Name))
}

// challengeKey is the key of a challenge's URL request: its id, as
// mapping makes the elicitation of it (the front's key when it has none).
func challengeKey(i int, ch otc.ToolAuthorizationChallenge) string {
	if ch.ID == "" {
		return fmt.Sprintf("elicitation-%d", i)
	}
	return ch.ID
}

// challengeList names challenges: "google (URL)", joined.
func challengeList(chs []otc.ToolAuthorizationChallenge) string {
	parts := make([]string, len(chs))
	for i, ch := range chs {
		parts[i] = fmt.Sprintf("%s at %s", ch.ID, ch.URL)
	}
	return strings.Join(parts, " and ")
}

// authError is the mapping of a failed OTC call, a challenge asked as the
// front must (challenged); relayed: an OTC front relays the call.
func (f *MCPFront) authError(ctx context.Context, t *frontTool, callErr error, relayed bool) (*mcpgo.CallToolResult, error) {
	res, err := mapping.MCPError(callErr, t.Tool.Name, mapping.MCPOptions{
		InputErrorsAsResult: f.opts.InputErrorsAsResult,
		URLElicitation:      front.ClientSupportsURLElicitation(ctx),
	})
	return challenged(ctx, t, callErr, res, err, relayed)
}
