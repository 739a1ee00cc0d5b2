// Package chain builds the common sluice.Guard in a few lines, without
// losing an error and without a panic.
//
// Each method of a Builder takes the Options of one policy's constructor
// and records them; Guard builds every policy at once and returns the
// guard, or one error that names every unusable option of every policy
// (errors.Join of the constructors' errors, each matching
// sluice.ErrInvalidOptions):
//
//	g, err := chain.New().
//		RateLimit(ratelimit.Options{Limit: ratelimit.Limit{Limit: 100, Period: time.Second}}).
//		Retry(retry.Options{}).
//		Breaker(breaker.Options{Name: "inference"}).
//		Bulkhead(concurrency.BulkheadOptions{MaxConcurrent: 32}).
//		Timeout(timeout.Options{Timeout: 2 * time.Second}).
//		Guard()
//	if err != nil {
//		return err // every unusable option of every policy, each matching sluice.ErrInvalidOptions
//	}
//	answer, err := sluice.Do(ctx, g, func(ctx context.Context) (string, error) {
//		return client.Infer(ctx, prompt)
//	})
//
// The policies take their places in sluice's recommended order, whatever
// the order of the calls, outermost first:
//
//	RateLimit → Coalesce → Fallback → Retry → Hedge → Breaker → Bulkhead or Adaptive → Timeout → call
//
// so that cheap rejections come first, every retry and hedge passes the
// breaker and the concurrency limit again, and the timeout bounds one
// attempt. A policy given twice, or both concurrency limits, is an error.
// For another order or a policy of your own, compose with sluice.New (a
// Guard is itself a Policy).
//
// A Builder is not safe for concurrent use; the Guard it builds is.
package chain

import (
	"errors"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/concurrency/limit"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/hedge"
	"github.com/sluicehq/sluice/internal/invalid"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/timeout"
)

// slot is a policy's place in the chain, outermost first.
type slot int

const (
	rateLimitSlot slot = iota
	coalesceSlot
	fallbackSlot
	retrySlot
	hedgeSlot
	breakerSlot
	concurrencySlot
	timeoutSlot
	numSlots
)

// Builder records the policies of a Guard; see the package documentation.
// The zero value is ready to use, as is New's.
type Builder struct {
	build      [numSlots]func(clock.Clock) (sluice.Policy, error)
	names      [numSlots]string // the method that filled each slot
	problems   invalid.Problems
	clock      clock.Clock
	classifier sluice.Classifier
}

// New returns an empty Builder.
func New() *Builder { return &Builder{} }

// set records the constructor of slot s, given by method name.
func (b *Builder) set(s slot, name string, build func(clock.Clock) (sluice.Policy, error)) *Builder {
	if prev := b.names[s]; prev != "" {
		what := name + " is given twice"
		if prev != name {
			what = prev + " and " + name + " are both given; a chain has one concurrency limit"
		}
		b.problems.Prefix = "chain: invalid options"
		b.problems.Addf("%s", what)
		return b
	}
	b.build[s], b.names[s] = build, name
	return b
}

// orClock returns c, or the builder's clock when c is nil.
func orClock(c, builder clock.Clock) clock.Clock {
	if c != nil {
		return c
	}
	return builder
}

// RateLimit adds a ratelimit.Limiter (ratelimit.New). Key each call with
// ratelimit.WithKey, or with httpguard's Options.Key.
func (b *Builder) RateLimit(opts ratelimit.Options) *Builder {
	return b.set(rateLimitSlot, "RateLimit", func(c clock.Clock) (sluice.Policy, error) {
		if opts.Store == nil {
			opts.Clock = orClock(opts.Clock, c)
		}
		return ratelimit.New(opts)
	})
}

// Coalesce adds single-flight (coalesce.New): overlapping calls with the
// same key share one run of the rest of the chain.
func (b *Builder) Coalesce(opts coalesce.Options) *Builder {
	return b.set(coalesceSlot, "Coalesce", func(clock.Clock) (sluice.Policy, error) {
		return coalesce.New(opts)
	})
}

// Fallback adds a fallback.Policy trying levels in order (fallback.New).
func (b *Builder) Fallback(levels ...fallback.Level) *Builder {
	return b.set(fallbackSlot, "Fallback", func(clock.Clock) (sluice.Policy, error) {
		return fallback.New(levels...), nil
	})
}

// Retry adds a retry.Retry (retry.New). Its zero Options retry a failure
// twice with backoff, within a retry budget (see docs/defaults.md).
func (b *Builder) Retry(opts retry.Options) *Builder {
	return b.set(retrySlot, "Retry", func(c clock.Clock) (sluice.Policy, error) {
		opts.Clock = orClock(opts.Clock, c)
		return retry.New(opts)
	})
}

// Hedge adds hedged requests (hedge.New).
func (b *Builder) Hedge(opts hedge.Options) *Builder {
	return b.set(hedgeSlot, "Hedge", func(c clock.Clock) (sluice.Policy, error) {
		opts.Clock = orClock(opts.Clock, c)
		return hedge.New(opts)
	})
}

// Breaker adds a circuit breaker (breaker.New). Its zero Options trip at a
// failure rate of one half over the last 100 calls and stay open 5s.
func (b *Builder) Breaker(opts breaker.Options) *Builder {
	return b.set(breakerSlot, "Breaker", func(c clock.Clock) (sluice.Policy, error) {
		opts.Clock = orClock(opts.Clock, c)
		return breaker.New(opts)
	})
}

// Bulkhead adds a static concurrency limit (concurrency.NewBulkhead).
func (b *Builder) Bulkhead(opts concurrency.BulkheadOptions) *Builder {
	return b.set(concurrencySlot, "Bulkhead", func(c clock.Clock) (sluice.Policy, error) {
		opts.Clock = orClock(opts.Clock, c)
		return concurrency.NewBulkhead(opts)
	})
}

// Adaptive adds an adaptive concurrency limit (concurrency.NewLimiter). A
// nil opts.Algorithm means limit.NewDefault with its default options
// (sluice's own algorithm, from 20 between 1 and 1000, as the gateway's
// adaptive default).
func (b *Builder) Adaptive(opts concurrency.LimiterOptions) *Builder {
	return b.set(concurrencySlot, "Adaptive", func(c clock.Clock) (sluice.Policy, error) {
		opts.Clock = orClock(opts.Clock, c)
		if opts.Algorithm == nil {
			alg, err := limit.NewDefault(limit.DefaultOptions{})
			if err != nil {
				return nil, err
			}
			opts.Algorithm = alg
		}
		return concurrency.NewLimiter(opts)
	})
}

// Timeout adds a timeout on each attempt (timeout.New).
func (b *Builder) Timeout(opts timeout.Options) *Builder {
	return b.set(timeoutSlot, "Timeout", func(c clock.Clock) (sluice.Policy, error) {
		opts.Clock = orClock(opts.Clock, c)
		return timeout.New(opts)
	})
}

// Clock sets the clock of the guard and of every policy whose Options leave
// Clock nil (a rate limiter with a Store of its own keeps the Store's).
// Nil, the default, means clock.Real. Tests pass a clock.NewFake.
func (b *Builder) Clock(c clock.Clock) *Builder {
	b.clock = c
	return b
}

// Classifier sets the guard's Classifier (see sluice.Guard.WithClassifier);
// nil, the default, means sluice.DefaultClassifier.
func (b *Builder) Classifier(c sluice.Classifier) *Builder {
	b.classifier = c
	return b
}

// Guard builds every policy recorded and returns the Guard, or, when any
// option is unusable, a nil Guard and an error that names every problem of
// every policy (it matches sluice.ErrInvalidOptions, and each
// constructor's own sentinel). A Builder with no policy builds a Guard that
// runs calls directly.
func (b *Builder) Guard() (*sluice.Guard, error) {
	errs := []error{b.problems.Err()}
	var policies []sluice.Policy
	for _, build := range b.build {
		if build == nil {
			continue
		}
		p, err := build(b.clock)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		policies = append(policies, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return sluice.New(policies...).WithClock(b.clock).WithClassifier(b.classifier), nil
}
