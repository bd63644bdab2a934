package upstream

import (
	"net"
	"net/http/httptest"
	"testing"
	"time"
)

// A server that cannot be reached yet at start is Starting for InitTimeout
// (it may be coming up beside the bridge): meanwhile the waits between
// attempts are at most startRetryMax, whatever the backoff says; after it,
// the upstream is no longer Starting and the backoff is its own again.
func TestUpstreamStartingWhileUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	waits := &waitRecorder{}
	u, _ := startHTTP(t, Config{URL: url, InitTimeout: 2500 * time.Millisecond,
		RestartBackoffMin: 4 * time.Second, RestartBackoffMax: 8 * time.Second}, Options{waited: waits.record})
	eventually(t, 5*time.Second, "a failed attempt", func() bool { return len(waits.of("restart")) >= 1 })
	if st := u.Status(); !st.Starting || st.Ready {
		t.Errorf("status %+v, want Starting", st)
	}
	if w := waits.of("restart")[0]; w.d > startRetryMax {
		t.Errorf("first wait %v while starting, want at most %v", w.d, startRetryMax)
	}
	eventually(t, 10*time.Second, "the end of Starting", func() bool { return !u.Status().Starting })
	eventually(t, 10*time.Second, "a wait after Starting", func() bool {
		for _, w := range waits.of("restart") {
			if w.d > startRetryMax {
				return true
			}
		}
		return false
	})
}

// The server comes up while the upstream is Starting: it is connected
// within about startRetryMax of listening.
func TestUpstreamConnectsSoonAfterTheServerListens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	u, _ := startHTTP(t, Config{URL: "http://" + addr + "/mcp", Protocol: ProtocolLegacy,
		RestartBackoffMin: 4 * time.Second, RestartBackoffMax: 30 * time.Second}, Options{})
	time.Sleep(2500 * time.Millisecond) // several attempts fail
	wire, _, _ := newStreamable(t, nil)
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the port was taken meanwhile: %v", err)
	}
	ts := httptest.NewUnstartedServer(wire)
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	listening := time.Now()
	waitReady(t, u)
	if d := time.Since(listening); d > startRetryMax+500*time.Millisecond {
		t.Errorf("connected %v after the server listened, want within about %v", d, startRetryMax)
	}
}

// Any other failure at start is an answer: a child that exits is not
// Starting any more.
func TestUpstreamNotStartingAfterAnAnswer(t *testing.T) {
	u, _, waits := startGrowing(t, Config{Env: []string{fakeExitAtStart + "=1"}})
	eventually(t, 10*time.Second, "a failed attempt", func() bool { return len(waits.of("restart")) >= 1 })
	if st := u.Status(); st.Starting {
		t.Errorf("status %+v: a child that exited is not starting", st)
	}
}
