package oauth

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testClock is a clock the tests move, safe for the goroutines that read
// it.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *testClock) now() time.Time        { return time.Unix(0, c.ns.Load()) }
func (c *testClock) add(d time.Duration)   { c.ns.Add(int64(d)) }
func (c *testClock) claims(sub string) any { return c.claimsFor(sub, c.now()) }
func (c *testClock) claimsFor(sub string, now time.Time) any {
	return map[string]any{"sub": sub, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
}

// loadIssuer is an issuer on 127.0.0.1 whose key set answers slowly (so
// that concurrent tokens meet one fetch) and can be made to fail; it counts
// the key set requests.
type loadIssuer struct {
	*jwtIssuer
	fail  atomic.Bool
	jwks  atomic.Int32
	delay time.Duration
}

func newLoadIssuer(t *testing.T) *loadIssuer {
	li := &loadIssuer{delay: 100 * time.Millisecond}
	li.jwtIssuer = &jwtIssuer{}
	li.srv = serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			writeJSON(w, http.StatusOK, map[string]any{"issuer": li.srv.URL, "authorization_endpoint": li.srv.URL + "/authorize",
				"token_endpoint": li.srv.URL + "/token", "jwks_uri": li.srv.URL + "/jwks", "response_types_supported": []string{"code"},
				"code_challenge_methods_supported": []string{"S256"}})
		case "/jwks":
			li.jwks.Add(1)
			time.Sleep(li.delay)
			if li.fail.Load() {
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(w, hostileMarker)
				return
			}
			li.mu.Lock()
			writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: li.keys})
			li.mu.Unlock()
		default:
			http.NotFound(w, r)
		}
	}))
	return li
}

// signTyped signs claims (with iss set to iss) with key under kid, the
// header's typ being typ (nil: none).
func signTyped(t *testing.T, key crypto.Signer, kid, iss string, typ any, claims any) string {
	t.Helper()
	opts := &jose.SignerOptions{}
	if typ != nil {
		opts = opts.WithHeader(jose.HeaderType, typ)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	m := claims.(map[string]any)
	m["iss"] = iss
	tok, err := jwt.Signed(s).Claims(m).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// verifyAll verifies the tokens at once and returns their errors.
func verifyAll(t *testing.T, v *JWTVerifier, tokens []string) []error {
	t.Helper()
	errs := make([]error, len(tokens))
	var wg sync.WaitGroup
	for i, tok := range tokens {
		wg.Go(func() { _, errs[i] = v.Verify(t.Context(), tok) })
	}
	wg.Wait()
	return errs
}

// Attack: tokens with made-up key ids, many at once, each made the
// verifier fetch the issuer's key set. Now: one fetch for all the tokens
// waiting, then at most one per JWKSMinRefresh; the tokens signed with a
// published key are served meanwhile.
func TestJWKSSingleFlight(t *testing.T) {
	t.Parallel()
	is := newLoadIssuer(t)
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	stranger, _ := rsa.GenerateKey(rand.Reader, 2048)
	is.publish(key, "k1", "RS256")
	clock := newTestClock()
	v := NewJWTVerifier([]string{is.srv.URL}, nil) // the hardened client: 127.0.0.1 is the issuer's own
	v.now = clock.now
	batch := func(good, bogus int) (served, refused int, others []error) {
		var tokens []string
		for range good {
			tokens = append(tokens, signTyped(t, key, "k1", is.srv.URL, "at+jwt", clock.claims("alice")))
		}
		for i := range bogus {
			tokens = append(tokens, signTyped(t, stranger, fmt.Sprint("made-up-", i), is.srv.URL, "at+jwt", clock.claims("mallory")))
		}
		for _, err := range verifyAll(t, v, tokens) {
			switch {
			case err == nil:
				served++
			case errors.Is(err, ErrTokenInactive):
				refused++
			default:
				others = append(others, err)
			}
		}
		return
	}
	if s, r, o := batch(10, 30); s != 10 || r != 30 || len(o) > 0 || is.jwks.Load() != 1 {
		t.Errorf("cold, 40 tokens at once: %d served, %d refused, %v; %d key set fetches, want 10, 30, none, 1", s, r, o, is.jwks.Load())
	}
	if s, r, o := batch(5, 30); s != 5 || r != 30 || len(o) > 0 || is.jwks.Load() != 1 {
		t.Errorf("within JWKSMinRefresh: %d served, %d refused, %v; %d fetches in all, want 1", s, r, o, is.jwks.Load())
	}
	clock.add(JWKSMinRefresh)
	if s, r, o := batch(5, 30); s != 5 || r != 30 || len(o) > 0 || is.jwks.Load() != 2 {
		t.Errorf("after JWKSMinRefresh: %d served, %d refused, %v; %d fetches in all, want 2", s, r, o, is.jwks.Load())
	}
}

// Attack: with the issuer's key set failing, every token made the verifier
// try again. Now: a failure is remembered; no fetch until the backoff
// (5 s, then 10 s…) has passed, and meanwhile the verifier cannot tell (an
// error that is not ErrTokenInactive: the MCP front's 503). Honest: once
// the issuer answers again, tokens verify.
func TestJWKSFailureBackoff(t *testing.T) {
	t.Parallel()
	is := newLoadIssuer(t)
	is.delay = 0
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	is.publish(key, "k1", "RS256")
	is.fail.Store(true)
	clock := newTestClock()
	v := NewJWTVerifier([]string{is.srv.URL}, nil)
	v.now = clock.now
	tok := func() string { return signTyped(t, key, "k1", is.srv.URL, "at+jwt", clock.claims("alice")) }
	cannotTell := func(step string, wantFetches int32) {
		t.Helper()
		for _, err := range verifyAll(t, v, []string{tok(), tok(), tok(), tok(), tok()}) {
			if err == nil || errors.Is(err, ErrTokenInactive) {
				t.Errorf("%s: %v, want an error that is not a refusal", step, err)
			} else {
				noMarkers(t, step+": the error", err.Error())
			}
		}
		if n := is.jwks.Load(); n != wantFetches {
			t.Errorf("%s: %d key set fetches in all, want %d", step, n, wantFetches)
		}
	}
	cannotTell("first failure", 1)
	cannotTell("within 5 s", 1)
	clock.add(JWKSFailureBackoff - time.Second)
	cannotTell("4 s later", 1)
	clock.add(time.Second)
	cannotTell("5 s later: one try, failing", 2)
	clock.add(JWKSFailureBackoff)
	cannotTell("5 s more: the backoff is 10 s now", 2)
	clock.add(JWKSFailureBackoff)
	cannotTell("10 s after the second failure: one more try", 3)
	if _, err := v.Verify(t.Context(), tok()); err == nil || !strings.Contains(err.Error(), "the next try is in 20s") {
		t.Errorf("after three failures: %v, want the next try in 20 s", err)
	}
	is.fail.Store(false)
	clock.add(20 * time.Second)
	if _, err := v.Verify(t.Context(), tok()); err != nil || is.jwks.Load() != 4 {
		t.Errorf("the issuer answers again: %v, %d fetches in all, want the token served after one fetch", err, is.jwks.Load())
	}
	if got := jwksBackoff(100); got != JWKSMaxBackoff {
		t.Errorf("backoff after 100 failures: %s, want %s", got, JWKSMaxBackoff)
	}
}

// RFC 9068 §2.1: a JWT access token is typed at+jwt (or
// application/at+jwt, in any case). Attack: an ID token, or any other JWT
// of the issuer, used as an access token. Now: refused by default, before
// any fetch; with AllowUntyped, an untyped or "JWT" token is accepted, any
// other type still refused.
func TestJWTType(t *testing.T) {
	t.Parallel()
	is := newLoadIssuer(t)
	is.delay = 0
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	is.publish(key, "k1", "RS256")
	strict := NewJWTVerifier([]string{is.srv.URL}, nil)
	lenient := NewJWTVerifier([]string{is.srv.URL}, nil).AllowUntyped()
	now := time.Now()
	for _, tc := range []struct {
		name          string
		typ           any
		strict, loose bool
	}{
		{"at+jwt", "at+jwt", true, true},
		{"AT+JWT", "AT+JWT", true, true},
		{"application/at+jwt", "application/at+jwt", true, true},
		{"Application/AT+JWT", "Application/AT+JWT", true, true},
		{"JWT", "JWT", false, true},
		{"application/jwt", "application/jwt", false, true},
		{"no typ", nil, false, true},
		{"an ID token's", "id_token+jwt", false, false},
		{"a logout token's", "logout+jwt", false, false},
		{"at+jwt with a suffix", "at+jwtx", false, false},
		{"a number", 5, false, false},
	} {
		tok := signTyped(t, key, "k1", is.srv.URL, tc.typ, map[string]any{"sub": "alice", "exp": now.Add(time.Hour).Unix()})
		for _, v := range []struct {
			name string
			v    *JWTVerifier
			want bool
		}{{"default", strict, tc.strict}, {"AllowUntyped", lenient, tc.loose}} {
			_, err := v.v.Verify(t.Context(), tok)
			if v.want != (err == nil) {
				t.Errorf("%s, %s: %v, want accepted=%v", tc.name, v.name, err, v.want)
			}
			if !v.want && !errors.Is(err, ErrTokenInactive) {
				t.Errorf("%s, %s: %v, want ErrTokenInactive", tc.name, v.name, err)
			}
		}
	}
	refusedOnly := NewJWTVerifier([]string{is.srv.URL}, nil)
	before := is.jwks.Load()
	for range 20 {
		_, _ = refusedOnly.Verify(t.Context(), signTyped(t, key, "k1", is.srv.URL, "JWT", map[string]any{"sub": "x", "exp": now.Add(time.Hour).Unix()}))
	}
	if n := is.jwks.Load() - before; n != 0 {
		t.Errorf("untyped tokens made %d key set fetches, want none", n)
	}
}

// introspectionServer is an introspection endpoint on 127.0.0.1: "good"
// is active, any other token inactive; it counts requests and the most in
// flight at once, and holds each until hold is closed (when set).
type introspectionServer struct {
	url                  string
	calls, inFlight, max atomic.Int32
	delay                time.Duration
	hold                 chan struct{}
}

func newIntrospectionServer(t *testing.T) *introspectionServer {
	s := &introspectionServer{delay: 100 * time.Millisecond}
	srv := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for {
			m := s.max.Load()
			if n <= m || s.max.CompareAndSwap(m, n) {
				break
			}
		}
		if s.hold != nil {
			select {
			case <-s.hold:
			case <-time.After(10 * time.Second):
			}
		}
		time.Sleep(s.delay)
		_ = r.ParseForm()
		if r.PostForm.Get("token") == "good" {
			writeJSON(w, http.StatusOK, map[string]any{"active": true, "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"active": false})
	}))
	s.url = srv.URL + "/introspect"
	return s
}

func introspectAll(t *testing.T, i *Introspector, tokens []string) (active, inactive int, others []error) {
	t.Helper()
	errs := make([]error, len(tokens))
	var wg sync.WaitGroup
	for k, tok := range tokens {
		wg.Go(func() { _, errs[k] = i.Introspect(t.Context(), tok) })
	}
	wg.Wait()
	for _, err := range errs {
		switch {
		case err == nil:
			active++
		case errors.Is(err, ErrTokenInactive):
			inactive++
		default:
			others = append(others, err)
		}
	}
	return
}

// Attack: every request with a made-up token cost one introspection
// request. Now: callers with one token share one request; an inactive
// answer is remembered for IntrospectionNegativeTTL. Honest: an active
// token is served, one request for all its callers.
func TestIntrospectionSingleFlightAndNegativeCache(t *testing.T) {
	t.Parallel()
	s := newIntrospectionServer(t)
	clock := newTestClock()
	i := NewIntrospector(s.url, "", "", nil) // the hardened client: the endpoint's host is its own
	i.now = clock.now
	bogus := make([]string, 30)
	for k := range bogus {
		bogus[k] = "made-up"
	}
	if a, in, o := introspectAll(t, i, bogus); a != 0 || in != 30 || len(o) > 0 || s.calls.Load() != 1 {
		t.Errorf("30 callers with one made-up token: %d active, %d inactive, %v; %d requests, want 1", a, in, o, s.calls.Load())
	}
	clock.add(IntrospectionNegativeTTL - time.Second)
	if a, in, o := introspectAll(t, i, bogus); a != 0 || in != 30 || len(o) > 0 || s.calls.Load() != 1 {
		t.Errorf("again within the negative TTL: %d active, %d inactive, %v; %d requests in all, want 1", a, in, o, s.calls.Load())
	}
	clock.add(time.Second)
	if _, err := i.Introspect(t.Context(), "made-up"); !errors.Is(err, ErrTokenInactive) || s.calls.Load() != 2 {
		t.Errorf("after the negative TTL: %v, %d requests in all, want 2", err, s.calls.Load())
	}
	good := make([]string, 30)
	for k := range good {
		good[k] = "good"
	}
	if a, in, o := introspectAll(t, i, good); a != 30 || in != 0 || len(o) > 0 || s.calls.Load() != 3 {
		t.Errorf("30 callers with one good token: %d active, %d inactive, %v; %d requests in all, want 3", a, in, o, s.calls.Load())
	}
}

// Attack: many distinct made-up tokens at once. Now: at most
// MaxIntrospectionsInFlight requests at the authorization server; the
// callers past it wait a bounded time, then get "cannot tell" (not a
// refusal).
func TestIntrospectionInFlightBound(t *testing.T) {
	t.Parallel()
	s := newIntrospectionServer(t)
	s.delay = 0
	s.hold = make(chan struct{})
	i := NewIntrospector(s.url, "", "", nil)
	i.queueWait = 200 * time.Millisecond
	const extra = 8
	tokens := make([]string, MaxIntrospectionsInFlight+extra)
	for k := range tokens {
		tokens[k] = fmt.Sprint("made-up-", k)
	}
	done := make(chan struct{})
	var a, in int
	var others []error
	go func() {
		defer close(done)
		a, in, others = introspectAll(t, i, tokens)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for s.inFlight.Load() < MaxIntrospectionsInFlight && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(3 * i.queueWait) // the callers past the bound give up meanwhile
	close(s.hold)
	<-done
	if a != 0 || in != MaxIntrospectionsInFlight || len(others) != extra {
		t.Errorf("%d active, %d inactive, %d other errors; want 0, %d, %d", a, in, len(others), MaxIntrospectionsInFlight, extra)
	}
	for _, err := range others {
		if !strings.Contains(err.Error(), "requests already in flight") {
			t.Errorf("past the bound: %v", err)
		}
	}
	if m := s.max.Load(); m != MaxIntrospectionsInFlight || s.calls.Load() != MaxIntrospectionsInFlight {
		t.Errorf("%d requests in flight at most, %d in all; want %d", m, s.calls.Load(), MaxIntrospectionsInFlight)
	}
}

// The introspection endpoint's redirect is not followed (the token would
// go elsewhere); its error bodies are not repeated.
func TestIntrospectionRedirectAndErrors(t *testing.T) {
	t.Parallel()
	it := newInternalTarget(t)
	var mode atomic.Value
	mode.Store("307")
	srv := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case "307":
			redirectTo(http.StatusTemporaryRedirect, it.url("/introspect"))(w, r)
		case "500":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":"`+hostileMarker+`"}`)
		default:
			writeJSON(w, http.StatusOK, map[string]any{"active": true, "sub": "alice"})
		}
	}))
	i := NewIntrospector(srv.URL+"/introspect", "rs", "rs-secret", nil)
	_, err := i.Introspect(t.Context(), "tok-1")
	if err == nil || errors.Is(err, ErrTokenInactive) || !strings.Contains(err.Error(), "token introspection at "+srv.URL+"/introspect: HTTP 307, a redirect, which the bridge never follows for a POST") {
		t.Errorf("a 307: %v", err)
	}
	mode.Store("500")
	if _, err := i.Introspect(t.Context(), "tok-2"); err == nil || errors.Is(err, ErrTokenInactive) {
		t.Errorf("a 500: %v", err)
	} else {
		noMarkers(t, "the error", err.Error())
	}
	it.untouched(t)
	mode.Store("ok")
	if info, err := i.Introspect(t.Context(), "tok-3"); err != nil || info.Subject != "alice" {
		t.Errorf("honest: %+v %v", info, err)
	}
}
