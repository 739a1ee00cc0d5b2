package gateway_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// lateAnswerUpstream is a grpc-go server whose StreamingInputCall reports
// each message it reads on got and its request's end on ended, then
// answers (the payloads' total size) only once release is closed, or
// ends when its call does (reported on cut).
type lateAnswerUpstream struct {
	testgrpc.UnimplementedTestServiceServer
	addr    string
	got     chan struct{}
	ended   chan struct{}
	cut     chan struct{}
	release chan struct{}
}

func startLateAnswerUpstream(t *testing.T) *lateAnswerUpstream {
	t.Helper()
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &lateAnswerUpstream{addr: ln.Addr().String(), got: make(chan struct{}, 16), ended: make(chan struct{}, 4),
		cut: make(chan struct{}, 4), release: make(chan struct{})}
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, u)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return u
}

func (u *lateAnswerUpstream) StreamingInputCall(s testgrpc.TestService_StreamingInputCallServer) error {
	var n int32
	for {
		req, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		n += int32(len(req.GetPayload().GetBody()))
		u.got <- struct{}{}
	}
	u.ended <- struct{}{}
	select {
	case <-u.release:
		return s.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: n})
	case <-s.Context().Done():
		u.cut <- struct{}{}
		return s.Context().Err()
	}
}

// TestGRPCClientStreamAnsweredAtItsEnd makes client-streaming calls whose
// upstream answers only once the client's stream has ended, to an
// upstream of each protocol (http1 reached over h2c, and h2c): the call
// streams for two minutes of the gateway's clock, longer than
// server.grpc_idle_timeout, as its messages keep it alive; then its
// upstream keeps it waiting for its answer's head ten times the
// upstream's response_header_timeout, on the wall clock, and the call
// still gets the answer. Another call whose upstream keeps silent after
// its end is ended by server.grpc_idle_timeout (DEADLINE_EXCEEDED
// idle_timeout) and its upstream stream reset. (The gateway's gRPC
// transport cut such a call after response_header_timeout, with
// UNAVAILABLE, whatever its deadline.)
func TestGRPCClientStreamAnsweredAtItsEnd(t *testing.T) {
	const headTimeout = 50 * time.Millisecond
	forEngines(t, func(t *testing.T, engine string) {
		for _, proto := range []string{"http1", "h2c"} {
			t.Run(proto, func(t *testing.T) {
				up := startLateAnswerUpstream(t)
				gw := startGateway(t, parseConfig(t, `
server: {engine: %s, grpc_idle_timeout: 1m}
upstreams:
  up: {targets: ["http://%s"], protocol: %s, response_header_timeout: 50ms}
routes:
  - {name: grpc, upstream: up}
`, engine, up.addr, proto))
				c := grpcClient(t, gw.Addr)
				wait := func(ch <-chan struct{}, what string) {
					t.Helper()
					select {
					case <-ch:
					case <-time.After(waitLimit):
						t.Fatalf("the upstream did not report %s", what)
					}
				}

				s, err := c.StreamingInputCall(callCtx(t))
				if err != nil {
					t.Fatal(err)
				}
				for i := range 4 { // two minutes in all, a message every 40s
					if i > 0 {
						gw.Clock.Advance(40 * time.Second)
					}
					if err := s.Send(&testgrpc.StreamingInputCallRequest{Payload: payload([]byte("abc"))}); err != nil {
						t.Fatalf("send %d: %v", i, err)
					}
					wait(up.got, "a message")
				}
				if err := s.CloseSend(); err != nil {
					t.Fatal(err)
				}
				wait(up.ended, "the request's end")
				select {
				case <-up.cut:
					t.Fatal("the upstream's stream was reset while it prepared its answer")
				case <-time.After(10 * headTimeout): // response_header_timeout is net/http's, on the wall clock
				}
				close(up.release)
				var resp testgrpc.StreamingInputCallResponse
				if err := s.RecvMsg(&resp); err != nil || resp.GetAggregatedPayloadSize() != 12 {
					t.Fatalf("the call got %v, size %d; want its answer, size 12", status.Convert(err), resp.GetAggregatedPayloadSize())
				}

				// Silent after its end: the idle timeout ends it.
				up.release = make(chan struct{})
				s, err = c.StreamingInputCall(callCtx(t))
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Send(&testgrpc.StreamingInputCallRequest{Payload: payload([]byte("abc"))}); err != nil {
					t.Fatal(err)
				}
				wait(up.got, "a message")
				if err := s.CloseSend(); err != nil {
					t.Fatal(err)
				}
				wait(up.ended, "the request's end")
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				defer cancel()
				if err := gw.Clock.BlockUntil(ctx, 1); err != nil { // the call's idle timer
					t.Fatal(err)
				}
				gw.Clock.Advance(time.Minute)
				if st := status.Convert(s.RecvMsg(new(testgrpc.StreamingInputCallResponse))); st.Code() != codes.DeadlineExceeded || st.Message() != "idle_timeout" {
					t.Errorf("a call silent after its end: %v, want DEADLINE_EXCEEDED idle_timeout", st)
				}
				wait(up.cut, "its stream's reset")
			})
		}
	})
}
