package gateway_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/gateway"
)

// TestOptionsLoops: Options.Loops is how many event loops serve; the
// connections spread over that many and no more.
func TestOptionsLoops(t *testing.T) {
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {})
	for _, loops := range []int{1, 3} {
		checkLeaks(t)
		cfg := parseConfig(t, `
listen: 127.0.0.1:0
upstreams: {up: {targets: [%s]}}
routes: [{name: all, upstream: up}]
`, up.URL)
		g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Loops: loops})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tg := &testGateway{Gateway: g, Addr: ln.Addr().String(), URL: "http://" + ln.Addr().String(), served: make(chan error, 1)}
		go func() { tg.served <- g.Serve(ln) }()
		for range 2 * loops {
			c := newClient(t) // a connection of its own
			if r := get(t, c, tg.URL+"/"); r.Code != http.StatusOK {
				t.Fatalf("status %d", r.Code)
			}
			c.CloseIdleConnections()
		}
		if n := gateway.LoopsServing(g); n != loops {
			t.Errorf("Loops %d: %d loops served", loops, n)
		}
		tg.stop(t)
	}
}
