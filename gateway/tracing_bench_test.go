package gateway

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/telemetry"
)

// BenchmarkHandleTracing is BenchmarkHandle with tracing off, on at sample
// 0 (no trace recorded, a context still sent upstream) and on at sample 1
// (every request's spans exported, to a collector that drops them), so
// that tracing's cost per request and its allocations show side by side.
func BenchmarkHandleTracing(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	up := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("hello from the upstream\n") }}
	go up.Serve(ln) //nolint:errcheck // ends with the listener
	defer ln.Close()
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
`, tt.tracing, ln.Addr()))
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
			defer g.state.Load().close(nil)
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
		})
	}
}
