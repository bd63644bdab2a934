package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpotc/mcpotc/mapping"
	"github.com/mcpotc/mcpotc/mcp/upstream"
	"github.com/mcpotc/mcpotc/otc"
)

// The OTC front's side of calls that wait for a user (resume.go says what
// is kept and why): the upstream call runs on a goroutine of its own so
// that an elicitation/create during it can end the OTC request with a
// challenge while the call stays open for the retry.

// liveCall is one upstream call, watched for the elicitations it asks.
type liveCall struct {
	cancel  context.CancelFunc
	done    chan struct{}
	raw     json.RawMessage
	err     error
	asks    chan *ask // elicitation/create during the call; unbuffered
	started time.Time
	timeout time.Duration // the upstream's call timeout (<= 0: none)

	mu    sync.Mutex
	bound func() bool // ends the call with the request it answers
}

// ask is one elicitation/create of a live call, waiting for its answer.
type ask struct {
	e      upstream.Elicitation
	until  time.Time   // the upstream waits for the answer until then
	answer chan string // one answer, buffered
}

// startLive starts an upstream call that ends with ctx (until it is held
// for a retry) and reports its elicitations.
func startLive(ctx context.Context, u *mcpServerEntry, name string, input json.RawMessage, meta map[string]any, header map[string][]string, r *upstream.Resume) *liveCall {
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	timeout := u.Config.CallTimeout
	if timeout == 0 {
		timeout = upstream.DefaultCallTimeout
	}
	lc := &liveCall{cancel: cancel, done: make(chan struct{}), asks: make(chan *ask), started: time.Now(), timeout: timeout}
	lc.bind(ctx)
	cctx = upstream.WithElicitation(cctx, lc.elicit)
	go func() {
		defer close(lc.done)
		defer cancel()
		lc.raw, lc.err = u.up.CallToolResume(cctx, name, input, meta, header, r)
	}()
	return lc
}

// bind makes ctx's end cancel the call (the request waiting for it).
func (lc *liveCall) bind(ctx context.Context) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.bound != nil {
		lc.bound()
	}
	lc.bound = context.AfterFunc(ctx, lc.cancel)
}

// unbind lets the call outlive the request it was bound to.
func (lc *liveCall) unbind() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.bound != nil {
		lc.bound()
		lc.bound = nil
	}
}

// elicit is the call's upstream.ElicitationFunc: it hands the request to
// whoever waits for the call and blocks for their answer, within ctx.
func (lc *liveCall) elicit(ctx context.Context, e upstream.Elicitation) string {
	a := &ask{e: e, answer: make(chan string, 1), until: time.Now().Add(DefaultResumeTTL)}
	if dl, ok := ctx.Deadline(); ok {
		a.until = dl.Add(-parkMargin)
	}
	if lc.timeout > 0 {
		if end := lc.started.Add(lc.timeout - parkMargin); end.Before(a.until) {
			a.until = end
		}
	}
	select {
	case lc.asks <- a:
	case <-ctx.Done():
		return ""
	}
	select {
	case action := <-a.answer:
		return action
	case <-ctx.Done():
		return ""
	}
}

// next waits for the call's end (ask nil) or its next elicitation.
func (lc *liveCall) next() *ask {
	select {
	case <-lc.done:
		return nil
	case a := <-lc.asks:
		return a
	}
}

// parked is a call held open for its retry, its URL elicitation
// unanswered.
type parked struct {
	key, owner string
	lc         *liveCall
	a          *ask
	check      string
	taken      chan struct{} // closed when a retry took it
}

// park holds p for its retry, within the bounds: the oldest held call of
// its owner, or of all, is answered "cancel" and let go.
func (rs *resumes) park(p *parked) {
	rs.parksMu.Lock()
	var evicted []*parked
	if old := rs.parks[p.key]; old != nil {
		rs.unparkLocked(old)
		evicted = append(evicted, old)
	}
	for len(rs.byOwner[p.owner]) >= parksPerCaller {
		old := rs.byOwner[p.owner][0]
		rs.unparkLocked(old)
		evicted = append(evicted, old)
	}
	for len(rs.parks) >= parksMax {
		var oldest *parked
		for _, list := range rs.byOwner {
			if len(list) > 0 && (oldest == nil || list[0].a.until.Before(oldest.a.until)) {
				oldest = list[0]
			}
		}
		rs.unparkLocked(oldest)
		evicted = append(evicted, oldest)
	}
	rs.parks[p.key] = p
	rs.byOwner[p.owner] = append(rs.byOwner[p.owner], p)
	rs.parksMu.Unlock()
	for _, old := range evicted {
		old.a.answer <- string(mcpgo.ElicitationResponseActionCancel)
		_ = rs.setStatus(context.Background(), old.check, checkFailed, "the bridge held too many calls waiting for a user; call the tool again")
	}
}

// unparkLocked forgets p; false when it was not held. rs.parksMu must be
// held.
func (rs *resumes) unparkLocked(p *parked) bool {
	if rs.parks[p.key] != p {
		return false
	}
	delete(rs.parks, p.key)
	list := rs.byOwner[p.owner]
	for i, x := range list {
		if x == p {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(rs.byOwner, p.owner)
	} else {
		rs.byOwner[p.owner] = list
	}
	return true
}

// unpark forgets p; false when it was not held (a retry or the bounds
// took it first).
func (rs *resumes) unpark(p *parked) bool {
	rs.parksMu.Lock()
	defer rs.parksMu.Unlock()
	return rs.unparkLocked(p)
}

// takeParked returns the call held for key and owner, no longer held;
// nil when there is none.
func (rs *resumes) takeParked(key, owner string) *parked {
	rs.parksMu.Lock()
	defer rs.parksMu.Unlock()
	p := rs.parks[key]
	if p == nil || p.owner != owner {
		return nil
	}
	rs.unparkLocked(p)
	close(p.taken)
	return p
}

// releaseAll lets every held call go, answered "cancel" (the front is
// closing).
func (rs *resumes) releaseAll() {
	rs.parksMu.Lock()
	var all []*parked
	for _, p := range rs.parks {
		all = append(all, p)
	}
	for _, p := range all {
		rs.unparkLocked(p)
	}
	rs.parksMu.Unlock()
	for _, p := range all {
		p.a.answer <- string(mcpgo.ElicitationResponseActionCancel)
		_ = rs.setStatus(context.Background(), p.check, checkFailed, "the bridge is shutting down; call the tool again")
	}
}

// held is the number of calls held open for a retry.
func (rs *resumes) held() int {
	rs.parksMu.Lock()
	defer rs.parksMu.Unlock()
	return len(rs.parks)
}

// watchParked lets p go when its upstream can wait no longer (answering
// "cancel") or its call ended on its own, unless a retry takes it first.
func (rs *resumes) watchParked(p *parked) {
	t := time.NewTimer(time.Until(p.a.until))
	defer t.Stop()
	select {
	case <-p.taken:
	case <-t.C:
		if rs.unpark(p) {
			p.a.answer <- string(mcpgo.ElicitationResponseActionCancel)
			_ = rs.setStatus(context.Background(), p.check, checkFailed, "no retry came while the MCP server waited; call the tool again")
		}
	case <-p.lc.done:
		if rs.unpark(p) {
			_ = rs.setStatus(context.Background(), p.check, checkFailed, "the MCP server ended the call; call the tool again")
		}
	}
}

// callSite is one OTC call of one MCP tool, as the front's tool function
// sees it.
type callSite struct {
	f         *OTCFront
	u         *mcpServerEntry
	c         *otc.Call
	mcpName   string
	principal string
	key       string // callKey
	meta      map[string]any
	header    map[string][]string
}

// run makes the call: a retry takes what its first call kept (a held call,
// or a 2026-07-28 state); then the call's outcome, its elicitations and
// challenges are handled as resume.go says. It returns the raw result or
// the error for mapping.OTCError, or a mapped OTC error.
func (s *callSite) run(ctx context.Context) (json.RawMessage, error) {
	rs, log := s.f.resumes, s.f.log
	if p := rs.takeParked(s.key, ownerOf(s.principal)); p != nil && !ended(p.lc) {
		// The retry: the user has seen the URL. In URL mode "accept" says
		// the user agreed to open it (MCP 2025-11-25, elicitation).
		log.Debug().Str("upstream", s.u.name()).Str("tool", s.mcpName).Msg("retry: answering the held elicitation accept")
		p.lc.bind(ctx)
		p.a.answer <- string(mcpgo.ElicitationResponseActionAccept)
		return s.follow(ctx, p.lc, p.check)
	}
	var resume *upstream.Resume
	var prev string
	rec, err := rs.take(ctx, s.principal, s.key, s.u.name(), s.mcpName)
	if err != nil {
		log.Warn().Err(err).Str("upstream", s.u.name()).Msg("the kept states of challenged calls cannot be read; calling afresh")
	}
	if rec != nil {
		resume = &upstream.Resume{InputResponses: map[string]json.RawMessage{}, RequestState: rec.RequestState}
		for _, k := range rec.Keys {
			resume.InputResponses[k] = json.RawMessage(`{"action":"accept"}`)
		}
		prev = rec.Check
		log.Debug().Str("upstream", s.u.name()).Str("tool", s.mcpName).Int("answers", len(rec.Keys)).Msg("retry: resuming with the kept requestState")
	}
	lc := startLive(ctx, s.u, s.mcpName, s.c.Request.Input, s.meta, s.header, resume)
	raw, err := s.follow(ctx, lc, prev)
	var ue *upstream.Error
	if resume != nil && errors.As(err, &ue) && invalidRequestState(ue) {
		// The server no longer knows the state (restarted, new key): the
		// call again, afresh, once.
		log.Info().Str("upstream", s.u.name()).Str("tool", s.mcpName).Msg("the MCP server refused the kept requestState; calling afresh")
		return s.follow(ctx, startLive(ctx, s.u, s.mcpName, s.c.Request.Input, s.meta, s.header, nil), "")
	}
	return raw, err
}

// ended reports whether lc's call is over (a held call whose server gave
// up as its retry came: the retry calls afresh).
func ended(lc *liveCall) bool {
	select {
	case <-lc.done:
		return true
	default:
		return false
	}
}

// invalidRequestState: the TypeScript SDK's answer to a requestState it
// does not accept (-32602 with data.reason "invalid_request_state").
func invalidRequestState(ue *upstream.Error) bool {
	var d struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(ue.Data, &d)
	return ue.Code == mcpgo.INVALID_PARAMS && d.Reason == "invalid_request_state"
}

// follow waits for lc: its end, or an elicitation. A form is declined
// (OTC carries none; the server decides what a decline means, and its
// outcome is the call's); a URL holds the call for the retry and answers
// the challenge. prev is the check of the challenge this call resumes (""
// for a first call): completed once the call ended, failed when it asks
// again.
func (s *callSite) follow(ctx context.Context, lc *liveCall, prev string) (json.RawMessage, error) {
	rs := s.f.resumes
	for {
		a := lc.next()
		if a == nil {
			break
		}
		if a.e.Mode != mcpgo.ElicitationModeURL || a.e.URL == "" {
			a.answer <- string(mcpgo.ElicitationResponseActionDecline)
			continue
		}
		_ = rs.setStatus(ctx, prev, checkFailed, "the MCP server asked again: the retry's answer holds the new challenge")
		return nil, s.hold(ctx, lc, a)
	}
	var ir *upstream.InputRequiredError
	var ue *upstream.Error
	switch {
	case errors.As(lc.err, &ir) && len(ir.URLs) > 0:
		_ = rs.setStatus(ctx, prev, checkFailed, "the MCP server asked again: the retry's answer holds the new challenge")
		return nil, s.keepModern(ctx, ir)
	case errors.As(lc.err, &ue) && ue.Code == mcpgo.URL_ELICITATION_REQUIRED:
		_ = rs.setStatus(ctx, prev, checkFailed, "the MCP server asked again: the retry's answer holds the new challenge")
		return nil, s.challenge(ctx, lc.err, "")
	}
	_ = rs.setStatus(ctx, prev, checkCompleted, "")
	return lc.raw, lc.err
}

// hold keeps lc open for the retry, its URL elicitation a unanswered, and
// answers the challenge.
func (s *callSite) hold(ctx context.Context, lc *liveCall, a *ask) error {
	rs := s.f.resumes
	check, err := rs.newStatus(ctx, s.principal)
	if err != nil {
		s.f.log.Warn().Err(err).Msg("a challenge's status cannot be kept: its check_url is left out")
	}
	rs.indexElicitation(s.u.name(), a.e.ElicitationID, check)
	lc.unbind()
	p := &parked{key: s.key, owner: ownerOf(s.principal), lc: lc, a: a, check: check, taken: make(chan struct{})}
	rs.park(p)
	go rs.watchParked(p)
	s.f.log.Info().Str("upstream", s.u.name()).Str("tool", s.mcpName).Time("until", a.until).
		Msg("the MCP server asked the user to open a URL during a call: challenge answered, the call held for the retry")
	id := a.e.ElicitationID
	if id == "" {
		id = "elicitation"
	}
	return s.withCheck(&otc.ServerErrorResponse{
		Message:          "Authorization is required: open the authorization URL, then call the tool again",
		DeveloperMessage: fmt.Sprintf("MCP server %s asked the user to open a URL (elicitation/create, URL mode) during %s: %s", s.u.name(), s.mcpName, a.e.Message),
		MissingRequirements: &otc.MissingRequirements{Authorization: []otc.ToolAuthorizationChallenge{
			{ID: id, URL: a.e.URL},
		}},
	}, check)
}

// keepModern keeps a 2026-07-28 input_required's state for the retry and
// answers the challenge.
func (s *callSite) keepModern(ctx context.Context, ir *upstream.InputRequiredError) error {
	rs := s.f.resumes
	keys := make([]string, len(ir.URLs))
	for i, r := range ir.URLs {
		keys[i] = r.Key
	}
	check, err := rs.newStatus(ctx, s.principal)
	if err == nil {
		err = rs.keep(ctx, s.principal, s.key, resumeRecord{Upstream: s.u.name(), Tool: s.mcpName, Keys: keys, RequestState: ir.RequestState, Check: check})
	}
	if err != nil {
		// The retry calls afresh: a server that keeps the authorization on
		// its side still goes on; one that needs its requestState asks again.
		s.f.log.Error().Err(err).Str("upstream", s.u.name()).Msg("a challenged call's state cannot be kept: its retry will call afresh")
		check = ""
	}
	return s.challenge(ctx, ir, check)
}

// challenge maps a URL challenge (-32042, or input_required with URLs)
// and adds check_url; legacy elicitation ids are indexed for their
// completion notice.
func (s *callSite) challenge(ctx context.Context, err error, check string) error {
	rs := s.f.resumes
	mapped := mapping.OTCError(err)
	var se *otc.ServerErrorResponse
	if !errors.As(mapped, &se) || se.MissingRequirements == nil {
		return mapped
	}
	var ue *upstream.Error
	if check == "" && errors.As(err, &ue) {
		// -32042 (2025-11-25): nothing to resume, but the server tells
		// when the user is done (notifications/elicitation/complete).
		var nerr error
		if check, nerr = rs.newStatus(ctx, s.principal); nerr != nil {
			s.f.log.Warn().Err(nerr).Msg("a challenge's status cannot be kept: its check_url is left out")
		}
		for _, ch := range se.MissingRequirements.Authorization {
			rs.indexElicitation(s.u.name(), ch.ID, check)
		}
	}
	return s.withCheck(se, check)
}

// withCheck gives each challenge of se check's check_url, unless it has
// one (an OTC server's own, restored through an MCP front).
func (s *callSite) withCheck(se *otc.ServerErrorResponse, check string) error {
	if check == "" || se.MissingRequirements == nil {
		return se
	}
	url := s.f.resumes.checkURL(s.c.HTTP, check)
	for i := range se.MissingRequirements.Authorization {
		if se.MissingRequirements.Authorization[i].CheckURL == "" {
			se.MissingRequirements.Authorization[i].CheckURL = url
		}
	}
	return se
}
