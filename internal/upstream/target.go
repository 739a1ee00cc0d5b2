package upstream

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
)

// Metrics records the events of one target. Its methods are called
// without any lock of the package held; telemetry.Target implements it.
type Metrics interface {
	// Attempt records an attempt's class and duration (called by the
	// pool's user, which times attempts).
	Attempt(c sluice.Class, d time.Duration)
	// BreakerTransition records a change of the target's passive-health
	// breaker.
	BreakerTransition(to breaker.State)
	// Forget drops what was recorded of the target, once it left the
	// configuration.
	Forget()
}

// Target is one server of a Pool. Its exported fields are set by New and
// read-only after; InFlight is the pool user's to count.
type Target struct {
	// URL is the target as configured: scheme://host:port.
	URL string
	// Client holds the target's HTTP/1.1 connections (its Addr is the
	// target's host:port, its IsTLS and TLSConfig its TLS).
	Client *fasthttp.HostClient
	// H2 is the pool's HTTP/2 transport when the upstream speaks h2 or
	// h2c, which then carries the requests instead of Client; nil for
	// http1.
	H2 *http.Transport
	// Wait bounds each wait between two reads of a streamed body
	// (response_header_timeout; zero: none).
	Wait time.Duration
	// Connect bounds connecting to the target (connect_timeout).
	Connect time.Duration
	// Metrics records the target's attempts and breaker transitions; never
	// nil (a no-op when Options.Metrics is nil).
	Metrics Metrics
	// InFlight counts the attempts under way to the target; the least
	// in-flight and p2c balancers read it. The pool's user adds and
	// removes its attempts.
	InFlight atomic.Int64

	// healthy is the verdict of the last active health check; true when
	// the pool has no active checks.
	healthy atomic.Bool
	// passive is the target's own breaker: it stops sending to a target
	// that keeps failing, whatever the route's policies are. Nil when it
	// could not be built.
	passive *breaker.Breaker
}

// Healthy reports the verdict of the target's last active health check;
// true when its pool has no active checks.
func (t *Target) Healthy() bool { return t.healthy.Load() }

// Available reports whether t may be sent a request now: healthy, and its
// passive-health breaker not open.
func (t *Target) Available() bool {
	return t.healthy.Load() && !t.passiveOpen()
}

func (t *Target) passiveOpen() bool {
	if t.passive == nil {
		return false
	}
	s := t.passive.State()
	return s == breaker.Open || s == breaker.ForcedOpen
}

// Acquire takes t's passive-health permit for an attempt, or returns the
// breaker's rejection when t is taken out. The outcome given to the
// permit's Done needs no latency: the breaker counts failures in a row
// only (five take the target out for five seconds, then one probe
// decides).
func (t *Target) Acquire() (sluice.Permit, error) {
	if t.passive == nil {
		return sluice.Permit{}, nil
	}
	return t.passive.Acquire(context.Background())
}

// Permit is Acquire for an attempt that goes whatever the breaker says:
// when it refuses, every target is failing (Pool.Choose found no better
// one), and the attempt goes anyway, unrecorded (the zero Permit), rather
// than failing for certain (Envoy's "panic routing").
func (t *Target) Permit() sluice.Permit {
	p, err := t.Acquire()
	if err != nil {
		return sluice.Permit{}
	}
	return p
}

// Breaker reports the state of t's passive-health breaker; ok is false
// when t has none.
func (t *Target) Breaker() (s breaker.State, ok bool) {
	if t.passive == nil {
		return 0, false
	}
	return t.passive.State(), true
}

// RoundTrip sends req to t and reads its response into resp, over HTTP/2
// or HTTP/1.1 as t's upstream speaks (see RoundTrip), within tr's bounds.
func (t *Target) RoundTrip(req *fasthttp.Request, resp *fasthttp.Response, tr Trip) error {
	if t.H2 != nil {
		return h2RoundTrip(t.H2, t, req, resp, tr)
	}
	return RoundTrip(t.Client, req, resp, tr)
}

// noMetrics is the Metrics of a pool given none.
type noMetrics struct{}

func (noMetrics) Attempt(sluice.Class, time.Duration) {}
func (noMetrics) BreakerTransition(breaker.State)     {}
func (noMetrics) Forget()                             {}
