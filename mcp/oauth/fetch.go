package oauth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// The hardened HTTP client
//
// Every request this package makes — protected resource and authorization
// server metadata, dynamic client registration, the token endpoint (code
// exchange, refresh, client credentials), a key set (JWKS), token
// introspection — goes through an *http.Client of NewHTTPClient, including
// those the official Go SDK's oauthex package and golang.org/x/oauth2 make
// with it. The URLs such a request goes to come from documents and headers
// of servers the bridge does not control, so the client keeps these rules:
//
//   - Redirects: never followed for a POST (token, registration,
//     introspection: a 307 would re-send a code, a code verifier or a client
//     secret elsewhere); for a GET (metadata, JWKS) at most MaxFetchRedirects,
//     each to the origin of the URL asked for. Anything else fails the
//     fetch, and its error names the URL asked for, not the redirect's
//     target.
//   - The dial guard: the client connects only to public addresses, or to
//     an address the configured server's own host name resolves to
//     (FetchOptions.Hosts: an upstream on a private network or on loopback
//     reaches its own authorization server there), or to one in
//     FetchOptions.AllowNetworks. Refused: loopback, private (RFC 1918,
//     fc00::/7), shared (100.64.0.0/10), link-local (169.254.0.0/16,
//     fe80::/10), unspecified, multicast, reserved, and the IPv6 forms that
//     embed such an IPv4 address (mapped, compatible, NAT64, 6to4). Every
//     address a name resolves to is checked, and the connection is made to
//     the address checked (no second lookup).
//   - A proxy from the environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY) is
//     used, as for the upstream connections themselves; then the bridge
//     does not choose the address it connects to, so it resolves the
//     destination's name first and refuses the request unless every address
//     passes the guard. The proxy resolves the name again: a name whose
//     answer changes between the two lookups escapes the check, so a proxy
//     in front of an internal network should refuse internal destinations
//     itself.
//   - Bounds: MaxFetchBody per answer (a larger one fails the fetch),
//     FetchTimeout per request (redirects and body included), short dial,
//     TLS and header timeouts, and a small connection pool.
//   - Errors (fetchError) say what was fetched, the URL asked for (without
//     its query), the HTTP status and a short reason of this package's own
//     wording: never a response body, a header value or a token.

// Bounds of the hardened client.
const (
	// FetchTimeout bounds one request: connecting, redirects, reading
	// the answer.
	FetchTimeout = 10 * time.Second
	// MaxFetchBody bounds one answer's body, decompressed.
	MaxFetchBody = 256 << 10
	// MaxFetchRedirects bounds the same-origin redirects of one GET.
	MaxFetchRedirects = 3

	fetchDialTimeout     = 5 * time.Second
	fetchTLSTimeout      = 5 * time.Second
	fetchHeaderTimeout   = 10 * time.Second
	fetchMaxHeaderBytes  = 64 << 10
	fetchMaxConnsPerHost = 2 * MaxIntrospectionsInFlight
	fetchMaxIdlePerHost  = 4
	fetchMaxIdleConns    = 16
	fetchIdleConnTimeout = 90 * time.Second
	maxErrorURLLength    = 160
	discoveryTimeout     = 30 * time.Second
)

// FetchOptions configure NewHTTPClient. A nil *FetchOptions is the zero
// value.
type FetchOptions struct {
	// Hosts are the configured servers the client works for, as URLs or
	// host names: an MCP server (serve-otc's upstream), the issuers and
	// the introspection endpoint (serve-mcp). An address one of them
	// resolves to passes the dial guard even when it is private or
	// loopback. Zero: none (public addresses only).
	Hosts []string
	// AllowNetworks pass the dial guard too: an authorization server on
	// the operator's own network. Zero: none.
	AllowNetworks []netip.Prefix
	// Timeout bounds one request. Zero: FetchTimeout.
	Timeout time.Duration

	// proxy replaces http.ProxyFromEnvironment (tests).
	proxy func(*http.Request) (*url.URL, error)
	// lookup replaces the system resolver (tests).
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// NewHTTPClient returns the hardened client of this package's fetches
// (see the rules above).
func NewHTTPClient(o *FetchOptions) *http.Client {
	if o == nil {
		o = &FetchOptions{}
	}
	g := &guard{
		allow:  slices.Clone(o.AllowNetworks),
		lookup: o.lookup,
		dialer: &net.Dialer{Timeout: fetchDialTimeout, KeepAlive: 30 * time.Second},
	}
	for _, h := range o.Hosts {
		if u, err := url.Parse(h); err == nil && u.Host != "" {
			h = u.Hostname()
		} else if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		if h != "" {
			g.hosts = append(g.hosts, h)
		}
	}
	if g.lookup == nil {
		g.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	direct := &http.Transport{
		DialContext:            g.dial,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    fetchTLSTimeout,
		ResponseHeaderTimeout:  fetchHeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: fetchMaxHeaderBytes,
		MaxConnsPerHost:        fetchMaxConnsPerHost,
		MaxIdleConnsPerHost:    fetchMaxIdlePerHost,
		MaxIdleConns:           fetchMaxIdleConns,
		IdleConnTimeout:        fetchIdleConnTimeout,
	}
	proxy := o.proxy
	if proxy == nil {
		proxy = http.ProxyFromEnvironment
	}
	proxied := direct.Clone()
	proxied.Proxy = proxy
	proxied.DialContext = g.dialer.DialContext // the proxy, configured by the operator
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = FetchTimeout
	}
	return &http.Client{
		Transport:     &fetchTransport{direct: direct, proxied: proxied, proxy: proxy, guard: g},
		CheckRedirect: checkRedirect,
		Timeout:       timeout,
	}
}

// fetchTransport sends a request directly (through the dial guard) or,
// when the environment names a proxy for it, through the proxy after
// checking the destination's addresses; it bounds each answer's body and
// records what it met in the request's fetchTrace.
type fetchTransport struct {
	direct, proxied *http.Transport
	proxy           func(*http.Request) (*url.URL, error)
	guard           *guard
}

func (t *fetchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tr := traceOf(req.Context())
	if req.Response == nil { // not a redirect's: a new URL asked for
		tr.ask(req)
	}
	base := t.direct
	if pu, err := t.proxy(req); err != nil {
		return nil, err
	} else if pu != nil {
		if err := t.guard.check(req.Context(), req.URL.Hostname()); err != nil {
			return nil, tr.refused(req, err)
		}
		base = t.proxied
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, tr.refused(req, err)
	}
	tr.answered(resp.StatusCode)
	if resp.ContentLength > MaxFetchBody {
		resp.Body.Close()
		return nil, tr.refused(req, &refusal{reason: tooLarge})
	}
	resp.Body = &boundedBody{rc: resp.Body, left: MaxFetchBody, tr: tr, req: req}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach both
// pools.
func (t *fetchTransport) CloseIdleConnections() {
	t.direct.CloseIdleConnections()
	t.proxied.CloseIdleConnections()
}

var tooLarge = fmt.Sprintf("the answer is larger than %d KiB", MaxFetchBody>>10)

// boundedBody fails a read past MaxFetchBody (rather than cutting the
// answer short without a word).
type boundedBody struct {
	rc   io.ReadCloser
	left int64
	tr   *fetchTrace
	req  *http.Request
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, b.tr.refused(b.req, &refusal{reason: tooLarge})
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// checkRedirect is the redirect policy of the hardened client.
func checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0]
	status := 0
	if req.Response != nil {
		status = req.Response.StatusCode
	}
	var why string
	switch {
	case first.Method != http.MethodGet && first.Method != http.MethodHead:
		why = "a redirect, which the bridge never follows for a " + first.Method
	case len(via) > MaxFetchRedirects:
		why = fmt.Sprintf("more than %d redirects", MaxFetchRedirects)
	case origin(req.URL) != origin(first.URL):
		why = "a redirect to another origin, which the bridge does not follow"
	default:
		return nil
	}
	r := &refusal{method: first.Method, url: errorURL(first.URL), status: status, reason: why}
	traceOf(req.Context()).refuse(r)
	return r
}

// origin is u's scheme, host and port (the default one made explicit).
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// sameOrigin reports whether the URLs a and b have one origin.
func sameOrigin(a, b string) bool {
	ua, err := url.Parse(a)
	if err != nil || ua.Host == "" {
		return false
	}
	ub, err := url.Parse(b)
	if err != nil || ub.Host == "" {
		return false
	}
	return origin(ua) == origin(ub)
}

// guard is the dial guard of one client.
type guard struct {
	hosts  []string // names or IP literals whose addresses pass
	allow  []netip.Prefix
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	dialer *net.Dialer
}

func (g *guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{ip}, nil
	}
	return g.lookup(ctx, host)
}

// own is what the configured hosts resolve to now (an address that
// cannot be found is not own: the guard fails closed).
func (g *guard) own(ctx context.Context) []netip.Addr {
	var out []netip.Addr
	for _, h := range g.hosts {
		if ips, err := g.resolve(ctx, h); err == nil {
			out = append(out, ips...)
		}
	}
	return out
}

// dial connects to the first address of addr's host that the guard lets
// through, by that address.
func (g *guard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips, err := g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var own []netip.Addr
	var ownDone bool
	var last error
	for _, ip := range ips {
		if addressClass(ip) != "" && !ownDone {
			own, ownDone = g.own(ctx), true
		}
		if why := addressRefusal(ip, own, g.allow); why != "" {
			if last == nil || isRefusal(last) {
				last = &refusal{reason: why}
			}
			continue
		}
		c, err := g.dialer.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	if last == nil {
		last = fmt.Errorf("%s: no address", host)
	}
	return nil, last
}

// check is the guard for a request that goes through a proxy: every
// address of host must pass.
func (g *guard) check(ctx context.Context, host string) error {
	ips, err := g.resolve(ctx, host)
	if err != nil {
		return err
	}
	var own []netip.Addr
	var ownDone bool
	for _, ip := range ips {
		if addressClass(ip) != "" && !ownDone {
			own, ownDone = g.own(ctx), true
		}
		if why := addressRefusal(ip, own, g.allow); why != "" {
			return &refusal{reason: why + " (checked before the request went to the proxy)"}
		}
	}
	return nil
}

// addressRefusal says why the dial guard refuses to connect to ip, ""
// when it may: ip is public, one of own (the configured servers'
// addresses), or in one of allow.
func addressRefusal(ip netip.Addr, own []netip.Addr, allow []netip.Prefix) string {
	class := addressClass(ip)
	if class == "" {
		return ""
	}
	plain := ip.WithZone("").Unmap()
	for _, o := range own {
		if o.IsValid() && o.WithZone("").Unmap() == plain {
			return ""
		}
	}
	for _, p := range allow {
		if p.Contains(plain) {
			return ""
		}
		if v4, ok := embeddedV4(plain); ok && p.Contains(v4) {
			return ""
		}
	}
	return fmt.Sprintf("refused to connect to %s, a %s address: not an address of the configured server's host, nor in an allowed network", plain, class)
}

// specialRanges are the ranges addressClass names beyond netip's own
// predicates.
var specialRanges = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (carrier-grade NAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved (benchmarking)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // and 255.255.255.255
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
}

// addressClass names the kind of non-public address ip is, "" for a
// public one.
func addressClass(ip netip.Addr) string {
	ip = ip.WithZone("").Unmap()
	switch {
	case !ip.IsValid():
		return "invalid"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, r := range specialRanges {
		if r.prefix.Contains(ip) {
			return r.class
		}
	}
	if v4, ok := embeddedV4(ip); ok {
		if c := addressClass(v4); c != "" {
			return c + " (in IPv6)"
		}
	}
	return ""
}

var (
	compatV6 = netip.MustParsePrefix("::/96")
	nat64    = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4   = netip.MustParsePrefix("2002::/16")
)

// embeddedV4 is the IPv4 address an IPv6 address carries: IPv4-compatible
// (::a.b.c.d), NAT64 (RFC 6052) or 6to4 (RFC 3056). (IPv4-mapped ones are
// unmapped by the caller.)
func embeddedV4(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() {
		return netip.Addr{}, false
	}
	b := ip.As16()
	switch {
	case compatV6.Contains(ip), nat64.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixTo4.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// refusal is the error of a request the hardened client refused to make
// or to finish. Its text is this package's own.
type refusal struct {
	method, url string // the request asked for ("" until known)
	status      int    // the answer refused (a redirect); 0: none
	reason      string
}

func (r *refusal) Error() string {
	s := r.reason
	if r.status != 0 {
		s = fmt.Sprintf("HTTP %d, %s", r.status, s)
	}
	if r.url == "" {
		return s
	}
	return r.method + " " + r.url + ": " + s
}

func isRefusal(err error) bool {
	var r *refusal
	return errors.As(err, &r)
}

// fetchTrace records what the requests of one operation met: the URL last
// asked for, the HTTP status of the last answer, and the first refusal.
// An operation's error is made from it (fetchError), never from a
// library's error text. Nil-safe: a request without one records nothing.
type fetchTrace struct {
	mu      sync.Mutex
	url     string
	method  string
	status  int
	refusal *refusal
}

type traceKey struct{}

// withTrace returns a context whose fetches record into a new trace.
func withTrace(ctx context.Context) (context.Context, *fetchTrace) {
	tr := &fetchTrace{}
	return context.WithValue(ctx, traceKey{}, tr), tr
}

func traceOf(ctx context.Context) *fetchTrace {
	tr, _ := ctx.Value(traceKey{}).(*fetchTrace)
	return tr
}

func (t *fetchTrace) ask(req *http.Request) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.url, t.method, t.status = errorURL(req.URL), req.Method, 0
}

func (t *fetchTrace) answered(status int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status = status
}

func (t *fetchTrace) refuse(r *refusal) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.refusal == nil {
		t.refusal = r
	}
}

// refused returns err, a refusal of the guard completed with the request
// it refused (and recorded), or any other error as it is.
func (t *fetchTrace) refused(req *http.Request, err error) error {
	var r *refusal
	if !errors.As(err, &r) {
		return err
	}
	if r.url == "" {
		// Name the request asked for, not a redirect's target.
		first := req
		for first.Response != nil && first.Response.Request != nil {
			first = first.Response.Request
		}
		c := *r
		c.method, c.url = first.Method, errorURL(first.URL)
		r = &c
	}
	t.refuse(r)
	return r
}

// wasRefused reports whether a request of the operation was refused.
func (t *fetchTrace) wasRefused() bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refusal != nil
}

// fetchError is the error of a failed fetch: what was fetched, the URL
// asked for, the HTTP status when there was an answer, and a reason in
// this package's words.
type fetchError struct {
	what   string
	url    string
	status int
	reason string
}

func (e *fetchError) Error() string {
	s := e.what + " at " + e.url + ": "
	switch {
	case e.status != 0 && e.reason != "":
		return s + fmt.Sprintf("HTTP %d, %s", e.status, e.reason)
	case e.status != 0:
		return s + fmt.Sprintf("HTTP %d", e.status)
	default:
		return s + e.reason
	}
}

// fail is the error of the operation traced by t, which fetched what at
// asked and failed with err (a library's error: read for its kind, never
// quoted).
func (t *fetchTrace) fail(what, asked string, err error) error {
	e := &fetchError{what: what, url: asked}
	if u, perr := url.Parse(asked); perr == nil {
		e.url = errorURL(u)
	}
	var r *refusal
	if t != nil {
		t.mu.Lock()
		if t.url != "" {
			e.url = t.url
		}
		e.status, r = t.status, t.refusal
		t.mu.Unlock()
	}
	if r == nil {
		errors.As(err, &r)
	}
	switch {
	case r != nil:
		e.reason = r.reason
		if r.url != "" {
			e.url = r.url
		}
	case e.status == 0 || (e.status >= 200 && e.status < 300):
		e.reason = describe(err)
	case e.status < 200 || e.status >= 300:
		// The status says it; a registration error may add its code.
		var ce *oauthex.ClientRegistrationError
		if errors.As(err, &ce) && slices.Contains(registrationErrorCodes, ce.ErrorCode) {
			e.reason = "the server answered " + ce.ErrorCode
		}
	}
	return e
}

// registrationErrorCodes are the error codes of RFC 7591 §3.2.2.
var registrationErrorCodes = []string{"invalid_redirect_uri", "invalid_client_metadata", "invalid_software_statement", "unapproved_software_statement"}

// tokenErrorCodes are the token endpoint's error codes (RFC 6749 §5.2,
// RFC 8707 §2): the only error text of an authorization server the bridge
// repeats.
var tokenErrorCodes = []string{"invalid_request", "invalid_client", "invalid_grant", "unauthorized_client",
	"unsupported_grant_type", "invalid_scope", "invalid_target"}

// tokenErrorCode is code when it is one of tokenErrorCodes, else a fixed
// text (the code is the server's; it may be anything).
func tokenErrorCode(code string) string {
	if slices.Contains(tokenErrorCodes, code) {
		return code
	}
	return "an error code outside RFC 6749"
}

// libraryReasons turn the errors of the Go SDK's oauthex package and of
// golang.org/x/oauth2 into fixed reasons: their texts quote URLs and
// values of the answer, which an error of the bridge never repeats.
var libraryReasons = []struct{ contains, reason string }{
	{"authorization_servers[", "the metadata names an authorization server URL the bridge refuses (not https, or a non-public IP address)"},
	{"does not use HTTPS", "not an https URL (plain http only on loopback)"},
	{"non-public address", "the URL names a non-public IP address"},
	{"got metadata resource", "the metadata names another resource (RFC 9728 §3.3)"},
	{"does not match issuer", "the metadata names another issuer (RFC 8414 §3.3)"},
	{"does not implement PKCE", "the metadata lists no PKCE method"},
	{"bad content type", "the answer is not application/json"},
	{"disallowed scheme", "a URL of the answer has a disallowed scheme"},
	{"missing required 'client_id'", "the answer has no client_id"},
	{"missing access_token", "the answer has no access_token"},
	{tooLarge, tooLarge},
}

// describe is a fixed reason for err: one of libraryReasons, or the kind
// of network failure.
func describe(err error) string {
	if err == nil {
		return "failed"
	}
	if r := (*refusal)(nil); errors.As(err, &r) {
		return r.reason
	}
	s := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded), strings.Contains(s, "Client.Timeout exceeded"),
		strings.Contains(s, "deadline exceeded"), strings.Contains(s, "i/o timeout"):
		return "no answer in time"
	case errors.Is(err, context.Canceled), strings.Contains(s, "context canceled"):
		return "canceled"
	}
	for _, l := range libraryReasons {
		if strings.Contains(s, l.contains) {
			return l.reason
		}
	}
	switch {
	case strings.Contains(s, "connection refused"):
		return "connection refused"
	case strings.Contains(s, "no such host"), strings.Contains(s, "server misbehaving"):
		return "the host name does not resolve"
	case strings.Contains(s, "x509:"), strings.Contains(s, "tls:"):
		return "TLS failed"
	case strings.Contains(s, "connection reset"), strings.Contains(s, "EOF"):
		return "the connection closed before the answer"
	case strings.Contains(s, "unsupported protocol scheme"):
		return "not an http or https URL"
	}
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) {
		return "the request failed"
	}
	return "not a valid answer"
}

// errorURL is u as an error names it: no user information, query or
// fragment, bounded.
func errorURL(u *url.URL) string {
	if u == nil {
		return "(no URL)"
	}
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	s := c.String()
	if len(s) > maxErrorURLLength {
		s = s[:maxErrorURLLength] + "…"
	}
	return s
}

// fetchClient is the HTTP client of an upstream's OAuth fetches: the
// Options.HTTPClient of the Manager when there is one, else a hardened
// client whose own host is the MCP server's, with cfg.AllowNetworks.
func (m *Manager) fetchClient(cfg Config) *http.Client {
	if m.httpClient != nil {
		return m.httpClient
	}
	return NewHTTPClient(&FetchOptions{Hosts: []string{cfg.ServerURL}, AllowNetworks: cfg.AllowNetworks})
}

// clientContext carries the upstream's HTTP client to golang.org/x/oauth2
// (its token requests: the code exchange, refresh, client credentials).
func (c *Client) clientContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, c.hc)
}
