package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// upBigHTTP is a raw streamable HTTP MCP server whose tool "big" answers
// {"mb": N, "sse": bool} with a result of N MiB, streamed (never held),
// as a JSON body or as one event of an event stream. Its GET stream sends
// a notification of getMB MiB, then notifications/tools/list_changed,
// after which tools/list has a third tool.
type upBigHTTP struct {
	getMB   int
	changed atomic.Bool
	wrote   atomic.Int64 // bytes of big answers written before the client went away
}

func (s *upBigHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		if s.getMB == 0 {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "event: message\ndata: "+`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`)
		upWriteA(w, s.getMB)
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
		s.wrote.Add(upWriteA(w, a.MB))
		fmt.Fprintf(w, `"}]},"jsonrpc":"2.0","id":%s}`, m.ID)
		if a.SSE {
			io.WriteString(w, "\n\n")
		}
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, m.ID)
	}
}

// upWriteA writes mb MiB of "a" in 64 KiB pieces and returns how many
// bytes were written before a write failed.
func upWriteA(w io.Writer, mb int) int64 {
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

func upStartBigHTTP(t *testing.T, s *upBigHTTP) (*Upstream, *upLogs) {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	logs := &upLogs{}
	u, err := StartUpstream(context.Background(), &UpstreamConfig{
		Name: "big-http", URL: srv.URL + "/mcp", MaxMessageBytes: 1 << 20,
		RestartBackoffMin: 20 * time.Millisecond, RestartBackoffMax: 100 * time.Millisecond,
	}, &UpstreamOptions{Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = u.Close(ctx)
	})
	upWaitReady(t, u)
	return u, logs
}

func TestUpstreamHTTPAnswerOverLimit(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			s := &upBigHTTP{}
			u, _ := upStartBigHTTP(t, s)
			upWaitTools(t, u, 2)

			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := upCall(t, u, "big", fmt.Sprintf(`{"mb":64,"sse":%v}`, sse))
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
			res, err := upCall(t, u, "small", `{}`)
			if err != nil || upText(t, res) != "small" {
				t.Fatalf("next call: %s, %v", res, err)
			}
			if st := u.Status(); !st.Ready || st.Restarts != 0 {
				t.Errorf("status = %+v", st)
			}
		})
	}
}

// An event over the limit on the GET stream (no call waits for it) is
// dropped and the stream goes on.
func TestUpstreamHTTPStreamEventOverLimitSkipped(t *testing.T) {
	s := &upBigHTTP{getMB: 2}
	u, logs := upStartBigHTTP(t, s)
	upWaitTools(t, u, 3) // list_changed, sent after the big event, arrived
	logs.waitLog(t, "upstream event over the message limit dropped", time.Second)
	if st := u.Status(); !st.Ready || st.Restarts != 0 {
		t.Errorf("status = %+v", st)
	}
}
