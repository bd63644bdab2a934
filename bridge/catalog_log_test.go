package bridge

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"
)

// Each change of the served catalog is one info line; a rebuild that
// changes nothing says nothing at info (docs/observability.md, Logs).
func TestCatalogChangeLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf).Level(zerolog.InfoLevel)
	build := func(defs map[string]string) catalogPrint {
		p := catalogPrint{}
		for k, v := range defs {
			p.add(k, v)
		}
		return p
	}
	steps := []struct {
		defs map[string]string
		want string // the line, "" for none
	}{
		{map[string]string{"a": "1", "b": "1"}, `{"level":"info","tools":2,"added":2,"removed":0,"changed":0,"message":"catalog ready"}`},
		{map[string]string{"a": "1", "b": "1"}, ""},
		{map[string]string{"a": "1", "b": "1"}, ""},
		{map[string]string{"a": "2", "c": "1"}, `{"level":"info","tools":2,"added":1,"removed":1,"changed":1,"message":"catalog changed"}`},
		{map[string]string{"a": "2", "c": "1"}, ""},
	}
	var prev catalogPrint
	for i, st := range steps {
		buf.Reset()
		next := build(st.defs)
		logged := logCatalogChange(log, prev, next)
		prev = next
		got := bytes.TrimSpace(buf.Bytes())
		if st.want == "" {
			if logged || len(got) != 0 {
				t.Errorf("step %d: logged %v %s, want nothing", i, logged, got)
			}
			continue
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("step %d: %v: %s", i, err, got)
		}
		_ = json.Unmarshal([]byte(st.want), &w)
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		if !logged || !bytes.Equal(gb, wb) {
			t.Errorf("step %d: got %s, want %s", i, gb, wb)
		}
	}
}

// A problem met by every rebuild is logged once while it lasts, and again
// when it comes back after going away.
func TestOnceNotes(t *testing.T) {
	var n onceNotes
	var got []bool
	for _, round := range [][]string{{"x"}, {"x"}, {}, {"x", "y"}, {"x", "y"}} {
		for _, k := range round {
			got = append(got, n.fresh(k))
		}
		n.round()
	}
	want := []bool{true, false, true, true, false, false}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}
