package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// durationValue is a time.Duration flag whose error says what to type
// (README, Commands): "--call-timeout 30" is not a duration, "30s" is.
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err == nil {
		*d = durationValue(v)
		return nil
	}
	if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
		return fmt.Errorf("a duration needs a unit: use a duration such as %ss, %sms or %sm", s, s, s)
	}
	return errors.New("use a duration such as 30s, 500ms or 2m")
}

// durationFlag defines a duration flag with the error of durationValue.
func durationFlag(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	durationVar(fs, p, name, def, usage)
	return p
}

// durationVar defines a duration flag stored in p, with the error of
// durationValue.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var((*durationValue)(p), name, usage)
}

// headerList is the repeatable --header 'Name: value' flag.
type headerList []string

func (l *headerList) String() string { return strings.Join(*l, ", ") }

func (l *headerList) Set(s string) error {
	name, _, ok := strings.Cut(s, ":")
	if !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(strings.TrimSpace(name), " \t") {
		// The value is not repeated: it may hold a secret.
		return errors.New(`want 'Name: value', e.g. --header 'Authorization: Bearer ${TOKEN}' (single quotes keep ${TOKEN} for mcpotc to read from the environment)`)
	}
	*l = append(*l, s)
	return nil
}

// header expands ${VAR} and ${env:VAR} in the values and returns the
// headers, recording unset variables in p.
func (l headerList) header(p *problems, getenv func(string) string) http.Header {
	h := http.Header{}
	for _, s := range l {
		name, value, _ := strings.Cut(s, ":")
		name = http.CanonicalHeaderKey(strings.TrimSpace(name))
		v, err := expandEnv(getenv, "--header", name, strings.TrimSpace(value))
		if err != nil {
			p.addErr("--header", name, err)
			continue
		}
		h.Add(name, v)
	}
	return h
}

// checkListen checks a --listen address and says what to type.
func checkListen(flagName, addr string) error {
	const example = "127.0.0.1:8090"
	if _, err := strconv.Atoi(addr); err == nil {
		return fmt.Errorf("%w: %s %s: use host:port, e.g. 127.0.0.1:%s (0.0.0.0:%s listens on every interface)", errUsage, flagName, addr, addr, addr)
	}
	if strings.Contains(addr, "://") {
		return fmt.Errorf("%w: %s %q: use host:port without a scheme, e.g. %s", errUsage, flagName, addr, example)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %s %q: use host:port, e.g. %s", errUsage, flagName, addr, example)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%w: %s %q: the port must be a number from 0 to 65535, e.g. %s", errUsage, flagName, addr, example)
	}
	return nil
}

// urlProblem says what is wrong with an upstream's http(s) URL and what to
// type instead; "" when it is fine. A URL with credentials is not repeated.
func urlProblem(raw string) string {
	if raw == "" {
		return "is empty: want an http(s) URL such as http://127.0.0.1:8081"
	}
	if !strings.Contains(raw, "://") {
		if strings.Contains(raw, "@") {
			return "has no scheme: add http:// (and no credentials: use headers or an API key variable)"
		}
		return fmt.Sprintf("%q has no scheme: add http://, e.g. http://%s", raw, strings.TrimPrefix(raw, "//"))
	}
	u, err := url.Parse(raw)
	if err == nil && u.User != nil {
		return "must not carry credentials: use headers or an API key variable"
	}
	if err != nil {
		return "is not a URL: want one such as http://127.0.0.1:8081"
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Sprintf("%q: want an http:// or https:// URL", raw)
	}
	if u.Host == "" {
		return fmt.Sprintf("%q has no host: want one such as http://127.0.0.1:8081", raw)
	}
	return ""
}

// otcBaseURL returns the base URL of an OTC server given as raw: a URL that
// ends in /tools or /tools/call (the endpoints the client appends) is cut to
// its base, and stripped says what was cut.
func otcBaseURL(raw string) (base, stripped string) {
	u, err := url.Parse(raw)
	if err != nil || u.RawQuery != "" || u.Fragment != "" {
		return raw, ""
	}
	p := strings.TrimSuffix(u.Path, "/")
	for _, end := range []string{"/tools/call", "/tools", "/call"} {
		if strings.HasSuffix(p, end) {
			u.Path = strings.TrimSuffix(p, end)
			u.RawPath = ""
			return u.String(), end
		}
	}
	return raw, ""
}

// flagsSet returns the names of the flags given on the command line.
func flagsSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// needs reports, in one message, the flags of names that were given
// although what they apply to was not: "--listen and --cors-origin need
// --transport http or sse".
func needs(set map[string]bool, cond bool, what string, names ...string) error {
	if cond {
		return nil
	}
	var given []string
	for _, n := range names {
		if set[n] {
			given = append(given, "--"+n)
		}
	}
	switch len(given) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%w: %s needs %s", errUsage, given[0], what)
	}
	return fmt.Errorf("%w: %s and %s need %s", errUsage, strings.Join(given[:len(given)-1], ", "), given[len(given)-1], what)
}

// unknownFlag rewords the flag package's "flag provided but not defined"
// with the nearest defined flag.
func unknownFlag(fs *flag.FlagSet, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err
	}
	name = strings.TrimPrefix(name, "-")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if near := nearest(name, names); near != "" {
		return fmt.Errorf("unknown flag --%s: did you mean --%s?", name, near)
	}
	return fmt.Errorf("unknown flag --%s", name)
}

const (
	allowedHostUsage = "host name (or name:port) a loopback listener also admits in Host and Origin besides localhost and loopback IPs, such as a reverse proxy's (repeatable)"
	corsOriginUsage  = "browser origin (https://app.example.com, or * for any) whose pages may call this server: CORS headers, preflight answered without credentials (repeatable; default: none)"
)

// allowedHostList is --allowed-host, the same on every command: a host
// name, or name:port to admit that port only; an IPv6 address in
// brackets.
type allowedHostList []string

func (l *allowedHostList) String() string { return strings.Join(*l, ",") }

func (l *allowedHostList) Set(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = s, ""
	}
	ok := host != "" && !strings.ContainsAny(host, "/:@[] \t")
	if inner, bracketed := strings.CutPrefix(host, "["); bracketed && strings.HasSuffix(inner, "]") {
		ip, err := netip.ParseAddr(strings.TrimSuffix(inner, "]"))
		ok = err == nil && ip.Is6()
	} else if err == nil {
		// SplitHostPort took the brackets off an IPv6 address.
		if ip, perr := netip.ParseAddr(host); perr == nil && ip.Is6() {
			ok = true
		}
	}
	if n, perr := strconv.Atoi(port); port != "" && (perr != nil || n < 1 || n > 65535) {
		ok = false
	}
	if !ok {
		return fmt.Errorf("want a host name such as mcp.example.com, or mcp.example.com:443 to admit one port only, without a scheme (an IPv6 address in brackets)")
	}
	*l = append(*l, s)
	return nil
}

// corsOriginList is --cors-origin: a browser origin (scheme://host[:port])
// or "*".
type corsOriginList []string

func (l *corsOriginList) String() string { return strings.Join(*l, ",") }

func (l *corsOriginList) Set(s string) error {
	if s != "*" {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("use an origin such as https://app.example.com or http://localhost:5173 (scheme, host and port; no path), or * for any")
		}
	}
	*l = append(*l, s)
	return nil
}

// commandHint is what follows "unknown command NAME": the nearest command
// by spelling (serve-mpc: serve-mcp), or "".
func commandHint(name string) string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	if near := nearest(name, names); near != "" {
		return fmt.Sprintf(": did you mean %q?", near)
	}
	return ""
}

// printFlags is fs.PrintDefaults with each flag written --name, as the
// README and the error messages write them (the flag package reads both).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	for line := range strings.Lines(buf.String()) {
		if rest, ok := strings.CutPrefix(line, "  -"); ok {
			line = "  --" + rest
		}
		_, _ = io.WriteString(w, line)
	}
}
