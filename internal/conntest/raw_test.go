package conntest

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// RawExchange returns the bytes a server wrote and whether it closed the
// connection: closed after an answer, or silent with it open.
func TestRawExchange(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				n, _ := c.Read(buf)
				_, _ = io.WriteString(c, "echo "+string(buf[:n]))
				if strings.HasPrefix(string(buf[:n]), "close") {
					return
				}
				time.Sleep(2 * time.Second) // silent, open
			}()
		}
	}()
	answer, closed, err := RawExchange(ln.Addr().String(), "close me", time.Second)
	if err != nil || answer != "echo close me" || !closed {
		t.Errorf("a server that closes: %q closed=%t %v", answer, closed, err)
	}
	answer, closed, err = RawExchange(ln.Addr().String(), "keep", 200*time.Millisecond)
	if err != nil || answer != "echo keep" || closed {
		t.Errorf("a server that stays silent: %q closed=%t %v", answer, closed, err)
	}
}
