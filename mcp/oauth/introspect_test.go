package oauth

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// Introspection (RFC 7662): an active token's answer is read and cached
// (until exp, at most a minute); inactive answers (200 or 4xx) and a past
// exp refuse the token; a 5xx is an error, not a refusal; the client
// authenticates with HTTP Basic.
func TestIntrospector(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	now := time.Unix(1_000_000, 0)
	t0 := now // the server's clock: exps are fixed
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_ = r.ParseForm()
		if id, secret, ok := r.BasicAuth(); !ok || id != "rs" || secret != "rs-secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.PostForm.Get("token") {
		case "active":
			_, _ = fmt.Fprintf(w, `{"active":true,"sub":"alice","client_id":"c","scope":"a b","aud":["https://r/mcp","x"],"exp":%d}`, t0.Add(time.Hour).Unix())
		case "short":
			_, _ = fmt.Fprintf(w, `{"active":true,"sub":"bob","aud":"https://r/mcp","exp":%d}`, t0.Add(IntrospectionCacheTTL+10*time.Second).Unix())
		case "past":
			_, _ = fmt.Fprintf(w, `{"active":true,"exp":%d}`, t0.Add(-time.Second).Unix())
		case "broken":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(`{"error":"upstream"}`))
		case "denied":
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"active":false}`))
		default:
			_, _ = w.Write([]byte(`{"active":false}`))
		}
	}))
	defer as.Close()
	i := NewIntrospector(as.URL, "rs", "rs-secret", as.Client())
	i.now = func() time.Time { return now }
	ctx := t.Context()

	info, err := i.Introspect(ctx, "active")
	if err != nil || info.Subject != "alice" || info.ClientID != "c" || !slices.Equal(info.Scopes, []string{"a", "b"}) ||
		!slices.Equal(info.Audience, []string{"https://r/mcp", "x"}) || !info.Expiry.Equal(t0.Add(time.Hour)) {
		t.Fatalf("active: %+v %v", info, err)
	}
	if _, err := i.Introspect(ctx, "active"); err != nil || calls.Load() != 1 {
		t.Errorf("a cached answer asked again (%d calls, %v)", calls.Load(), err)
	}
	now = now.Add(IntrospectionCacheTTL)
	if _, err := i.Introspect(ctx, "active"); err != nil || calls.Load() != 2 {
		t.Errorf("after a minute the answer is asked again: %d calls, %v", calls.Load(), err)
	}
	if info, err := i.Introspect(ctx, "short"); err != nil || !slices.Equal(info.Audience, []string{"https://r/mcp"}) {
		t.Errorf("one aud string: %+v %v", info, err)
	}
	now = now.Add(10 * time.Second)
	if _, err := i.Introspect(ctx, "short"); !errors.Is(err, ErrTokenInactive) {
		t.Errorf("a cached token past its exp: %v, want ErrTokenInactive", err)
	}
	for _, tok := range []string{"inactive", "denied", "past"} {
		if _, err := i.Introspect(ctx, tok); !errors.Is(err, ErrTokenInactive) {
			t.Errorf("%s: %v, want ErrTokenInactive", tok, err)
		}
	}
	if _, err := i.Introspect(ctx, "broken"); err == nil || errors.Is(err, ErrTokenInactive) {
		t.Errorf("a 502: %v, want an error that is not a refusal", err)
	}
}
