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
				refusedHeaderCloses(t, engine, tls.VersionTLS13, garbage)
				if name != "oversized" { // TLS 1.2 allows 2048 of expansion
					refusedHeaderCloses(t, engine, tls.VersionTLS12, garbage)
				}
			})
		})
	}
}

// refusedHeaderCloses checks, for TestLoopTLSRefusedHeaderCloses, that a
// connection of TLS version vers closes once it sent garbage after a
// request answered.
func refusedHeaderCloses(t *testing.T, engine string, vers uint16, garbage []byte) {
	t.Helper()
	_, addr, ca := loopTLSGateway(t, engine, ", idle_timeout: 1h, read_timeout: 1h")
	nc, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sc := tls.Client(nc, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}, MaxVersion: vers})
	_ = nc.SetDeadline(time.Now().Add(waitLimit))
	if _, err := io.WriteString(sc, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, body := readResponse(t, bufio.NewReader(sc)); body != "GET /a https 0" {
		t.Fatalf("TLS %x: answer %q", vers, body)
	}
	if v := sc.ConnectionState().Version; v != vers {
		t.Fatalf("TLS %x, want %x", v, vers)
	}
	if _, err := nc.Write(garbage); err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, nc) // an alert, then the end
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("TLS %x: the connection is still open", vers)
	}
}
