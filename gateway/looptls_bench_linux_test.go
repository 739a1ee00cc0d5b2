package gateway_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"testing"

	"github.com/sluicehq/sluice/internal/testpki"
)

// BenchmarkLoopProxyTLS is BenchmarkLoopProxy through the TLS listener:
// one request on one keep-alive HTTPS connection (TLS 1.3), which the
// loops serve; allocs/op is the gateway's and the client's TLS.
func BenchmarkLoopProxyTLS(b *testing.B) {
	const answer = "HTTP/1.1 200 OK\r\nContent-Length: 24\r\n\r\nhello from the upstream\n"
	up := startRaw(b, func(c net.Conn, br *bufio.Reader) {
		for {
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				if len(line) <= 2 {
					break
				}
			}
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	})
	ca := testpki.NewCA(b)
	gw := startGatewayClock(b, parseConfig(b, `
server: {engine: loop}
tls: {listen: 127.0.0.1:0, certificates: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - name: all
    upstream: up
    policies:
      rate_limit: {algorithm: gcra, limit: 100000000, period: 1s, key: ip}
      circuit_breaker: {failure_rate: 0.5, window: {kind: count, size: 100}}
      concurrency: {adaptive: {algorithm: default, min: 16, max: 1024, initial: 256}}
`, certList(ca.Server("127.0.0.1")), up.addr), nil)
	conn, err := tls.Dial("tcp", serveTLS(b, gw), &tls.Config{RootCAs: ca.Pool, NextProtos: []string{"http/1.1"}})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	benchGets(b, conn)
}
