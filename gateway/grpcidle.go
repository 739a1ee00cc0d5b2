package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/clock"
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
type grpcIdle struct {
	clock  clock.Clock
	limit  time.Duration
	last   atomic.Int64 // clock Nanotime of the last byte either way
	cancel context.CancelCauseFunc
	body   io.Closer // the client's request body

	mu      sync.Mutex  // protects timer, stopped
	timer   clock.Timer // the next check
	stopped bool        // the call ended, or the watch ended it
}

// watchGRPCIdle starts watching a call whose context cancel cancels and
// whose request body is body, and returns the watch.
func watchGRPCIdle(clk clock.Clock, limit time.Duration, cancel context.CancelCauseFunc, body io.Closer) *grpcIdle {
	w := &grpcIdle{clock: clk, limit: limit, cancel: cancel, body: body}
	w.touch()
	w.mu.Lock()
	w.timer = clk.AfterFunc(limit, w.check)
	w.mu.Unlock()
	return w
}

// touch records that a byte passed.
func (w *grpcIdle) touch() { w.last.Store(w.clock.Nanotime()) }

// check ends the call when it has been idle for the limit, and otherwise
// looks again when it would be.
func (w *grpcIdle) check() {
	idle := time.Duration(w.clock.Nanotime() - w.last.Load())
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	if idle < w.limit {
		w.timer = w.clock.AfterFunc(w.limit-idle, w.check)
		w.mu.Unlock()
		return
	}
	w.stopped = true
	w.mu.Unlock()
	w.cancel(errGRPCIdle)
	_ = w.body.Close()
}

// stop ends the watch; the call is over.
func (w *grpcIdle) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.timer.Stop()
}

// reader returns r, each read of which that returns bytes touches w.
func (w *grpcIdle) reader(r io.ReadCloser) io.ReadCloser { return &idleReader{r, w} }

type idleReader struct {
	io.ReadCloser
	w *grpcIdle
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.w.touch()
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
