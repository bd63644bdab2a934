package conntest

import (
	"io"
	"net"
	"testing"
	"time"
)

// pair returns the two ends of a loopback TCP connection.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// The body arrives whole and in order, no faster than a byte an interval.
func TestTrickleWritesTheBody(t *testing.T) {
	client, server := pair(t)
	const every = 20 * time.Millisecond
	start := time.Now()
	stop := Trickle(client, "abcd", every)
	defer stop()
	_ = server.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 4)
	if _, err := io.ReadFull(server, got); err != nil || string(got) != "abcd" {
		t.Fatalf("read %q, %v; want abcd", got, err)
	}
	if took := time.Since(start); took < 4*every {
		t.Errorf("4 bytes in %v, want at least %v", took, 4*every)
	}
}

// stop ends the writes at once, the next byte unwritten.
func TestTrickleStop(t *testing.T) {
	client, server := pair(t)
	stop := Trickle(client, "abcd", time.Hour)
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return")
	}
	client.Close()
	_ = server.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := server.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("after stop: read %d bytes, %v; want none and EOF", n, err)
	}
}
