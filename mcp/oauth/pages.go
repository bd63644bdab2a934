package oauth

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html"
	"net/http"
	"strings"
)

// The pages of the /oauth/ routes: the one place a person meets the bridge
// outside their agent. Each says what happened, for which tool server,
// and what to do next, in the bridge's own words: nothing an
// authorization server or a URL said is repeated, but for an RFC 6749
// error code and the name a verified ID token gives.

type pageKind int

const (
	pageUnknown      pageKind = iota // no such state (or it expired and was forgotten)
	pageEnded                        // the state was used or expired
	pageOtherBrowser                 // a callback from a browser that did not open the link
	pageFailed                       // the flow failed; p.why says how
	pageAuthorized                   // completed
	pageWaiting                      // VerifyVerifier: not confirmed yet
	pageProviderDown                 // the users' OpenID provider cannot be reached
	pageLoginLost                    // /oauth/login without its cookie (another browser, or expired)
	pageSignInFailed                 // the provider refused, or its answer did not verify; args[0] says which
	pageOtherUser                    // signed in as args[0], not the flow's user
	pageExpired                      // the state expired before the flow ended (pageEnded of an expired flow)
)

// pageStyle is the pages' only style; the Content-Security-Policy admits
// it by its hash and nothing else (no script, no image, no form).
const pageStyle = `body{font-family:system-ui,sans-serif;max-width:40em;margin:3em auto;padding:0 1em;line-height:1.5;color:#222}h1{font-size:1.4em}.ok{color:#176f2c}.no{color:#a11}code{background:#f3f3f3;padding:0 .2em}`

var pageCSP = func() string {
	sum := sha256.Sum256([]byte(pageStyle))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

// page writes one of the pages; p (when known) names the tool server.
func (m *Manager) page(w http.ResponseWriter, status int, kind pageKind, p *pending, args ...string) {
	server := "the tool server"
	if p != nil && p.c != nil {
		server = "the tool server " + quote(p.c.cfg.Upstream)
	}
	arg := ""
	if len(args) > 0 {
		arg = args[0]
	}
	if kind == pageEnded && p != nil && p.status == statusFailed && p.why == whyExpired {
		kind = pageExpired
	}
	var title, class string
	var paras []string
	minutes := fmt.Sprint(int(PendingTTL.Minutes()))
	closeIt := "You can close this window and go back to the application you were using."
	switch kind {
	case pageUnknown:
		title, class = "Unknown or expired authorization link", "no"
		paras = []string{"This link is not (or no longer) one the bridge issued. Links are good for " +
			minutes + " minutes and for one use.",
			"Go back to the application and use the tool again: it gives you a new link."}
	case pageEnded:
		title, class = "This authorization link was already used", "no"
		paras = []string{"The authorization for " + server + " has ended (" + publicStatus(p.status) + "). Nothing was changed now.",
			"If the tool still asks for an authorization, use it again in the application to get a new link."}
	case pageExpired:
		title, class = "This authorization link has expired", "no"
		paras = []string{"The authorization for " + server + " was not completed within " + minutes +
			" minutes of the link being given out, so the link no longer works. Nothing was authorized.",
			"Go back to the application and use the tool again: it gives you a new link. Open it and finish within " + minutes + " minutes."}
	case pageOtherBrowser:
		title, class = "This authorization was started in another browser", "no"
		paras = []string{"The answer of the authorization server reached this browser, but the authorization link was opened in another one. " +
			"Nothing was authorized and nothing was changed.",
			"Open the authorization link you were given in this browser, from the start."}
	case pageFailed:
		title, class = "Authorization failed", "no"
		why := "it did not complete"
		if p != nil && p.why != "" {
			why = p.why
		}
		paras = []string{"The bridge could not get access to " + server + ": " + why + ".",
			"Go back to the application and use the tool again: it gives you a new link."}
	case pageAuthorized:
		title, class = "Authorized", "ok"
		who := ""
		if p != nil && p.user != "" {
			who = " for the user " + quote(p.user)
		}
		paras = []string{"The bridge can now reach " + server + who + "."}
		if p != nil && p.c != nil && p.user != "" && p.c.verifies(p.user) == VerifyNone {
			// user_verification none: say what that means to the person
			// who just connected their account.
			paras = append(paras, "The bridge did not check that you are the user "+quote(p.user)+
				": this tool server is set up without user verification, so whoever opens the link connects their account. "+
				"The account you just used now serves that user's calls. If you are not "+quote(p.user)+", tell the application's operator.")
		}
		paras = append(paras, closeIt+" The tool works from now on; if it had stopped to ask, use it again.")
	case pageWaiting:
		title, class = "Waiting for the application", ""
		paras = []string{"The authorization for " + server + " waits for the application to confirm who you are. " +
			"If the application does not take you on, go back to it and use the tool again."}
	case pageProviderDown:
		title, class = "The sign-in service cannot be reached", "no"
		paras = []string{"Before " + server + " can be authorized, you must sign in, but the sign-in service does not answer now.",
			"Try the same link again in a minute. Nothing was changed."}
	case pageLoginLost:
		title, class = "Sign-in not recognised", "no"
		paras = []string{"This sign-in was not started in this browser, or it took too long. Nothing was authorized.",
			"Open the authorization link you were given again, in this browser."}
	case pageSignInFailed:
		title, class = "Sign-in failed", "no"
		paras = []string{"Signing in for " + server + " did not succeed: " + arg + ". Nothing was authorized.",
			"Open the authorization link again to retry."}
	case pageOtherUser:
		title, class = "This authorization link is for another user", "no"
		paras = []string{"You are signed in as " + quote(arg) + ", but this link was issued to another user of the application. " +
			"Nothing was authorized: an account can only be connected by the user the link was issued to.",
			"If someone sent you this link, do not use it. To connect your own account, use the tool in the application yourself: it gives you a link of your own."}
	}
	var b strings.Builder
	b.WriteString("<!doctype html><html lang=\"en\"><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">")
	fmt.Fprintf(&b, "<title>%s — mcpotc</title><style>%s</style>", html.EscapeString(title), pageStyle)
	fmt.Fprintf(&b, "<h1 class=%q>%s</h1>", class, html.EscapeString(title))
	for _, t := range paras {
		fmt.Fprintf(&b, "<p>%s</p>", html.EscapeString(t))
	}
	b.WriteString("</html>\n")
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// quote is s between typographic quotes, cut to 200 bytes.
func quote(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return "“" + s + "”"
}
