package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestUpstreamMsgEnds(t *testing.T) {
	big := strings.Repeat("x", 100)
	tests := []struct {
		name, head, tail string
		id               string
		method           bool
	}{
		{name: "id first", head: `{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"` + big, id: `17`},
		{name: "id last (TypeScript SDK)", tail: big + `"}]},"jsonrpc":"2.0","id":17}`, id: `17`},
		{name: "id last, spaces", tail: big + "\"}]} ,\r\n \"jsonrpc\" : \"2.0\" , \"id\" : 17 }\r", id: `17`},
		{name: "string id last", tail: big + `"}]},"id":"a\"b\\","jsonrpc":"2.0"}`, id: `"a\"b\\"`},
		{name: "negative id first", head: `{ "id" : -3 , "result":{` + big, id: `-3`},
		{name: "id after a small object", head: `{"jsonrpc":"2.0","_meta":{"id":1,"s":"}\"{"},"id":5,"result":{"x":"` + big, id: `5`},
		{name: "nested id only", head: `{"result":{"id":4,"text":"` + big, tail: big + `"}}`},
		{name: "nested id at the end", tail: big + `","id":4}}`},
		{name: "id inside a string at the end", tail: big + `x\",\"id\":4}"}`},
		{name: "escaped backslash then quote", tail: big + `\\","id":8}`, id: `8`},
		{name: "request", head: `{"jsonrpc":"2.0","id":"srv-1","method":"sampling/createMessage","params":{"x":"` + big, id: `"srv-1"`, method: true},
		{name: "request, TypeScript order", head: `{"method":"sampling/createMessage","params":{"x":"` + big, tail: big + `"},"jsonrpc":"2.0","id":3}`, id: `3`, method: true},
		{name: "notification", head: `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + big, method: true},
		{name: "null id", tail: big + `"},"id":null}`},
		{name: "no object", head: `[1,2,3` + big},
		{name: "cut inside the id", tail: `7}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e msgEnds
			e.scanHead([]byte(tt.head))
			e.scanTail([]byte(tt.tail))
			if string(e.id) != tt.id || e.method != tt.method {
				t.Errorf("id %q method %v, want id %q method %v", e.id, e.method, tt.id, tt.method)
			}
		})
	}
}

func TestUpstreamRing(t *testing.T) {
	var r ring
	var all []byte
	for i := range 5000 {
		p := []byte(strings.Repeat(fmt.Sprint(i%10), i%37))
		r.write(p)
		all = append(all, p...)
		want := all[max(0, len(all)-tailKeep):]
		if !bytes.Equal(r.bytes(), want) {
			t.Fatalf("after %d writes: ring holds %d bytes, not the last %d written", i+1, len(r.bytes()), len(want))
		}
	}
	r.write(bytes.Repeat([]byte("z"), tailKeep+5))
	if !bytes.Equal(r.bytes(), bytes.Repeat([]byte("z"), tailKeep)) {
		t.Fatal("a write longer than the ring")
	}
}

// TestUpstreamLinesAtTheWire feeds stdout bytes in pieces of every size and
// compares what mcp-go's reader gets, line for line.
func TestUpstreamLinesAtTheWire(t *testing.T) {
	u := &Upstream{name: "t", nonce: "N0NCE", cfg: Config{MaxMessageBytes: 64}, log: discardLog()}
	long := strings.Repeat("y", headKeep+tailKeep) // so that the head does not hold the end
	in := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":{"t":"` + long + `"}}` + "\n" +
		`{"result":{"t":"` + long + `"},"jsonrpc":"2.0","id":3}` + "\r\n" +
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"t":"` + long + `"}}` + "\n" +
		`{"jsonrpc":"2.0","id":4,"result":{"exactly":"` + strings.Repeat("z", 64-len(`{"jsonrpc":"2.0","id":4,"result":{"exactly":""}}`)) + `"}}` + "\n" +
		`{"jsonrpc":"2.0","id":"s1","method":"roots/list","params":{"t":"` + long + `"}}` + "\n" +
		`{"result":{"t":"` + long + `"}}` + "\n" +
		`{"jsonrpc":"2.0","id":5,"result":{}}` + "\n"
	lines := strings.SplitAfter(in, "\n")
	// pass: how much of a line reaches the reader before its end (at most
	// max; held until the end beyond that).
	for _, pass := range []int{64, 16, 1} {
		for _, piece := range []int{1, 2, 3, 7, 64, 65, 4096} {
			t.Run(fmt.Sprintf("pass=%d,piece=%d", pass, piece), func(t *testing.T) {
				checkLines(t, u, in, lines, pass, piece)
			})
		}
	}
}

func checkLines(t *testing.T, u *Upstream, in string, lines []string, pass, piece int) {
	t.Helper()
	cut := func(s string) string { return s[:pass] + "\x00\n" }
	want := lines[0] +
		cut(lines[1]) + `{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"answer over the message limit","data":{"mcpotc/too-large":"N0NCE","size":` + fmt.Sprint(len(lines[1])-1) + "}}}\n" +
		cut(lines[2]) + `{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"answer over the message limit","data":{"mcpotc/too-large":"N0NCE","size":` + fmt.Sprint(len(lines[2])-1) + "}}}\n" +
		cut(lines[3]) +
		lines[4] +
		cut(lines[5]) +
		cut(lines[6]) +
		lines[7]
	var responded []string
	var died []string
	l := u.newLines(func(b []byte) { responded = append(responded, string(b)) }, func(why string) { died = append(died, why) })
	l.pass = int64(pass)
	src := &pieces{data: []byte(in), piece: piece}
	var got bytes.Buffer
	buf := make([]byte, 5)
	for {
		n, err := l.read(src, buf)
		got.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if g := got.String(); g != want {
		i := 0
		for i < min(len(g), len(want)) && g[i] == want[i] {
			i++
		}
		t.Errorf("reader got %d bytes, want %d; first difference at %d: got %q, want %q",
			len(g), len(want), i, g[i:min(len(g), i+120)], want[i:min(len(want), i+120)])
	}
	wantResp := `{"jsonrpc":"2.0","id":"s1","error":{"code":-32600,"message":"request of ` + fmt.Sprint(len(lines[5])-1) + ` bytes over the client's 64-byte message limit"}}` + "\n"
	if len(responded) != 1 || responded[0] != wantResp {
		t.Errorf("answers to the child = %q, want %q", responded, wantResp)
	}
	if len(died) != 1 || died[0] != fmt.Sprintf("a message of %d bytes over the 64-byte limit without a readable id", len(lines[6])-1) {
		t.Errorf("connection failures = %q", died)
	}
}

type pieces struct {
	data  []byte
	piece int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, errors.New("EOF")
	}
	n := copy(b[:min(len(b), p.piece)], p.data)
	p.data = p.data[n:]
	return n, nil
}

func TestUpstreamStdioAnswerOverLimit(t *testing.T) {
	for _, shape := range []string{"id_first", "id_last"} {
		t.Run(shape, func(t *testing.T) {
			u, logs := startFake(t, Config{MaxMessageBytes: 1 << 20}, Options{})
			waitReady(t, u)
			pid := childPID(t, u)

			_, err := callTool(t, u, "big", `{"mb":8,"shape":"`+shape+`"}`)
			var tl *TooLargeError
			if !errors.As(err, &tl) || !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want a *TooLargeError", err)
			}
			logs.waitLog(t, "fake: big line of", 5*time.Second)
			var size int64
			fmt.Sscanf(logs.String()[strings.Index(logs.String(), "fake: big line of "):], "fake: big line of %d", &size)
			want := TooLargeError{Upstream: "fake-stdio", Tool: "big", Limit: 1 << 20, Size: size}
			if *tl != want || size < 8<<20 {
				t.Errorf("error = %+v, want %+v", *tl, want)
			}
			// The same child answers the next call.
			res, err := callTool(t, u, "echo_raw", `{"a":1}`)
			if err != nil || resultText(t, res) != `{"a":1}` {
				t.Fatalf("next call: %s, %v", res, err)
			}
			if childPID(t, u) != pid || u.Status().Restarts != 0 {
				t.Errorf("the child was restarted: %+v", u.Status())
			}
		})
	}
}

func TestUpstreamStdioOtherMessagesOverLimit(t *testing.T) {
	u, logs := startFake(t, Config{MaxMessageBytes: 1 << 20}, Options{})
	waitReady(t, u)

	// A notification over the limit is dropped; the call goes on.
	res, err := callTool(t, u, "big", `{"mb":2,"shape":"notification"}`)
	if err != nil || !strings.HasPrefix(resultText(t, res), "wrote ") {
		t.Fatalf("call after a big notification: %s, %v", res, err)
	}
	logs.waitLog(t, "upstream notification over the message limit dropped", time.Second)

	// A server request over the limit gets an error answer.
	res, err = callTool(t, u, "big", `{"mb":2,"shape":"request"}`)
	if err != nil {
		t.Fatal(err)
	}
	size := len(`{"jsonrpc":"2.0","id":"srv-big","method":"sampling/createMessage","params":{"x":"`+`"}}`) + 2<<20
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":"srv-big","error":{"code":-32600,"message":"request of %d bytes over the client's 1048576-byte message limit"}}`, size)
	if got := resultText(t, res); got != want {
		t.Errorf("the server's request was answered\n%s\nwant\n%s", got, want)
	}
	if u.Status().Restarts != 0 {
		t.Errorf("restarted: %+v", u.Status())
	}

	// A message without an id cannot be matched to its call: the
	// connection is restarted, and the call is lost.
	_, err = callTool(t, u, "big", `{"mb":2,"shape":"no_id"}`)
	if !errors.Is(err, ErrLost) {
		t.Errorf("err = %v, want ErrLost", err)
	}
	eventually(t, 10*time.Second, "a restart", func() bool { return u.Status().Restarts == 1 })
	logs.waitLog(t, "without a readable id", time.Second)
	waitReady(t, u)
	if _, err := callTool(t, u, "echo_raw", `{}`); err != nil {
		t.Errorf("after the restart: %v", err)
	}
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// A line longer than what passes at once (passMax) but within the limit
// is held, then given whole.
func TestUpstreamStdioLongAnswerWithinLimit(t *testing.T) {
	u, _ := startFake(t, Config{MaxMessageBytes: 3 << 20}, Options{})
	waitReady(t, u)
	for _, shape := range []string{"id_first", "id_last"} {
		res, err := callTool(t, u, "big", `{"mb":2,"shape":"`+shape+`"}`)
		if err != nil {
			t.Fatalf("%s: %v", shape, err)
		}
		if text := resultText(t, res); text != strings.Repeat("a", 2<<20) {
			t.Errorf("%s: text of %d bytes, want 2 MiB of a", shape, len(text))
		}
	}
	if _, err := callTool(t, u, "big", `{"mb":4,"shape":"id_first"}`); !errors.Is(err, ErrTooLarge) {
		t.Errorf("4 MiB: err = %v, want ErrTooLarge", err)
	}
}
