package sluice

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// ErrRejected is matched by every rejection: errors.Is(err, ErrRejected)
// reports whether a policy refused to run a call.
var ErrRejected = errors.New("sluice: rejected")

// ErrInvalidOptions is matched (errors.Is) by the error that every
// constructor of sluice's packages returns when its options are unusable.
// That error names every unusable option, one errors.Join element each; a
// package's own sentinel, such as breaker.ErrInvalidOptions, matches too.
var ErrInvalidOptions = errors.New("sluice: invalid options")

// ErrTimeout is returned when a timeout policy ended a call. It matches
// context.DeadlineExceeded too.
var ErrTimeout error = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string { return "sluice: timeout" }

func (timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// Reason says which kind of policy rejected a call.
type Reason string

const (
	// RateLimited: a rate limit is exhausted (HTTP 429).
	RateLimited Reason = "rate_limited"
	// CircuitOpen: a circuit breaker is open or its half-open probes are
	// taken (HTTP 503).
	CircuitOpen Reason = "circuit_open"
	// Overloaded: a concurrency limit is reached, its queue is full, or the
	// wait in its queue ran out (HTTP 503).
	Overloaded Reason = "overloaded"
)

// Rejection is the error a policy returns when it refuses to run a call.
// errors.Is(r, ErrRejected) is true for every Rejection.
type Rejection struct {
	// Reason says which kind of policy rejected the call.
	Reason Reason
	// Policy names the policy instance, if it has a name.
	Policy string
	// RetryAfter is when the caller may try again; zero when unknown.
	RetryAfter time.Duration
}

// Error describes the rejection, for example
// `sluice: rejected: circuit_open (policy "db", retry after 5s)`.
func (r *Rejection) Error() string {
	s := "sluice: rejected: " + string(r.Reason)
	if r.Policy == "" && r.RetryAfter <= 0 {
		return s
	}
	s += " ("
	if r.Policy != "" {
		s += "policy " + strconv.Quote(r.Policy)
		if r.RetryAfter > 0 {
			s += ", "
		}
	}
	if r.RetryAfter > 0 {
		s += "retry after " + r.RetryAfter.String()
	}
	return s + ")"
}

// Is reports whether target is ErrRejected.
func (r *Rejection) Is(target error) bool { return target == ErrRejected }

// RetryAfterHint is implemented by errors that know when a call may be tried
// again (a *Rejection, or an HTTP error carrying a Retry-After header).
type RetryAfterHint interface {
	RetryAfterHint() time.Duration
}

// RetryAfterHint returns r.RetryAfter.
func (r *Rejection) RetryAfterHint() time.Duration { return r.RetryAfter }

// RetryAfter returns the first positive retry-after hint found in err's
// chain, and whether there was one.
func RetryAfter(err error) (time.Duration, bool) {
	for err != nil {
		if h, ok := err.(RetryAfterHint); ok {
			if d := h.RetryAfterHint(); d > 0 {
				return d, true
			}
		}
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				if d, ok := RetryAfter(inner); ok {
					return d, true
				}
			}
			return 0, false
		default:
			return 0, false
		}
	}
	return 0, false
}
