package oauth

import (
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// A verified token's claims reach TokenInfo.Claims, for access rules on
// claims (groups, nested roles): from a JWT's payload and from an
// introspection answer's members. A token that does not verify gives
// none.
func TestTokenClaims(t *testing.T) {
	t.Parallel()
	is := newJWTIssuer(t)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	is.publish(rs, "rs", "RS256")
	v := NewJWTVerifier([]string{is.srv.URL}, is.srv.Client())
	now := time.Now()
	claims := map[string]any{"iss": is.srv.URL, "sub": "alice", "aud": "https://r/mcp", "exp": now.Add(time.Hour).Unix(),
		"groups": []string{"support", "ops"}, "realm_access": map[string]any{"roles": []string{"auditor"}}, "https://example.com/team": "blue"}
	info, err := v.Verify(t.Context(), sign(t, rs, "rs", jose.RS256, claims))
	if err != nil {
		t.Fatal(err)
	}
	groups, _ := info.Claims["groups"].([]any)
	realm, _ := info.Claims["realm_access"].(map[string]any)
	roles, _ := realm["roles"].([]any)
	if len(groups) != 2 || groups[0] != "support" || len(roles) != 1 || roles[0] != "auditor" || info.Claims["https://example.com/team"] != "blue" || info.Claims["sub"] != "alice" {
		t.Errorf("JWT claims: %#v", info.Claims)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	if info, err := v.Verify(t.Context(), sign(t, other, "rs", jose.RS256, claims)); err == nil || info != nil {
		t.Errorf("a token signed by another key: %+v %v", info, err)
	}

	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"active":true,"sub":"bob","scope":"a b","groups":["admins"],"exp":` + strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + `}`))
	}))
	defer as.Close()
	got, err := NewIntrospector(as.URL, "", "", as.Client()).Introspect(t.Context(), "opaque")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := got.Claims["groups"].([]any)
	if got.Subject != "bob" || !slices.Equal(got.Scopes, []string{"a", "b"}) || len(g) != 1 || g[0] != "admins" || got.Expiry.Unix() != now.Add(time.Hour).Unix() {
		t.Errorf("introspection: %+v", got)
	}
}
