package grpcguard_test

import (
	"context"
	"errors"
	"io"
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
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/timeout"
)

func serverOpts(g *sluice.Guard, opts grpcguard.Options) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.UnaryInterceptor(grpcguard.UnaryServerInterceptor(g, opts)),
		grpc.StreamInterceptor(grpcguard.StreamServerInterceptor(g, opts)),
	}
}

func TestUnaryServerRateLimitAnswersResourceExhaustedWithPushback(t *testing.T) {
	clk := clock.NewFake(t0)
	lim := newLimiter(t, clk, ratelimit.Limit{Limit: 1, Period: time.Minute})
	svc := &service{}
	c := start(t, svc, serverOpts(sluice.New(lim), grpcguard.Options{Key: grpcguard.ByMethod}))
	ctx := ctxFor(t)

	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	var trailer metadata.MD
	_, err := c.EmptyCall(ctx, &testgrpc.Empty{}, grpc.Trailer(&trailer))
	wantCode(t, err, codes.ResourceExhausted)
	if got := trailer.Get(grpcguard.PushbackKey); len(got) != 1 || got[0] != "60000" {
		t.Errorf("pushback trailer %q, want [60000]", got)
	}
	// ByMethod: another method has its own quota.
	if _, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
		t.Errorf("other method: %v", err)
	}
	if n := svc.calls.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
	clk.Advance(time.Minute)
	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
		t.Errorf("after the period: %v", err)
	}
}

func TestServerKeyByMetadata(t *testing.T) {
	lim := newLimiter(t, clock.NewFake(t0), ratelimit.Limit{Limit: 1, Period: time.Minute})
	c := start(t, &service{}, serverOpts(sluice.New(lim), grpcguard.Options{Key: grpcguard.ByMetadata("X-Api-Key")}))
	ctx := ctxFor(t)
	call := func(key string) error {
		_, err := c.EmptyCall(metadata.AppendToOutgoingContext(ctx, "x-api-key", key), &testgrpc.Empty{})
		return err
	}
	if err := call("a"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, call("a"), codes.ResourceExhausted)
	if err := call("b"); err != nil {
		t.Errorf("key b: %v", err)
	}
}

func TestServerKeyByPeer(t *testing.T) {
	lim := newLimiter(t, clock.NewFake(t0), ratelimit.Limit{Limit: 1, Period: time.Minute})
	var key string
	keyed := func(ctx context.Context, m string) string {
		key = grpcguard.ByPeer(ctx, m)
		return key
	}
	c := start(t, &service{}, serverOpts(sluice.New(lim), grpcguard.Options{Key: keyed}))
	ctx := ctxFor(t)
	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
		t.Fatal(err)
	}
	if key != "127.0.0.1" {
		t.Errorf("key %q, want 127.0.0.1", key)
	}
	_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	wantCode(t, err, codes.ResourceExhausted)
}

func TestUnaryServerUnavailableHandlerOpensBreaker(t *testing.T) {
	clk := clock.NewFake(t0)
	b := newBreaker(t, breaker.Options{ConsecutiveFailures: 3, OpenDuration: 5 * time.Second, Clock: clk})
	svc := &service{unary: func(context.Context) error { return status.Error(codes.Unavailable, "db down") }}
	c := start(t, svc, serverOpts(sluice.New(b), grpcguard.Options{}))
	ctx := ctxFor(t)
	for i := range 3 {
		_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		wantCode(t, err, codes.Unavailable)
		if msg := status.Convert(err).Message(); msg != "db down" {
			t.Fatalf("call %d: message %q, want the handler's", i, msg)
		}
	}
	if s := b.State(); s != breaker.Open {
		t.Fatalf("breaker %v after 3 Unavailable answers, want open", s)
	}
	var trailer metadata.MD
	_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer))
	wantCode(t, err, codes.Unavailable)
	if n := svc.calls.Load(); n != 3 {
		t.Errorf("handler ran %d times, want 3: the open breaker must not call it", n)
	}
	if got := trailer.Get(grpcguard.PushbackKey); len(got) != 1 || got[0] != "5000" {
		t.Errorf("pushback trailer %q, want [5000]", got)
	}
}

func TestUnaryServerClientErrorsDoNotCount(t *testing.T) {
	b := newBreaker(t, breaker.Options{ConsecutiveFailures: 1, Clock: clock.NewFake(t0)})
	var code codes.Code
	svc := &service{unary: func(context.Context) error { return status.Error(code, "no") }}
	c := start(t, svc, serverOpts(sluice.New(b), grpcguard.Options{}))
	ctx := ctxFor(t)
	for _, code = range []codes.Code{codes.NotFound, codes.InvalidArgument, codes.AlreadyExists,
		codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition} {
		_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		wantCode(t, err, code)
	}
	m := b.Metrics()
	if b.State() != breaker.Closed || m.Failures != 0 || m.Calls != 6 {
		t.Errorf("breaker %v with %d failures in %d calls, want closed, 0 in 6", b.State(), m.Failures, m.Calls)
	}
}

func TestUnaryServerConcurrencyLimitAnswersUnavailable(t *testing.T) {
	bh := newBulkhead(t, 1)
	entered, release := make(chan struct{}), make(chan struct{})
	svc := &service{unary: func(context.Context) error {
		entered <- struct{}{}
		<-release
		return nil
	}}
	c := start(t, svc, serverOpts(sluice.New(bh), grpcguard.Options{}))
	ctx := ctxFor(t)
	first := make(chan error, 1)
	go func() {
		_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		first <- err
	}()
	<-entered
	_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	wantCode(t, err, codes.Unavailable)
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first call: %v", err)
	}
	if n := bh.InFlight(); n != 0 {
		t.Errorf("InFlight %d after the call, want 0", n)
	}
	go func() { <-entered }()
	if _, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
		t.Errorf("after release: %v", err)
	}
}

func TestStreamServerHoldsAdmissionForItsLife(t *testing.T) {
	bh := newBulkhead(t, 1)
	svc := &service{duplex: func(s testgrpc.TestService_FullDuplexCallServer) error {
		for {
			if _, err := s.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
				return err
			}
		}
	}}
	c := start(t, svc, serverOpts(sluice.New(bh), grpcguard.Options{}))
	ctx := ctxFor(t)

	s1, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Send(&testgrpc.StreamingOutputCallRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Recv(); err != nil { // the handler runs: the slot is taken
		t.Fatal(err)
	}
	s2, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s2.Recv()
	wantCode(t, err, codes.Unavailable)

	if err := s1.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: %v", err)
	}
	if n := bh.InFlight(); n != 0 {
		t.Errorf("InFlight %d after the stream ended, want 0", n)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestStreamServerFinalStatusFeedsBreaker(t *testing.T) {
	b := newBreaker(t, breaker.Options{ConsecutiveFailures: 2, Clock: clock.NewFake(t0)})
	var code codes.Code
	svc := &service{output: func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
		if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
			return err
		}
		return status.Error(code, "stream ended")
	}}
	c := start(t, svc, serverOpts(sluice.New(b), grpcguard.Options{}))
	ctx := ctxFor(t)
	stream := func() error {
		s, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			return err
		}
		for range 3 {
			if _, err := s.Recv(); err != nil {
				return err
			}
		}
		return nil
	}
	code = codes.NotFound
	for range 3 {
		wantCode(t, stream(), codes.NotFound)
	}
	if s := b.State(); s != breaker.Closed {
		t.Fatalf("breaker %v after NotFound streams, want closed", s)
	}
	code = codes.Internal
	for range 2 {
		wantCode(t, stream(), codes.Internal)
	}
	if s := b.State(); s != breaker.Open {
		t.Fatalf("breaker %v after 2 Internal streams, want open", s)
	}
	wantCode(t, stream(), codes.Unavailable)
	if n := svc.calls.Load(); n != 5 {
		t.Errorf("handler ran %d times, want 5", n)
	}
}

func TestServerGuardFor(t *testing.T) {
	closed := newBreaker(t, breaker.Options{})
	closed.ForceOpen()
	perMethod := map[string]*sluice.Guard{emptyCall: sluice.New(closed)}
	opts := grpcguard.Options{GuardFor: func(m string) *sluice.Guard { return perMethod[m] }}
	c := start(t, &service{}, serverOpts(sluice.New(), opts))
	ctx := ctxFor(t)
	_, err := c.EmptyCall(ctx, &testgrpc.Empty{})
	wantCode(t, err, codes.Unavailable)
	if _, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
		t.Errorf("method without a guard of its own: %v", err)
	}
}

func TestUnaryServerRunsHandlerOnce(t *testing.T) {
	svc := &service{unary: func(context.Context) error { return status.Error(codes.Unavailable, "db down") }}
	r, err := retry.New(retry.Options{MaxAttempts: 3, Backoff: retry.Constant(0), NoBudget: true})
	if err != nil {
		t.Fatal(err)
	}
	c := start(t, svc, serverOpts(sluice.New(r), grpcguard.Options{}))
	_, err = c.UnaryCall(ctxFor(t), &testgrpc.SimpleRequest{})
	wantCode(t, err, codes.Unavailable)
	if msg := status.Convert(err).Message(); msg != "db down" {
		t.Errorf("message %q, want the handler's", msg)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestUnaryServerTimeoutAnswersDeadlineExceeded(t *testing.T) {
	clk := clock.NewFake(t0)
	to, err := timeout.New(timeout.Options{Timeout: 2 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	b := newBreaker(t, breaker.Options{ConsecutiveFailures: 1, Clock: clk})
	// The handler answers late, with a success: the timeout still wins.
	svc := &service{unary: func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	}}
	c := start(t, svc, serverOpts(sluice.New(b, to), grpcguard.Options{}))
	ctx := ctxFor(t)
	done := make(chan error, 1)
	go func() {
		_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		done <- err
	}()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	wantCode(t, <-done, codes.DeadlineExceeded)
	if s := b.State(); s != breaker.Open {
		t.Errorf("breaker %v after a timeout, want open", s)
	}
}
