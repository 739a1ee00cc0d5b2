package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/config"
)

// TestFastErrorTimeoutCloses: fasthttp's answer to a head that
// server.read_header_timeout cut closes the connection at once, whether
// none of the head came (408) or part of it (400: fasthttp wraps the
// read's timeout in an error of its own): the client is not sending, and
// a lingering close would hold a slow client's connection for up to
// lingerTime more. A head fasthttp cannot read is answered 400 with a
// lingering close.
func TestFastErrorTimeoutCloses(t *testing.T) {
	cfg, err := config.Parse("test.yaml", []byte(`
upstreams:
  up: {targets: ["http://127.0.0.1:1"]}
routes:
  - {name: all, upstream: up}
`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Shutdown(context.Background()) })
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		name   string
		err    error
		code   int
		linger bool
	}{
		{"nothing read", timeout, fasthttp.StatusRequestTimeout, false},
		{"head begun", fmt.Errorf("error when reading request headers: %w", timeout), fasthttp.StatusBadRequest, false},
		{"head unreadable", errors.New("error when reading request headers: cannot find whitespace"), fasthttp.StatusBadRequest, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, peer := net.Pipe()
			defer c.Close()
			defer peer.Close()
			pc := &prefixConn{Conn: c}
			var ctx fasthttp.RequestCtx
			ctx.Init2(pc, nil, false)
			g.fastError(&ctx, tc.err)
			if got := ctx.Response.StatusCode(); got != tc.code {
				t.Errorf("answer %d, want %d", got, tc.code)
			}
			if lingers := pc.at.Load() != nil; lingers != tc.linger {
				t.Errorf("lingering close %v, want %v", lingers, tc.linger)
			}
		})
	}
}
