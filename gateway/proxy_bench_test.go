package gateway

import (
	"fmt"
	"log/slog"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/telemetry"
)

// BenchmarkHandle measures one proxied request through the route of
// scripts/loadtest.sh (rate limit, breaker, adaptive limit) to a loopback
// upstream: the handler's own work and allocations plus one upstream round
// trip (the client side is not included).
func BenchmarkHandle(b *testing.B) { benchHandle(b, benchUpstream(b), "") }

// benchUpstream starts the loopback upstream of BenchmarkHandle, stopped at
// the benchmark's end, and returns its address.
func benchUpstream(b *testing.B) net.Addr {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	up := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("hello from the upstream\n") }}
	go up.Serve(ln) //nolint:errcheck // ends with the listener
	b.Cleanup(func() { _ = ln.Close() })
	return ln.Addr()
}

// benchHandle runs BenchmarkHandle against the upstream at addr, with more
// YAML at the top of the configuration (top).
func benchHandle(b *testing.B, addr net.Addr, top string) {
	g := benchGateway(b, addr, top)
	var req fasthttp.Request
	req.SetRequestURI("/")
	req.Header.SetHost("example.com")
	peer := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	for b.Loop() {
		ctx.Init(&req, peer, nil)
		g.handle(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("status %d", ctx.Response.StatusCode())
		}
	}
}

// benchGateway makes the gateway of BenchmarkHandle, to the upstream at
// addr with more YAML at the top of its configuration (top), closed at the
// benchmark's end.
func benchGateway(b *testing.B, addr net.Addr, top string) *Gateway {
	cfg, err := config.Parse("bench.yaml", fmt.Appendf(nil, `
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
`, top, addr))
	if err != nil {
		b.Fatal(err)
	}
	m, err := telemetry.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	g, err := New(cfg, Options{Metrics: m, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.state.Load().close(nil) })
	return g
}
