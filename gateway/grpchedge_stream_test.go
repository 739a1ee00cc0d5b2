package gateway_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// grpcStreamers are two grpc-go servers of TestService on loopback for
// the hedging of streams. StreamingOutputCall: the first call of a
// payload starting with "hedge" (across both servers) waits until its
// context ends, and says so on cancelled; any other sends one message per
// ResponseParameters entry, of its size, starting with the server's name,
// and sends the next only once the test has read the previous (next).
// FullDuplexCall echoes each message as it comes; StreamingInputCall
// waits for its client's last message, then answers.
type grpcStreamers struct {
	addrs     [2]string
	next      chan struct{} // the test read a message: the stream may send the next
	first     chan string   // a payload's first call arrived
	cancelled chan string   // a payload's waiting call was cancelled

	mu     sync.Mutex
	calls  map[string]int // StreamingOutputCalls by payload
	inputs int            // StreamingInputCalls
}

type grpcStreamer struct {
	testgrpc.UnimplementedTestServiceServer
	name string
	s    *grpcStreamers
}

func startGRPCStreamers(t *testing.T) *grpcStreamers {
	t.Helper()
	checkLeaks(t)
	s := &grpcStreamers{next: make(chan struct{}), first: make(chan string, 8), cancelled: make(chan string, 8), calls: map[string]int{}}
	for i, name := range []string{"a", "b"} {
		s.addrs[i] = serveTestService(t, &grpcStreamer{name: name, s: s})
	}
	return s
}

func (g *grpcStreamer) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, st testgrpc.TestService_StreamingOutputCallServer) error {
	id := string(req.GetPayload().GetBody())
	g.s.mu.Lock()
	g.s.calls[id]++
	n := g.s.calls[id]
	g.s.mu.Unlock()
	ctx := st.Context()
	if n == 1 {
		g.s.first <- id
		if strings.HasPrefix(id, "hedge") {
			<-ctx.Done()
			g.s.cancelled <- id
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	for i, p := range req.GetResponseParameters() {
		if i > 0 {
			select {
			case <-g.s.next:
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		body := make([]byte, p.GetSize())
		copy(body, fmt.Sprintf("%s%d", g.name, i))
		if err := st.Send(&testgrpc.StreamingOutputCallResponse{Payload: payload(body)}); err != nil {
			return err
		}
	}
	return nil
}

func (g *grpcStreamer) FullDuplexCall(st testgrpc.TestService_FullDuplexCallServer) error {
	for {
		req, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := st.Send(&testgrpc.StreamingOutputCallResponse{Payload: req.GetPayload()}); err != nil {
			return err
		}
	}
}

func (g *grpcStreamer) StreamingInputCall(st testgrpc.TestService_StreamingInputCallServer) error {
	g.s.mu.Lock()
	g.s.inputs++
	g.s.mu.Unlock()
	g.s.first <- "input"
	var n int32
	for {
		req, err := st.Recv()
		if err == io.EOF {
			return st.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: n})
		}
		if err != nil {
			return err
		}
		n += int32(len(req.GetPayload().GetBody()))
	}
}

// recvStream reads want messages of st, each of size bytes, letting the
// server send the next only once one is read, then the stream's end; it
// returns the first message's server name.
func recvStream(t *testing.T, st testgrpc.TestService_StreamingOutputCallClient, s *grpcStreamers, want, size int) string {
	t.Helper()
	var server string
	for i := range want {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		b := m.GetPayload().GetBody()
		if len(b) != size || string(b[1:2]) != fmt.Sprint(i) {
			t.Fatalf("message %d: %d bytes %q...", i, len(b), b[:min(len(b), 4)])
		}
		if i == 0 {
			server = string(b[:1])
		}
		if i < want-1 {
			s.next <- struct{}{}
		}
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("the stream's end: %v", err)
	}
	return server
}

// TestGRPCHedgedServerStreamFlows makes server-streaming calls of a
// method named idempotent on a route that hedges (and on one that retries
// too): each message reaches the client as the upstream sends it, the
// upstream sending the next only once the client has read the previous
// (eight of 256 KiB: neither the whole answer nor a 1 MiB part of it is
// held). On the route that only hedges, a stream whose first attempt
// sends nothing is hedged, once the delay has passed on the gateway's
// clock, to the other target, which streams; the first attempt is
// cancelled. (A call hedged held its whole answer, up to 1 MiB, before
// any of it was sent: such a stream never started.)
func TestGRPCHedgedServerStreamFlows(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		for _, retry := range []string{"", "{attempts: 2}"} {
			s := startGRPCStreamers(t)
			policies := "hedge: {delay: 50ms, budget: 1}"
			if retry != "" {
				policies += ", retry: " + retry
			}
			gw, c := grpcHedgeGateway(t, engine, s.addrs, policies)
			params := make([]*testgrpc.ResponseParameters, 8)
			for i := range params {
				params[i] = &testgrpc.ResponseParameters{Size: 256 << 10}
			}
			st, err := c.StreamingOutputCall(callCtx(t), &testgrpc.StreamingOutputCallRequest{Payload: payload([]byte("a")), ResponseParameters: params})
			if err != nil {
				t.Fatal(err)
			}
			<-s.first
			recvStream(t, st, s, len(params), 256<<10)
			if retry != "" {
				continue
			}

			base := gw.Clock.Timers()
			st, err = c.StreamingOutputCall(callCtx(t), &testgrpc.StreamingOutputCallRequest{Payload: payload([]byte("hedge")), ResponseParameters: params[:3]})
			if err != nil {
				t.Fatal(err)
			}
			if got := <-s.first; got != "hedge" {
				t.Fatalf("first call of %q", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if err := gw.Clock.BlockUntil(ctx, base+2); err != nil { // the call's idle timer, and the hedge's
				t.Fatal(err)
			}
			gw.Clock.Advance(50 * time.Millisecond)
			recvStream(t, st, s, 3, 256<<10)
			if got := <-s.cancelled; got != "hedge" {
				t.Errorf("cancelled %q", got)
			}
			if h := gw.routeStatus(t, "grpc").Hedge; h.Requests != 2 || h.Hedges != 1 || h.Wins != 1 {
				t.Errorf("hedge status %+v, want 2 requests, 1 hedge won", *h)
			}
		}
	})
}

// TestGRPCHedgeOnlyStreamsNotHeld makes, on a route that hedges but does
// not retry, with every TestService method named idempotent, a
// bidirectional ping-pong call (the client sends a message only once the
// previous one's answer came) and a client-streaming call whose delay
// passes before its last message: the ping-pong flows, and neither is
// hedged (the upstream sees each call once). (The request was read whole
// before the first attempt, so a ping-pong stalled until the idle
// timeout.)
func TestGRPCHedgeOnlyStreamsNotHeld(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		s := startGRPCStreamers(t)
		gw, c := grpcHedgeGateway(t, engine, s.addrs, "hedge: {delay: 50ms, budget: 1}")
		st, err := c.FullDuplexCall(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			ping := fmt.Sprintf("ping %d", i)
			if err := st.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload([]byte(ping))}); err != nil {
				t.Fatal(err)
			}
			m, err := st.Recv()
			if err != nil || string(m.GetPayload().GetBody()) != ping {
				t.Fatalf("answer to %q: %q, %v", ping, m.GetPayload().GetBody(), err)
			}
		}
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != io.EOF {
			t.Fatalf("the ping-pong's end: %v", err)
		}

		base := gw.Clock.Timers()
		in, err := c.StreamingInputCall(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := in.Send(&testgrpc.StreamingInputCallRequest{Payload: payload([]byte("m"))}); err != nil {
			t.Fatal(err)
		}
		<-s.first
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := gw.Clock.BlockUntil(ctx, base+2); err != nil { // the call's idle timer, and the hedge's
			t.Fatal(err)
		}
		gw.Clock.Advance(50 * time.Millisecond) // the hedge waits for the request's end
		if err := in.Send(&testgrpc.StreamingInputCallRequest{Payload: payload([]byte("m"))}); err != nil {
			t.Fatal(err)
		}
		if resp, err := in.CloseAndRecv(); err != nil || resp.GetAggregatedPayloadSize() != 2 {
			t.Fatalf("the client stream: %v, %v", resp, err)
		}
		s.mu.Lock()
		inputs := s.inputs
		s.mu.Unlock()
		if inputs != 1 {
			t.Errorf("the client stream reached the upstream %d times, want once", inputs)
		}
		if h := gw.routeStatus(t, "grpc").Hedge; h.Wins != 0 {
			t.Errorf("hedge status %+v, want no win", *h)
		}
	})
}

// gatedUnary is a TestService whose UnaryCall says it arrived, then
// answers (one message) once the test releases it.
type gatedUnary struct {
	testgrpc.UnimplementedTestServiceServer
	arrived chan struct{}
	release chan struct{}
}

func (g *gatedUnary) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	g.arrived <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &testgrpc.SimpleResponse{Payload: req.GetPayload()}, nil
}

// TestGRPCQueuedHedgeDoesNotHoldWinner hedges a unary call on a route
// whose concurrency limit (one slot, a queue) the first attempt fills:
// the hedge, once due, waits in the queue; the first attempt's answer
// then comes, wins, and reaches the client at once (on the route that
// only hedges, and on one that retries too), and the slot is free again.
// (The hedge waited in the queue holding the race's lock, which the
// winner needs before it streams, while the winner held the slot the
// hedge waited for: the call hung until the queue's max_wait, forever
// without one, and the route's slot with it.)
func TestGRPCQueuedHedgeDoesNotHoldWinner(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		for _, retry := range []string{"", ", retry: {attempts: 2}"} {
			checkLeaks(t)
			up := &gatedUnary{arrived: make(chan struct{}, 2), release: make(chan struct{})}
			addr := serveTestService(t, up)
			gw, c := grpcHedgeGateway(t, engine, [2]string{addr, addr},
				"hedge: {delay: 50ms, budget: 1}, concurrency: {max: 1, queue: 1, max_wait: 1h}"+retry)
			base := gw.Clock.Timers()
			answered := make(chan error, 1)
			go func() {
				_, err := c.UnaryCall(callCtx(t), &testgrpc.SimpleRequest{Payload: payload([]byte("x"))})
				answered <- err
			}()
			<-up.arrived
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if err := gw.Clock.BlockUntil(ctx, base+2); err != nil { // the call's idle timer, and the hedge's
				t.Fatal(err)
			}
			gw.Clock.Advance(50 * time.Millisecond)
			eventually(t, "the hedge queued", func() bool { return gw.routeStatus(t, "grpc").ConcurrencyQueued == 1 })
			close(up.release)
			if err := <-answered; err != nil { // within the call's deadline
				t.Errorf("the call: %v", err)
				gw.Clock.Advance(time.Hour) // the queue's max_wait: a hedge left waiting gives up
			}
			eventually(t, "the slot freed", func() bool {
				st := gw.routeStatus(t, "grpc")
				return st.ConcurrencyInFlight == 0 && st.ConcurrencyQueued == 0
			})
		}
	})
}

// TestGRPCRefusedFirstAttemptEndsRace makes, on a route that only hedges,
// whose concurrency limit (one slot, a queue with a max_wait) another call
// fills, a unary call whose first attempt waits in the queue past the
// hedge's delay and is then refused: the call is answered at once with
// UNAVAILABLE overloaded. (The hedge, due meanwhile, waited for the first
// attempt's exchange to end or the request to end, neither of which came
// since the first attempt never sent it: the call hung until its idle
// timeout.)
func TestGRPCRefusedFirstAttemptEndsRace(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := &gatedUnary{arrived: make(chan struct{}, 2), release: make(chan struct{})}
		addr := serveTestService(t, up)
		gw, c := grpcHedgeGateway(t, engine, [2]string{addr, addr},
			"hedge: {delay: 50ms, budget: 1}, concurrency: {max: 1, queue: 1, max_wait: 100ms}")
		held := make(chan error, 1)
		go func() {
			_, err := c.UnaryCall(callCtx(t), &testgrpc.SimpleRequest{Payload: payload([]byte("a"))})
			held <- err
		}()
		<-up.arrived // the slot is taken
		base := gw.Clock.Timers()
		answered := make(chan error, 1)
		go func() {
			_, err := c.UnaryCall(callCtx(t), &testgrpc.SimpleRequest{Payload: payload([]byte("b"))})
			answered <- err
		}()
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := gw.Clock.BlockUntil(ctx, base+3); err != nil { // the call's idle timer, the hedge's, the queue's
			t.Fatal(err)
		}
		gw.Clock.Advance(50 * time.Millisecond) // the hedge is due
		gw.Clock.Advance(50 * time.Millisecond) // the first attempt's wait ends
		err := <-answered
		if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != "overloaded" {
			t.Errorf("the refused call: %v, want UNAVAILABLE overloaded", err)
		}
		close(up.release)
		if err := <-held; err != nil {
			t.Errorf("the call that held the slot: %v", err)
		}
	})
}
