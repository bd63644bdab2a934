package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// bigHTTP is a raw streamable HTTP MCP server whose tool "big" answers
// {"mb": N, "sse": bool} with a result of N MiB, streamed (never held),
// as a JSON body or as one event of an event stream. Its GET stream sends
// a notification of getMB MiB, then notifications/tools/list_changed,
// after which tools/list has a third tool.
type bigHTTP struct {
	getMB   int
	changed atomic.Bool
	wrote   atomic.Int64 // bytes of big answers written before the client went away
}

func (s *bigHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		if s.getMB == 0 {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "event: message\ndata: "+`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`)
		writeA(w, s.getMB)
		io.WriteString(w, `"}}`+"\n\n")
		s.changed.Store(true)
		io.WriteString(w, "event: message\ndata: "+`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string `json:"name"`
			Arguments struct {
				MB  int  `json:"mb"`
				SSE bool `json:"sse"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if m.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	reply := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}
	switch m.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "s1")
		reply(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"big-http","version":"1.0.0"}}`)
	case "tools/list":
		tools := `{"name":"big","inputSchema":{"type":"object"}},{"name":"small","inputSchema":{"type":"object"}}`
		if s.changed.Load() {
			tools += `,{"name":"later","inputSchema":{"type":"object"}}`
		}
		reply(`{"tools":[` + tools + `]}`)
	case "tools/call":
		if m.Params.Name != "big" {
			reply(`{"content":[{"type":"text","text":"small"}]}`)
			return
		}
		a := m.Params.Arguments
		if a.SSE {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message\ndata: ")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		// TypeScript SDK key order: the id comes last.
		io.WriteString(w, `{"result":{"content":[{"type":"text","text":"`)
		s.wrote.Add(writeA(w, a.MB))
		fmt.Fprintf(w, `"}]},"jsonrpc":"2.0","id":%s}`, m.ID)
		if a.SSE {
			io.WriteString(w, "\n\n")
		}
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, m.ID)
	}
}

// writeA writes mb MiB of "a" in 64 KiB pieces and returns how many
// bytes were written before a write failed.
func writeA(w io.Writer, mb int) int64 {
	piece := []byte(strings.Repeat("a", 64<<10))
	var n int64
	for range mb * 16 {
		k, err := w.Write(piece)
		n += int64(k)
		if err != nil {
			break
		}
	}
	return n
}

func startBigHTTP(t *testing.T, s *bigHTTP) (*Upstream, *testLogs) {
	t.Helper()
	return startBigHTTPLimit(t, s, 1<<20)
}

func startBigHTTPLimit(t *testing.T, s *bigHTTP, limit int64) (*Upstream, *testLogs) {
	t.Helper()
	return startBigServer(t, s, "big-http", "/mcp", limit)
}

// startBigServer serves h, starts an upstream named name on its path with
// a message limit of limit bytes and waits until it is ready. When the test
// ends the upstream is closed (an error of its Close is not checked), then
// the server.
func startBigServer(t *testing.T, h http.Handler, name, path string, limit int64) (*Upstream, *testLogs) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(func() { closeServer(srv) })
	u, logs := startLogged(t, Config{
		Name: name, URL: srv.URL + path, MaxMessageBytes: limit,
		RestartBackoffMin: 20 * time.Millisecond, RestartBackoffMax: 100 * time.Millisecond,
	}, Options{}, false)
	waitReady(t, u)
	return u, logs
}

func TestUpstreamHTTPAnswerOverLimit(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			s := &bigHTTP{}
			u, _ := startBigHTTP(t, s)
			waitTools(t, u, 2)

			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := callTool(t, u, "big", fmt.Sprintf(`{"mb":64,"sse":%v}`, sse))
			runtime.ReadMemStats(&after)
			var tl *TooLargeError
			if !errors.As(err, &tl) || !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want a *TooLargeError", err)
			}
			if want := (TooLargeError{Upstream: "big-http", Tool: "big", Limit: 1 << 20}); *tl != want {
				t.Errorf("error = %+v, want %+v", *tl, want)
			}
			// Whatever the server managed to write, the bridge allocated a
			// bounded amount for it, not the answer's 64 MiB.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 24<<20 {
				t.Errorf("the call allocated %d MiB", alloc>>20)
			}
			res, err := callTool(t, u, "small", `{}`)
			if err != nil || resultText(t, res) != "small" {
				t.Fatalf("next call: %s, %v", res, err)
			}
			if st := u.Status(); !st.Ready || st.Restarts != 0 {
				t.Errorf("status = %+v", st)
			}
		})
	}
}

// An answer longer than what passes at once (passMax) but within the
// limit is held, then given whole.
func TestUpstreamHTTPLongAnswerWithinLimit(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			u, _ := startBigHTTPLimit(t, &bigHTTP{}, 3<<20)
			waitTools(t, u, 2)
			res, err := callTool(t, u, "big", fmt.Sprintf(`{"mb":2,"sse":%v}`, sse))
			if err != nil {
				t.Fatal(err)
			}
			if text := resultText(t, res); text != strings.Repeat("a", 2<<20) {
				t.Errorf("text of %d bytes, want 2 MiB of a", len(text))
			}
			if _, err := callTool(t, u, "big", fmt.Sprintf(`{"mb":4,"sse":%v}`, sse)); !errors.Is(err, ErrTooLarge) {
				t.Errorf("4 MiB: err = %v, want ErrTooLarge", err)
			}
		})
	}
}

// An event over the limit on the GET stream (no call waits for it) is
// dropped and the stream goes on.
func TestUpstreamHTTPStreamEventOverLimitSkipped(t *testing.T) {
	s := &bigHTTP{getMB: 2}
	u, logs := startBigHTTP(t, s)
	waitTools(t, u, 3) // list_changed, sent after the big event, arrived
	logs.waitLog(t, "upstream event over the message limit dropped", time.Second)
	if st := u.Status(); !st.Ready || st.Restarts != 0 {
		t.Errorf("status = %+v", st)
	}
}

// bigSSE is a raw legacy HTTP+SSE MCP server: GET /sse is the event
// stream (endpoint first), POST /messages takes requests, answered over the
// stream. Tool "big" answers {"mb": N, "shape": …} with an event of N MiB,
// streamed: "answer" (id last), "answer_lines" (id first, data split over
// many data: lines), "request" (a server request, then the call's answer
// says what the bridge answered it), "notification" (then a small answer),
// "no_id".
//
// Events go to the newest stream only: after a reconnection the old
// stream's handler may not have seen its client go yet, and must not take
// the answers meant for the new one.
type bigSSE struct {
	mu      sync.Mutex
	events  chan func(w io.Writer) // the newest stream's, written in order
	answers chan string            // answers to the server's own request
}

func newUpBigSSE() *bigSSE {
	return &bigSSE{events: make(chan func(io.Writer), 16), answers: make(chan string, 1)}
}

// emit queues an event for the newest stream.
func (s *bigSSE) emit(ev func(io.Writer)) {
	s.mu.Lock()
	ch := s.events
	s.mu.Unlock()
	ch <- ev
}

func (s *bigSSE) send(msg string) {
	s.emit(func(w io.Writer) { io.WriteString(w, "event: message\ndata: "+msg+"\n\n") })
}

func (s *bigSSE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		events := make(chan func(io.Writer), 16)
		s.mu.Lock()
		s.events = events
		s.mu.Unlock()
		serveEvents(w, r, "event: endpoint\ndata: /messages?session=1\n\n", events, func(w io.Writer, ev func(io.Writer)) { ev(w) })
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Error  json.RawMessage `json:"error"`
		Params struct {
			Name      string `json:"name"`
			Arguments struct {
				MB    int    `json:"mb"`
				Shape string `json:"shape"`
			} `json:"arguments"`
		} `json:"params"`
	}
	body, _ := io.ReadAll(r.Body)
	if json.Unmarshal(body, &m) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	if m.Method == "" { // an answer to the server's request
		s.answers <- string(body)
		return
	}
	if m.ID == nil {
		return
	}
	id := string(m.ID)
	switch m.Method {
	case "initialize":
		s.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"big-sse","version":"1.0.0"}}}`)
	case "tools/list":
		s.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"big","inputSchema":{"type":"object"}},{"name":"small","inputSchema":{"type":"object"}}]}}`)
	case "tools/call":
		a := m.Params.Arguments
		if m.Params.Name != "big" {
			s.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"small"}]}}`)
			return
		}
		big := func(head, tail string, lines bool) {
			s.emit(func(w io.Writer) {
				io.WriteString(w, "event: message\ndata: "+head)
				piece := strings.Repeat("a", 64<<10)
				for range a.MB * 16 {
					if lines {
						io.WriteString(w, "\ndata: ")
					}
					io.WriteString(w, piece)
				}
				io.WriteString(w, tail+"\n\n")
			})
		}
		switch a.Shape {
		case "answer":
			big(`{"result":{"content":[{"type":"text","text":"`, `"}]},"jsonrpc":"2.0","id":`+id+`}`, false)
		case "answer_lines":
			big(`{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"`, `"}]}}`, true)
		case "notification":
			big(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`, `"}}`, false)
			s.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"after the notification"}]}}`)
		case "request":
			big(`{"jsonrpc":"2.0","id":"srv-big","method":"sampling/createMessage","params":{"x":"`, `"}}`, false)
			go func() {
				answer := "no answer"
				select {
				case answer = <-s.answers:
				case <-time.After(10 * time.Second):
				}
				b, _ := json.Marshal(answer)
				s.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":` + string(b) + `}]}}`)
			}()
		case "no_id":
			big(`{"jsonrpc":"2.0","result":{"text":"`, `"}}`, false)
		}
	}
}

func TestUpstreamLegacySSEOverLimit(t *testing.T) {
	u, logs := startBigServer(t, newUpBigSSE(), "big-sse", "/sse", 1<<20)
	waitTools(t, u, 2)

	for _, shape := range []string{"answer", "answer_lines"} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := callTool(t, u, "big", `{"mb":32,"shape":"`+shape+`"}`)
		runtime.ReadMemStats(&after)
		var tl *TooLargeError
		if !errors.As(err, &tl) {
			t.Fatalf("%s: err = %v, want a *TooLargeError", shape, err)
		}
		if tl.Upstream != "big-sse" || tl.Tool != "big" || tl.Limit != 1<<20 || tl.Size < 32<<20 {
			t.Errorf("%s: error = %+v", shape, *tl)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 24<<20 {
			t.Errorf("%s: the call allocated %d MiB", shape, alloc>>20)
		}
		if res, err := callTool(t, u, "small", `{}`); err != nil || resultText(t, res) != "small" {
			t.Fatalf("%s: next call: %s, %v", shape, res, err)
		}
	}

	res, err := callTool(t, u, "big", `{"mb":2,"shape":"notification"}`)
	if err != nil || resultText(t, res) != "after the notification" {
		t.Fatalf("after a big notification: %s, %v", res, err)
	}
	res, err = callTool(t, u, "big", `{"mb":2,"shape":"request"}`)
	if err != nil {
		t.Fatal(err)
	}
	size := len("event: message\ndata: "+`{"jsonrpc":"2.0","id":"srv-big","method":"sampling/createMessage","params":{"x":"`+`"}}`+"\n\n") + 2<<20
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":"srv-big","error":{"code":-32600,"message":"request of %d bytes over the client's 1048576-byte message limit"}}`, size)
	if got := resultText(t, res); got != want {
		t.Errorf("the server's request was answered\n%s\nwant\n%s", got, want)
	}
	if st := u.Status(); !st.Ready || st.Restarts != 0 {
		t.Errorf("status = %+v", st)
	}

	// Without an id: the stream fails, the upstream reconnects.
	if _, err := callTool(t, u, "big", `{"mb":2,"shape":"no_id"}`); !errors.Is(err, ErrLost) {
		t.Errorf("no id: err = %v, want ErrLost", err)
	}
	eventually(t, 10*time.Second, "a reconnection", func() bool { return u.Status().Restarts == 1 })
	logs.waitLog(t, "without a readable id", time.Second)
	waitReady(t, u)
	if res, err := callTool(t, u, "small", `{}`); err != nil || resultText(t, res) != "small" {
		t.Errorf("after reconnecting: %s, %v", res, err)
	}
}

// closeServer closes srv without waiting on a handler stuck writing to a
// client that went away (httptest.Server.Close waits for every handler).
func closeServer(srv *httptest.Server) {
	srv.CloseClientConnections()
	srv.Close()
}
