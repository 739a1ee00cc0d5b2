//go:build linux

package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkLoopTracing measures one request through the event loops, on
// one keep-alive connection, to a loopback target, with tracing off, on at
// sample 0 (nothing recorded, a context still sent upstream) and on at
// sample 1 (every request's spans exported to a collector that drops
// them). The client and the target allocate nothing per request, so
// allocs/op is the gateway's.
func BenchmarkLoopTracing(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	for _, tt := range []struct{ name, tracing string }{
		{"off", ""},
		{"sample=0", fmt.Sprintf(`tracing: {endpoint: "%s", sample: 0}`, collector.URL)},
		{"sample=1", fmt.Sprintf(`tracing: {endpoint: "%s", sample: 1}`, collector.URL)},
	} {
		b.Run(tt.name, func(b *testing.B) {
			const answer = "HTTP/1.1 200 OK\r\nContent-Length: 24\r\n\r\nhello from the upstream\n"
			up := startRaw(b, func(c net.Conn, br *bufio.Reader) {
				for {
					for { // the request's head: a GET without a body
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
			gw := startGatewayClock(b, parseConfig(b, `
server: {engine: loop}
%s
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - name: all
    upstream: up
    policies:
      rate_limit: {algorithm: gcra, limit: 100000000, period: 1s, key: ip}
      circuit_breaker: {failure_rate: 0.5, window: {kind: count, size: 100}}
      concurrency: {adaptive: {algorithm: default, min: 16, max: 1024, initial: 256}}
`, tt.tracing, up.addr), nil)
			conn, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			req := []byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
			br := bufio.NewReader(conn)
			b.ReportAllocs()
			for b.Loop() {
				_ = conn.SetDeadline(time.Now().Add(waitLimit))
				if _, err := conn.Write(req); err != nil {
					b.Fatal(err)
				}
				// The answer is the upstream's: 24 bytes of body after the
				// gateway's head, which ends with an empty line.
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						b.Fatal(err)
					}
					if len(line) <= 2 {
						break
					}
				}
				if _, err := br.Discard(24); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
