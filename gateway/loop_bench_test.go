//go:build linux

package gateway_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// BenchmarkLoopProxy measures one request through the event loops, on one
// keep-alive connection, to a loopback target that answers every request
// alike, on the route of scripts/loadtest.sh (rate limit, breaker, adaptive
// limit): the loops' fast path. The client and the target allocate nothing
// per request, so allocs/op is the gateway's. BenchmarkLoopProxyRules is
// the same route with rewrite and header rules.
func BenchmarkLoopProxy(b *testing.B) { benchLoop(b, "", "") }

func BenchmarkLoopProxyRules(b *testing.B) {
	benchLoop(b, "", `
    rewrite: {add_prefix: /api}
    headers: {request: {set: {X-Env: prod}}, response: {remove: [X-Internal]}}`)
}

// benchLoop runs BenchmarkLoopProxy with more YAML at the top of the
// configuration (top) and for the route (more).
func benchLoop(b *testing.B, top, more string) {
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
      concurrency: {adaptive: {algorithm: default, min: 16, max: 1024, initial: 256}}%s
`, top, up.addr, more), nil)
	conn, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	benchGets(b, conn)
}

// benchGets sends GETs on conn, one at a time, each answered 200 before
// the next, for b's iterations, and reports allocations.
func benchGets(b *testing.B, conn net.Conn) {
	req := []byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
	br := bufio.NewReader(conn)
	b.ReportAllocs()
	for b.Loop() {
		_ = conn.SetDeadline(time.Now().Add(waitLimit))
		if _, err := conn.Write(req); err != nil {
			b.Fatal(err)
		}
		if err := readAnswer200(br); err != nil {
			b.Fatal(err)
		}
	}
}

// readAnswer200 reads one 200 response with a Content-Length from br.
func readAnswer200(br *bufio.Reader) error {
	size := -1
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if first && !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
			return &answerError{line: string(line)}
		}
		if len(line) <= 2 {
			break
		}
		if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
			size, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if size < 0 {
		return &answerError{line: "no Content-Length"}
	}
	_, err := br.Discard(size)
	return err
}

type answerError struct{ line string }

func (e *answerError) Error() string { return "unexpected answer: " + e.line }
