package sluice

import (
	"context"
	"errors"
	"time"
)

// Class says how a call ended, as far as the policies are concerned.
type Class uint8

const (
	// Success: the call ran and succeeded.
	Success Class = iota
	// Failure: the call ran and failed; it counts against the downstream.
	Failure
	// Ignored: the call ran but its result says nothing about the downstream,
	// for example because the caller cancelled it. It feeds no window and no
	// latency sample.
	Ignored
	// Dropped: the call never ran, because a policy rejected it or the caller
	// gave up before it started. It feeds no window and no latency sample.
	Dropped
)

// String returns the class in lower case ("success", "failure", ...).
func (c Class) String() string {
	switch c {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Ignored:
		return "ignored"
	case Dropped:
		return "dropped"
	}
	return "unknown"
}

// Ran reports whether a call of this class really ran against the downstream
// and so may feed breaker windows and latency samples.
func (c Class) Ran() bool { return c == Success || c == Failure }

// Outcome describes how one call, or one attempt of a call, ended.
type Outcome struct {
	// Class is what the Classifier made of the call.
	Class Class
	// Err is the error the call returned, or the rejection that stopped it.
	Err error
	// Latency is how long the call ran. It is zero for Dropped calls.
	Latency time.Duration
}

// Classifier decides the Class of a call that ran. ctx is the context the
// call ran with and err the error it returned.
type Classifier func(ctx context.Context, err error) Class

// DefaultClassifier classifies a nil error as Success; an error caused by
// the caller cancelling ctx (ctx is done with context.Canceled) as Ignored;
// and every other error, including a deadline that expired, as Failure: a
// call that could not finish in time was too slow for its caller.
func DefaultClassifier(ctx context.Context, err error) Class {
	if err == nil {
		return Success
	}
	if errors.Is(ctx.Err(), context.Canceled) && errors.Is(err, context.Canceled) {
		return Ignored
	}
	return Failure
}

// durationOf converts a difference of clock.Nanotime readings to a Duration,
// clamping a negative difference to zero.
func durationOf(ns int64) time.Duration {
	if ns < 0 {
		return 0
	}
	return time.Duration(ns)
}
