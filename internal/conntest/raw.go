package conntest

import (
	"errors"
	"io"
	"net"
	"os"
	"time"
)

// RawExchange dials addr (a loopback host:port), writes request byte for
// byte (a request net/http's client would not send), and reads what comes
// back until the server closes the connection or quiet passes without a
// byte. closed reports that the server closed it (EOF, or a reset after
// its answer) rather than falling silent with the connection open.
func RawExchange(addr, request string, quiet time.Duration) (answer string, closed bool, err error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", false, err
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, request); err != nil {
		return "", false, err
	}
	var got []byte
	buf := make([]byte, 4096)
	for {
		_ = conn.SetReadDeadline(time.Now().Add(quiet))
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		switch {
		case err == nil:
			continue
		case errors.Is(err, os.ErrDeadlineExceeded):
			return string(got), false, nil
		case errors.Is(err, io.EOF), len(got) > 0:
			return string(got), true, nil
		default:
			return string(got), false, err
		}
	}
}
