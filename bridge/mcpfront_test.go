package bridge

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpotc/mcpotc/otc"
)

// switchable is a fake OTC upstream whose catalog (or failure) the test sets.
type switchable struct {
	mu     sync.Mutex
	status int
	tools  string
}

func (s *switchable) set(status int, tools string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.tools = status, tools
}

func (s *switchable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	status, tools := s.status, s.tools
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, `{"$schema":"urn:oxp:1.0","items":`+tools+`}`)
}

func toolDef(id, name string) string {
	version := id[strings.IndexByte(id, '@')+1:]
	return `{"id":"` + id + `","name":"` + name + `","description":"d","version":"` + version + `","input_schema":{"type":"object"},"output_schema":{}}`
}

func otcUpstreamOn(t *testing.T, name, prefix string, h http.Handler) OTCServer {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := otc.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return OTCServer{Name: name, Client: c, Prefix: prefix}
}

func toolNames(f *MCPFront) []string {
	var names []string
	for _, t := range f.Server().Tools() {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return names
}

func TestUpstreamDownAtStartJoinsLater(t *testing.T) {
	ctx := context.Background()
	down := &switchable{}
	down.set(http.StatusServiceUnavailable, `[]`)
	up := &switchable{}
	up.set(http.StatusOK, `[`+toolDef("A.One@1.0.0", "A_One")+`]`)
	f, err := NewMCPFront(ctx, []OTCServer{otcUpstreamOn(t, "up", "", up), otcUpstreamOn(t, "down", "", down)}, nil)
	if err != nil {
		t.Fatalf("an upstream that is down stopped the bridge: %v", err)
	}
	if got := toolNames(f); strings.Join(got, ",") != "A_One" {
		t.Fatalf("tools at start = %v", got)
	}
	down.set(http.StatusOK, `[`+toolDef("B.Two@1.0.0", "B_Two")+`,`+toolDef("B.Two@1.2.0", "B_Two")+`]`)
	if err := f.refresh(ctx, false); err != nil {
		t.Fatal(err)
	}
	if got := toolNames(f); strings.Join(got, ",") != "A_One,B_Two" {
		t.Fatalf("tools after the upstream came back = %v", got)
	}
	if id := f.upstreams[1].tools["B_Two"].OTCID; id != "B.Two@1.2.0" {
		t.Errorf("B_Two bound to %s, want the latest B.Two@1.2.0", id)
	}
	// Going down again keeps the last good tools.
	down.set(http.StatusInternalServerError, `[]`)
	if err := f.refresh(ctx, false); err != nil {
		t.Fatal(err)
	}
	if got := toolNames(f); strings.Join(got, ",") != "A_One,B_Two" {
		t.Errorf("tools after a failed listing = %v", got)
	}
}

func TestNameClashAtStartNamesBoth(t *testing.T) {
	a, b := &switchable{}, &switchable{}
	a.set(http.StatusOK, `[`+toolDef("Calculator.Add@1.0.0", "Calculator_Add")+`]`)
	b.set(http.StatusOK, `[`+toolDef("Calculator.Add@2.0.0", "Calculator_Add")+`]`)
	_, err := NewMCPFront(context.Background(), []OTCServer{otcUpstreamOn(t, "one", "", a), otcUpstreamOn(t, "two", "", b)}, nil)
	if err == nil || !strings.Contains(err.Error(), "Calculator.Add@1.0.0") || !strings.Contains(err.Error(), "Calculator.Add@2.0.0") ||
		!strings.Contains(err.Error(), "one") || !strings.Contains(err.Error(), "two") {
		t.Fatalf("err = %v; want a clash naming both tools and upstreams", err)
	}
	// A prefix resolves it.
	f, err := NewMCPFront(context.Background(), []OTCServer{otcUpstreamOn(t, "one", "", a), otcUpstreamOn(t, "two", "v2_", b)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNames(f); strings.Join(got, ",") != "Calculator_Add,v2_Calculator_Add" {
		t.Errorf("tools = %v", got)
	}
	// A clash that appears later is refused, and the first holder keeps the name.
	c := &switchable{}
	c.set(http.StatusOK, `[]`)
	f, err = NewMCPFront(context.Background(), []OTCServer{otcUpstreamOn(t, "one", "", a), otcUpstreamOn(t, "three", "", c)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.set(http.StatusOK, `[`+toolDef("Other.Add@1.0.0", "Calculator_Add")+`]`)
	if err := f.refresh(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if got := f.upstreams[0].tools["Calculator_Add"]; got == nil || len(f.upstreams[1].tools) != 0 {
		t.Errorf("later clash: one has %v, three has %v", f.upstreams[0].tools, f.upstreams[1].tools)
	}
}

// TestCatalogChangeNotifiesClients checks that a refresh that changes the
// catalog sends notifications/tools/list_changed, and one that does not
// sends nothing.
func TestCatalogChangeNotifiesClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := &switchable{}
	s.set(http.StatusOK, `[`+toolDef("A.One@1.0.0", "A_One")+`]`)
	f, err := NewMCPFront(ctx, []OTCServer{otcUpstreamOn(t, "up", "", s)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- f.Server().ServeStdio(ctx, inR, outW); outW.Close() }()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	write := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(5 * time.Second):
			return ""
		}
	}
	write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if l := next(); !strings.Contains(l, `"id":1`) {
		t.Fatalf("initialize answer: %q", l)
	}
	write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// mcp-go writes notifications from a goroutine of its own, so they may
	// come before or after an answer: count them over the whole exchange.
	notified := 0
	readUntil := func(id string) {
		t.Helper()
		for {
			l := next()
			switch {
			case l == "":
				t.Fatalf("no answer %s", id)
			case strings.Contains(l, `"method":"notifications/tools/list_changed"`):
				notified++
			case strings.Contains(l, `"id":`+id):
				return
			}
		}
	}
	if err := f.refresh(ctx, false); err != nil { // unchanged: no notification
		t.Fatal(err)
	}
	write(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	readUntil("2")
	s.set(http.StatusOK, `[`+toolDef("A.One@1.0.0", "A_One")+`,`+toolDef("A.Two@1.0.0", "A_Two")+`]`)
	if err := f.refresh(ctx, false); err != nil {
		t.Fatal(err)
	}
	write(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	readUntil("3")
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
		select {
		case l := <-lines:
			if strings.Contains(l, "list_changed") {
				notified++
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	if notified != 1 {
		t.Errorf("%d tools/list_changed notifications; want exactly 1 (for the one change)", notified)
	}
	inW.Close()
	<-done
}

// A poll that finds an upstream's listing unchanged keeps its tools; a
// listing refused for a name clash is looked at again at every poll, so it
// is installed once the clash is gone, though its bytes never changed.
func TestRefreshUnchangedAndRefusedListings(t *testing.T) {
	ctx := context.Background()
	a, b := &switchable{}, &switchable{}
	a.set(http.StatusOK, `[`+toolDef("A.One@1.0.0", "Same")+`]`)
	b.set(http.StatusOK, `[`+toolDef("B.Two@1.0.0", "Two")+`]`)
	f, err := NewMCPFront(ctx, []OTCServer{otcUpstreamOn(t, "a", "", a), otcUpstreamOn(t, "b", "", b)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	step := func(what, want string) {
		t.Helper()
		if err := f.refresh(ctx, false); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := strings.Join(toolNames(f), ","); got != want {
			t.Fatalf("%s: tools %s, want %s", what, got, want)
		}
	}
	step("nothing changed", "Same,Two")
	b.set(http.StatusOK, `[`+toolDef("B.Two@1.0.0", "Two")+`,`+toolDef("B.Same@1.0.0", "Same")+`]`)
	step("b lists a name a holds: refused", "Same,Two")
	step("b unchanged, still clashing: still refused", "Same,Two")
	a.set(http.StatusOK, `[`+toolDef("A.Three@1.0.0", "Three")+`]`)
	step("a gave the name up: b's unchanged listing installed", "Same,Three,Two")
	f.mu.Lock()
	owner := f.upstreams[1].tools["Same"].def.ID
	f.mu.Unlock()
	if owner != "B.Same@1.0.0" {
		t.Fatalf("Same is %s, want b's B.Same@1.0.0", owner)
	}
	step("nothing changed again", "Same,Three,Two")
	// A failed listing, then the same bytes as before it: up again.
	up := func() bool {
		for _, st := range f.upstreamMetrics() {
			if st.Name == "a" {
				return st.Up
			}
		}
		return false
	}
	listing := `[` + toolDef("A.Three@1.0.0", "Three") + `]`
	a.set(http.StatusServiceUnavailable, `{}`)
	step("a down: its tools kept", "Same,Three,Two")
	if up() {
		t.Fatal("a is up after a failed listing")
	}
	a.set(http.StatusOK, listing)
	step("a back with the listing it had", "Same,Three,Two")
	if !up() {
		t.Fatal("a is still down after listing what it listed before failing")
	}
}
