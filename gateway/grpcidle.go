package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/idle"
)

// errGRPCIdle ends a gRPC call through which no byte passed either way for
// server.grpc_idle_timeout. It is a timeout for the client
// (DEADLINE_EXCEEDED, grpc-message idle_timeout, see grpcMessage) and says
// nothing about the upstream for the route's policies (classify: Ignored),
// since either side may be the silent one.
var errGRPCIdle = fmt.Errorf("gateway: the gRPC call was idle for server.grpc_idle_timeout: %w", context.DeadlineExceeded)

// grpcIdleMessage is the grpc-message of a call ended by errGRPCIdle.
const grpcIdleMessage = "idle_timeout"

// grpcIdle ends a gRPC call once no byte of it passed either way (read
// from the client's request, or from the upstream's answer) for its limit,
// on its clock: it cancels the call's context with errGRPCIdle, which cuts
// the attempt in flight (its upstream stream is reset), and closes the
// client's request body, which ends a read waiting on it. The call then
// ends as any cut call does, and its admission (the route's concurrency
// slot among them) with it. Stop it when the call ends.
type grpcIdle struct{ w *idle.Watch }

// watchGRPCIdle starts watching a call whose context cancel cancels and
// whose request body is body, and returns the watch.
func watchGRPCIdle(clk clock.Clock, limit time.Duration, cancel context.CancelCauseFunc, body io.Closer) *grpcIdle {
	return &grpcIdle{idle.Start(clk, limit, func() {
		cancel(errGRPCIdle)
		_ = body.Close()
	})}
}

// stop ends the watch; the call is over.
func (g *grpcIdle) stop() { g.w.Stop() }

// reader returns r, each read of which that returns bytes touches w.
func (g *grpcIdle) reader(r io.ReadCloser) io.ReadCloser { return &idleReader{r, g.w} }

type idleReader struct {
	io.ReadCloser
	w *idle.Watch
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.w.Touch()
	}
	return n, err
}

// grpcIdleCause returns errGRPCIdle when ctx ended because its call was
// idle (see grpcIdle), else err.
func grpcIdleCause(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), errGRPCIdle) {
		return errGRPCIdle
	}
	return err
}
