package gateway

import (
	"context"
	"crypto/tls"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
)

// target is one server of an upstream pool.
type target struct {
	url    string // scheme://host:port, as configured
	client *fasthttp.HostClient
	// h2 is the pool's HTTP/2 transport when the upstream speaks h2 or
	// h2c, which then carries the requests instead of client.
	h2       *http.Transport
	inflight atomic.Int64
	// healthy is the verdict of the last active health check; true when the
	// pool has no active checks.
	healthy atomic.Bool
	// passive is the target's own breaker: it stops sending to a target that
	// keeps failing, whatever the route's policies are.
	passive passiveHealth
	// wait bounds each wait between two reads of a streamed body
	// (response_header_timeout; the wait for the head is the attempt's:
	// see lifecycle.headLimit).
	wait time.Duration
	// connect bounds connecting to the target (connect_timeout).
	connect time.Duration
	// metrics records its attempts and breaker transitions.
	metrics targetMetrics
}

// passiveHealth is what a target needs of its breaker. The outcomes it is
// given carry no latency (attempts are not timed for it).
type passiveHealth interface {
	sluice.Admitter
	Open() bool // reports whether the breaker rejects calls now
}

// upstreamClient returns the connection pool of one target, for
// roundTrip. A connection unused for idle is closed; connecting takes at
// most connect (less when the request's deadline is sooner). tc configures
// TLS to an https target; nil means the defaults.
func upstreamClient(u *url.URL, maxConns int, idle, connect time.Duration, tc *tls.Config) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                     hostPort(u),
		IsTLS:                    u.Scheme == "https",
		TLSConfig:                tc,
		MaxConns:                 maxConns,
		MaxIdleConnDuration:      idle,
		NoDefaultUserAgentHeader: true,
		DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
			if timeout <= 0 || timeout > connect {
				timeout = connect
			}
			return fasthttp.DialTimeout(addr, timeout)
		},
	}
}

func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return u.Host + ":443"
	}
	return u.Host + ":80"
}

// pool is an upstream: its targets and how one is picked.
type pool struct {
	name    string
	cfg     *config.Upstream
	targets []*target
	pick    func(p *pool, avoid *target) *target
	// tls is the client TLS configuration of the upstream's tls section;
	// nil without one.
	tls *tls.Config
	// h2 carries the requests of an h2 or h2c upstream, over connections
	// that concurrent requests share; nil for http1.
	h2    *http.Transport
	rr    atomic.Uint64
	clock clock.Clock
	log   *slog.Logger

	grpc     grpcTransport // gRPC calls' HTTP/2 client (grpcproxy.go)
	once     sync.Once     // starts health checks
	stopOnce sync.Once
	done     chan struct{} // closed by stop
}

// available reports whether t may be sent a request now.
func (t *target) available() bool {
	return t.healthy.Load() && (t.passive == nil || !t.passive.Open())
}

// permit takes t's passive-health permit for an attempt. When the breaker
// refuses, every target is failing (choose found no better one), and the
// attempt goes anyway, unrecorded (the zero Permit), rather than failing
// for certain (Envoy's "panic routing").
func (t *target) permit() sluice.Permit {
	if t.passive != nil {
		if p, err := t.passive.Acquire(context.Background()); err == nil {
			return p
		}
	}
	return sluice.Permit{}
}

// choose returns a target for the next attempt, preferring one other than
// avoid (the target a failed attempt went to). When every target is
// unavailable it still returns one, so that the caller learns why from it.
func (p *pool) choose(avoid *target) *target {
	if len(p.targets) == 1 {
		return p.targets[0]
	}
	return p.pick(p, avoid)
}

func pickRoundRobin(p *pool, avoid *target) *target {
	n := uint64(len(p.targets))
	start := p.rr.Add(1)
	for i := uint64(0); i < n; i++ {
		t := p.targets[(start+i)%n]
		if t != avoid && t.available() {
			return t
		}
	}
	return p.targets[start%n]
}

func pickLeastInflight(p *pool, avoid *target) *target {
	var best *target
	start := int(p.rr.Add(1)) // rotate ties so that equal targets share load
	n := len(p.targets)
	for i := 0; i < n; i++ {
		t := p.targets[(start+i)%n]
		if t == avoid || !t.available() {
			continue
		}
		if best == nil || t.inflight.Load() < best.inflight.Load() {
			best = t
		}
	}
	if best == nil {
		return p.targets[start%n]
	}
	return best
}

func pickP2C(p *pool, avoid *target) *target {
	n := len(p.targets)
	for tries := 0; tries < 3; tries++ {
		a, b := p.targets[rand.IntN(n)], p.targets[rand.IntN(n)]
		if b.inflight.Load() < a.inflight.Load() {
			a, b = b, a
		}
		if a != avoid && a.available() {
			return a
		}
		if b != avoid && b.available() {
			return b
		}
	}
	return pickLeastInflight(p, avoid)
}

var balancers = map[string]func(*pool, *target) *target{
	"round_robin":    pickRoundRobin,
	"least_inflight": pickLeastInflight,
	"p2c":            pickP2C,
}

// newPool builds an upstream from its configuration and its client TLS
// configuration tc (see upstreamTLS), with a passive-health breaker per
// target: five failures in a row take a target out for five seconds, then
// one probe decides.
func newPool(name string, cfg *config.Upstream, tc *tls.Config, g *Gateway) *pool {
	p := &pool{name: name, cfg: cfg, pick: balancers[cfg.Balance], clock: g.clock, log: g.log, done: make(chan struct{}), tls: tc}
	if cfg.Protocol != "http1" {
		p.h2 = h2Transport(cfg, tc)
	}
	for _, raw := range cfg.Targets {
		u, _ := url.Parse(raw) // validated by config
		t := &target{url: raw, client: upstreamClient(u, 4096, cfg.IdleTimeout.D(), cfg.ConnectTimeout.D(), tc), h2: p.h2,
			wait: cfg.ResponseHeaderTimeout.D(), connect: cfg.ConnectTimeout.D(), metrics: newTargetMetrics(g, name, raw)}
		t.healthy.Store(true)
		b, err := breaker.New(breaker.Options{
			Name:                "target " + raw,
			Clock:               g.clock,
			ConsecutiveFailures: 5,
			OpenDuration:        5 * time.Second,
			HalfOpenCalls:       1,
			OnStateChange: func(_ string, _, to breaker.State) {
				t.metrics.BreakerTransition(to)
			},
		})
		if err == nil {
			t.passive = passiveBreaker{b}
		}
		p.targets = append(p.targets, t)
	}
	return p
}

// passiveBreaker adapts a breaker to passiveHealth.
type passiveBreaker struct{ *breaker.Breaker }

func (b passiveBreaker) Open() bool {
	s := b.State()
	return s == breaker.Open || s == breaker.ForcedOpen
}
