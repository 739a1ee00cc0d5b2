package grpcguard

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
)

// outcome classifies a call that ran and ended with err, leaving Latency
// zero: nil is a Success; a context's own error (a handler that returned
// ctx.Err()) is classified by g's Classifier, as httpguard does; a status
// code of CANCELED is Ignored; any other code is a Failure when IsFailure
// says so and a Success otherwise. Err is err in every case.
func (s *settings) outcome(ctx context.Context, g *sluice.Guard, err error) sluice.Outcome {
	if err == nil {
		return sluice.Outcome{Class: sluice.Success}
	}
	var class sluice.Class
	switch code := status.Code(err); {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		class = g.Classify(ctx, err)
	case code == codes.Canceled:
		class = sluice.Ignored
	case s.isFailure(code):
		class = sluice.Failure
	default:
		class = sluice.Success
	}
	return sluice.Outcome{Class: class, Err: err}
}

// dropped is the Result of an attempt that did not run.
func dropped(err error) sluice.Result {
	return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Dropped, Err: err}}
}
