package front

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Two issuers that each have a subject "u1", and their tokens: "A:u1" is
// u1 of issuer A, "B:u1" u1 of issuer B, "none:u1" a token whose verifier
// names no issuer, "X:u1" one of an issuer the front does not trust.
const (
	issuerA = "https://as-a.example.com"
	issuerB = "https://as-b.example.com/"
)

func twoIssuerAuth(issuers ...string) *ResourceAuth {
	names := map[string]string{"A": issuerA, "B": issuerB, "X": "https://as-x.example.com", "Bslash": "https://as-b.example.com"}
	return &ResourceAuth{
		Resource:             "https://mcp.example.com/mcp",
		AuthorizationServers: issuers,
		Verify: func(_ context.Context, token string) (*Identity, error) {
			which, sub, ok := strings.Cut(token, ":")
			if !ok {
				return nil, ErrInvalidToken
			}
			return &Identity{Issuer: names[which], Subject: sub, Audience: []string{"https://mcp.example.com/mcp"}, Expiry: time.Now().Add(time.Hour)}, nil
		},
	}
}

// principalFront is a front with a tool "name" that answers the caller's
// Name("sub").
func principalFront(t *testing.T) *Server {
	f, _ := testFront(t, nil)
	addTool(f, mcpgo.NewTool("name"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		id, ok := CallerIdentity(ctx)
		if !ok {
			return mcpgo.NewToolResultText("no identity"), nil
		}
		return mcpgo.NewToolResultText(id.Issuer + " | " + id.Name("sub")), nil
	})
	return f
}

func nameText(issuer, name string) string {
	return `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"` + issuer + ` | ` + name + `"}]}}`
}

// A principal is issuer + subject (issue 25, item 8): with two trusted
// issuers, subject u1 of issuer B is served neither the streamable HTTP
// session (in memory, or signed with SessionKeys) nor the legacy SSE
// session of subject u1 of issuer A (404), and its name differs; each
// issuer's u1 is served its own session. A token of an untrusted issuer,
// or one naming no issuer among several, is 401.
func TestFrontPrincipalIsIssuerAndSubject(t *testing.T) {
	t.Parallel()
	auth := twoIssuerAuth(issuerA, issuerB)
	for _, tc := range []struct {
		name string
		keys [][]byte
	}{{"sessions in memory", nil}, {"signed session ids", [][]byte{[]byte(keyA)}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := startFrontHTTP(t, principalFront(t), &HTTPOptions{Resource: auth, SessionKeys: tc.keys})
			url := srv.URL + StreamablePath
			a := &httpTestClient{url: url, token: "A:u1"}
			initialize(t, a)
			intruder := &httpTestClient{url: url, token: "B:u1", session: a.session, version: a.version}
			r, err := intruder.post(t, context.Background(), request(2, "tools/call", callParams("name", `{}`)), nil)
			if err != nil || r.status != http.StatusNotFound {
				t.Errorf("u1 of issuer B in the session of u1 of issuer A: %d %s %v, want 404", r.status, r.body, err)
			}
			sameJSON(t, callTool(t, a, 2, "tools/call", callParams("name", `{}`)), nameText(issuerA, "https://as-a.example.com#u1"))
			b := &httpTestClient{url: url, token: "B:u1"}
			initialize(t, b)
			// Issuer B's own spelling (a final slash) is its name, however
			// its tokens spell it.
			sameJSON(t, callTool(t, b, 2, "tools/call", callParams("name", `{}`)), nameText(issuerB, "https://as-b.example.com/#u1"))
			bAgain := &httpTestClient{url: url, token: "Bslash:u1", session: b.session, version: b.version}
			sameJSON(t, callTool(t, bAgain, 2, "tools/call", callParams("name", `{}`)), nameText(issuerB, "https://as-b.example.com/#u1"))
			for _, token := range []string{"X:u1", "none:u1"} {
				status, challenge, body := sendInitialize(t, http.MethodPost, url,
					map[string]string{"Accept": "application/json, text/event-stream", "Authorization": "Bearer " + token})
				if status != http.StatusUnauthorized || !strings.HasPrefix(challenge, `Bearer error="invalid_token"`) {
					t.Errorf("%s: %d %q %s, want 401 invalid_token", token, status, challenge, body)
				}
			}
		})
	}
	t.Run("legacy SSE", func(t *testing.T) {
		t.Parallel()
		srv, _ := startFrontHTTP(t, principalFront(t), &HTTPOptions{Resource: auth})
		a := startFrontSSE(t, srv.URL, "A:u1")
		initialize(t, a)
		if status, err := a.postAs(request(5, "ping", `{}`), "B:u1"); err != nil || status != http.StatusNotFound {
			t.Errorf("u1 of issuer B posting to the SSE session of u1 of issuer A: %d %v, want 404", status, err)
		}
		sameJSON(t, callTool(t, a, 2, "tools/call", callParams("name", `{}`)), nameText(issuerA, "https://as-a.example.com#u1"))
	})
	t.Run("one issuer: the name is the subject, and a verifier may leave the issuer out", func(t *testing.T) {
		t.Parallel()
		srv, _ := startFrontHTTP(t, principalFront(t), &HTTPOptions{Resource: twoIssuerAuth(issuerA)})
		for _, token := range []string{"A:u1", "none:u1"} {
			c := &httpTestClient{url: srv.URL + StreamablePath, token: token}
			initialize(t, c)
			sameJSON(t, callTool(t, c, 2, "tools/call", callParams("name", `{}`)), nameText(issuerA, "u1"))
		}
		status, _, body := sendInitialize(t, http.MethodPost, srv.URL+StreamablePath,
			map[string]string{"Accept": "application/json, text/event-stream", "Authorization": "Bearer B:u1"})
		if status != http.StatusUnauthorized {
			t.Errorf("a token of an issuer not trusted: %d %s, want 401", status, body)
		}
	})
}

// Name is one string per caller: no two (issuer, subject) pairs of a
// handler with several issuers share it, whatever "#" or "%" they hold;
// with one issuer it is the subject (or client id) as it is.
func TestIdentityName(t *testing.T) {
	t.Parallel()
	several := []Identity{
		{Issuer: "https://a.example", Subject: "u1"},
		{Issuer: "https://a.example#x", Subject: "u1"},
		{Issuer: "https://a.example", Subject: "x#u1"},
		{Issuer: "https://a.example%23x", Subject: "u1"},
		{Issuer: "https://a.example%", Subject: "23x#u1"},
		{Issuer: "https://b.example", Subject: "u1"},
		{Issuer: "https://b.example", Subject: "%23"},
		{Issuer: "https://b.example", Subject: "#"},
	}
	seen := map[string]Identity{}
	for _, id := range several {
		id.several = true
		n := id.Name("sub")
		if prev, ok := seen[n]; ok {
			t.Errorf("%+v and %+v are both named %q", prev, id, n)
		}
		seen[n] = id
		if p := id.principal(); seen["principal "+p].Subject != "" {
			t.Errorf("%+v shares its principal %q", id, p)
		} else {
			seen["principal "+p] = id
		}
	}
	id := Identity{Issuer: "https://a.example#x", Subject: "u1", ClientID: "c1", several: true}
	if got := id.Name("sub"); got != "https://a.example%23x#u1" {
		t.Errorf("Name(sub) = %q", got)
	}
	if got := id.Name("client_id"); got != "https://a.example%23x#c1" {
		t.Errorf("Name(client_id) = %q", got)
	}
	id.several = false
	if id.Name("sub") != "u1" || id.Name("client_id") != "c1" || id.Name("") != "u1" {
		t.Errorf("one issuer: %q %q", id.Name("sub"), id.Name("client_id"))
	}
	if (&Identity{Issuer: "https://a.example", several: true}).Name("sub") != "" {
		t.Error("a token without a subject has a name")
	}
}

// A signed session id minted before issuers were part of a principal (its
// owner hash over the subject alone) stays its owner's where that is
// unambiguous — a handler with one issuer — and is no one's with several.
func TestFrontSignedSessionsLegacyOwner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		issuers []string
		want    int
	}{{[]string{issuerA}, http.StatusOK}, {[]string{issuerA, issuerB}, http.StatusNotFound}} {
		url, h := signedReplica(t, HTTPOptions{Resource: twoIssuerAuth(tc.issuers...)}, keyA)
		c := &httpTestClient{url: url, token: "none:u1"}
		if len(tc.issuers) > 1 {
			c.token = "A:u1"
		}
		initialize(t, c)
		// The owner as the old format wrote it: the subject alone.
		legacy := h.ids.signer.sign(sessionClaims{Version: "2025-11-25", Owner: ownerMAC([]byte(keyA), "sub:u1")}, nil)
		claims, _, ok := h.ids.signer.verify(legacy)
		if !ok || claims.Owner == "" {
			t.Fatalf("the legacy id does not verify: %v %+v", ok, claims)
		}
		old := &httpTestClient{url: url, token: c.token, session: legacy, version: "2025-11-25"}
		r, err := old.post(t, context.Background(), request(3, "ping", `{}`), nil)
		if err != nil || r.status != tc.want {
			t.Errorf("%d issuers: a legacy id of u1: %d %s %v, want %d", len(tc.issuers), r.status, r.body, err, tc.want)
		}
		other := &httpTestClient{url: url, token: "A:u2", session: legacy, version: "2025-11-25"}
		if r, err := other.post(t, context.Background(), request(4, "ping", `{}`), nil); err != nil || r.status != http.StatusNotFound {
			t.Errorf("%d issuers: a legacy id of u1 used by u2: %d %v, want 404", len(tc.issuers), r.status, err)
		}
	}
}
