package grpcguard_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/grpcguard"
	"github.com/sluicehq/sluice/hedge"
	"github.com/sluicehq/sluice/retry"
)

func clientOpts(g *sluice.Guard, opts grpcguard.Options) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithUnaryInterceptor(grpcguard.UnaryClientInterceptor(g, opts)),
		grpc.WithStreamInterceptor(grpcguard.StreamClientInterceptor(g, opts)),
	}
}

// newRetry is a retry of up to attempts attempts with no backoff wait and
// no budget; abort, if set, is its AbortIf.
func newRetry(t *testing.T, attempts int, abort func(sluice.Result) bool) *retry.Retry {
	t.Helper()
	r, err := retry.New(retry.Options{MaxAttempts: attempts, Backoff: retry.Constant(0), NoBudget: true, AbortIf: abort})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// failing answers code for the first n calls and OK after.
func failing(n int32, code codes.Code) func(context.Context) error {
	var calls atomic.Int32
	return func(context.Context) error {
		if calls.Add(1) <= n {
			return status.Error(code, "try again")
		}
		return nil
	}
}

func TestUnaryClientRetriesRetryableMethodOnUnavailable(t *testing.T) {
	svc := &service{empty: failing(2, codes.Unavailable)}
	opts := grpcguard.Options{RetryableMethods: grpcguard.Methods(emptyCall)}
	c := start(t, svc, nil, clientOpts(sluice.New(newRetry(t, 3, nil)), opts)...)
	if _, err := c.EmptyCall(ctxFor(t), &testgrpc.Empty{}); err != nil {
		t.Fatalf("call: %v", err)
	}
	if n := svc.calls.Load(); n != 3 {
		t.Errorf("server saw %d calls, want 3", n)
	}
}

func TestUnaryClientSendsOtherCallsOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method func(testgrpc.TestServiceClient, context.Context) error
		code   codes.Code
		abort  func(sluice.Result) bool
	}{
		{"method not retryable", unary, codes.Unavailable, nil},
		{"method not retryable, AbortIf", unary, codes.Unavailable, grpcguard.NotRetryable},
		{"code not retryable", empty, codes.Internal, nil},
		{"code not retryable, AbortIf", empty, codes.Internal, grpcguard.NotRetryable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &service{empty: failing(5, tc.code), unary: failing(5, tc.code)}
			var retries atomic.Int32
			r, err := retry.New(retry.Options{
				MaxAttempts: 3, Backoff: retry.Constant(0), NoBudget: true, AbortIf: tc.abort,
				OnRetry: func(int, time.Duration, sluice.Result) { retries.Add(1) },
			})
			if err != nil {
				t.Fatal(err)
			}
			opts := grpcguard.Options{RetryableMethods: grpcguard.Methods(emptyCall)}
			c := start(t, svc, nil, clientOpts(sluice.New(r), opts)...)
			err = tc.method(c, ctxFor(t))
			wantCode(t, err, tc.code)
			if msg := status.Convert(err).Message(); msg != "try again" {
				t.Errorf("message %q, want the server's", msg)
			}
			if n := svc.calls.Load(); n != 1 {
				t.Errorf("server saw %d calls, want 1", n)
			}
			// Without AbortIf the retry plans one retry, which is refused
			// without sending; with it the retry plans none.
			want := int32(1)
			if tc.abort != nil {
				want = 0
			}
			if n := retries.Load(); n != want {
				t.Errorf("%d retries planned, want %d", n, want)
			}
		})
	}
}

func unary(c testgrpc.TestServiceClient, ctx context.Context) error {
	_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	return err
}

func empty(c testgrpc.TestServiceClient, ctx context.Context) error {
	_, err := c.EmptyCall(ctx, &testgrpc.Empty{})
	return err
}

func TestUnaryClientRetryWaitsForServerPushback(t *testing.T) {
	clk := clock.NewFake(t0)
	first := true
	svc := &service{empty: func(ctx context.Context) error {
		if !first {
			return nil
		}
		first = false
		_ = grpc.SetTrailer(ctx, metadata.Pairs(grpcguard.PushbackKey, "1500"))
		return status.Error(codes.Unavailable, "busy")
	}}
	delays := make(chan time.Duration, 3)
	r, err := retry.New(retry.Options{
		MaxAttempts: 3, Backoff: retry.Constant(0), NoBudget: true, Clock: clk, MaxRetryAfter: 2 * time.Second,
		OnRetry: func(_ int, d time.Duration, _ sluice.Result) { delays <- d },
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := grpcguard.Options{RetryableMethods: grpcguard.Methods(emptyCall)}
	c := start(t, svc, nil, clientOpts(sluice.New(r), opts)...)
	ctx := ctxFor(t)
	done := make(chan error, 1)
	go func() { done <- empty(c, ctx) }()
	if d := <-delays; d != 1500*time.Millisecond {
		t.Errorf("retry waits %v, want the server's pushback of 1.5s", d)
	}
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(1500 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("call: %v", err)
	}
	if n := svc.calls.Load(); n != 2 {
		t.Errorf("server saw %d calls, want 2", n)
	}
}

func TestUnaryClientServerPushbackAbortsRetry(t *testing.T) {
	svc := &service{empty: func(ctx context.Context) error {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(grpcguard.PushbackKey, "-1"))
		return status.Error(codes.Unavailable, "do not come back")
	}}
	opts := grpcguard.Options{RetryableMethods: grpcguard.Methods(emptyCall)}
	c := start(t, svc, nil, clientOpts(sluice.New(newRetry(t, 3, grpcguard.NotRetryable)), opts)...)
	wantCode(t, empty(c, ctxFor(t)), codes.Unavailable)
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("server saw %d calls, want 1", n)
	}
}

func TestUnaryClientBreakerCountsStatusCodes(t *testing.T) {
	b := newBreaker(t, breaker.Options{ConsecutiveFailures: 2, OpenDuration: 3 * time.Second, Clock: clock.NewFake(t0)})
	var code atomic.Int32
	svc := &service{empty: func(context.Context) error { return status.Error(codes.Code(code.Load()), "x") }}
	c := start(t, svc, nil, clientOpts(sluice.New(b), grpcguard.Options{})...)
	ctx := ctxFor(t)
	code.Store(int32(codes.NotFound))
	for range 3 {
		wantCode(t, empty(c, ctx), codes.NotFound)
	}
	if s := b.State(); s != breaker.Closed {
		t.Fatalf("breaker %v after NotFound, want closed", s)
	}
	code.Store(int32(codes.Unavailable))
	for range 2 {
		wantCode(t, empty(c, ctx), codes.Unavailable)
	}
	err := empty(c, ctx)
	wantCode(t, err, codes.Unavailable)
	if !errors.Is(err, sluice.ErrRejected) {
		t.Errorf("error %v does not match sluice.ErrRejected", err)
	}
	if d, ok := sluice.RetryAfter(err); !ok || d != 3*time.Second {
		t.Errorf("retry after %v, %v, want 3s", d, ok)
	}
	if n := svc.calls.Load(); n != 5 {
		t.Errorf("server saw %d calls, want 5: the open breaker must not send", n)
	}
}

func TestUnaryClientCancelledCallIsIgnored(t *testing.T) {
	b := newBreaker(t, breaker.Options{ConsecutiveFailures: 1, Clock: clock.NewFake(t0)})
	entered := make(chan struct{})
	svc := &service{empty: func(ctx context.Context) error {
		close(entered)
		<-ctx.Done()
		return ctx.Err()
	}}
	c := start(t, svc, nil, clientOpts(sluice.New(b), grpcguard.Options{})...)
	ctx, cancel := context.WithCancel(ctxFor(t))
	go func() {
		<-entered
		cancel()
	}()
	wantCode(t, empty(c, ctx), codes.Canceled)
	if m := b.Metrics(); b.State() != breaker.Closed || m.Calls != 0 {
		t.Errorf("breaker %v with %d calls, want closed with none counted", b.State(), m.Calls)
	}
}

func TestStreamClientHoldsAdmissionUntilTheEnd(t *testing.T) {
	bh := newBulkhead(t, 1)
	svc := &service{output: func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
		for range 2 {
			if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
				return err
			}
		}
		return nil
	}}
	c := start(t, svc, nil, clientOpts(sluice.New(bh), grpcguard.Options{})...)
	ctx := ctxFor(t)

	s1, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
	wantCode(t, err, codes.Unavailable)
	if !errors.Is(err, sluice.ErrRejected) {
		t.Errorf("error %v does not match sluice.ErrRejected", err)
	}
	for i := 0; ; i++ {
		_, err := s1.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || i == 2 {
			t.Fatalf("message %d: %v", i, err)
		}
		if n := bh.InFlight(); n != 1 {
			t.Fatalf("InFlight %d while the stream runs, want 1", n)
		}
	}
	if n := bh.InFlight(); n != 0 {
		t.Errorf("InFlight %d once Recv saw the end, want 0", n)
	}

	// A client stream ends with its one response.
	s3, err := c.StreamingInputCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s3.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	if n := bh.InFlight(); n != 0 {
		t.Errorf("InFlight %d once CloseAndRecv returned, want 0", n)
	}
	if n := svc.calls.Load(); n != 2 {
		t.Errorf("server saw %d streams, want 2", n)
	}
}

func TestStreamClientCancelReleases(t *testing.T) {
	bh := newBulkhead(t, 1)
	svc := &service{duplex: func(s testgrpc.TestService_FullDuplexCallServer) error {
		<-s.Context().Done()
		return s.Context().Err()
	}}
	c := start(t, svc, nil, clientOpts(sluice.New(bh), grpcguard.Options{})...)
	ctx, cancel := context.WithCancel(ctxFor(t))
	s, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	_, err = s.Recv()
	wantCode(t, err, codes.Canceled)
	if n := bh.InFlight(); n != 0 {
		t.Errorf("InFlight %d once Recv saw the cancellation, want 0", n)
	}
}

func TestStreamClientFailureFeedsBreaker(t *testing.T) {
	b := newBreaker(t, breaker.Options{ConsecutiveFailures: 1, Clock: clock.NewFake(t0)})
	svc := &service{duplex: func(testgrpc.TestService_FullDuplexCallServer) error {
		return status.Error(codes.Internal, "broken")
	}}
	// A retry in the guard does not apply to streams.
	g := sluice.New(newRetry(t, 3, nil), b)
	c := start(t, svc, nil, clientOpts(g, grpcguard.Options{RetryableMethods: func(string) bool { return true }})...)
	ctx := ctxFor(t)
	s, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	wantCode(t, err, codes.Internal)
	if st := b.State(); st != breaker.Open {
		t.Fatalf("breaker %v, want open", st)
	}
	_, err = c.FullDuplexCall(ctx)
	wantCode(t, err, codes.Unavailable)
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("server saw %d streams, want 1", n)
	}
}

func TestUnaryClientAttemptsNeverOverlap(t *testing.T) {
	clk := clock.NewFake(t0)
	h, err := hedge.New(hedge.Options{Delay: time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	// The first call fails at once and may be retried; the second waits.
	var calls atomic.Int32
	entered, release := make(chan struct{}, 2), make(chan struct{})
	svc := &service{empty: func(context.Context) error {
		if calls.Add(1) == 1 {
			return status.Error(codes.Unavailable, "again")
		}
		entered <- struct{}{}
		<-release
		return nil
	}}
	opts := grpcguard.Options{RetryableMethods: func(string) bool { return true }}
	c := start(t, svc, nil, clientOpts(sluice.New(newRetry(t, 3, nil), h), opts)...)
	ctx := ctxFor(t)
	done := make(chan error, 1)
	go func() { done <- empty(c, ctx) }()
	<-entered
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second) // the hedge starts while the retry runs
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("call: %v", err)
	}
	if s := h.Stats(); s.Hedges != 1 {
		t.Errorf("hedges %d, want 1", s.Hedges)
	}
	if n := svc.calls.Load(); n != 2 {
		t.Errorf("server saw %d calls, want 2: attempts filling one reply must not overlap", n)
	}
}
