package oauth

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/hex"
	"net/http"
)

// Browser binding
//
// The callback of an authorization is accepted only from the browser that
// opened its authorization URL (and, with VerifyOIDC, signed in there as
// the challenged user): /oauth/authorize/{state} (or /oauth/login) sets a
// cookie whose value is a MAC of the state under a key derived from the
// vault key (the same on every replica), and /oauth/callback requires it.
// So an authorization server URL copied out of one browser and completed
// in another — the second half of a forwarded-link attack — binds nothing,
// and a stranger holding a state can neither complete nor fail its flow.
//
// The cookie is HttpOnly, SameSite=Lax (sent with the authorization
// server's top-level redirect back to the bridge, never with a cross-site
// subrequest), Secure when the public URL is https, scoped to /oauth/, and
// lives as long as the authorization URL; its path is the public URL's path
// + /oauth/. Its name carries a tag of the
// state, so that one browser can hold several flows at once.

const bindCookiePrefix = "mcpotc_flow_"

// bindCookieName is the name of state's binding cookie.
func (m *Manager) bindCookieName(state string) string {
	return bindCookiePrefix + hex.EncodeToString(m.vault.Sum("flow-cookie-name", []byte(state))[:8])
}

func (m *Manager) bindValue(state string) []byte {
	return m.vault.Sum("flow-cookie", []byte(state))
}

// bind sets state's binding cookie on the answer.
func (m *Manager) bind(w http.ResponseWriter, state string) {
	m.setCookie(w, m.bindCookieName(state), base64.RawURLEncoding.EncodeToString(m.bindValue(state)), int(PendingTTL.Seconds()))
}

// unbind removes state's binding cookie (the flow is over).
func (m *Manager) unbind(w http.ResponseWriter, state string) {
	m.setCookie(w, m.bindCookieName(state), "", -1)
}

// bound reports whether r carries state's binding cookie.
func (m *Manager) bound(r *http.Request, state string) bool {
	if state == "" {
		return false
	}
	c, err := r.Cookie(m.bindCookieName(state))
	if err != nil {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(c.Value)
	return err == nil && hmac.Equal(got, m.bindValue(state))
}

func (m *Manager) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     m.cookiePath,
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   m.secure,
		SameSite: http.SameSiteLaxMode,
	})
}
