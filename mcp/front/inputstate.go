package front

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Asking the user, and the retry that answers (multi round-trip requests)
//
// A tool handler that needs its user first — to open an authorization
// page — returns an *InputRequired (or mcp-go's
// URLElicitationRequiredError, which is one without State). A client
// before 2026-07-28 gets -32042 with data {"elicitations": […]} and calls
// again once its user is done. A 2026-07-28 client gets an input_required
// result (MCP 2026-07-28, multi round-trip requests): one inputRequests
// entry per URL, keyed by its ElicitationID, with params {mode, message,
// url} only (that revision dropped elicitationId; _meta, MCP's extension
// point, is kept when the handler gave one), a text content for clients
// that show one, and a requestState the front seals. The client retries
// the call with inputResponses (each key's {"action": "accept" |
// "decline" | "cancel"}) and that requestState; the front opens the
// state, checks it, and gives the handler what it carries (Resumed).
// What a round needs travels in the state, so any replica holding the
// same keys (Options.StateKeys) continues a call another one began; what
// is kept is only that a state was used (each answers its result once:
// usedstates.go, Options.UsedStates, which replicas must share).
//
// The requestState is "mrs1." and the base64url (no padding) of a 12-byte
// random nonce and the AES-256-GCM sealing of a JSON envelope:
//
//   - p: SHA-256 of the caller's principal (issuer and subject with OAuth,
//     the bearer token's holder, stdio's parent, else the client address:
//     caller.go),
//   - t: the tool's name,
//   - a: SHA-256 of the call's arguments in canonical form (object keys
//     sorted, no insignificant white space, strings escaped one way,
//     numbers as written),
//   - e: its expiry (Options.InputStateTTL after sealing), unix ms,
//   - r: the round (input_required results this call has had, this one
//     included),
//   - k: the keys of the inputRequests asked,
//   - s: the handler's State, opaque to the front.
//
// The AES key is HMAC-SHA256 of a fixed label under each of
// Options.StateKeys (the first seals; every one opens, for rotation), so
// a key shared with another use (signed session ids) is never used as it
// is. The client cannot read the state, and cannot change it without the
// open failing.
//
// A retry is refused, -32602 with a message that says why and what to do,
// before any handler runs, when its requestState: was not sealed under
// one of the keys (forged, altered, another deployment's, or sealed by a
// process whose random key is gone); was sealed for another caller, tool
// or arguments (a replay by another user, or with swapped arguments); has
// expired; was used already (a replay by its own caller: usedstates.go);
// or comes with inputResponses that do not answer every key asked with
// accept, decline or cancel. Arguments with a key given twice in one
// object are refused before (callRequest): the digest would read one
// value and a tool perhaps another. So is a requestState without
// inputResponses, and inputResponses without a requestState: the front
// sends neither alone. A request of an earlier protocol version that
// carries them gets them ignored (that era has no multi round-trip).
// A handler that asks again on a retry seals the next round; past
// maxInputRounds the call ends with an isError result instead.

// Bounds of the multi round-trip state.
const (
	// DefaultInputStateTTL is Options.InputStateTTL when zero: how long a
	// user has to answer.
	DefaultInputStateTTL = 10 * time.Minute
	// MaxInputState bounds an InputRequired's State, in bytes.
	MaxInputState = 8 << 10
	// maxRequestState bounds a requestState looked at: longer ones are
	// refused unread.
	maxRequestState = 16 << 10
	// maxInputRounds bounds the input_required results of one call: a
	// handler that asks more often gets an isError result instead (the
	// official SDKs' drivers give up after 10 rounds too).
	maxInputRounds = 10
	// maxInputKeys bounds the inputRequests of one result, and the
	// inputResponses of a retry.
	maxInputKeys = 32
	// requestStatePrefix starts a sealed requestState (version 1).
	requestStatePrefix = "mrs1."
)

// requestStateLabel is what the AES key is derived from, under each
// configured key (and the additional data of every sealing).
const requestStateLabel = "mcpotc mcp/front requestState v1"

// InputRequired is a tool handler's error asking the user to open URLs
// (URL-mode elicitations, such as an authorization page) before the call
// can go on; return it as a pointer, possibly wrapped. To a client before
// 2026-07-28 it is -32042 with data {"elicitations": Elicitations} (State
// and Text unused); to a 2026-07-28 client, an input_required result
// whose sealed requestState brings State back to the handler on the
// client's retry (Resumed). See the comment at the top of this file.
type InputRequired struct {
	// Elicitations are the URLs to open, in URL mode: each with its URL,
	// its Message and its ElicitationID, the key of its inputRequests
	// entry and of the user's answer ("elicitation-N" when empty).
	Elicitations []mcpgo.ElicitationParams
	// State comes back to the handler in Resumption.State on the retry,
	// at most MaxInputState bytes. Nil: none.
	State []byte
	// Text is the result's text content, for 2026-07-28 clients that show
	// a result's content. Empty: each elicitation's message and URL.
	Text string
}

func (e *InputRequired) Error() string {
	urls := make([]string, len(e.Elicitations))
	for i, el := range e.Elicitations {
		urls[i] = el.URL
	}
	return "the user must open " + strings.Join(urls, " and ") + " first"
}

// Resumption is what a 2026-07-28 client's retry of a call brings, once
// the front has checked its requestState: the user's answers and the
// handler's State of the input_required result they answer.
type Resumption struct {
	// Round counts the input_required results of this call so far: 1 on
	// the retry that answers the first.
	Round int
	// State is the InputRequired.State of the result answered.
	State []byte
	// Responses holds the user's answer to each elicitation asked, by its
	// key (ElicitationID): Action is accept, decline or cancel. Every key
	// asked has one.
	Responses map[string]mcpgo.ElicitationResponse
}

type resumedKey struct{}

// Resumed returns the retry the current tools/call is (2026-07-28: it
// answered an input_required result of this call with inputResponses and
// a valid requestState); false for a first call.
func Resumed(ctx context.Context) (*Resumption, bool) {
	r, ok := ctx.Value(resumedKey{}).(*Resumption)
	return r, ok && r != nil
}

// Modern reports whether the request being handled is of protocol
// version 2026-07-28 or later (stateless: its _meta names its version).
func Modern(ctx context.Context) bool {
	r := requestFrom(ctx)
	return r != nil && r.x.modern != nil
}

// inputEnvelope is what a requestState seals.
type inputEnvelope struct {
	Principal []byte   `json:"p"`
	Tool      string   `json:"t"`
	Args      []byte   `json:"a"`
	Expires   int64    `json:"e"`
	Round     int      `json:"r"`
	Keys      []string `json:"k"`
	State     []byte   `json:"s,omitempty"`
}

// inputSealer seals and opens requestStates.
type inputSealer struct {
	aeads []cipher.AEAD // aeads[0] seals
	ttl   time.Duration
	now   func() time.Time
}

// newInputSealer derives an AES-256-GCM key from each of keys; none: one
// random key, this process's own.
func newInputSealer(keys [][]byte, ttl time.Duration) *inputSealer {
	if len(keys) == 0 {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		keys = [][]byte{k}
	}
	if ttl <= 0 {
		ttl = DefaultInputStateTTL
	}
	s := &inputSealer{ttl: ttl, now: time.Now}
	for _, k := range keys {
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte(requestStateLabel))
		block, err := aes.NewCipher(mac.Sum(nil))
		if err != nil {
			panic(err) // a 32-byte key is always an AES key
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			panic(err)
		}
		s.aeads = append(s.aeads, aead)
	}
	return s
}

func (s *inputSealer) seal(env *inputEnvelope) (string, error) {
	env.Expires = s.now().Add(s.ttl).UnixMilli()
	plain, err := json.Marshal(env)
	if err != nil {
		return "", err
	}
	aead := s.aeads[0]
	out := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := io.ReadFull(rand.Reader, out); err != nil {
		return "", err
	}
	out = aead.Seal(out, out, plain, []byte(requestStateLabel))
	return requestStatePrefix + base64.RawURLEncoding.EncodeToString(out), nil
}

// errStateNotOurs is a requestState that no key opens.
var errStateNotOurs = errors.New("it was not issued by this server, or was altered")

func (s *inputSealer) open(state string) (*inputEnvelope, error) {
	rest, ok := strings.CutPrefix(state, requestStatePrefix)
	if !ok || len(state) > maxRequestState {
		return nil, errStateNotOurs
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return nil, errStateNotOurs
	}
	for _, aead := range s.aeads {
		n := aead.NonceSize()
		if len(raw) < n+aead.Overhead() {
			return nil, errStateNotOurs
		}
		plain, err := aead.Open(nil, raw[:n], raw[n:], []byte(requestStateLabel))
		if err != nil {
			continue
		}
		var env inputEnvelope
		if json.Unmarshal(plain, &env) != nil {
			return nil, errStateNotOurs
		}
		return &env, nil
	}
	return nil, errStateNotOurs
}

// principalOf is the caller of the current request as a requestState
// binds it: SHA-256 of its principal ("none" outside a transport).
func principalOf(ctx context.Context) []byte {
	p := "none"
	if c := callerFrom(ctx); c != nil {
		p = c.principal
	}
	sum := sha256.Sum256([]byte(p))
	return sum[:]
}

// argsDigest is SHA-256 of the canonical form of the arguments args.
func argsDigest(args json.RawMessage) []byte {
	canon, err := canonicalJSON(args)
	if err != nil {
		canon = args // not JSON: as it is (the call would fail anyway)
	}
	sum := sha256.Sum256(canon)
	return sum[:]
}

// canonicalJSON is the JSON text v with object keys sorted, without
// insignificant white space, its strings escaped one way (as encoding/json
// writes them, without HTML escapes) and its numbers as written.
func canonicalJSON(v []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	return encode(x) // maps encode with their keys sorted
}

// resume checks a 2026-07-28 tools/call's requestState and inputResponses
// (req's, as callRequest read them) and returns ctx carrying the
// Resumption; ctx itself when the call is a first one.
func (f *Server) resume(ctx context.Context, req *mcpgo.CallToolRequest) (context.Context, *RPCError) {
	state, responses := req.Params.RequestState, req.Params.InputResponses
	req.Params.RequestState, req.Params.InputResponses = "", nil // a handler reads Resumed, never these
	switch {
	case state == "" && responses == nil:
		return ctx, nil
	case state == "":
		return ctx, invalidRetry("inputResponses came without a requestState: answer an input_required result of this server with its requestState, or call the tool without inputResponses")
	case responses == nil:
		return ctx, invalidRetry("a requestState came without inputResponses: answer each of the result's inputRequests, or call the tool without a requestState")
	}
	env, err := f.sealer.open(state)
	switch {
	case err != nil:
		return ctx, invalidRetry("requestState refused: " + err.Error() + "; call the tool again without inputResponses and requestState")
	case subtle.ConstantTimeCompare(env.Principal, principalOf(ctx)) != 1:
		return ctx, invalidRetry("requestState refused: it was issued to another caller")
	case env.Tool != req.Params.Name:
		return ctx, invalidRetry("requestState refused: it was issued for another tool than " + strconv.Quote(req.Params.Name))
	case !bytes.Equal(env.Args, argsDigest(req.Params.RawArguments)):
		return ctx, invalidRetry("requestState refused: it was issued for other arguments; retry with the arguments of the call that received it")
	case f.sealer.now().UnixMilli() > env.Expires:
		return ctx, invalidRetry(fmt.Sprintf("requestState refused: it expired (an answer is awaited at most %s); call the tool again without inputResponses and requestState", f.sealer.ttl))
	}
	if len(responses) > maxInputKeys {
		return ctx, invalidRetry(fmt.Sprintf("inputResponses has %d entries; at most %d are read", len(responses), maxInputKeys))
	}
	r := &Resumption{Round: env.Round, State: env.State, Responses: make(map[string]mcpgo.ElicitationResponse, len(env.Keys))}
	for _, k := range env.Keys {
		resp, ok := responses[k]
		if !ok {
			return ctx, invalidRetry("inputResponses has no answer for " + strconv.Quote(k) + ": answer every key of the result's inputRequests")
		}
		if err := resp.DecodeFor(mcpgo.MethodElicitationCreate); err != nil || resp.Elicitation == nil {
			return ctx, invalidRetry("inputResponses[" + strconv.Quote(k) + "] must be an elicitation result: {\"action\": \"accept\" | \"decline\" | \"cancel\"}")
		}
		switch a := resp.Elicitation.Action; a {
		case mcpgo.ElicitationResponseActionAccept, mcpgo.ElicitationResponseActionDecline, mcpgo.ElicitationResponseActionCancel:
			r.Responses[k] = resp.Elicitation.ElicitationResponse
		default:
			return ctx, invalidRetry("inputResponses[" + strconv.Quote(k) + "].action is " + strconv.Quote(string(a)) + ": it must be accept, decline or cancel")
		}
	}
	if failure := f.useState(ctx, state, env.Expires); failure != nil {
		return ctx, failure
	}
	return context.WithValue(ctx, resumedKey{}, r), nil
}

// useState marks state used (usedstates.go), once every other check
// passed: a state used before is refused, and so is one that cannot be
// marked. The mark is made whether or not the caller is still there (it
// is not the caller's to cancel), within useStateTimeout.
func (f *Server) useState(ctx context.Context, state string, expires int64) *RPCError {
	sum := sha256.Sum256([]byte(state))
	principal := "none"
	if c := callerFrom(ctx); c != nil {
		principal = c.principal
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), useStateTimeout)
	defer cancel()
	first, err := f.usedStates.UseOnce(uctx, principal, hex.EncodeToString(sum[:16]), time.UnixMilli(expires))
	switch {
	case errors.Is(err, ErrUsedStatesFull):
		return &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "requestState not accepted now: " + err.Error() +
			"; retry later, or call the tool again without inputResponses and requestState"}
	case err != nil:
		f.log.Error("mcp front: a requestState cannot be marked used", "error", err)
		return &RPCError{Code: mcpgo.INTERNAL_ERROR, Message: "requestState not accepted now: it cannot be recorded as used; retry"}
	case !first:
		return invalidRetry("requestState refused: it was used already (each one answers its input_required result once); " +
			"answer the latest input_required result, or call the tool again without inputResponses and requestState")
	}
	return nil
}

func invalidRetry(msg string) *RPCError {
	return &RPCError{Code: mcpgo.INVALID_PARAMS, Message: "invalid tools/call params: " + msg}
}

// inputRequest finds the request for input in a handler's error: an
// *InputRequired, or a URLElicitationRequiredError (as a value or a
// pointer), which asks the same without State.
func inputRequest(err error) (*InputRequired, bool) {
	var ir *InputRequired
	if errors.As(err, &ir) && ir != nil {
		return ir, true
	}
	if e, ok := urlElicitation(err); ok {
		return &InputRequired{Elicitations: e.Elicitations}, true
	}
	return nil, false
}

// legacyInputRequired is -32042 asking a client before 2026-07-28 for the
// URL elicitations of ask.
func legacyInputRequired(ask *InputRequired) *RPCError {
	e := mcpgo.URLElicitationRequiredError{Elicitations: ask.Elicitations}
	return &RPCError{Code: mcpgo.URL_ELICITATION_REQUIRED, Message: e.Error(), Data: map[string]any{"elicitations": ask.Elicitations}}
}

// inputRequired is the input_required result asking a 2026-07-28 client
// for ask in the call req (the round after the one it resumes, if any),
// or, past maxInputRounds or when it cannot be sealed, an isError result
// saying the call ends here.
func (f *Server) inputRequired(ctx context.Context, req mcpgo.CallToolRequest, ask *InputRequired) json.RawMessage {
	round := 1
	if r, ok := Resumed(ctx); ok {
		round = r.Round + 1
	}
	if round > maxInputRounds {
		return f.endResult(fmt.Sprintf("The tool %s asked the user for input %d times without completing: it was not asked again, and did not run. %s",
			req.Params.Name, maxInputRounds, ask.text()))
	}
	if len(ask.State) > MaxInputState || len(ask.Elicitations) > maxInputKeys || len(ask.Elicitations) == 0 {
		f.log.Error("mcp front: a tool's request for input cannot be sealed", "tool", req.Params.Name,
			"state_bytes", len(ask.State), "elicitations", len(ask.Elicitations))
		return f.endResult(fmt.Sprintf("The tool %s needs the user to open %s, but its request could not be sent: it did not run.", req.Params.Name, ask.urls()))
	}
	type params struct {
		Meta    *mcpgo.Meta `json:"_meta,omitempty"`
		Mode    string      `json:"mode"`
		Message string      `json:"message"`
		URL     string      `json:"url"`
	}
	type inputRequest struct {
		Method string `json:"method"`
		Params params `json:"params"`
	}
	requests := make(map[string]inputRequest, len(ask.Elicitations))
	keys := make([]string, 0, len(ask.Elicitations))
	for i, e := range ask.Elicitations {
		key := e.ElicitationID
		if key == "" {
			key = "elicitation-" + strconv.Itoa(i)
		}
		if _, dup := requests[key]; dup {
			key += "-" + strconv.Itoa(i)
		}
		keys = append(keys, key)
		requests[key] = inputRequest{Method: string(mcpgo.MethodElicitationCreate),
			Params: params{Meta: e.Meta, Mode: mcpgo.ElicitationModeURL, Message: e.Message, URL: e.URL}}
	}
	sort.Strings(keys)
	state, err := f.sealer.seal(&inputEnvelope{Principal: principalOf(ctx), Tool: req.Params.Name,
		Args: argsDigest(req.Params.RawArguments), Round: round, Keys: keys, State: ask.State})
	if err != nil {
		f.log.Error("mcp front: a requestState cannot be sealed", "tool", req.Params.Name, "error", err)
		return f.endResult(fmt.Sprintf("The tool %s needs the user to open %s, but its request could not be sent: it did not run.", req.Params.Name, ask.urls()))
	}
	b, _ := encode(struct {
		Content       []mcpgo.Content         `json:"content"`
		InputRequests map[string]inputRequest `json:"inputRequests"`
		RequestState  string                  `json:"requestState"`
		ResultType    mcpgo.ResultType        `json:"resultType"`
	}{[]mcpgo.Content{mcpgo.NewTextContent(ask.text())}, requests, state, mcpgo.ResultTypeInputRequired})
	return f.modernResult(json.RawMessage(b), "", nil)
}

// endResult is a 2026-07-28 isError result with text.
func (f *Server) endResult(text string) json.RawMessage {
	b, _ := f.callResult(mcpgo.NewToolResultError(text), true)
	return b
}

// text is ask's text content: Text, else each elicitation's message and
// URL.
func (ask *InputRequired) text() string {
	if ask.Text != "" {
		return ask.Text
	}
	lines := make([]string, 0, len(ask.Elicitations))
	for _, e := range ask.Elicitations {
		msg := strings.TrimSpace(e.Message)
		if msg == "" {
			msg = "Open this URL:"
		}
		lines = append(lines, msg+" "+e.URL)
	}
	return strings.Join(lines, "\n")
}

func (ask *InputRequired) urls() string {
	urls := make([]string, len(ask.Elicitations))
	for i, e := range ask.Elicitations {
		urls[i] = e.URL
	}
	return strings.Join(urls, " and ")
}
