package conntest

import (
	"net"
	"time"
)

// Trickle writes body to conn one byte every interval, from a goroutine,
// until all of it is written, a write fails, or stop is called: a client
// that sends its request body too slowly. stop returns once the goroutine
// has ended.
func Trickle(conn net.Conn, body string, every time.Duration) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range len(body) {
			select {
			case <-quit:
				return
			case <-time.After(every):
			}
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
