package grpcguard

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice"
)

// StreamClientInterceptor returns an interceptor that admits each stream
// through the admission policies of g (those that implement
// sluice.Admitter: rate limit, breaker, concurrency limit), or of
// Options.GuardFor's guard for its method, and holds the admission until
// the stream ends. A nil guard opens streams straight through. Flow
// policies (retry, timeout, hedge, fallback) are not applied: a stream
// that started is never sent again; bound a stream with its context.
//
// A stream the guard refuses is not opened: the interceptor returns
// Error(err) (see StatusFor). A stream ends, and its admission is released
// before the call that saw the end returns, when RecvMsg returns an error
// (io.EOF is a success), after the one response of a stream whose server
// does not stream, or when the stream's context is done. As gRPC requires
// anyway, a caller that stops reading early must cancel the context.
//
// The outcome is classified from the final status (see Options.IsFailure)
// with a zero Latency, as StreamServerInterceptor explains. Each stream
// runs one goroutine of the interceptor's while it lasts. The interceptor
// is safe for concurrent use.
func StreamClientInterceptor(g *sluice.Guard, opts Options) grpc.StreamClientInterceptor {
	s := opts.settings()
	ag := admissionOnly(g)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		cg := s.streamGuard(g, ag, method)
		if cg == nil {
			return streamer(ctx, desc, cc, method, callOpts...)
		}
		ctx = s.keyed(ctx, method)
		cs := &clientStream{
			s: &s, g: cg, ctx: ctx, serverStreams: desc.ServerStreams,
			ended: make(chan sluice.Outcome, 1), released: make(chan struct{}),
		}
		opened := make(chan error, 1)
		go cs.hold(ctx, opened, func(ctx context.Context) (grpc.ClientStream, error) {
			return streamer(ctx, desc, cc, method, callOpts...)
		})
		if err := <-opened; err != nil {
			<-cs.released
			return nil, err
		}
		return cs, nil
	}
}

// clientStream is a stream that holds its admission until it ends.
type clientStream struct {
	grpc.ClientStream // set by hold before it reports the stream opened

	s             *settings
	g             *sluice.Guard // an admission-only guard
	ctx           context.Context
	serverStreams bool

	endOnce  sync.Once
	ended    chan sluice.Outcome // receives the stream's outcome, once
	released chan struct{}       // closed once the admission is released
}

// hold admits the stream, opens it with open and holds the admission until
// the stream ends. It sends on opened the error that refused or failed the
// stream, or nil once the stream is open.
func (cs *clientStream) hold(ctx context.Context, opened chan<- error, open func(context.Context) (grpc.ClientStream, error)) {
	defer close(cs.released)
	ran := false
	res := cs.g.Run(ctx, func(ctx context.Context) sluice.Result {
		ran = true
		stream, err := open(ctx)
		if err != nil {
			opened <- err
			return sluice.Result{Outcome: cs.s.outcome(ctx, cs.g, err)}
		}
		cs.ClientStream = stream
		opened <- nil
		select {
		case o := <-cs.ended:
			return sluice.Result{Outcome: o}
		case <-ctx.Done():
			// An end reported before the caller cancelled is the stream's.
			select {
			case o := <-cs.ended:
				return sluice.Result{Outcome: o}
			default:
			}
			err := ctx.Err()
			return sluice.Result{Outcome: sluice.Outcome{Class: cs.g.Classify(ctx, err), Err: err}}
		}
	})
	if !ran {
		opened <- Error(res.Err)
	}
}

// RecvMsg receives a message and, when the stream ended, reports its
// outcome and waits for its admission to be released.
func (cs *clientStream) RecvMsg(m any) error {
	err := cs.ClientStream.RecvMsg(m)
	if err != nil || !cs.serverStreams {
		end := err
		if errors.Is(err, io.EOF) {
			end = nil
		}
		cs.end(end)
	}
	return err
}

// end reports that the stream ended with err (nil for OK), once, and waits
// for the admission to be released.
func (cs *clientStream) end(err error) {
	cs.endOnce.Do(func() {
		cs.ended <- cs.s.outcome(cs.ctx, cs.g, err)
		<-cs.released
	})
}
