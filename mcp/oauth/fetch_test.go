package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The dial guard's decision, as a pure function: no address below is
// dialled by any test (only loopback ones are, elsewhere).
func TestAddressRefusal(t *testing.T) {
	t.Parallel()
	own := []netip.Addr{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("fd00::5")}
	allow := []netip.Prefix{netip.MustParsePrefix("192.168.50.0/24"), netip.MustParsePrefix("fd12::/16")}
	for _, tc := range []struct {
		addr  string
		class string // "" public
		ok    bool   // passes the guard with own and allow
	}{
		{"93.184.216.34", "", true},
		{"2606:4700::1111", "", true},
		{"8.8.8.8", "", true},
		{"127.0.0.1", "loopback", true}, // own
		{"127.0.0.2", "loopback", false},
		{"::1", "loopback", false},
		{"::ffff:127.0.0.2", "loopback", false}, // IPv4-mapped
		{"::ffff:127.0.0.1", "loopback", true},  // own, mapped
		{"10.1.2.3", "private", true},           // own
		{"10.1.2.4", "private", false},
		{"172.16.0.1", "private", false},
		{"172.31.255.255", "private", false},
		{"172.32.0.1", "", true},
		{"192.168.1.1", "private", false},
		{"192.168.50.7", "private", true}, // allowed network
		{"::ffff:192.168.50.7", "private", true},
		{"fd00::5", "private", true}, // own
		{"fd00::6", "private", false},
		{"fd12::1", "private", true}, // allowed network
		{"fc00::1", "private", false},
		{"100.64.0.1", "shared (carrier-grade NAT)", false},
		{"100.127.255.254", "shared (carrier-grade NAT)", false},
		{"100.128.0.1", "", true},
		{"169.254.169.254", "link-local", false}, // cloud metadata
		{"::ffff:169.254.169.254", "link-local", false},
		{"fe80::1", "link-local", false},
		{"fe80::1%eth0", "link-local", false},
		{"0.0.0.0", "unspecified", false},
		{"::", "unspecified", false},
		{"0.1.2.3", "this-network", false},
		{"224.0.0.1", "link-local", false}, // link-local multicast
		{"233.252.0.1", "multicast", false},
		{"239.255.255.250", "multicast", false},
		{"ff02::1", "link-local", false}, // link-local multicast
		{"ff05::2", "multicast", false},
		{"255.255.255.255", "reserved", false},
		{"240.0.0.1", "reserved", false},
		{"198.18.0.1", "reserved (benchmarking)", false},
		{"fec0::1", "site-local", false},
		{"::127.0.0.2", "loopback (in IPv6)", false},          // IPv4-compatible
		{"::a9fe:a9fe", "link-local (in IPv6)", false},        // ::169.254.169.254
		{"64:ff9b::a9fe:a9fe", "link-local (in IPv6)", false}, // NAT64 of 169.254.169.254
		{"64:ff9b::808:808", "", true},                        // NAT64 of 8.8.8.8
		{"2002:a00:1::1", "private (in IPv6)", false},         // 6to4 of 10.0.0.1
		{"2002:c0a8:3207::1", "private (in IPv6)", true},      // 6to4 of 192.168.50.7: allowed network
		{"2002:808:808::1", "", true},                         // 6to4 of 8.8.8.8
		{"::ffff:8.8.8.8", "", true},
	} {
		ip := netip.MustParseAddr(tc.addr)
		if got := addressClass(ip); got != tc.class {
			t.Errorf("addressClass(%s) = %q, want %q", tc.addr, got, tc.class)
		}
		why := addressRefusal(ip, own, allow)
		if (why == "") != tc.ok {
			t.Errorf("addressRefusal(%s) = %q, want ok=%v", tc.addr, why, tc.ok)
		}
		if why != "" && !strings.Contains(why, tc.class) {
			t.Errorf("addressRefusal(%s) = %q does not name the class %q", tc.addr, why, tc.class)
		}
		// Without own addresses or allowed networks, only public ones pass.
		if why := addressRefusal(ip, nil, nil); (why == "") != (tc.class == "") {
			t.Errorf("addressRefusal(%s, none) = %q", tc.addr, why)
		}
	}
}

// Markers: text of answers that must never reach an error, a page or a
// log line of the bridge.
const (
	internalMarker = "INTERNAL-SECRET-7d41"
	hostileMarker  = "HOSTILE-BODY-93ae"
	headerMarker   = "HOSTILE-HEADER-5c02"
)

// serveOn starts an HTTP server on a loopback address of the test's
// choosing (127.0.0.2 is not the upstream's 127.0.0.1).
func serveOn(t *testing.T, ip string, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listening on %s (the tests need the loopback network 127.0.0.0/8): %v", ip, err)
	}
	s := httptest.NewUnstartedServer(h)
	_ = s.Listener.Close()
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// internalTarget is a service on the internal network (127.0.0.2) that no
// fetch of the bridge may reach: it counts the requests it gets and
// answers everything with a tempting body.
type internalTarget struct {
	srv  *httptest.Server
	hits atomic.Int32
}

func newInternalTarget(t *testing.T) *internalTarget {
	it := &internalTarget{}
	it.srv = serveOn(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		it.hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"access_token":"%s","token_type":"Bearer","client_id":"%s","issuer":"%s","resource":"%s"}`,
			internalMarker, internalMarker, internalMarker, internalMarker)
	}))
	return it
}

func (it *internalTarget) url(path string) string { return it.srv.URL + path }

func (it *internalTarget) untouched(t *testing.T) {
	t.Helper()
	if n := it.hits.Load(); n != 0 {
		t.Errorf("the internal target (127.0.0.2) got %d requests, want none", n)
	}
}

// noMarkers fails when s carries a marker of an answer.
func noMarkers(t *testing.T, what, s string) {
	t.Helper()
	for _, m := range []string{internalMarker, hostileMarker, headerMarker} {
		if strings.Contains(s, m) {
			t.Errorf("%s carries %q: %s", what, m, s)
		}
	}
}

// fakeUpstream is an MCP server at 127.0.0.1 with its own authorization
// server on the same origin: its protected resource metadata, metadata,
// registration and token endpoints, each replaceable.
type fakeUpstream struct {
	srv      *httptest.Server
	prm      http.HandlerFunc
	meta     http.HandlerFunc
	register http.HandlerFunc
	token    http.HandlerFunc
	hits     atomic.Int32
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	f := &fakeUpstream{}
	f.srv = serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		var h http.HandlerFunc
		switch r.URL.Path {
		case "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource":
			h = f.prm
		case "/.well-known/oauth-authorization-server":
			h = f.meta
		case "/register":
			h = f.register
		case "/token":
			h = f.token
		}
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}))
	base := f.srv.URL
	f.prm = func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"resource": base + "/mcp", "authorization_servers": []string{base}})
	}
	f.meta = func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, f.metadata(nil))
	}
	f.register = func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusCreated, map[string]any{"client_id": "cid", "token_endpoint_auth_method": "none"})
	}
	f.token = func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"access_token": "at-good", "token_type": "Bearer", "expires_in": 3600, "refresh_token": "rt"})
	}
	return f
}

// metadata is the authorization server's metadata, with mod's changes.
func (f *fakeUpstream) metadata(mod map[string]any) map[string]any {
	base := f.srv.URL
	m := map[string]any{"issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
		"registration_endpoint": base + "/register", "response_types_supported": []string{"code"},
		"code_challenge_methods_supported": []string{"S256"}}
	for k, v := range mod {
		m[k] = v
	}
	return m
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// redirectTo answers with a redirect to target, its body and a header
// carrying markers.
func redirectTo(status int, target string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", target)
		w.Header().Set("X-Note", headerMarker)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, hostileMarker)
	}
}

// client is a shared-mode Client of f's MCP endpoint with the hardened
// client (no Options.HTTPClient), and its Manager.
func (f *fakeUpstream) client(t *testing.T, cfg Config) (*Manager, *Client) {
	t.Helper()
	m, err := NewManager(&Options{PublicURL: "http://bridge.test"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstream, cfg.ServerURL = "up", f.srv.URL+"/mcp"
	c, err := m.Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}

// challenge401 is the upstream's 401, naming resourceMetadata when given.
func challenge401(resourceMetadata string) *http.Response {
	h := http.Header{}
	v := `Bearer realm="mcp"`
	if resourceMetadata != "" {
		v += `, resource_metadata="` + resourceMetadata + `"`
	}
	h.Set("WWW-Authenticate", v)
	return &http.Response{StatusCode: http.StatusUnauthorized, Header: h}
}

// unauthorized hands c the upstream's 401 and returns the error: an
// *AuthorizationRequired when discovery and registration worked.
func unauthorized(t *testing.T, c *Client, resourceMetadata string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := c.Unauthorized(ctx, "", challenge401(resourceMetadata))
	return err
}

// Attack: a registration endpoint answering 302 to an internal address
// (the bridge followed it with a GET). Now: not followed; the error names
// the registration URL and the status, nothing of the answer. Honest: a
// 201 registers.
func TestRegistrationRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			it := newInternalTarget(t)
			f := newFakeUpstream(t)
			f.register = redirectTo(status, it.url("/latest/meta-data/"+headerMarker))
			_, c := f.client(t, Config{})
			err := unauthorized(t, c, f.srv.URL+"/.well-known/oauth-protected-resource/mcp")
			if err == nil || isRequired(err) {
				t.Fatalf("a registration answered by a redirect: %v, want an error", err)
			}
			want := fmt.Sprintf("dynamic client registration at %s/register: HTTP %d, a redirect, which the bridge never follows for a POST", f.srv.URL, status)
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
			noMarkers(t, "the error", err.Error())
			if strings.Contains(err.Error(), "127.0.0.2") {
				t.Errorf("the error names the redirect's target: %v", err)
			}
			it.untouched(t)
		})
	}
	f := newFakeUpstream(t)
	_, c := f.client(t, Config{})
	if err := unauthorized(t, c, f.srv.URL+"/.well-known/oauth-protected-resource/mcp"); !isRequired(err) {
		t.Errorf("honest registration: %v, want the authorization challenge", err)
	}
}

// Attack: a registration (or token) endpoint named at an internal address
// in the metadata. Now: the dial guard refuses it (127.0.0.2 is not the
// upstream's 127.0.0.1) and no packet goes. Honest: the same endpoint in
// an allow_networks network is reached.
func TestDialGuard(t *testing.T) {
	t.Parallel()
	it := newInternalTarget(t)
	f := newFakeUpstream(t)
	f.meta = func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, f.metadata(map[string]any{"registration_endpoint": it.url("/register")}))
	}
	_, c := f.client(t, Config{})
	err := unauthorized(t, c, "")
	if err == nil || !strings.Contains(err.Error(), "refused to connect to 127.0.0.2, a loopback address") ||
		!strings.Contains(err.Error(), "dynamic client registration at "+it.url("/register")) {
		t.Errorf("registration at an internal address: %v", err)
	}
	noMarkers(t, "the error", err.Error())
	it.untouched(t)

	_, allowed := f.client(t, Config{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
	err = unauthorized(t, allowed, "")
	if n := it.hits.Load(); n != 1 {
		t.Errorf("with allow_networks 127.0.0.2/32 the endpoint got %d requests, want 1", n)
	}
	// The internal target's answer has no redirect_uris etc. but a
	// client_id: registration works; the error is the challenge.
	if !isRequired(err) {
		t.Errorf("with the network allowed: %v, want the challenge", err)
	}
}

// Attack: a resource_metadata in the upstream's WWW-Authenticate naming
// another origin (the bridge made a blind GET there). Now: refused without
// fetching, the error says what and why. Honest: the same path on the MCP
// server's origin is read.
func TestResourceMetadataSameOrigin(t *testing.T) {
	t.Parallel()
	it := newInternalTarget(t)
	f := newFakeUpstream(t)
	_, c := f.client(t, Config{})
	for _, rm := range []string{
		it.url("/.well-known/oauth-protected-resource/mcp"),
		"http://localhost:" + strings.Split(f.srv.URL, ":")[2] + "/.well-known/oauth-protected-resource/mcp", // another host name
		"https://" + strings.TrimPrefix(f.srv.URL, "http://") + "/.well-known/oauth-protected-resource/mcp",  // another scheme
	} {
		before := f.hits.Load()
		err := unauthorized(t, c, rm)
		if err == nil || !strings.Contains(err.Error(), "the resource_metadata of the MCP server's challenge is not on the MCP server's origin ("+f.srv.URL+"): refused without fetching it") {
			t.Errorf("resource_metadata %s: %v", rm, err)
		}
		if err != nil && strings.Contains(err.Error(), "127.0.0.2") {
			t.Errorf("the error repeats the header's URL: %v", err)
		}
		if n := f.hits.Load() - before; n != 0 {
			t.Errorf("resource_metadata %s: %d requests, want none", rm, n)
		}
	}
	it.untouched(t)
	if err := unauthorized(t, c, f.srv.URL+"/.well-known/oauth-protected-resource/mcp"); !isRequired(err) {
		t.Errorf("same-origin resource_metadata: %v, want the challenge", err)
	}
}

// Metadata GETs follow a few redirects on their own origin, none to
// another; a metadata answer larger than MaxFetchBody fails the fetch.
func TestMetadataRedirectsAndSize(t *testing.T) {
	t.Parallel()
	it := newInternalTarget(t)
	f := newFakeUpstream(t)
	var mode atomic.Value
	mode.Store("cross")
	prm := f.prm
	f.prm = func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("moved") != "":
			prm(w, r)
		case mode.Load() == "cross":
			redirectTo(http.StatusFound, it.url("/.well-known/oauth-protected-resource/mcp"))(w, r)
		case mode.Load() == "same":
			redirectTo(http.StatusFound, "/.well-known/oauth-protected-resource/mcp?moved=1")(w, r)
		case mode.Load() == "loop":
			redirectTo(http.StatusFound, r.URL.Path)(w, r)
		case mode.Load() == "large":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"resource":"`+strings.Repeat(hostileMarker, 2*MaxFetchBody/len(hostileMarker))+`"}`)
		}
	}
	_, c := f.client(t, Config{})
	rm := f.srv.URL + "/.well-known/oauth-protected-resource/mcp"
	for _, tc := range []struct{ mode, want string }{
		{"cross", "protected resource metadata at " + rm + ": HTTP 302, a redirect to another origin, which the bridge does not follow"},
		{"loop", "protected resource metadata at " + rm + ": HTTP 302, more than 3 redirects"},
		{"large", "protected resource metadata at " + rm + ": HTTP 200, the answer is larger than 256 KiB"},
	} {
		mode.Store(tc.mode)
		c.forget()
		err := unauthorized(t, c, rm)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.mode, err, tc.want)
		}
		if err != nil {
			noMarkers(t, tc.mode+": the error", err.Error())
		}
	}
	it.untouched(t)
	mode.Store("same")
	c.forget()
	if err := unauthorized(t, c, rm); !isRequired(err) {
		t.Errorf("a same-origin redirect: %v, want the challenge", err)
	}
}

// No answer's body or header reaches an error: metadata with a wrong
// content type, a wrong issuer, a 500 with a body; a registration refused
// with an error description; a token endpoint's made-up error code.
func TestFetchErrorsQuoteNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(f *fakeUpstream)
		want  string
	}{
		{"metadata content type", func(f *fakeUpstream) {
			f.meta = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/"+headerMarker)
				_, _ = io.WriteString(w, hostileMarker)
			}
		}, "authorization server metadata at %s/.well-known/oauth-authorization-server: HTTP 200, the answer is not application/json"},
		{"metadata issuer", func(f *fakeUpstream) {
			f.meta = func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, http.StatusOK, f.metadata(map[string]any{"issuer": "https://" + hostileMarker + ".example"}))
			}
		}, "authorization server metadata at %s/.well-known/oauth-authorization-server: HTTP 200, the metadata names another issuer"},
		{"metadata 500", func(f *fakeUpstream) {
			f.meta = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Debug", headerMarker)
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(w, hostileMarker)
			}
		}, "authorization server metadata at %s/.well-known/oauth-authorization-server: HTTP 500"},
		{"registration 400", func(f *fakeUpstream) {
			f.register = func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_client_metadata", "error_description": hostileMarker})
			}
		}, "dynamic client registration at %s/register: HTTP 400, the server answered invalid_client_metadata"},
		{"registration 400 made-up code", func(f *fakeUpstream) {
			f.register = func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, http.StatusBadRequest, map[string]any{"error": hostileMarker})
			}
		}, "dynamic client registration at %s/register: HTTP 400"},
		{"registration 503", func(f *fakeUpstream) {
			f.register = func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, hostileMarker)
			}
		}, "dynamic client registration at %s/register: HTTP 503"},
		{"registration garbage", func(f *fakeUpstream) {
			f.register = func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, hostileMarker)
			}
		}, "dynamic client registration at %s/register: HTTP 201, not a valid answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeUpstream(t)
			tc.setup(f)
			_, c := f.client(t, Config{})
			err := unauthorized(t, c, "")
			if want := fmt.Sprintf(tc.want, f.srv.URL); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("%v, want %q", err, want)
			}
			noMarkers(t, "the error", err.Error())
		})
	}
}

// Attack: a token endpoint answering 307 to another host (the bridge
// re-POSTed the code and code_verifier there). Now: not followed, for the
// code exchange (the callback page names the token URL and the status,
// nothing else), the refresh and the client credentials grant. Honest: a
// 200 completes each.
func TestTokenRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	it := newInternalTarget(t)
	f := newFakeUpstream(t)
	var redirect atomic.Bool
	var posted atomic.Int32
	good := f.token
	f.token = func(w http.ResponseWriter, r *http.Request) {
		posted.Add(1)
		if redirect.Load() {
			redirectTo(http.StatusTemporaryRedirect, it.url("/token"))(w, r)
			return
		}
		good(w, r)
	}
	tokenURL := f.srv.URL + "/token"
	for _, honest := range []bool{false, true} {
		redirect.Store(!honest)
		// The code exchange, at the callback.
		m, c := f.client(t, Config{})
		r, ok := unauthorized(t, c, "").(*AuthorizationRequired)
		if !ok {
			t.Fatal("no challenge")
		}
		state := strings.TrimPrefix(r.URL, "http://bridge.test/oauth/authorize/")
		var b browser // the browser that opened the link
		b.get(t, m, "/oauth/authorize/"+state)
		w := b.get(t, m, "/oauth/callback?state="+state+"&code=the-code")
		page := w.Body.String()
		if honest {
			if w.Code != http.StatusOK {
				t.Errorf("honest exchange: %d %s", w.Code, page)
			}
		} else {
			want := "POST " + tokenURL + ": HTTP 307, a redirect, which the bridge never follows for a POST"
			if w.Code != http.StatusBadRequest || !strings.Contains(page, want) {
				t.Errorf("exchange answered by a 307: %d %s, want 400 saying %q", w.Code, page, want)
			}
			noMarkers(t, "the callback page", page)
		}

		// The refresh, and the client credentials grant.
		soon := time.Now().Add(refreshMargin / 2)
		_ = c.save(t.Context(), "", &record{ServerURL: c.cfg.ServerURL, Issuer: c.server().asm.Issuer, Resource: c.server().resource,
			AccessToken: "old", RefreshToken: "rt", Expiry: soon, TokenURL: tokenURL,
			Client: registration{ID: "cid", Method: "none"}})
		h, err := c.Authorization(t.Context())
		if honest != (err == nil && h == "Bearer at-good") {
			t.Errorf("refresh (honest %v): %q %v", honest, h, err)
		}
		if err != nil {
			noMarkers(t, "the refresh error", err.Error())
		}
		_, cc := f.client(t, Config{Grant: GrantClientCredentials, ClientID: "cid", ClientSecret: "s"})
		cc.srv = c.server()
		h, err = cc.Authorization(t.Context())
		if honest != (err == nil && h == "Bearer at-good") {
			t.Errorf("client credentials (honest %v): %q %v", honest, h, err)
		}
		if err != nil {
			noMarkers(t, "the client credentials error", err.Error())
		}
	}
	it.untouched(t)
	if posted.Load() != 6 {
		t.Errorf("the token endpoint got %d requests, want 6 (3 refused, 3 honest)", posted.Load())
	}
}

// A token endpoint's error code outside RFC 6749 is not repeated; one of
// RFC 6749's is.
func TestTokenErrorCodes(t *testing.T) {
	t.Parallel()
	f := newFakeUpstream(t)
	var code atomic.Value
	f.token = func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": code.Load(), "error_description": hostileMarker, "error_uri": "https://" + hostileMarker})
	}
	_, c := f.client(t, Config{Grant: GrantClientCredentials, ClientID: "cid", ClientSecret: "s"})
	for _, tc := range []struct{ code, want string }{
		{"invalid_client", "the authorization server answered invalid_client"},
		{hostileMarker + "<script>", "the authorization server answered an error code outside RFC 6749"},
	} {
		code.Store(tc.code)
		err := unauthorized(t, c, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error code %q: %v, want %q", tc.code, err, tc.want)
		}
		if err != nil {
			noMarkers(t, "the error", err.Error())
		}
	}
}

// Behind a proxy (HTTPS_PROXY) the guard checks the destination before the
// request goes to the proxy: an internal destination is refused and the
// proxy gets nothing; the upstream's own host goes through the proxy.
func TestProxyDestinationChecked(t *testing.T) {
	t.Parallel()
	it := newInternalTarget(t)
	f := newFakeUpstream(t)
	var proxied atomic.Int32
	proxy := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1) // a forward proxy gets the absolute URL
		if r.URL.Host != strings.TrimPrefix(f.srv.URL, "http://") {
			t.Errorf("the proxy was asked for %s", r.URL)
		}
		writeJSON(w, http.StatusOK, map[string]any{"via": "proxy"})
	}))
	pu, _ := url.Parse(proxy.URL)
	hc := NewHTTPClient(&FetchOptions{Hosts: []string{f.srv.URL + "/mcp"}, proxy: http.ProxyURL(pu)})
	ctx, tr := withTrace(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, it.url("/x"), nil)
	_, err := hc.Do(req)
	if err == nil || !strings.Contains(err.Error(), "refused to connect to 127.0.0.2") || !strings.Contains(err.Error(), "before the request went to the proxy") {
		t.Errorf("an internal destination through the proxy: %v", err)
	}
	if !tr.wasRefused() {
		t.Error("the refusal is not in the trace")
	}
	if proxied.Load() != 0 {
		t.Errorf("the proxy got %d requests for a refused destination", proxied.Load())
	}
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodGet, f.srv.URL+"/anything", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("the upstream's own host through the proxy: %v", err)
	}
	resp.Body.Close()
	if proxied.Load() != 1 || f.hits.Load() != 0 {
		t.Errorf("proxy %d, upstream %d requests: want the request through the proxy", proxied.Load(), f.hits.Load())
	}
	it.untouched(t)
}

// A body larger than MaxFetchBody fails the read (not a silent cut) with
// the package's own words; Content-Length says it before reading.
func TestBoundedBody(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", MaxFetchBody+1)
	srv := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("chunked") != "" {
			w.(http.Flusher).Flush() // no Content-Length
		} else {
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
		}
		_, _ = io.WriteString(w, big)
	}))
	hc := NewHTTPClient(&FetchOptions{Hosts: []string{srv.URL}})
	_, err := hc.Get(srv.URL + "/?x=1")
	if err == nil || !strings.Contains(err.Error(), "the answer is larger than 256 KiB") {
		t.Errorf("Content-Length past the bound: %v", err)
	}
	resp, err := hc.Get(srv.URL + "/?chunked=1")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil || n != MaxFetchBody || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a chunked body past the bound: read %d, %v", n, err)
	}
}

// The configured hosts may be URLs, host:port or names; their addresses
// are the guard's own.
func TestGuardHosts(t *testing.T) {
	t.Parallel()
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "mcp.internal.test" {
			return []netip.Addr{netip.MustParseAddr("10.9.8.7")}, nil
		}
		return nil, fmt.Errorf("%s: no such host", host)
	}
	for _, h := range []string{"https://mcp.internal.test/mcp", "mcp.internal.test:8443", "mcp.internal.test"} {
		hc := NewHTTPClient(&FetchOptions{Hosts: []string{h}, lookup: lookup})
		g := hc.Transport.(*fetchTransport).guard
		own := g.own(t.Context())
		if len(own) != 1 || own[0] != netip.MustParseAddr("10.9.8.7") || addressRefusal(own[0], own, nil) != "" {
			t.Errorf("Hosts %q: own addresses %v", h, own)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"https://a.example/x", "https://A.example:443/y", true},
		{"http://a.example/x", "http://a.example:80", true},
		{"http://a.example/x", "https://a.example/x", false},
		{"http://a.example:8080/x", "http://a.example/x", false},
		{"http://a.example/x", "http://b.example/x", false},
		{"/relative", "http://a.example/", false},
		{"http://[::1]:5/x", "http://[::1]:5/y", true},
	} {
		if got := sameOrigin(tc.a, tc.b); got != tc.want {
			t.Errorf("sameOrigin(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}
