package gateway_test

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// grpcUpstream is a grpc-go server of grpc.testing.TestService on
// loopback (h2c): UnaryCall echoes its payload, StreamingOutputCall sends
// one message per ResponseParameters, StreamingInputCall adds up its
// payloads' sizes, FullDuplexCall echoes each message. Every call ends
// with the trailer x-trailer: kept. While fail is set (a code other than
// OK) every call fails with it, and so do the next failFirst calls;
// EmptyCall always fails with NOT_FOUND. A UnaryCall whose payload is
// "block" announces itself on blocked and waits for its context to end.
type grpcUpstream struct {
	testgrpc.UnimplementedTestServiceServer
	addr      string
	fail      atomic.Uint32 // codes.Code; OK: calls succeed
	failFirst atomic.Int64  // calls that fail with UNAVAILABLE before the others succeed
	unary     atomic.Int64  // UnaryCall calls
	input     atomic.Int64  // StreamingInputCall calls
	empty     atomic.Int64  // EmptyCall calls
	deadline  chan time.Duration
	md        chan metadata.MD // a UnaryCall's request metadata, when room
	blocked   chan struct{}
}

func startGRPCUpstream(t *testing.T) *grpcUpstream {
	t.Helper()
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &grpcUpstream{addr: ln.Addr().String(), deadline: make(chan time.Duration, 64), md: make(chan metadata.MD, 64), blocked: make(chan struct{}, 64)}
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, u)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return u
}

func (u *grpcUpstream) failing(ctx context.Context) error {
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "kept"))
	if c := codes.Code(u.fail.Load()); c != codes.OK {
		return status.Error(c, "failing on purpose")
	}
	if u.failFirst.Add(-1) >= 0 {
		return status.Error(codes.Unavailable, "failing at first")
	}
	return nil
}

func (u *grpcUpstream) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	u.unary.Add(1)
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		select {
		case u.md <- md:
		default:
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		select {
		case u.deadline <- time.Until(dl):
		default:
		}
	}
	if string(req.GetPayload().GetBody()) == "block" {
		u.blocked <- struct{}{}
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if err := u.failing(ctx); err != nil {
		return nil, err
	}
	return &testgrpc.SimpleResponse{Payload: req.GetPayload()}, nil
}

func (u *grpcUpstream) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	u.empty.Add(1)
	return nil, status.Error(codes.NotFound, "no such thing")
}

func (u *grpcUpstream) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
	if err := u.failing(s.Context()); err != nil {
		return err
	}
	for _, p := range req.GetResponseParameters() {
		body := make([]byte, p.GetSize())
		if err := s.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: body}}); err != nil {
			return err
		}
	}
	return nil
}

func (u *grpcUpstream) StreamingInputCall(s testgrpc.TestService_StreamingInputCallServer) error {
	u.input.Add(1)
	if err := u.failing(s.Context()); err != nil {
		return err
	}
	var n int32
	for {
		req, err := s.Recv()
		if err == io.EOF {
			return s.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: n})
		}
		if err != nil {
			return err
		}
		n += int32(len(req.GetPayload().GetBody()))
	}
}

func (u *grpcUpstream) FullDuplexCall(s testgrpc.TestService_FullDuplexCallServer) error {
	if err := u.failing(s.Context()); err != nil {
		return err
	}
	for {
		req, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.Send(&testgrpc.StreamingOutputCallResponse{Payload: req.GetPayload()}); err != nil {
			return err
		}
	}
}

// grpcClient returns a TestService client of a connection to addr (h2c
// by prior knowledge; over TLS with creds when given), closed when the
// test ends.
func grpcClient(t *testing.T, addr string, creds ...credentials.TransportCredentials) testgrpc.TestServiceClient {
	t.Helper()
	tc := insecure.NewCredentials()
	if len(creds) > 0 {
		tc = creds[0]
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(tc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testgrpc.NewTestServiceClient(cc)
}

// grpcGateway starts a gateway on engine whose route "grpc" sends to up,
// with extra lines under the route, and returns a client of it.
func grpcGateway(t *testing.T, engine string, up *grpcUpstream, extra string) (*testGateway, testgrpc.TestServiceClient) {
	t.Helper()
	gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - name: grpc
    upstream: up
%s`, engine, up.addr, extra))
	return gw, grpcClient(t, gw.Addr)
}
