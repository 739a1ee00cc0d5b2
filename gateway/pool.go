package gateway

import (
	"crypto/tls"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/upstream"
)

// target is one server of an upstream pool.
type target = upstream.Target

// pool is an upstream of the gateway: its targets, their balancing and
// health (internal/upstream), and the transport of its gRPC calls
// (grpcproxy.go).
type pool struct {
	*upstream.Pool
	grpc grpcTransport // gRPC calls' HTTP/2 client
}

// newPool builds the upstream called name from its configuration and its
// client TLS configuration tc (see upstream.ClientTLS), with g's clock,
// log and per-target metrics.
func newPool(name string, cfg *config.Upstream, tc *tls.Config, g *Gateway) (*pool, error) {
	p, err := upstream.New(name, cfg, upstream.Options{
		TLS:   tc,
		Clock: g.clock,
		Log:   g.log,
		Metrics: func(url string) upstream.Metrics {
			return newTargetMetrics(g, name, url)
		},
	})
	if err != nil {
		return nil, err
	}
	return &pool{Pool: p}, nil
}

// stop ends the health checks and closes the idle HTTP/2 connections (the
// upstream's and gRPC calls'). It is safe to call more than once.
func (p *pool) stop() {
	p.Stop()
	p.closeGRPC()
}
