package oauth

import (
	"context"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpotc/mcpotc/mcp/oauth/vault"
)

// Authorizations shared by replicas
//
// With Options.Replicated (serve-otc --state redis://…), a pending
// authorization is kept in the vault too, sealed like the tokens (its PKCE
// verifier, the client's secret and a token that waits for the
// application's confirmation never leave it in clear), under Key{Kind:
// kindAuthorization, User: its state}, so that the replica that serves
// /oauth/authorize/{state}, /oauth/callback or /oauth/check/{state} need
// not be the one that issued the challenge: it rebuilds the authorization
// from the record, for the upstream of the same name in its own
// configuration. Every step writes the record again (pending, exchanging,
// completed or failed), so check_url tells the same on every replica.
//
// The state is single-use on each replica, and the record says
// "exchanging" once a callback took it; two callbacks with one state on
// two replicas at the same instant could both read "pending", but the
// authorization server accepts its code once (OAuth 2.1 §4.1.3), so at
// most one gets a token. A record that cannot be written is logged and the
// authorization works through its own replica, as with one replica.
// Without Options.Replicated nothing of a pending authorization is written
// to the store (a file store is rewritten only for tokens).

// kindAuthorization is the vault Kind of a pending authorization;
// kindFlow names the state of a VerifyVerifier flow id.
const (
	kindAuthorization = "authorization"
	kindFlow          = "authorization-flow"
)

// sharedTimeout bounds one vault operation of an authorization.
const sharedTimeout = 2 * time.Second

// pendingRecord is a pending authorization as the vault keeps it.
type pendingRecord struct {
	Upstream string       `json:"upstream"`
	Caller   string       `json:"caller,omitempty"`
	User     string       `json:"user,omitempty"`
	FlowID   string       `json:"flow_id,omitempty"`
	Held     *record      `json:"held,omitempty"`
	Verifier string       `json:"verifier"`
	AuthURL  string       `json:"auth_url"`
	Scopes   []string     `json:"scopes,omitempty"`
	Created  time.Time    `json:"created"`
	Status   string       `json:"status"`
	Why      string       `json:"why,omitempty"`
	Ended    time.Time    `json:"ended,omitzero"`
	Server   serverRecord `json:"server"`
}

// serverRecord is the discovery an authorization was issued with.
type serverRecord struct {
	MetadataURL     string                  `json:"metadata_url,omitempty"`
	Resource        string                  `json:"resource,omitempty"`
	ScopesSupported []string                `json:"scopes_supported,omitempty"`
	Meta            *oauthex.AuthServerMeta `json:"meta"`
	Client          registration            `json:"client"`
}

func authorizationKey(state string) vault.Key {
	return vault.Key{Kind: kindAuthorization, User: state}
}

// share writes p (a copy the caller owns) to the vault, to live as long as
// this replica keeps it.
func (m *Manager) share(ctx context.Context, p *pending) {
	if !m.replicated {
		return
	}
	rec := pendingRecord{
		Upstream: p.c.cfg.Upstream, Caller: p.caller, User: p.user, FlowID: p.flowID, Held: p.held, Verifier: p.verifier, AuthURL: p.authURL, Scopes: p.scopes,
		Created: p.created, Status: p.status, Why: p.why, Ended: p.ended,
		Server: serverRecord{MetadataURL: p.srv.metadataURL, Resource: p.srv.resource, ScopesSupported: p.srv.scopesSupported,
			Meta: p.srv.asm, Client: p.srv.client},
	}
	expires := p.created.Add(PendingTTL)
	if !p.ended.IsZero() {
		expires = p.ended.Add(ResultTTL)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
	defer cancel()
	if err := m.vault.Put(ctx, authorizationKey(p.state), rec, expires); err != nil {
		m.log.Warn("authorization not shared with other replicas: it completes through this one only",
			"upstream", rec.Upstream, "error", err)
	}
	if p.flowID != "" && p.status == statusPending {
		_ = m.vault.Put(ctx, vault.Key{Kind: kindFlow, User: p.flowID}, p.state, expires)
	}
}

// fetchFlow is the state of a flow id another replica issued, "" when
// none is known.
func (m *Manager) fetchFlow(ctx context.Context, flowID string) string {
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	var state string
	if err := m.vault.Get(ctx, vault.Key{Kind: kindFlow, User: flowID}, &state); err != nil {
		return ""
	}
	return state
}

// unshare forgets the shared record of an authorization this replica
// evicted.
func (m *Manager) unshare(ctx context.Context, state string) {
	if !m.replicated {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
	defer cancel()
	_ = m.vault.Delete(ctx, authorizationKey(state))
}

// fetchShared rebuilds the authorization of state from the vault: nil when
// there is none, or its upstream is not one of this replica's.
func (m *Manager) fetchShared(ctx context.Context, state string) *pending {
	if !m.replicated || state == "" || len(state) > 256 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	var rec pendingRecord
	if err := m.vault.Get(ctx, authorizationKey(state), &rec); err != nil {
		if !errors.Is(err, vault.ErrNotFound) {
			m.log.Warn("cannot read a shared authorization", "error", err)
		}
		return nil
	}
	m.mu.Lock()
	c := m.clients[rec.Upstream]
	m.mu.Unlock()
	if c == nil || rec.Server.Meta == nil {
		return nil
	}
	srv := &server{metadataURL: rec.Server.MetadataURL, resource: rec.Server.Resource, scopesSupported: rec.Server.ScopesSupported,
		asm: rec.Server.Meta, client: rec.Server.Client}
	return &pending{
		state: state, flowID: rec.FlowID, c: c, caller: rec.Caller, user: rec.User, held: rec.Held, verifier: rec.Verifier, authURL: rec.AuthURL, cfg: m.authConfig(srv, rec.Scopes),
		srv: srv, scopes: rec.Scopes, created: rec.Created, status: rec.Status, why: rec.Why, ended: rec.Ended,
	}
}
