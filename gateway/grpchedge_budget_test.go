package gateway_test

import (
	"context"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// TestGRPCUnsentHedgeKeepsBudget, on a route that only hedges, with a
// hedge budget of half a hedge per call: a quick call, then a client
// stream whose hedge falls due but is not sent (the stream is two
// messages), then a server-streaming call whose first target does not
// answer: its hedge is granted and wins, the one hedge counted as sent.
// (The stream's unsent hedge kept the budget's one token, and the last
// call waited for its first target; then sluice_hedges_total still
// counted it.)
func TestGRPCUnsentHedgeKeepsBudget(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		s := startGRPCStreamers(t)
		gw, c := grpcHedgeGateway(t, engine, s.addrs, "hedge: {delay: 50ms, budget: 0.5}")
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		one := []*testgrpc.ResponseParameters{{Size: 4}}
		st, err := c.StreamingOutputCall(callCtx(t), &testgrpc.StreamingOutputCallRequest{Payload: payload([]byte("q")), ResponseParameters: one})
		if err != nil {
			t.Fatal(err)
		}
		<-s.first
		recvStream(t, st, s, 1, 4)
		callsEnded(t, gw)
		base := gw.Clock.Timers()
		in, err := c.StreamingInputCall(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := in.Send(&testgrpc.StreamingInputCallRequest{Payload: payload([]byte("m"))}); err != nil {
			t.Fatal(err)
		}
		<-s.first
		if err := gw.Clock.BlockUntil(ctx, base+2); err != nil { // the call's idle timer, and the hedge's
			t.Fatal(err)
		}
		gw.Clock.Advance(50 * time.Millisecond) // due: granted, it waits for the request's end
		if err := in.Send(&testgrpc.StreamingInputCallRequest{Payload: payload([]byte("m"))}); err != nil {
			t.Fatal(err)
		}
		if resp, err := in.CloseAndRecv(); err != nil || resp.GetAggregatedPayloadSize() != 2 {
			t.Fatalf("the client stream: %v, %v", resp, err)
		}

		callsEnded(t, gw)
		base = gw.Clock.Timers()
		st, err = c.StreamingOutputCall(callCtx(t), &testgrpc.StreamingOutputCallRequest{Payload: payload([]byte("hedge")), ResponseParameters: one})
		if err != nil {
			t.Fatal(err)
		}
		if got := <-s.first; got != "hedge" {
			t.Fatalf("first call of %q", got)
		}
		if err := gw.Clock.BlockUntil(ctx, base+2); err != nil {
			t.Fatal(err)
		}
		gw.Clock.Advance(50 * time.Millisecond)
		recvStream(t, st, s, 1, 4)
		if got := <-s.cancelled; got != "hedge" {
			t.Errorf("cancelled %q", got)
		}
		if h := gw.routeStatus(t, "grpc").Hedge; h.Hedges != 1 || h.Wins != 1 || h.Denied != 0 {
			t.Errorf("hedge status %+v, want the last call's hedge granted, sent and won (the stream's not counted)", *h)
		}
		compareMetrics(t, gw, `
sluice_hedges_total{route="grpc"} 1
sluice_hedge_wins_total{route="grpc"} 1
`, "sluice_hedges_total", "sluice_hedge_wins_total")
	})
}

// callsEnded waits for the gateway to end the calls on route grpc that
// its client saw end, so that their timers are gone before the test
// counts the next call's.
func callsEnded(t *testing.T, gw *testGateway) {
	t.Helper()
	eventually(t, "the route's calls ended", func() bool { return gw.routeStatus(t, "grpc").InFlight == 0 })
}
