package grpcguard_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
)

const (
	emptyCall  = "/grpc.testing.TestService/EmptyCall"
	unaryCall  = "/grpc.testing.TestService/UnaryCall"
	outputCall = "/grpc.testing.TestService/StreamingOutputCall"
)

// wait bounds every wait of a test on something the test itself causes.
const wait = 10 * time.Second

// service is a TestService whose methods do what the test sets. Unset
// methods answer OK (unary) or end at once (streams).
type service struct {
	testgrpc.UnimplementedTestServiceServer
	calls  atomic.Int32 // handler invocations, every method
	empty  func(ctx context.Context) error
	unary  func(ctx context.Context) error
	output func(req *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error
	input  func(s testgrpc.TestService_StreamingInputCallServer) error
	duplex func(s testgrpc.TestService_FullDuplexCallServer) error
}

func (s *service) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	s.calls.Add(1)
	if s.empty != nil {
		if err := s.empty(ctx); err != nil {
			return nil, err
		}
	}
	return &testgrpc.Empty{}, nil
}

func (s *service) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.calls.Add(1)
	if s.unary != nil {
		if err := s.unary(ctx); err != nil {
			return nil, err
		}
	}
	return &testgrpc.SimpleResponse{Username: "ok"}, nil
}

func (s *service) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, st testgrpc.TestService_StreamingOutputCallServer) error {
	s.calls.Add(1)
	if s.output != nil {
		return s.output(req, st)
	}
	return nil
}

func (s *service) StreamingInputCall(st testgrpc.TestService_StreamingInputCallServer) error {
	s.calls.Add(1)
	if s.input != nil {
		return s.input(st)
	}
	return st.SendAndClose(&testgrpc.StreamingInputCallResponse{})
}

func (s *service) FullDuplexCall(st testgrpc.TestService_FullDuplexCallServer) error {
	s.calls.Add(1)
	if s.duplex != nil {
		return s.duplex(st)
	}
	return nil
}

// start serves svc on a loopback port with serverOpts and returns a client
// of it dialled with dialOpts. Both are stopped when the test ends.
func start(t *testing.T, svc *service, serverOpts []grpc.ServerOption, dialOpts ...grpc.DialOption) testgrpc.TestServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(serverOpts...)
	testgrpc.RegisterTestServiceServer(srv, svc)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	dialOpts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dialOpts...)
	conn, err := grpc.NewClient(lis.Addr().String(), dialOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("Serve: %v", err)
		}
	})
	return testgrpc.NewTestServiceClient(conn)
}

// ctxFor returns a context bounded by wait, cancelled when the test ends.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// wantCode fails the test unless err has the status code want.
func wantCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("status %v (%v), want %v", got, err, want)
	}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newLimiter(t *testing.T, clk clock.Clock, lim ratelimit.Limit) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(ratelimit.Options{Name: "rl", Limit: lim, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newBreaker(t *testing.T, opts breaker.Options) *breaker.Breaker {
	t.Helper()
	b, err := breaker.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newBulkhead(t *testing.T, n int) *concurrency.Bulkhead {
	t.Helper()
	b, err := concurrency.NewBulkhead(concurrency.BulkheadOptions{MaxConcurrent: n, Name: "bh"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
