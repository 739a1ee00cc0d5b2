package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/config"
)

// TestFastErrorTimeoutCloses: a head that server.read_header_timeout cut
// is not answered, whether none of it came or part of it (fasthttp wraps
// the read's timeout in an error of its own), as the loops, nginx and
// net/http answer neither: fasthttp's answer finds the write deadline
// passed, and the connection closes at once (the client is not sending,
// and a lingering close would hold a slow client's connection for up to
// lingerTime more). A head fasthttp cannot read, or one with a bare LF
// line, is answered 400 with a lingering close.
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
		{"nothing read", timeout, 0, false},
		{"head begun", fmt.Errorf("error when reading request headers: %w", timeout), 0, false},
		{"head unreadable", errors.New("error when reading request headers: cannot find whitespace"), fasthttp.StatusBadRequest, true},
		{"bare LF", fmt.Errorf("error when reading request headers: %w", errBareLF), fasthttp.StatusBadRequest, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, peer := net.Pipe()
			defer c.Close()
			defer peer.Close()
			go func() { _, _ = io.Copy(io.Discard, peer) }() // ends as peer closes
			pc := &prefixConn{Conn: c}
			var ctx fasthttp.RequestCtx
			ctx.Init2(pc, nil, false)
			g.fastError(&ctx, tc.err)
			_, werr := pc.Write([]byte("x"))
			if answered := !errors.Is(werr, os.ErrDeadlineExceeded); answered != (tc.code != 0) {
				t.Errorf("answer can be written %v (%v), want %v", answered, werr, tc.code != 0)
			}
			if got := ctx.Response.StatusCode(); tc.code != 0 && got != tc.code {
				t.Errorf("answer %d, want %d", got, tc.code)
			}
			if lingers := pc.at.Load() != nil; lingers != tc.linger {
				t.Errorf("lingering close %v, want %v", lingers, tc.linger)
			}
		})
	}
}
