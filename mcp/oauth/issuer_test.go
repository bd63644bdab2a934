package oauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// TokenInfo.Issuer: a verified JWT's iss as the trusted issuer is
// configured (its spelling, a final slash included or not), each of two
// issuers' tokens named by its own; an introspection answer's iss, "" when
// it names none.
func TestTokenInfoIssuer(t *testing.T) {
	t.Parallel()
	a, b := newJWTIssuer(t), newJWTIssuer(t)
	ka, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	kb, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	a.publish(ka, "k", "ES256")
	b.publish(kb, "k", "ES256")
	configured := []string{a.srv.URL + "/", b.srv.URL}
	v := NewJWTVerifier(configured, nil)
	exp := time.Now().Add(time.Hour).Unix()
	for _, tc := range []struct {
		key  *ecdsa.PrivateKey
		iss  string
		want string
	}{
		{ka, a.srv.URL, a.srv.URL + "/"},
		{kb, b.srv.URL + "/", b.srv.URL},
	} {
		tok := sign(t, tc.key, "k", jose.ES256, map[string]any{"iss": tc.iss, "sub": "u1", "aud": "https://r/mcp", "exp": exp})
		info, err := v.Verify(t.Context(), tok)
		if err != nil || info.Issuer != tc.want || info.Subject != "u1" {
			t.Errorf("iss %s: %+v %v, want issuer %s", tc.iss, info, err, tc.want)
		}
	}

	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		iss := ""
		if r.PostForm.Get("token") == "with-iss" {
			iss = `"iss":"https://as.example",`
		}
		fmt.Fprintf(w, `{"active":true,%s"sub":"u1","exp":%d}`, iss, exp)
	}))
	defer as.Close()
	i := NewIntrospector(as.URL, "", "", nil)
	for token, want := range map[string]string{"with-iss": "https://as.example", "without": ""} {
		info, err := i.Introspect(t.Context(), token)
		if err != nil || info.Issuer != want {
			t.Errorf("introspection %s: %+v %v, want issuer %q", token, info, err, want)
		}
	}
}
