package httpguard

import (
	"net/http"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// DefaultMaxReplayBody is the largest request body Transport buffers so that
// it can replay it on a retry, when Options.MaxReplayBody is zero: 1 MiB.
const DefaultMaxReplayBody = 1 << 20

// Options configures Middleware and Transport. The zero value is ready to
// use; every field documents its default. Every value is usable, so
// Middleware and Transport return no error.
type Options struct {
	// Key gives each request's rate-limit key, which Middleware puts in the
	// request's context with ratelimit.WithKey before the guard runs, so
	// that a ratelimit.Limiter in the guard limits each key on its own (see
	// ByClientIP, ByHeader and ByPattern). It must be safe for concurrent
	// use. Nil means ByClientIP() with no trusted proxy: one limit per peer
	// address (an IPv6 peer's /64), as the gateway's default `key: ip`; to
	// share one limit among all requests, return a constant. Transport ignores it (a
	// client's key is its request context's: see ratelimit.WithKey).
	Key func(*http.Request) string

	// IsFailure reports whether a response with the given status code counts
	// as a failure against the downstream (breakers count it, retries may
	// retry it). It must be safe for concurrent use. Nil means status >= 500.
	IsFailure func(status int) bool

	// MaxReplayBody is the largest request body, in bytes, that Transport
	// reads into memory so that a retry can send it again; it is used only
	// for requests without GetBody. A larger body is streamed to the first
	// attempt and the request is never retried. Zero means
	// DefaultMaxReplayBody; a negative value means never buffer. Middleware
	// ignores it.
	MaxReplayBody int64

	// ErrorHandler writes the response when the guard stops a request before
	// the handler wrote anything (a rejection, a timeout). Middleware only.
	// Nil means calling WriteError(w, err).
	ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)

	// Clock measures the latency reported in outcomes and resolves
	// Retry-After dates. Nil means clock.Real.
	Clock clock.Clock
}

// settings is Options with the defaults filled in.
type settings struct {
	key          func(*http.Request) string
	isFailure    func(status int) bool
	maxReplay    int64
	errorHandler func(w http.ResponseWriter, r *http.Request, err error)
	clock        clock.Clock
}

func (o Options) settings() settings {
	s := settings{
		key:          o.Key,
		isFailure:    o.IsFailure,
		maxReplay:    o.MaxReplayBody,
		errorHandler: o.ErrorHandler,
		clock:        clock.Or(o.Clock),
	}
	if s.key == nil {
		s.key = ByClientIP()
	}
	if s.isFailure == nil {
		s.isFailure = defaultIsFailure
	}
	if s.maxReplay == 0 {
		s.maxReplay = DefaultMaxReplayBody
	}
	if s.errorHandler == nil {
		s.errorHandler = func(w http.ResponseWriter, _ *http.Request, err error) { WriteError(w, err) }
	}
	return s
}

func defaultIsFailure(status int) bool { return status >= 500 }

// since is the time elapsed on c since the Nanotime reading start.
func since(c clock.Clock, start int64) time.Duration {
	return time.Duration(max(c.Nanotime()-start, 0))
}
