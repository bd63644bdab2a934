package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEncodeFields(t *testing.T) {
	at := time.Date(2026, 7, 28, 12, 0, 0, 123456000, time.FixedZone("x", 3600))
	b, ok := Encode(&Record{Time: at, Kind: KindCall, Front: "otc", Principal: "jwt:alice", UserID: "alice", Upstream: "everything",
		Tool: "Everything.Echo@1.0.0", Outcome: "ok", Status: 200, Duration: 1500 * time.Microsecond, CallID: "c1", TraceID: "t1",
		Args: []string{"message"}})
	if !ok {
		t.Fatal("not encoded")
	}
	if !strings.HasSuffix(string(b), "}\n") || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("not one line: %q", b)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"audit": "call", "time": "2026-07-28T11:00:00.123456Z", "front": "otc", "principal": "jwt:alice", "user_id": "alice",
		"upstream": "everything", "tool": "Everything.Echo@1.0.0", "outcome": "ok", "status": 200.0, "duration_ms": 1.5, "call_id": "c1",
		"trace_id": "t1", "args": []any{"message"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("line\n got %v\nwant %v", got, want)
	}
	// An authorization line has no duration.
	b, _ = Encode(&Record{Kind: KindAuthorization, Front: "mcp", Outcome: OutcomeRefused, Status: 401, Detail: "unauthorized: the token has expired"})
	got = nil
	_ = json.Unmarshal(b, &got)
	if _, has := got["duration_ms"]; has || got["detail"] != "unauthorized: the token has expired" || got["time"] == "" {
		t.Fatalf("authorization line: %v", got)
	}
}

// Every field is cut to its bound and holds no control character, so that
// no caller-chosen string makes a line long, or two lines of one.
func TestEncodeBounds(t *testing.T) {
	long := strings.Repeat("\"\\é\u202e\u0085\x85\U000e0001", 5000) + "\n\r\x00\u2028"
	var args []string
	for i := range 100 {
		args = append(args, fmt.Sprintf("%d%s", i, long))
	}
	r := &Record{Kind: KindCall, Front: long, Principal: long, UserID: long, Upstream: long, Tool: long, Outcome: long,
		CallID: long, TraceID: long, Detail: long, Args: args}
	b, ok := Encode(r)
	if !ok {
		t.Fatal("a record of long fields is not written: the cuts should bound it")
	}
	if len(b) > MaxLineBytes {
		t.Fatalf("line of %d bytes, over %d", len(b), MaxLineBytes)
	}
	if strings.Count(string(b), "\n") != 1 || strings.ContainsAny(string(b[:len(b)-1]), "\r\x00\u2028\u202e\u0085\U000e0001") {
		t.Fatalf("control characters in the line: %q", b[:200])
	}
	var got line
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Principal) > 512 || len(got.Tool) > 256 || len(got.CallID) > 64 || len(got.Args) != maxArgs || len(got.Args[0]) > 64 {
		t.Fatalf("not cut: principal %d, tool %d, call_id %d, args %d", len(got.Principal), len(got.Tool), len(got.CallID), len(got.Args))
	}
}

func TestArgNames(t *testing.T) {
	for in, want := range map[string][]string{
		`{"a":1,"secret":"hunter2","nested":{"x":[1,2]}}`: {"a", "secret", "nested"},
		`{}`:     nil,
		`[1,2]`:  nil,
		`"text"`: nil,
		``:       nil,
	} {
		if got := ArgNames([]byte(in)); !reflect.DeepEqual(got, want) {
			t.Errorf("ArgNames(%s) = %q, want %q", in, got, want)
		}
	}
	var b strings.Builder
	b.WriteString("{")
	for i := range 100 {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	b.WriteString(`"last":0}`)
	if got := ArgNames([]byte(b.String())); len(got) != maxArgs {
		t.Fatalf("%d names, want at most %d", len(got), maxArgs)
	}
}

// The file is rotated before a line would take it past MaxBytes: no file
// is larger, Keep rotated files stay, and the lines read back in order
// across them are the lines written, the oldest gone with PATH.Keep+1.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l, err := Open(path, &Options{MaxBytes: MinMaxBytes, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	const n = 400 // about 150 bytes each: some 4 files' worth
	for i := range n {
		l.Write(&Record{Kind: KindCall, Front: "otc", Tool: "T", Outcome: "ok", CallID: fmt.Sprintf("call-%04d", i)})
		if i%50 == 0 {
			waitWritten(t, l, int64(i+1)) // stay within the buffer
		}
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l.Dropped() != 0 || l.Written() != n {
		t.Fatalf("written %d, dropped %d", l.Written(), l.Dropped())
	}
	var ids []string
	for _, name := range []string{path + ".2", path + ".1", path} {
		st, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > MinMaxBytes {
			t.Fatalf("%s: %d bytes, over the bound %d", name, st.Size(), MinMaxBytes)
		}
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v, want 0600", name, st.Mode().Perm())
		}
		for _, r := range readLines(t, name) {
			ids = append(ids, r.CallID)
		}
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Fatalf("%s.3 exists (Keep 2): %v", path, err)
	}
	if len(ids) == n || len(ids) < 2*MinMaxBytes/200 {
		t.Fatalf("%d lines kept of %d: want the oldest file removed, and 3 files' worth", len(ids), n)
	}
	first := n - len(ids)
	for i, id := range ids {
		if want := fmt.Sprintf("call-%04d", first+i); id != want {
			t.Fatalf("line %d is %s, want %s (lines lost or out of order)", i, id, want)
		}
	}
}

// Reopening appends: a restart does not truncate the log, and counts what
// the file holds toward its bound.
func TestReopenAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	for round := range 2 {
		l, err := Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		l.Write(&Record{Kind: KindCall, Front: "mcp", Outcome: "ok", CallID: fmt.Sprint(round)})
		_ = l.Close(context.Background())
	}
	if got := readLines(t, path); len(got) != 2 || got[0].CallID != "0" || got[1].CallID != "1" {
		t.Fatalf("lines %+v", got)
	}
}

// A writer that does not keep up never holds a call up: Write returns at
// once, the lines beyond the buffer are dropped and counted, and Warn is
// told.
func TestFullBufferDrops(t *testing.T) {
	pr, pw := io.Pipe() // nobody reads: the writer blocks on its first line
	defer pr.Close()
	var mu sync.Mutex
	var warned []int64
	l := New(pw, &Options{Buffer: 8, PerPrincipal: 8, Warn: func(d int64, _ error) { mu.Lock(); warned = append(warned, d); mu.Unlock() }})
	start := time.Now()
	for range 100 {
		l.Write(&Record{Kind: KindCall, Front: "otc", Outcome: "ok"})
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("100 writes took %v: Write waited for the writer", d)
	}
	// The writer holds one line, the buffer 8: the rest are dropped.
	if d := l.Dropped(); d < 100-8-1 || d > 100-8 {
		t.Fatalf("dropped %d, want %d or %d", d, 100-8-1, 100-8)
	}
	_ = pr.Close() // the blocked write fails: its line is counted too
	_ = l.Close(context.Background())
	mu.Lock()
	defer mu.Unlock()
	if len(warned) == 0 || warned[len(warned)-1] != l.Dropped() {
		t.Fatalf("Warn told %v, dropped %d", warned, l.Dropped())
	}
	l.Write(&Record{Kind: KindCall, Front: "otc", Outcome: "ok"})
	if l.Dropped() != warned[len(warned)-1]+1 {
		t.Fatal("a line written after Close is not counted as dropped")
	}
}

// One principal's flood fills its share of the buffer, not the buffer:
// mallory's lines beyond Options.PerPrincipal are dropped while the writer
// is held up, and alice's and bob's lines still find room; once the lines
// are written, no principal's count remains.
func TestBufferSharePerPrincipal(t *testing.T) {
	gate := &gatedWriter{entered: make(chan struct{}, 1), open: make(chan struct{})}
	l := New(gate, &Options{Buffer: 16, PerPrincipal: 4})
	write := func(who string, n int) {
		for i := range n {
			l.Write(&Record{Kind: KindCall, Front: "otc", Principal: who, Outcome: "ok", CallID: fmt.Sprint(who, i)})
		}
	}
	write("addr:mallory", 1)
	<-gate.entered // the writer holds mallory's first line
	write("addr:mallory", 50)
	write("jwt:alice", 2)
	write("jwt:bob", 1)
	if d := l.Dropped(); d != 50-4 {
		t.Errorf("dropped %d, want %d (mallory's lines beyond 4 waiting)", d, 50-4)
	}
	close(gate.open)
	_ = l.Close(context.Background())

	if len(l.queued) != 0 {
		t.Errorf("after the writer went on, lines still counted as waiting: %v", l.queued)
	}

	var who []string
	for _, line := range strings.Split(strings.TrimSpace(gate.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		who = append(who, fmt.Sprint(m["principal"]))
	}
	want := []string{"addr:mallory", "addr:mallory", "addr:mallory", "addr:mallory", "addr:mallory", "jwt:alice", "jwt:alice", "jwt:bob"}
	if !reflect.DeepEqual(who, want) {
		t.Errorf("written:\n%v\nwant\n%v", who, want)
	}
}

// gatedWriter blocks every Write until open is closed, telling entered
// of the first.
type gatedWriter struct {
	entered chan struct{}
	open    chan struct{}
	mu      sync.Mutex
	b       strings.Builder
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.b.Write(p)
}

func (g *gatedWriter) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.b.String()
}

func TestNilLog(t *testing.T) {
	var l *Log
	l.Write(&Record{Kind: KindCall})
	if l.Dropped() != 0 || l.Close(context.Background()) != nil {
		t.Fatal("a nil Log does something")
	}
}

func waitWritten(t *testing.T, l *Log, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.Written() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d lines written, want %d", l.Written(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func readLines(t *testing.T, path string) []line {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []line
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, MaxLineBytes)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every control (C0, DEL, C1), line or paragraph separator and invisible
// formatting character (Unicode Cf: bidi overrides, isolates and marks,
// zero-width characters, the BOM, tags) a caller puts in a field is written
// as a \u escape: the raw line holds none of them (a line never reads as
// two, a terminal acts on none, RLO reverses nothing), the operator sees
// each escape, and a JSON reader gets the field back as it was.
func TestEncodeEscapesInvisible(t *testing.T) {
	for _, c := range []struct {
		r    rune
		want string
	}{
		{0x00, `\u0000`}, {0x1b, `\u001b`}, {0x7f, `\u007f`},
		{0x80, `\u0080`}, {0x85, `\u0085`}, {0x9b, `\u009b`}, {0x9f, `\u009f`},
		{0x2028, `\u2028`}, {0x2029, `\u2029`},
		{0x202a, `\u202a`}, {0x202b, `\u202b`}, {0x202c, `\u202c`}, {0x202d, `\u202d`}, {0x202e, `\u202e`},
		{0x2066, `\u2066`}, {0x2067, `\u2067`}, {0x2068, `\u2068`}, {0x2069, `\u2069`},
		{0x200e, `\u200e`}, {0x200f, `\u200f`}, {0x061c, `\u061c`},
		{0x200b, `\u200b`}, {0x200d, `\u200d`}, {0x2060, `\u2060`}, {0xfeff, `\ufeff`}, {0x00ad, `\u00ad`},
		{0xe0001, `\udb40\udc01`}, {0x1d173, `\ud834\udd73`},
	} {
		user := "alice" + string(c.r) + "evil"
		tool := "Tool" + string(c.r) + "@1.0.0"
		b, ok := Encode(&Record{Kind: KindCall, Front: "otc", Principal: "p" + string(c.r), UserID: user, Tool: tool, Outcome: "ok"})
		if !ok {
			t.Fatalf("U+%04X: not encoded", c.r)
		}
		if strings.ContainsRune(string(b[:len(b)-1]), c.r) || strings.Count(string(b), "\n") != 1 {
			t.Errorf("U+%04X is in the line as it is: %q", c.r, b)
		}
		if !strings.Contains(string(b), `"user_id":"alice`+c.want+`evil"`) || !strings.Contains(string(b), `"tool":"Tool`+c.want+`@1.0.0"`) {
			t.Errorf("U+%04X is not written %s: %s", c.r, c.want, b)
		}
		var got line
		if err := json.Unmarshal(b, &got); err != nil || got.UserID != user || got.Tool != tool {
			t.Errorf("U+%04X: the line does not read back: %v %q %q", c.r, err, got.UserID, got.Tool)
		}
	}
	// Printable text stays as it is: letters of any script, é, emoji.
	b, _ := Encode(&Record{Kind: KindCall, Front: "otc", UserID: "élodie שלום 😀 <&>", Outcome: "ok"})
	if !strings.Contains(string(b), `"user_id":"élodie שלום 😀 <&>"`) {
		t.Fatalf("printable text changed: %s", b)
	}
}
