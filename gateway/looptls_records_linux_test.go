package gateway_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestLoopTLSRefusedHeaderCloses sends, after a request answered on an
// open TLS connection, bytes that crypto/tls refuses at once: plaintext
// HTTP (not TLS's record version), a header announcing more than TLS 1.3
// allows, an empty record (too short to decrypt). The gateway closes the
// connection without waiting for the bytes a header announces (its idle
// timeout is an hour), on each engine.
func TestLoopTLSRefusedHeaderCloses(t *testing.T) {
	for name, garbage := range map[string][]byte{
		"plaintext": []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"oversized": {23, 3, 3, 0x41, 0x01}, // 16641 bytes: over 2^14+256
		"empty":     {23, 3, 3, 0, 0},       // too short to decrypt
	} {
		t.Run(name, func(t *testing.T) {
			forEngines(t, func(t *testing.T, engine string) {
				_, addr, ca := loopTLSGateway(t, engine, ", idle_timeout: 1h, read_timeout: 1h")
				nc, err := net.DialTimeout("tcp", addr, waitLimit)
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				sc := tls.Client(nc, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}})
				_ = nc.SetDeadline(time.Now().Add(waitLimit))
				if _, err := io.WriteString(sc, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				if _, body := readResponse(t, bufio.NewReader(sc)); body != "GET /a https 0" {
					t.Fatalf("answer %q", body)
				}
				if _, err := nc.Write(garbage); err != nil {
					t.Fatal(err)
				}
				_, err = io.Copy(io.Discard, nc) // an alert, then the end
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatal("the connection is still open")
				}
			})
		})
	}
}
