package grpcguard_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/grpcguard"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/retry"
)

// serveExample serves svc on a loopback port with serverOpts and dials it
// with dialOpts; stop stops both.
func serveExample(svc testgrpc.TestServiceServer, serverOpts []grpc.ServerOption, dialOpts ...grpc.DialOption) (c testgrpc.TestServiceClient, stop func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(serverOpts...)
	testgrpc.RegisterTestServiceServer(srv, svc)
	go func() { _ = srv.Serve(lis) }()
	dialOpts = append(dialOpts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := grpc.NewClient(lis.Addr().String(), dialOpts...)
	if err != nil {
		panic(err)
	}
	return testgrpc.NewTestServiceClient(conn), func() { _ = conn.Close(); srv.Stop() }
}

func ExampleUnaryServerInterceptor() {
	// One call per minute per API key, at most 64 calls at once.
	limiter, err := ratelimit.New(ratelimit.Options{Limit: ratelimit.Limit{Limit: 1, Period: time.Minute}})
	if err != nil {
		panic(err)
	}
	bulkhead, err := concurrency.NewBulkhead(concurrency.BulkheadOptions{MaxConcurrent: 64})
	if err != nil {
		panic(err)
	}
	guard := sluice.New(limiter, bulkhead)
	opts := grpcguard.Options{Key: grpcguard.ByMetadata("x-api-key")}
	c, stop := serveExample(&service{}, []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(grpcguard.UnaryServerInterceptor(guard, opts)),
		grpc.ChainStreamInterceptor(grpcguard.StreamServerInterceptor(guard, opts)),
	})
	defer stop()

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "alice")
	for range 2 {
		var trailer metadata.MD
		_, err := c.EmptyCall(ctx, &testgrpc.Empty{}, grpc.Trailer(&trailer))
		// The pushback is the wait left, in milliseconds: up to 60000.
		fmt.Println(status.Code(err), "pushback:", len(trailer.Get(grpcguard.PushbackKey)) == 1)
	}
	// Output:
	// OK pushback: false
	// ResourceExhausted pushback: true
}

func ExampleUnaryClientInterceptor() {
	// The server fails the first call with UNAVAILABLE.
	var calls atomic.Int32
	warmingUp := func(context.Context) error {
		if calls.Add(1) == 1 {
			return status.Error(codes.Unavailable, "warming up")
		}
		return nil
	}
	svc := &service{empty: warmingUp, unary: warmingUp}

	r, err := retry.New(retry.Options{MaxAttempts: 3, AbortIf: grpcguard.NotRetryable})
	if err != nil {
		panic(err)
	}
	b, err := breaker.New(breaker.Options{Name: "test-service"})
	if err != nil {
		panic(err)
	}
	guard := sluice.New(r, b)
	opts := grpcguard.Options{
		// EmptyCall is idempotent: it may be sent again after UNAVAILABLE.
		RetryableMethods: grpcguard.Methods("/grpc.testing.TestService/EmptyCall"),
	}
	c, stop := serveExample(svc, nil,
		grpc.WithChainUnaryInterceptor(grpcguard.UnaryClientInterceptor(guard, opts)),
		grpc.WithChainStreamInterceptor(grpcguard.StreamClientInterceptor(guard, opts)),
	)
	defer stop()

	_, err = c.EmptyCall(context.Background(), &testgrpc.Empty{})
	fmt.Println(status.Code(err), "after", calls.Load(), "calls")

	// UnaryCall is not declared retryable: it is sent once.
	calls.Store(0)
	_, err = c.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	fmt.Println(status.Code(err), "after", calls.Load(), "call")
	// Output:
	// OK after 2 calls
	// Unavailable after 1 call
}
