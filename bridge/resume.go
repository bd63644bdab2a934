package bridge

import (
	"container/list"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Calls that wait for a user to open a URL (docs/otc-front.md,
// MCP servers that ask the user to open a URL)
//
// An MCP server may stop a call to have its user open a URL (an
// authorization of its own): 2026-07-28 servers answer input_required with
// URL elicitations and a requestState; 2025-11-25 servers send
// elicitation/create in URL mode during the call, or fail it with -32042.
// The OTC front answers the 400 challenge missing_requirements.
// authorization [{id, url, check_url}] and keeps what the OTC client's
// retry needs to go on, bound to who asked:
//
//   - the requestState and the keys of the URL requests (2026-07-28), in
//     a ResumeStore: this process's memory, or the store the replicas
//     share (--state); the retry sends the call again with
//     inputResponses {key: {"action":"accept"}} and that requestState;
//   - the call itself (2025-11-25 elicitation/create): it stays open,
//     its elicitation unanswered, in this process only; the retry answers
//     "accept" (in URL mode: the user agreed to open the URL) and gets the
//     call's outcome. The upstream waits for that answer a bounded time
//     (mcp-go's streamable HTTP client gives an answer 30 s; stdio and SSE
//     the call timeout); when it passes, it is answered "cancel" and the
//     retry makes a new call;
//   - -32042 (2025-11-25): nothing to resume, the retry makes a new call.
//
// A retry resumes only when it comes from the same caller
// (otc.Caller.Principal), for the same user_id, tool, input and call_id
// (when the first call had one): a hash of all of them is the key. Another
// caller's call never meets that key, and gets its own challenge.
//
// check_url (GET /elicitation/check/{id}) answers {"status": …}: "pending"
// until the bridge learns more; "completed" once the MCP server said the
// user finished (2025-11-25 notifications/elicitation/complete), or once
// the resumed call ended; "failed" when the kept state expired, or the
// server asked again (the retry's answer carries the new challenge). The
// bridge cannot see a third-party page: 2026-07-28 has no completion
// signal, so for those servers check_url stays "pending" until the retry.

// Bounds and lifetimes of what is kept for a retry.
const (
	// DefaultResumeTTL is how long a challenged call's state waits for
	// its retry.
	DefaultResumeTTL = 10 * time.Minute
	// DefaultResumePerCaller bounds the records one caller (a principal)
	// has kept (two per challenge: the state and its check_url status);
	// beyond it, its oldest go.
	DefaultResumePerCaller = 32
	// DefaultResumeMax bounds the records kept for every caller together;
	// beyond it, the oldest go.
	DefaultResumeMax = 20_000
	// parksPerCaller and parksMax bound the calls held open for a retry
	// (2025-11-25 elicitations): each holds an upstream call.
	parksPerCaller = 4
	parksMax       = 256
	// parkMargin ends a held call's wait this long before the upstream's
	// own bound (the transport's deadline, the call timeout), so that the
	// answer still reaches it.
	parkMargin = time.Second
	// storeTimeout bounds one ResumeStore operation of a call.
	storeTimeout = 2 * time.Second
	// elicitIndexMax bounds the (upstream, elicitationId) → check id
	// entries kept for notifications/elicitation/complete.
	elicitIndexMax = 4096
)

// ResumeStore keeps the records of challenged calls for their retries
// (see above): opaque values by id, each owned by a caller, expiring. One
// process: NewMemoryResumeStore; replicas: one they share (bridge/state).
type ResumeStore interface {
	// Keep stores val under id for ttl, owned by owner. It then drops the
	// owner's oldest records beyond perOwner, and the oldest of all beyond
	// total.
	Keep(ctx context.Context, owner, id string, val []byte, ttl time.Duration, perOwner, total int) error
	// Take returns id's value and deletes it, at once for every replica
	// (nil, nil: none, or expired).
	Take(ctx context.Context, id string) ([]byte, error)
	// Get returns id's value (nil, nil: none, or expired).
	Get(ctx context.Context, id string) ([]byte, error)
	// Update replaces id's value, keeping its expiry; false when there is
	// none.
	Update(ctx context.Context, id string, val []byte) (bool, error)
}

// MemoryResumeStore is a ResumeStore in this process's memory; safe for
// concurrent use.
type MemoryResumeStore struct {
	mu      sync.Mutex
	now     func() time.Time
	byID    map[string]*list.Element // of *memRecord, in all
	all     *list.List               // oldest first
	byOwner map[string][]string      // ids, oldest first
}

type memRecord struct {
	id, owner string
	val       []byte
	exp       time.Time
}

// NewMemoryResumeStore returns an empty MemoryResumeStore; now is its
// clock (nil: time.Now).
func NewMemoryResumeStore(now func() time.Time) *MemoryResumeStore {
	if now == nil {
		now = time.Now
	}
	return &MemoryResumeStore{now: now, byID: map[string]*list.Element{}, all: list.New(), byOwner: map[string][]string{}}
}

// Keep implements ResumeStore.
func (s *MemoryResumeStore) Keep(ctx context.Context, owner, id string, val []byte, ttl time.Duration, perOwner, total int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.dropLocked(id)
	// Expired records go first (oldest first: they expire in order when
	// kept with one ttl; others wait for their turn or the bounds).
	for e := s.all.Front(); e != nil && !now.Before(e.Value.(*memRecord).exp); e = s.all.Front() {
		s.dropLocked(e.Value.(*memRecord).id)
	}
	for perOwner > 0 && len(s.byOwner[owner]) >= perOwner {
		s.dropLocked(s.byOwner[owner][0])
	}
	for total > 0 && s.all.Len() >= total {
		s.dropLocked(s.all.Front().Value.(*memRecord).id)
	}
	r := &memRecord{id: id, owner: owner, val: append([]byte(nil), val...), exp: now.Add(ttl)}
	s.byID[id] = s.all.PushBack(r)
	s.byOwner[owner] = append(s.byOwner[owner], id)
	return nil
}

// dropLocked forgets id. s.mu must be held.
func (s *MemoryResumeStore) dropLocked(id string) {
	e, ok := s.byID[id]
	if !ok {
		return
	}
	r := e.Value.(*memRecord)
	s.all.Remove(e)
	delete(s.byID, id)
	ids := s.byOwner[r.owner]
	for i, x := range ids {
		if x == id {
			ids = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(s.byOwner, r.owner)
	} else {
		s.byOwner[r.owner] = ids
	}
}

// liveLocked is id's record unless it expired. s.mu must be held.
func (s *MemoryResumeStore) liveLocked(id string) *memRecord {
	e, ok := s.byID[id]
	if !ok {
		return nil
	}
	r := e.Value.(*memRecord)
	if !s.now().Before(r.exp) {
		s.dropLocked(id)
		return nil
	}
	return r
}

// Take implements ResumeStore.
func (s *MemoryResumeStore) Take(ctx context.Context, id string) ([]byte, error) {
	return s.read(ctx, id, true)
}

// Get implements ResumeStore.
func (s *MemoryResumeStore) Get(ctx context.Context, id string) ([]byte, error) {
	return s.read(ctx, id, false)
}

// read is the live record id's value, nil when there is none: removed
// with take (the record's own bytes), else a copy.
func (s *MemoryResumeStore) read(ctx context.Context, id string, take bool) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.liveLocked(id)
	switch {
	case r == nil:
		return nil, nil
	case take:
		s.dropLocked(id)
		return r.val, nil
	}
	return append([]byte(nil), r.val...), nil
}

// Update implements ResumeStore.
func (s *MemoryResumeStore) Update(ctx context.Context, id string, val []byte) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.liveLocked(id)
	if r == nil {
		return false, nil
	}
	r.val = append([]byte(nil), val...)
	return true, nil
}

// Len is the number of records kept (expired ones included until they
// are dropped).
func (s *MemoryResumeStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all.Len()
}

// Check statuses (check_url).
const (
	checkPending   = "pending"
	checkCompleted = "completed"
	checkFailed    = "failed"
)

// resumeRecord is what a 2026-07-28 call's retry needs.
type resumeRecord struct {
	Caller       string   `json:"caller"` // a hash of the principal, checked again on take
	Upstream     string   `json:"upstream"`
	Tool         string   `json:"tool"` // the MCP tool
	Keys         []string `json:"keys"` // the URL requests asked
	RequestState string   `json:"request_state,omitempty"`
	Check        string   `json:"check"`
}

// checkRecord is a challenge's check_url status.
type checkRecord struct {
	Status string `json:"status"`
	Why    string `json:"why,omitempty"`
}

// Store ids: the state of a call by its key, a status by its check id.
func stateID(key string) string   { return "state:" + key }
func checkID(check string) string { return "check:" + check }

// callKey binds a retry to its first call: a hash of the caller, the
// user, the upstream, the tool, the call_id ("" when the caller sent
// none) and the input (canonical JSON: keys sorted, numbers as written).
func callKey(principal, user, upstream, toolID, callID string, input json.RawMessage) string {
	h := sha256.New()
	for _, s := range []string{"mcpotc-resume-1", principal, user, upstream, toolID, callID} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(canonicalJSON(input))
	return hex.EncodeToString(h.Sum(nil))
}

// ownerOf is the store's owner for a principal (no identity in the store).
func ownerOf(principal string) string {
	sum := sha256.Sum256([]byte("mcpotc-resume-owner\x00" + principal))
	return hex.EncodeToString(sum[:16])
}

// canonicalJSON re-encodes a JSON value with sorted keys and numbers as
// they were written; the bytes themselves when they do not decode.
func canonicalJSON(raw json.RawMessage) []byte {
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

// newCheck is a fresh check id: 128 random bits.
func newCheck() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// resumes is what the OTC front keeps for retries.
type resumes struct {
	store     ResumeStore
	ttl       time.Duration
	perCaller int
	max       int
	publicURL string // "" : the URL each caller reached the bridge by

	parksMu sync.Mutex
	parks   map[string]*parked   // by call key
	byOwner map[string][]*parked // oldest first

	indexMu sync.Mutex
	index   map[string]string // upstream + "\x00" + elicitationId → check id
	order   []string          // index keys, oldest first
}

func newResumes(store ResumeStore, ttl time.Duration, perCaller, max int, publicURL string) *resumes {
	if store == nil {
		store = NewMemoryResumeStore(nil)
	}
	if ttl <= 0 {
		ttl = DefaultResumeTTL
	}
	if perCaller <= 0 {
		perCaller = DefaultResumePerCaller
	}
	if max <= 0 {
		max = DefaultResumeMax
	}
	return &resumes{store: store, ttl: ttl, perCaller: perCaller, max: max, publicURL: strings.TrimSuffix(publicURL, "/"),
		parks: map[string]*parked{}, byOwner: map[string][]*parked{}, index: map[string]string{}}
}

// checkURL is the check_url of check for a call that came in r.
func (rs *resumes) checkURL(r *http.Request, check string) string {
	base := rs.publicURL
	if base == "" && r != nil {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + "/elicitation/check/" + check
}

// opCtx bounds one store operation, whatever the call's context says
// (a challenge is kept even when its client went away).
func opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
}

// newStatus keeps a pending check for principal; "" when the store failed.
func (rs *resumes) newStatus(ctx context.Context, principal string) (string, error) {
	check := newCheck()
	b, _ := json.Marshal(checkRecord{Status: checkPending})
	sctx, cancel := opCtx(ctx)
	defer cancel()
	if err := rs.store.Keep(sctx, ownerOf(principal), checkID(check), b, rs.ttl, rs.perCaller, rs.max); err != nil {
		return "", err
	}
	return check, nil
}

// setStatus records a check's status (when it is still kept).
func (rs *resumes) setStatus(ctx context.Context, check, status, why string) error {
	if check == "" {
		return nil
	}
	b, _ := json.Marshal(checkRecord{Status: status, Why: why})
	sctx, cancel := opCtx(ctx)
	defer cancel()
	_, err := rs.store.Update(sctx, checkID(check), b)
	return err
}

// keep records a 2026-07-28 call's state for its retry.
func (rs *resumes) keep(ctx context.Context, principal, key string, rec resumeRecord) error {
	rec.Caller = ownerOf(principal)
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	sctx, cancel := opCtx(ctx)
	defer cancel()
	return rs.store.Keep(sctx, rec.Caller, stateID(key), b, rs.ttl, rs.perCaller, rs.max)
}

// take returns (and forgets) the state kept for key by principal, for
// upstream's tool; nil when there is none.
func (rs *resumes) take(ctx context.Context, principal, key, upstream, tool string) (*resumeRecord, error) {
	sctx, cancel := opCtx(ctx)
	defer cancel()
	b, err := rs.store.Take(sctx, stateID(key))
	if err != nil || b == nil {
		return nil, err
	}
	var rec resumeRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, errors.New("a kept call state does not decode")
	}
	// The key binds all of these already; a record that says otherwise
	// is not this call's.
	if rec.Caller != ownerOf(principal) || rec.Upstream != upstream || rec.Tool != tool {
		return nil, nil
	}
	return &rec, nil
}

// status reads a check's status; ok false when it is unknown or expired.
func (rs *resumes) status(ctx context.Context, check string) (checkRecord, bool, error) {
	sctx, cancel := opCtx(ctx)
	defer cancel()
	b, err := rs.store.Get(sctx, checkID(check))
	if err != nil || b == nil {
		return checkRecord{}, false, err
	}
	var rec checkRecord
	if json.Unmarshal(b, &rec) != nil {
		return checkRecord{}, false, nil
	}
	return rec, true, nil
}

// serveCheck answers GET /elicitation/check/{id}: 200 {"status": …}, or 404
// {"status":"failed"} for an unknown or expired id. The id is 128 random
// bits; the answer says nothing but the status.
func (rs *resumes) serveCheck(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	rec, ok, err := rs.status(r.Context(), r.PathValue("id"))
	switch {
	case err != nil:
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"pending","error":"the bridge's state store is unavailable"}` + "\n"))
		return
	case !ok:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"status":"failed","error":"unknown or expired challenge"}` + "\n"))
		return
	}
	body := map[string]string{"status": rec.Status}
	if rec.Why != "" {
		body["error"] = rec.Why
	}
	_ = json.NewEncoder(w).Encode(body)
}

// indexElicitation remembers which check an elicitation id of an upstream
// belongs to, for its notifications/elicitation/complete (bounded: the
// oldest entries go).
func (rs *resumes) indexElicitation(upstream, elicitationID, check string) {
	if elicitationID == "" || check == "" {
		return
	}
	k := upstream + "\x00" + elicitationID
	rs.indexMu.Lock()
	defer rs.indexMu.Unlock()
	if _, ok := rs.index[k]; !ok {
		rs.order = append(rs.order, k)
	}
	rs.index[k] = check
	for len(rs.order) > elicitIndexMax {
		delete(rs.index, rs.order[0])
		rs.order = rs.order[1:]
	}
}

// completedCheck is the check an upstream's notifications/elicitation/
// complete (MCP 2025-11-25: the user finished) is about, forgotten from
// the index; "" when it is about none the bridge issued.
func (rs *resumes) completedCheck(upstream string, params json.RawMessage) string {
	var p struct {
		ElicitationID string `json:"elicitationId"`
	}
	if json.Unmarshal(params, &p) != nil || p.ElicitationID == "" {
		return ""
	}
	k := upstream + "\x00" + p.ElicitationID
	rs.indexMu.Lock()
	defer rs.indexMu.Unlock()
	check := rs.index[k]
	delete(rs.index, k) // its order entry goes with the bound
	return check
}
