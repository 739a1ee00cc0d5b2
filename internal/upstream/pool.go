package upstream

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/invalid"
)

// ErrInvalidOptions is the error of New given an upstream it cannot build;
// it matches sluice.ErrInvalidOptions.
var ErrInvalidOptions = invalid.Sentinel("upstream: invalid options")

// maxConns bounds the HTTP/1.1 connections to one target.
const maxConns = 4096

// Options is what New needs besides the upstream's configuration.
type Options struct {
	// TLS is the client TLS configuration of the upstream's tls section
	// (see ClientTLS); nil means the defaults (system roots, the target's
	// host).
	TLS *tls.Config
	// Clock times the passive-health breakers and the active checks'
	// intervals; nil means clock.Real.
	Clock clock.Clock
	// Log receives the active checks' verdict changes; nil discards them.
	Log *slog.Logger
	// Metrics returns the Metrics of the target at url; nil (or a nil
	// Metrics returned) records nothing.
	Metrics func(url string) Metrics
}

// Pool is an upstream: its targets, and how the target of an attempt is
// picked. It is safe for concurrent use. Start begins its active health
// checks; Stop ends them and closes its idle HTTP/2 connections.
type Pool struct {
	name    string
	cfg     *config.Upstream
	targets []*Target
	pick    func(p *Pool, avoid *Target) *Target
	tls     *tls.Config
	h2      *http.Transport // nil for http1
	rr      atomic.Uint64   // rotates round robin and least in-flight ties
	clock   clock.Clock
	log     *slog.Logger

	once     sync.Once // starts health checks
	stopOnce sync.Once
	done     chan struct{} // closed by Stop
}

// New builds the upstream called name from its configuration, as config
// validates and completes it (an empty balance is round robin, an empty
// protocol http1; a target that does not parse, an unknown balance or
// protocol, or no target at all is an error matching ErrInvalidOptions,
// every problem reported), with a passive-health breaker per
// target: five failures in a row take a target out for five seconds, then
// one probe decides. Each target keeps up to 4096 HTTP/1.1 connections,
// closing one idle for idle_timeout. Health checks do not start before
// Start.
func New(name string, cfg *config.Upstream, o Options) (*Pool, error) {
	bad := invalid.Problems{Prefix: ErrInvalidOptions.Error(), Sentinel: ErrInvalidOptions}
	pick, ok := balancers[cfg.Balance]
	if !ok {
		bad.Addf("upstreams.%s.balance: unknown balancer %q", name, cfg.Balance)
	}
	switch cfg.Protocol {
	case "", "http1", "h2", "h2c":
	default:
		bad.Addf("upstreams.%s.protocol: unknown protocol %q", name, cfg.Protocol)
	}
	if len(cfg.Targets) == 0 {
		bad.Addf("upstreams.%s.targets: none", name)
	}
	urls := make([]*url.URL, len(cfg.Targets))
	for i, raw := range cfg.Targets {
		u, err := url.Parse(raw)
		if err != nil {
			bad.Addf("upstreams.%s.targets[%d]: %v", name, i, err)
		}
		urls[i] = u
	}
	if err := bad.Err(); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	p := &Pool{name: name, cfg: cfg, pick: pick, tls: o.TLS, clock: o.Clock, log: o.Log, done: make(chan struct{})}
	if cfg.Protocol != "" && cfg.Protocol != "http1" {
		p.h2 = h2Transport(cfg, o.TLS)
	}
	for i, raw := range cfg.Targets {
		t := &Target{URL: raw, Client: hostClient(urls[i], maxConns, cfg.IdleTimeout.D(), cfg.ConnectTimeout.D(), o.TLS), H2: p.h2,
			Wait: cfg.ResponseHeaderTimeout.D(), Connect: cfg.ConnectTimeout.D(), Metrics: noMetrics{}}
		if o.Metrics != nil {
			if m := o.Metrics(raw); m != nil {
				t.Metrics = m
			}
		}
		t.healthy.Store(true)
		b, err := breaker.New(breaker.Options{
			Name:                "target " + raw,
			Clock:               o.Clock,
			ConsecutiveFailures: 5,
			OpenDuration:        5 * time.Second,
			HalfOpenCalls:       1,
			OnStateChange: func(_ string, _, to breaker.State) {
				t.Metrics.BreakerTransition(to)
			},
		})
		if err == nil {
			t.passive = b
		}
		p.targets = append(p.targets, t)
	}
	return p, nil
}

// Config returns the configuration p was built from; it must not be
// changed.
func (p *Pool) Config() *config.Upstream { return p.cfg }

// TLS returns the client TLS configuration p was built with; nil without
// a tls section.
func (p *Pool) TLS() *tls.Config { return p.tls }

// H2 returns the transport of an h2 or h2c upstream; nil for http1.
func (p *Pool) H2() *http.Transport { return p.h2 }

// Targets returns p's targets, in the configuration's order; the slice
// must not be changed.
func (p *Pool) Targets() []*Target { return p.targets }

// Choose returns a target for the next attempt, preferring one other than
// avoid (the target a failed attempt went to; nil for none) and one that
// is Available. When every target is unavailable it still returns one, so
// that the caller learns why from it.
func (p *Pool) Choose(avoid *Target) *Target {
	if len(p.targets) == 1 {
		return p.targets[0]
	}
	return p.pick(p, avoid)
}

// Start begins active health checks, if the upstream has them. It is safe
// to call more than once.
func (p *Pool) Start() {
	if p.cfg.Health == nil {
		return
	}
	p.once.Do(func() { go p.checkLoop() })
}

// Stop ends the health checks and closes the idle HTTP/2 connections. It
// is safe to call more than once.
func (p *Pool) Stop() {
	p.stopOnce.Do(func() {
		close(p.done)
		if p.h2 != nil {
			p.h2.CloseIdleConnections()
		}
	})
}
