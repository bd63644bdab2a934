package bridge

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpotc/mcpotc/mapping"
	"github.com/mcpotc/mcpotc/mcp/upstream"
)

// Reloading a configuration without a restart (docs/operations.md, Reload without restart)
//
// What a configuration file decides is one value per front: an
// OTCFrontConfig or an MCPFrontConfig. NewOTCFront and NewMCPFront apply
// the first; Reload checks a new one as the start would and swaps it in
// whole, or refuses it and changes nothing. The swap is one store: a call
// runs on the configuration it started with (its tool function holds the
// upstream it was made for) and the next one on the new configuration.
//
// Upstreams are matched by name. On the OTC front, one whose connection is
// configured alike (upstream.Config and OAuth) keeps its connection — a
// stdio child is not restarted for a new allow list or toolkit name;
// another gets a new connection, which is connected, and given a moment
// to list its tools (ReloadListWait), before the swap, so that the new
// catalog is whole when it is served. A connection the swap replaced is
// closed once the calls on it are done (bounded by its call timeout). On
// the MCP front, one of the same Revision keeps its catalog; the others are
// listed before the swap, and a tool name two upstreams would share refuses
// the configuration, as it fails the start.

// ReloadListWait bounds how long a reload waits for a new or changed MCP
// server to list its tools before the new configuration is served; one
// that takes longer (or cannot be reached) is served as at the start:
// its tools appear once it lists them.
var ReloadListWait = 5 * time.Second

// reloadHook runs in a reload between the swap of the configuration and
// the publication of its catalog (tests: a moment stretched there must
// show no request the new tools under the old controls). Nil: nothing.
var reloadHook = func() {}

// retireSettle is how long a connection a reload replaced stays open
// after the swap before it waits for its calls to end: a call that found
// its tool in the old catalog an instant before the swap reaches the tool
// function (and is counted) within it.
var retireSettle = time.Second

// OTCFrontConfig is what the configuration decides of an OTC front: the
// MCP servers and their settings. Reload swaps it whole.
type OTCFrontConfig struct {
	Upstreams []MCPServer
	// Controls replace the access policy and rate limits served
	// (SetControls) once the upstreams are swapped. Nil: none.
	Controls *Controls
}

// otcState is an OTCFrontConfig as the front serves it.
type otcState struct {
	ups []*mcpServerEntry
}

// upstreams are the MCP servers of the configuration served now.
func (f *OTCFront) upstreams() []*mcpServerEntry { return f.state.Load().ups }

// check refuses a configuration the front cannot serve, with the errors
// of the start: two servers of one name or toolkit, a per-user server
// without authenticated callers, OAuth without the front's OAuth options.
func (f *OTCFront) check(cfg OTCFrontConfig) error {
	names, toolkits := map[string]bool{}, map[string]bool{}
	for _, u := range cfg.Upstreams {
		if u.Config.Name != "" && names[u.Config.Name] {
			return fmt.Errorf("two MCP servers are named %q", u.Config.Name)
		}
		names[u.Config.Name] = true
		if u.OAuth != nil && u.OAuth.PerUser && !f.authn && !f.trustStated {
			return fmt.Errorf("MCP server %s: per_user needs authenticated callers (an API key or JWTs): context.user_id is the caller's word", u.Config.Name)
		}
		if u.Toolkit != "" {
			tk := mapping.Sanitize(u.Toolkit)
			if toolkits[tk] {
				return fmt.Errorf("two MCP servers have the toolkit name %q", tk)
			}
			toolkits[tk] = true
		}
	}
	return nil
}

// prepare builds cfg's state: each upstream keeps the connection of a
// served one of its name that is configured alike, else gets a new one,
// built and not connected (fresh).
func (f *OTCFront) prepare(cfg OTCFrontConfig) (*otcState, []*upConn, error) {
	served := f.upstreams()
	claimed := map[*upConn]bool{}
	// match is the served upstream of c's name configured alike (same),
	// else one of its name (named), unclaimed; servers without a name
	// (--mcp, the command after --) are told apart by their configuration.
	match := func(c MCPServer) (same, named *mcpServerEntry) {
		for _, o := range served {
			if o.Config.Name != c.Config.Name || claimed[o.upConn] {
				continue
			}
			if sameConnection(o.MCPServer, c) {
				return o, o
			}
			if named == nil {
				named = o
			}
		}
		return nil, named
	}
	next := &otcState{}
	var fresh []*upConn
	var replaced []*mcpServerEntry // served ones whose OAuth client a new one replaced
	for _, c := range cfg.Upstreams {
		u := &mcpServerEntry{MCPServer: c}
		same, named := match(c)
		if same != nil {
			claimed[same.upConn] = true
			u.upConn = same.upConn
			next.ups = append(next.ups, u)
			continue
		}
		u.upConn = &upConn{listed: make(chan struct{})}
		up, err := f.newUpstream(u, f.version)
		if named != nil && named.OAuth != nil && c.OAuth != nil {
			replaced = append(replaced, named)
		}
		if err != nil {
			for _, b := range fresh {
				_ = b.up.Close(context.Background()) // not connected: nothing runs
			}
			// The OAuth manager names each upstream's client: the served
			// ones' again.
			for _, o := range replaced {
				oc := *o.OAuth
				oc.Upstream, oc.ServerURL = o.Config.Name, o.Config.URL
				_, _ = f.oauth.Client(oc)
			}
			return nil, nil, err
		}
		u.up = up
		fresh = append(fresh, u.upConn)
		next.ups = append(next.ups, u)
	}
	return next, fresh, nil
}

// sameConnection tells whether a and b connect alike: the same
// upstream.Config (command, arguments, environment, URL, headers,
// timeouts, protocol) and OAuth client.
func sameConnection(a, b MCPServer) bool {
	return reflect.DeepEqual(a.Config, b.Config) && reflect.DeepEqual(a.OAuth, b.OAuth)
}

// Reload serves cfg instead of the configuration served now, or refuses
// it (an error as NewOTCFront's) and changes nothing. New and changed MCP
// servers are connected first and given ReloadListWait to list their
// tools; the connections cfg no longer uses are closed once their calls
// are done.
func (f *OTCFront) Reload(ctx context.Context, cfg OTCFrontConfig) error {
	f.reload.Lock()
	defer f.reload.Unlock()
	select {
	case <-f.closing:
		return errors.New("the front is closed")
	default:
	}
	if err := f.check(cfg); err != nil {
		return err
	}
	for _, u := range cfg.Upstreams {
		if u.OAuth != nil && f.oauth == nil {
			return fmt.Errorf("MCP server %s: oauth needs the bridge's OAuth routes and token store, which are set up at start when a server has oauth: restart serve-otc to add the first one", u.Config.Name)
		}
	}
	next, fresh, err := f.prepare(cfg)
	if err != nil {
		return err
	}
	for _, c := range fresh {
		c.up.Connect(f.ctx)
	}
	waitListed(ctx, fresh, ReloadListWait)
	kept := map[*upConn]bool{}
	for _, u := range next.ups {
		kept[u.upConn] = true
	}
	// The upstreams, their tools (and overrides) and the controls are
	// published as one catalog: no request sees the new tools under the
	// old controls, or the old under the new.
	f.mu.Lock()
	prev := f.state.Swap(next)
	f.ctl.set(cfg.Controls)
	reloadHook()
	f.rebuildLocked()
	f.mu.Unlock()
	var d reloadDiff
	was, is := map[*upConn]*mcpServerEntry{}, map[string]bool{}
	for _, u := range prev.ups {
		was[u.upConn] = u
	}
	for _, u := range next.ups {
		is[u.Config.Name] = u.Config.Name != ""
		o := was[u.upConn]
		switch {
		case o != nil && !reflect.DeepEqual(o.MCPServer, u.MCPServer):
			d.updated = append(d.updated, u.name())
		case o != nil:
		case u.Config.Name != "" && slices.ContainsFunc(prev.ups, func(p *mcpServerEntry) bool { return p.Config.Name == u.Config.Name }):
			d.reconnected = append(d.reconnected, u.name())
		default:
			d.added = append(d.added, u.name())
		}
	}
	for _, u := range prev.ups {
		if !kept[u.upConn] && !is[u.Config.Name] {
			d.removed = append(d.removed, u.name())
		}
	}
	d.log(f.log, len(next.ups))
	for _, u := range prev.ups {
		if !kept[u.upConn] {
			kept[u.upConn] = true // once, should two names share it
			f.retire(u)
		}
	}
	return nil
}

// reloadDiff is what a reload changed, by upstream name.
type reloadDiff struct {
	added, removed []string
	reconnected    []string // a new connection (or, on the MCP front, listed afresh)
	updated        []string // the same connection, other settings
}

func (d reloadDiff) log(log zerolog.Logger, upstreams int) {
	ev := log.Info().Int("upstreams", upstreams)
	for _, l := range []struct {
		key   string
		names []string
	}{{"added", d.added}, {"removed", d.removed}, {"changed", d.reconnected}, {"updated", d.updated}} {
		if len(l.names) > 0 {
			sort.Strings(l.names)
			ev = ev.Strs(l.key, l.names)
		}
	}
	ev.Msg("configuration applied")
}

// waitListed waits until each of conns listed its tools or failed for
// good (neither ready nor starting), for at most d.
func waitListed(ctx context.Context, conns []*upConn, d time.Duration) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for _, c := range conns {
		for waiting := true; waiting; {
			select {
			case <-c.listed:
				waiting = false
			case <-tick.C:
				if s := c.up.Status(); !s.Ready && !s.Starting {
					waiting = false
				}
			case <-deadline.C:
				return
			case <-ctx.Done():
				return
			}
		}
	}
}

// retire closes the connection of u, which a reload replaced, once the
// calls on it are done: after retireSettle, as soon as it has none, at
// most its call timeout (and the detached calls' grace) later; at once
// when the front closes.
func (f *OTCFront) retire(u *mcpServerEntry) {
	f.retired.Add(1)
	go func() {
		defer f.retired.Done()
		bound := u.Config.CallTimeout
		if bound <= 0 {
			bound = upstream.DefaultCallTimeout
		}
		deadline := time.Now().Add(retireSettle + bound + detachedGrace)
		settle := time.NewTimer(retireSettle)
		defer settle.Stop()
		select {
		case <-settle.C:
		case <-f.closing:
		}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for u.calls.Load() > 0 && time.Now().Before(deadline) {
			select {
			case <-tick.C:
			case <-f.closing:
				deadline = time.Now()
			}
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(f.ctx), retireCloseTimeout)
		defer cancel()
		if err := u.up.Close(ctx); err != nil {
			f.log.Warn().Str("upstream", u.name()).Err(err).Msg("stopping an MCP server a reload replaced")
			return
		}
		f.log.Info().Str("upstream", u.name()).Msg("MCP server a reload replaced or removed: stopped")
	}()
}

// detachedGrace is how long a call with a call_id may outlive its
// upstream's call timeout (cmd/mcpotc bounds such calls so).
const detachedGrace = 5 * time.Second

// retireCloseTimeout bounds closing a replaced connection (its calls are
// over; a stdio child is asked to exit, then killed).
const retireCloseTimeout = 15 * time.Second

// waitGroupCtx waits for wg, or for ctx to end.
func waitGroupCtx(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// MCPFrontConfig is what the configuration decides of an MCP front: the
// OTC tool servers and their settings. Reload swaps it whole.
type MCPFrontConfig struct {
	Upstreams []OTCServer
	// Controls replace the access policy and rate limits served
	// (SetControls) once the catalog is installed. Nil: none.
	Controls *Controls
}

// Reload serves cfg instead of the configuration served now, or refuses
// it (an error as NewMCPFront's: two upstreams of one name, a tool name
// two of them expose) and changes nothing. An upstream of the same Name
// and Revision as a served one is kept as it is; the others are listed
// before the new catalog is installed (one that cannot be listed is
// served as at the start: its tools appear when a refresh reaches it).
func (f *MCPFront) Reload(ctx context.Context, cfg MCPFrontConfig) error {
	seen := map[string]bool{}
	for _, u := range cfg.Upstreams {
		if seen[u.Name] {
			return fmt.Errorf("two upstreams are named %q", u.Name)
		}
		seen[u.Name] = true
	}
	f.lists.Lock()
	defer f.lists.Unlock()
	old := map[string]*otcServerEntry{}
	f.mu.Lock()
	for _, u := range f.upstreams {
		old[u.Name] = u
	}
	f.mu.Unlock()
	var ups []*otcServerEntry
	for _, c := range cfg.Upstreams {
		if o := old[c.Name]; o != nil && c.Revision != "" && o.Revision == c.Revision {
			ups = append(ups, o)
			continue
		}
		ups = append(ups, &otcServerEntry{OTCServer: c, tools: map[string]*frontTool{}})
	}
	results := f.list(ctx, ups)
	// As at the start, a tool name exposed twice refuses the whole.
	owner := map[string]toolOwner{}
	for i, u := range ups {
		r := results[i]
		if r.clash != nil {
			return r.clash
		}
		tools := r.tools
		if r.unchanged || r.err != nil {
			tools = u.tools // kept (none for a new one)
		}
		if err := clashes(owner, u.Name, tools); err != nil {
			return err
		}
	}
	if err := f.install(ups, results, true, &cfg.Controls); err != nil {
		return err
	}
	var d reloadDiff
	for _, u := range ups {
		switch o := old[u.Name]; {
		case o == nil:
			d.added = append(d.added, u.Name)
		case o != u:
			d.reconnected = append(d.reconnected, u.Name)
		}
		delete(old, u.Name)
	}
	for name := range old {
		d.removed = append(d.removed, name)
	}
	d.log(f.log, len(ups))
	return nil
}
