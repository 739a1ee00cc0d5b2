package gateway_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/clock"
)

// grpcRacers are two grpc-go servers of TestService on loopback for
// hedging tests: the first UnaryCall of each payload (across both) waits
// until its context ends, and says so on cancelled; a later one answers at
// once with a payload of ResponseSize bytes that starts with the request's,
// its ServerId the server's name. StreamingInputCall counts its
// calls and answers at once.
type grpcRacers struct {
	addrs [2]string

	mu        sync.Mutex
	calls     map[string]int    // UnaryCalls by payload
	firstOn   map[string]string // the server of each payload's first call
	first     chan string       // a payload's first call arrived
	cancelled chan string       // a payload's first call was cancelled
	inputs    int               // StreamingInputCalls
}

type grpcRacer struct {
	testgrpc.UnimplementedTestServiceServer
	name string
	r    *grpcRacers
}

func startGRPCRacers(t *testing.T) *grpcRacers {
	t.Helper()
	checkLeaks(t)
	r := &grpcRacers{calls: map[string]int{}, firstOn: map[string]string{}, first: make(chan string, 8), cancelled: make(chan string, 8)}
	for i, name := range []string{"a", "b"} {
		r.addrs[i] = serveTestService(t, &grpcRacer{name: name, r: r})
	}
	return r
}

// serveTestService serves srv with grpc-go on a loopback port until the
// test ends, and returns its address.
func serveTestService(t *testing.T, srv testgrpc.TestServiceServer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, srv)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

func (s *grpcRacer) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	id := string(req.GetPayload().GetBody())
	s.r.mu.Lock()
	s.r.calls[id]++
	n := s.r.calls[id]
	if n == 1 {
		s.r.firstOn[id] = s.name
	}
	s.r.mu.Unlock()
	if n == 1 {
		s.r.first <- id
		<-ctx.Done()
		s.r.cancelled <- id
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	body := make([]byte, req.GetResponseSize())
	copy(body, id)
	return &testgrpc.SimpleResponse{Payload: payload(body), ServerId: s.name}, nil
}

func (s *grpcRacer) StreamingInputCall(st testgrpc.TestService_StreamingInputCallServer) error {
	s.r.mu.Lock()
	s.r.inputs++
	s.r.mu.Unlock()
	for {
		if _, err := st.Recv(); err != nil {
			return st.SendAndClose(&testgrpc.StreamingInputCallResponse{})
		}
	}
}

// grpcHedgeGateway starts a gateway on engine with a route "grpc" to the
// gRPC servers at addrs, every TestService method named idempotent, whose
// policies are the YAML flow mapping's entries policies, and returns a
// client of it.
func grpcHedgeGateway(t *testing.T, engine string, addrs [2]string, policies string) (*testGateway, testgrpc.TestServiceClient) {
	t.Helper()
	gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s", "http://%s"]}
routes:
  - name: grpc
    upstream: up
    grpc: {idempotent: ["/grpc.testing.TestService/*"]}
    policies: {%s}
`, engine, addrs[0], addrs[1], policies))
	return gw, grpcClient(t, gw.Addr)
}

// TestGRPCHedgeUnary makes a unary call of a method named idempotent on a
// route that hedges, to two targets, the first of which does not answer:
// once the delay has passed on the gateway's clock, a hedge goes to the
// other target, its answer is served, and the first attempt is cancelled
// (the upstream sees its context end) without counting as a failure;
// whether the answer's message is held whole or, too long to hold,
// streams. A client-streaming call of the same service is not hedged.
// (gRPC calls were never hedged.)
func TestGRPCHedgeUnary(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		rs := startGRPCRacers(t)
		gw, c := grpcHedgeGateway(t, engine, rs.addrs, "hedge: {delay: 50ms, budget: 1}, circuit_breaker: {consecutive_failures: 1, failure_rate: 0}")
		for i, size := range []int32{1, 3 << 19} { // held whole, then too long to hold (1.5 MiB)
			id := string(rune('1' + i))
			base := gw.Clock.Timers()
			type answer struct {
				resp *testgrpc.SimpleResponse
				err  error
			}
			answered := make(chan answer, 1)
			go func() {
				resp, err := c.UnaryCall(callCtx(t), &testgrpc.SimpleRequest{Payload: payload([]byte(id)), ResponseSize: size})
				answered <- answer{resp, err}
			}()
			if got := <-rs.first; got != id {
				t.Fatalf("first call of %q, want %q", got, id)
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			// The call's idle timer, and the hedge's.
			if err := gw.Clock.BlockUntil(ctx, base+2); err != nil {
				t.Fatal(err)
			}
			gw.Clock.Advance(49 * time.Millisecond)
			if h := gw.routeStatus(t, "grpc").Hedge; h.Hedges != uint64(i) {
				t.Fatalf("a hedge before the delay: %+v", *h)
			}
			gw.Clock.Advance(time.Millisecond)
			a := <-answered
			if b := a.resp.GetPayload().GetBody(); a.err != nil || len(b) != int(size) || string(b[:1]) != id {
				t.Fatalf("the hedged call %s: %d bytes, %v", id, len(b), a.err)
			}
			rs.mu.Lock()
			firstOn := rs.firstOn[id]
			rs.mu.Unlock()
			if a.resp.GetServerId() == firstOn {
				t.Errorf("the hedge went to %s, the first attempt's target", firstOn)
			}
			if got := <-rs.cancelled; got != id {
				t.Errorf("cancelled %q, want %q", got, id)
			}
			eventually(t, "the lost attempt settled", func() bool {
				for _, u := range gw.Status().Upstreams {
					for _, tt := range u.Targets {
						if tt.InFlight != 0 {
							return false
						}
					}
				}
				return true
			})
			st := gw.routeStatus(t, "grpc")
			if h := st.Hedge; h.Requests != uint64(i+1) || h.Hedges != uint64(i+1) || h.Wins != uint64(i+1) {
				t.Errorf("hedge status %+v, want %d requests, hedges and wins", *h, i+1)
			}
			if st.Breaker != "closed" {
				t.Errorf("breaker %s after a lost attempt, want closed", st.Breaker)
			}
		}

		// A client stream of two messages is not hedged.
		s, err := c.StreamingInputCall(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := s.Send(&testgrpc.StreamingInputCallRequest{Payload: payload([]byte("m"))}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.CloseAndRecv(); err != nil {
			t.Fatalf("a client stream: %v", err)
		}
		if h := gw.routeStatus(t, "grpc").Hedge; h.Hedges != 2 {
			t.Errorf("hedge status %+v after a client stream, want it not hedged", *h)
		}
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if rs.inputs != 1 {
			t.Errorf("the client stream reached the upstream %d times, want 1", rs.inputs)
		}
	})
}

// TestGRPCHedgedRetryAnswersLastAttempt retries a hedged call whose first
// race ends with the upstream's UNAVAILABLE (held) and whose second one
// cannot reach its target: the client gets the last attempt's failure,
// the gateway's UNAVAILABLE upstream_unreachable, not the first race's
// answer. (A race that held no answer left the previous one's in place,
// and it was sent.)
func TestGRPCHedgedRetryAnswersLastAttempt(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		up.fail.Store(uint32(codes.Unavailable))
		fc := clock.NewFake(time.Time{})
		// Round robin starts at the second target: up first, then the
		// closed one.
		gw := startGatewayClock(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s", "http://%s"]}
routes:
  - name: grpc
    upstream: up
    grpc: {idempotent: [/grpc.testing.TestService/UnaryCall]}
    policies:
      retry: {attempts: 2, backoff: {initial: 1ns, max: 1ns, jitter: none}}
      hedge: {delay: 1h}
`, engine, closedAddr(t), up.addr), fc)
		pumpClock(t, fc, time.Nanosecond)
		st, tr := unary(t, grpcClient(t, gw.Addr), "x")
		if up.unary.Load() != 1 {
			t.Fatalf("the upstream got %d calls, want 1", up.unary.Load())
		}
		if st.Code() != codes.Unavailable || st.Message() != "upstream_unreachable" || len(tr.Get("x-trailer")) != 0 {
			t.Errorf("got %v, trailers %v; want the last attempt's UNAVAILABLE upstream_unreachable", st, tr)
		}
	})
}
