package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
)

// ErrorPolicy says what is decided when a rate limit's state cannot be
// read: what a Limiter does when its Store fails, and what a shared Store
// (redisstore) decides while its server cannot answer. It is spelled
// "open", "closed" or "local" in text (String, UnmarshalText), as in the
// gateway's configuration.
type ErrorPolicy uint8

const (
	// FailOpen admits the call: an outage of a shared store does not
	// become an outage of the service. It is the default.
	FailOpen ErrorPolicy = iota
	// FailClosed rejects the call; a Limiter's rejection is a *LimitError
	// whose Err is the store's error.
	FailClosed
	// FailLocal decides by a store of this process instead (a shared
	// store's fallback, such as redisstore's Options.Fallback): each
	// replica then limits on its own until the shared store is back. A
	// Limiter whose Store still fails admits the call, as FailOpen.
	FailLocal
)

var errorPolicyNames = [...]string{FailOpen: "open", FailClosed: "closed", FailLocal: "local"}

// String returns "open", "closed" or "local".
func (p ErrorPolicy) String() string {
	if int(p) < len(errorPolicyNames) {
		return errorPolicyNames[p]
	}
	return "ErrorPolicy(" + strconv.Itoa(int(p)) + ")"
}

// MarshalText returns String's text.
func (p ErrorPolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads "open", "closed" or "local".
func (p *ErrorPolicy) UnmarshalText(b []byte) error {
	for i, name := range errorPolicyNames {
		if string(b) == name {
			*p = ErrorPolicy(i)
			return nil
		}
	}
	return fmt.Errorf("%q is not one of open, closed, local", b)
}

// Options configures a Limiter.
type Options struct {
	// Name names the limiter in its rejections (sluice.Rejection.Policy).
	Name string
	// Limit is the initial limit; it must be valid (see Limit.Validate).
	// SetLimit changes it.
	Limit Limit
	// Store keeps the keys' state. Nil means a new Memory store with
	// default options on Clock. Limiters that share a Store share the state
	// of equal keys.
	Store Store
	// Key is the key used when the context carries none (see WithKey). The
	// empty string is a valid key.
	Key string
	// OnError says what to do when the Store fails; the zero value is
	// FailOpen. A Memory store never fails for want of room: a full one
	// evicts keys (see Memory).
	OnError ErrorPolicy
	// Clock is the clock of the default Memory store; nil means clock.Real.
	// It is not used when Store is set.
	Clock clock.Clock
}

// Limiter is an admission policy that admits a call when its key's rate
// limit allows one more event. The key is the one WithKey put in the call's
// context, or Options.Key. A Limiter is safe for concurrent use; its limit
// can be changed at run time with SetLimit, which keeps every key's state.
// A key longer than MaxKeyLen is kept under its digest, so that a key's
// memory in the Store is bounded.
//
// A rejected call gets a *LimitError, which satisfies
// errors.Is(err, sluice.ErrRejected), carries Reason sluice.RateLimited and a
// RetryAfter, and exposes the Decision for RateLimit headers. Acquire
// allocates only when it rejects.
type Limiter struct {
	name    string
	store   Store
	key     string
	onError ErrorPolicy
	limit   atomic.Pointer[Limit]
}

var (
	_ sluice.Admitter = (*Limiter)(nil)
	_ sluice.Policy   = (*Limiter)(nil)
)

// New returns a Limiter configured by opts. For unusable opts (an invalid
// Limit) it returns an error matching sluice.ErrInvalidOptions and
// ErrInvalidLimit (errors.Is) that names every unusable option.
func New(opts Options) (*Limiter, error) {
	if err := opts.Limit.Validate(); err != nil {
		return nil, err
	}
	l := &Limiter{name: opts.Name, store: opts.Store, key: opts.Key, onError: opts.OnError}
	if l.store == nil {
		l.store = NewMemory(MemoryOptions{Clock: opts.Clock})
	}
	lim := opts.Limit
	l.limit.Store(&lim)
	return l, nil
}

// Limit returns the current limit.
func (l *Limiter) Limit() Limit { return *l.limit.Load() }

// SetLimit replaces the limit for the calls that start from now on. Keys keep
// their state, which each algorithm carries over to the new limit (see the
// algorithms); only a change of Algorithm starts keys afresh. It returns an
// error, and changes nothing, if lim is invalid.
func (l *Limiter) SetLimit(lim Limit) error {
	if err := lim.Validate(); err != nil {
		return fmt.Errorf("ratelimit: setting limit of %q: %w", l.name, err)
	}
	l.limit.Store(&lim)
	return nil
}

// Allow asks the store for n events on key under the current limit, and
// returns its answer as is: OnError is not applied.
func (l *Limiter) Allow(ctx context.Context, key string, n int) (Decision, error) {
	return l.store.AllowN(ctx, storeKey(key), *l.limit.Load(), n)
}

// Acquire consumes one event of the key of ctx (see WithKey), or of
// Options.Key. It returns a zero Permit (Done does nothing) when the event
// is admitted, and a *LimitError when it is not. An admission is reported
// to the function WithKeyReport put in ctx, if any.
func (l *Limiter) Acquire(ctx context.Context) (sluice.Permit, error) {
	key, report := l.key, (func(string, time.Duration, Decision))(nil)
	switch v := ctx.Value(keyCtxKey{}).(type) {
	case string:
		key = v
	case *keyReport:
		key, report = v.key, v.report
	}
	lim := l.limit.Load()
	d, err := l.store.AllowN(ctx, storeKey(key), *lim, 1)
	switch {
	case err != nil:
		if l.onError != FailClosed {
			return sluice.Permit{}, nil
		}
		return sluice.Permit{}, newLimitError(l.name, lim.Period, d, err)
	case !d.Allowed:
		return sluice.Permit{}, newLimitError(l.name, lim.Period, d, nil)
	}
	if report != nil {
		report(l.name, lim.Period, d)
	}
	return sluice.Permit{}, nil
}

// Run runs next if Acquire admits the call; see sluice.RunAdmitted.
func (l *Limiter) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, l, next)
}

func newLimitError(name string, period time.Duration, d Decision, err error) *LimitError {
	return &LimitError{
		Period:    period,
		Rejection: sluice.Rejection{Reason: sluice.RateLimited, Policy: name, RetryAfter: max(0, d.RetryAfter)},
		Decision:  d,
		Err:       err,
	}
}

// LimitError is the error of a call that a rate limit rejected. It is a
// sluice.Rejection with Reason sluice.RateLimited (so errors.Is(err,
// sluice.ErrRejected) holds and errors.As finds the *sluice.Rejection), plus
// the Decision that rejected it.
type LimitError struct {
	sluice.Rejection
	// Decision is the store's answer, for the RateLimit headers; when the
	// store failed it is whatever the store returned with its error (the
	// zero Decision, or only Limit set for a full Memory store).
	Decision Decision
	// Err is the store's error when the store failed (or was full) and the
	// call was rejected because of it; nil otherwise.
	Err error
	// Period is the limit's window, for the RateLimit-Policy header.
	Period time.Duration
}

// RateLimitReport describes the decision for the RateLimit and
// RateLimit-Policy headers (it implements httpguard.RateLimitReporter, which
// this package cannot import): the policy's name, its quota per window, what
// is left now, the window and the time until the quota is full again.
func (e *LimitError) RateLimitReport() (policy string, limit, remaining int, window, reset time.Duration) {
	return e.Policy, e.Decision.Limit, max(e.Decision.Remaining, 0), e.Period, e.Decision.ResetAfter
}

// Error describes the rejection and, if any, the store's error.
func (e *LimitError) Error() string {
	if e.Err == nil {
		return e.Rejection.Error()
	}
	return e.Rejection.Error() + ": " + e.Err.Error()
}

// Unwrap returns the embedded *sluice.Rejection and, if any, Err.
func (e *LimitError) Unwrap() []error {
	if e.Err == nil {
		return []error{&e.Rejection}
	}
	return []error{&e.Rejection, e.Err}
}

type keyCtxKey struct{}

// WithKey returns a copy of ctx that carries key, the rate-limit key that a
// Limiter uses for calls made with it (a client's address or API key, say).
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtxKey{}, key)
}

// WithKeyReport is WithKey, and report is called by every Limiter that
// admits a call made with the returned context, with the limiter's name,
// its period and its Decision: what an HTTP server needs for the
// RateLimit headers of an admitted request (httpguard's Middleware uses
// it). report runs on the caller's goroutine with no lock held; it must
// not block.
func WithKeyReport(ctx context.Context, key string, report func(name string, period time.Duration, d Decision)) context.Context {
	if report == nil {
		return WithKey(ctx, key)
	}
	return context.WithValue(ctx, keyCtxKey{}, &keyReport{key: key, report: report})
}

// keyReport is the value WithKeyReport puts in a context.
type keyReport struct {
	key    string
	report func(string, time.Duration, Decision)
}

// KeyFrom returns the key that WithKey or WithKeyReport put in ctx, and
// whether there is one.
func KeyFrom(ctx context.Context) (string, bool) {
	switch v := ctx.Value(keyCtxKey{}).(type) {
	case string:
		return v, true
	case *keyReport:
		return v.key, true
	}
	return "", false
}

// IgnoresLatency reports true: a rate limit never reads a call's latency
// (sluice.LatencyIgnorer).
func (l *Limiter) IgnoresLatency() bool { return true }
