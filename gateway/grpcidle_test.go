package gateway_test

import (
	"context"
	"io"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestGRPCIdleTimeout holds gRPC calls open without a byte passing: the
// gateway ends each after server.grpc_idle_timeout on its clock with
// DEADLINE_EXCEEDED, releases the route's concurrency slot, and serves
// the next call; whether its answer was passing, its request was being
// read whole (a call that may be retried) or it waited for the answer's
// head. A call whose messages keep passing is not idle. (A call without
// grpc-timeout had no bound: a client held a slot, and a stream upstream,
// for as long as it liked by sending nothing.)
func TestGRPCIdleTimeout(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		start := func(t *testing.T, idempotent string) (*testGateway, testgrpc.TestServiceClient) {
			up := startGRPCUpstream(t)
			gw := startGateway(t, parseConfig(t, `
server: {engine: %s, grpc_idle_timeout: 1m}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - name: grpc
    upstream: up
    grpc: {idempotent: [%s]}
    policies: {concurrency: {max: 1}, retry: {}}
`, engine, up.addr, idempotent))
			return gw, grpcClient(t, gw.Addr)
		}
		// idle lets the call that recv reads idle for the timeout, and
		// checks that it ended and released its slot.
		idle := func(t *testing.T, gw *testGateway, c testgrpc.TestServiceClient, recv func() error) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if err := gw.Clock.BlockUntil(ctx, 1); err != nil { // the call's idle timer
				t.Fatal(err)
			}
			gw.Clock.Advance(time.Minute)
			if st := status.Convert(recv()); st.Code() != codes.DeadlineExceeded || st.Message() != "idle_timeout" {
				t.Errorf("an idle call: %v, want DEADLINE_EXCEEDED idle_timeout", st)
			}
			eventually(t, "the slot to be released", func() bool { return gw.routeStatus(t, "grpc").ConcurrencyInFlight == 0 })
			if st, _ := unary(t, c, "next"); st.Code() != codes.OK {
				t.Errorf("the call after: %v", st)
			}
		}

		t.Run("answer passing", func(t *testing.T) {
			gw, c := start(t, "/x.Y/Z")
			s, err := c.FullDuplexCall(callCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload([]byte("a"))}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Recv(); err != nil {
				t.Fatal(err)
			}
			idle(t, gw, c, func() error { _, err := s.Recv(); return err })
		})
		t.Run("request held", func(t *testing.T) {
			gw, c := start(t, "/grpc.testing.TestService/FullDuplexCall")
			s, err := c.FullDuplexCall(callCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			idle(t, gw, c, func() error { _, err := s.Recv(); return err })
		})
		t.Run("awaiting the head", func(t *testing.T) {
			gw, c := start(t, "/x.Y/Z")
			s, err := c.StreamingInputCall(callCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(&testgrpc.StreamingInputCallRequest{Payload: payload([]byte("a"))}); err != nil {
				t.Fatal(err)
			}
			idle(t, gw, c, func() error { return s.RecvMsg(new(testgrpc.StreamingInputCallResponse)) })
		})
		t.Run("active", func(t *testing.T) {
			gw, c := start(t, "/x.Y/Z")
			s, err := c.FullDuplexCall(callCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 { // two minutes in all, a message every 40s
				if i > 0 {
					gw.Clock.Advance(40 * time.Second)
				}
				if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload([]byte("a"))}); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
				if _, err := s.Recv(); err != nil {
					t.Fatalf("answer %d: %v", i, err)
				}
			}
			_ = s.CloseSend()
			if _, err := s.Recv(); err != io.EOF {
				t.Errorf("after CloseSend: %v, want EOF", err)
			}
		})
	})
}

// TestGRPCClientNotReading sends an answer, streamed or held whole, to a
// client that reads none of it (its stream's window is 100 bytes, never
// opened further): the gateway's write waits on the client for
// server.write_timeout, then the client's stream is reset, the call ends
// and the route's concurrency slot is released. (The write waited
// forever, server.grpc_idle_timeout notwithstanding: a streamed call held
// its slot, a held one its answer, however long the client liked.)
func TestGRPCClientNotReading(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		// Passed on as it comes, and held whole (a call that may be
		// retried), then sent.
		for _, kind := range []struct{ name, route string }{
			{"streamed", "policies: {concurrency: {max: 1}}"},
			{"held", "grpc: {idempotent: [/grpc.testing.TestService/*]}\n    policies: {concurrency: {max: 1}, retry: {}}"},
		} {
			t.Run(kind.name, func(t *testing.T) { clientNotReading(t, engine, kind.route) })
		}
	})
}

func clientNotReading(t *testing.T, engine, route string) {
	up := startGRPCUpstream(t)
	gw := startGateway(t, parseConfig(t, `
server: {engine: %s, grpc_idle_timeout: 1m, write_timeout: 1s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - name: grpc
    upstream: up
    %s
`, engine, up.addr, route))
	h := dialH2(t, gw.Addr)
	if err := h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100}); err != nil {
		t.Fatal(err)
	}
	h.headers(t, 1, false, ":method", "POST", ":scheme", "http", ":authority", gw.Addr,
		":path", "/grpc.testing.TestService/StreamingOutputCall", "content-type", "application/grpc", "te", "trailers")
	msg, err := proto.Marshal(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1000}, {Size: 1000}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteData(1, true, append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)); err != nil {
		t.Fatal(err)
	}
	// The window's 100 bytes arrive: the gateway holds the rest of
	// what it read, and its write waits on the client.
	got, reset := 0, false
	for range 100 {
		if got >= 100 || reset {
			break
		}
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = h.fr.WriteSettingsAck()
			}
		case *http2.DataFrame:
			got += len(f.Data())
		case *http2.RSTStreamFrame:
			reset = true
		}
	}
	if got != 100 {
		t.Fatalf("got %d bytes of the answer (reset %v), want the window's 100", got, reset)
	}
	for range 100 { // after write_timeout, on the wall clock (net/http's)
		if reset {
			break
		}
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for the stream's reset: %v", err)
		}
		if f, ok := f.(*http2.RSTStreamFrame); ok && f.StreamID == 1 {
			reset = true
		}
	}
	if !reset {
		t.Fatal("the stream was not reset")
	}
	eventually(t, "the slot to be released", func() bool { return gw.routeStatus(t, "grpc").ConcurrencyInFlight == 0 })
	if st, _ := unary(t, grpcClient(t, gw.Addr), "next"); st.Code() != codes.OK {
		t.Errorf("the call after: %v", st)
	}
}
