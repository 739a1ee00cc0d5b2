package gateway

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/config"
)

// TestExpectHeldAcrossReload: a request whose Content-Length was over
// server.max_body_bytes when its head came (headerReceived held it as an
// Expect: 100-continue that the client did not send) is refused by
// expect even when a reload has raised the limit past its length before
// expect runs: never a 100 Continue the client did not ask for. A
// client's own Expect is answered by the limit expect reads; an HTTP/1.0
// client's, or an empty Expect line, is no asking (RFC 9110 section
// 10.1.1). Both engines take this path: the loops hand such requests to
// the goroutine engine.
func TestExpectHeldAcrossReload(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) { testExpectHeldAcrossReload(t, engine) })
	}
}

func testExpectHeldAcrossReload(t *testing.T, engine string) {
	conf := func(max string) *config.Config {
		cfg, err := config.Parse("test.yaml", []byte(`
server: {engine: `+engine+`, max_body_bytes: `+max+`}
upstreams:
  up: {targets: ["http://127.0.0.1:1"]}
routes:
  - {name: all, upstream: up}
`))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	g, err := New(conf("1000"), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Shutdown(context.Background()) })
	for _, tc := range []struct {
		name, head string
		want       int
	}{
		{"unasked", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n", fasthttp.StatusRequestEntityTooLarge},
		{"HTTP/1.0", "POST / HTTP/1.0\r\nHost: x\r\nContent-Length: 2000\r\n\r\n", fasthttp.StatusRequestEntityTooLarge},
		{"HTTP/1.0 asked", "POST / HTTP/1.0\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2000\r\n\r\n", fasthttp.StatusRequestEntityTooLarge},
		{"HTTP/1.0 asked in capitals", "POST / HTTP/1.0\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 2000\r\n\r\n", fasthttp.StatusRequestEntityTooLarge},
		{"empty Expect", "POST / HTTP/1.1\r\nHost: x\r\nExpect:\r\nContent-Length: 2000\r\n\r\n", fasthttp.StatusRequestEntityTooLarge},
		{"asked", "POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2000\r\n\r\n", fasthttp.StatusContinue},
		{"asked in capitals", "POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-CONTINUE\r\nContent-Length: 2000\r\n\r\n", fasthttp.StatusContinue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := g.Apply(conf("1000")); err != nil {
				t.Fatal(err)
			}
			var req fasthttp.Request
			if err := req.Header.Read(bufio.NewReader(strings.NewReader(tc.head))); err != nil {
				t.Fatal(err)
			}
			g.headerReceived(&req.Header)
			if err := g.Apply(conf("1000000")); err != nil { // the reload, between the head and expect
				t.Fatal(err)
			}
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
			if !ctx.Request.MayContinue() {
				t.Fatal("the request is not held as an Expect: 100-continue")
			}
			if got := g.expect(&ctx); got != tc.want {
				t.Errorf("expect answered %d, want %d", got, tc.want)
			}
		})
	}
}
