package gateway_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/testpki"
)

func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

func payload(b []byte) *testgrpc.Payload { return &testgrpc.Payload{Body: b} }

// unary makes a UnaryCall of body and returns its status and trailers.
func unary(t *testing.T, c testgrpc.TestServiceClient, body string) (*status.Status, metadata.MD) {
	t.Helper()
	var tr metadata.MD
	resp, err := c.UnaryCall(callCtx(t), &testgrpc.SimpleRequest{Payload: payload([]byte(body))}, grpc.Trailer(&tr))
	if err == nil && string(resp.GetPayload().GetBody()) != body {
		t.Fatalf("UnaryCall(%q) echoed %q", body, resp.GetPayload().GetBody())
	}
	return status.Convert(err), tr
}

func TestGRPCUnaryKeepsTrailersAndDeadline(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		_, c := grpcGateway(t, engine, up, "")
		var tr metadata.MD
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		body := bytes.Repeat([]byte("x"), 300<<10)
		resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload(body)}, grpc.Trailer(&tr))
		if err != nil || !bytes.Equal(resp.GetPayload().GetBody(), body) {
			t.Fatalf("UnaryCall: %v", err)
		}
		if got := tr.Get("x-trailer"); len(got) != 1 || got[0] != "kept" {
			t.Errorf("trailer x-trailer = %q, want [kept]", got)
		}
		// The client's grpc-timeout reaches the upstream, less what passed.
		if d := <-up.deadline; d <= 0 || d > waitLimit {
			t.Errorf("the upstream's deadline is %v away, want within the client's %v", d, waitLimit)
		}
	})
}

func TestGRPCStreamingKinds(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		_, c := grpcGateway(t, engine, up, "")

		t.Run("server", func(t *testing.T) {
			sizes := []int32{0, 1, 1000, 70000, 300000, 5}
			req := &testgrpc.StreamingOutputCallRequest{}
			for _, n := range sizes {
				req.ResponseParameters = append(req.ResponseParameters, &testgrpc.ResponseParameters{Size: n})
			}
			s, err := c.StreamingOutputCall(callCtx(t), req)
			if err != nil {
				t.Fatal(err)
			}
			for i, n := range sizes {
				m, err := s.Recv()
				if err != nil || len(m.GetPayload().GetBody()) != int(n) {
					t.Fatalf("message %d: %v, %d bytes, want %d", i, err, len(m.GetPayload().GetBody()), n)
				}
			}
			if _, err := s.Recv(); err != io.EOF {
				t.Fatalf("after the last message: %v, want EOF", err)
			}
			if got := s.Trailer().Get("x-trailer"); len(got) != 1 || got[0] != "kept" {
				t.Errorf("trailer x-trailer = %q, want [kept]", got)
			}
		})

		t.Run("client", func(t *testing.T) {
			s, err := c.StreamingInputCall(callCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			for i := range 50 {
				b := bytes.Repeat([]byte{'c'}, i*997)
				want += len(b)
				if err := s.Send(&testgrpc.StreamingInputCallRequest{Payload: payload(b)}); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			resp, err := s.CloseAndRecv()
			if err != nil || int(resp.GetAggregatedPayloadSize()) != want {
				t.Fatalf("CloseAndRecv: %v, %d, want %d", err, resp.GetAggregatedPayloadSize(), want)
			}
		})

		t.Run("bidi", func(t *testing.T) {
			s, err := c.FullDuplexCall(callCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			// Each answer is awaited before the next message is sent: the
			// gateway must pass both ways at once.
			for i := range 100 {
				b := bytes.Repeat([]byte{byte('a' + i%26)}, i*101)
				if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload(b)}); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
				m, err := s.Recv()
				if err != nil || !bytes.Equal(m.GetPayload().GetBody(), b) {
					t.Fatalf("answer %d: %v", i, err)
				}
			}
			if err := s.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Recv(); err != io.EOF {
				t.Fatalf("after CloseSend: %v, want EOF", err)
			}
			if got := s.Trailer().Get("x-trailer"); len(got) != 1 || got[0] != "kept" {
				t.Errorf("trailer x-trailer = %q, want [kept]", got)
			}
		})
	})
}

func TestGRPCRateLimitIsResourceExhausted(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		_, c := grpcGateway(t, engine, up, `    policies: {rate_limit: {limit: 1, period: 1h, key: route}}`)
		if st, _ := unary(t, c, "first"); st.Code() != codes.OK {
			t.Fatalf("first call: %v", st)
		}
		st, tr := unary(t, c, "second")
		if st.Code() != codes.ResourceExhausted {
			t.Fatalf("second call: %v, want RESOURCE_EXHAUSTED", st)
		}
		if got := tr.Get("grpc-retry-pushback-ms"); len(got) != 1 || got[0] == "" || got[0] == "0" {
			t.Errorf("grpc-retry-pushback-ms = %q, want the wait", got)
		}
		if got := tr.Get("retry-after"); len(got) != 1 || got[0] != "3600" {
			t.Errorf("retry-after = %q, want [3600]", got)
		}
		if n := up.unary.Load(); n != 1 {
			t.Errorf("the upstream got %d calls, want 1", n)
		}
	})
}

func TestGRPCFailingUpstreamOpensBreaker(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		_, c := grpcGateway(t, engine, up, `    policies: {circuit_breaker: {consecutive_failures: 3, open_for: 1h}}`)
		// NOT_FOUND says nothing against the upstream: it never opens.
		for range 5 {
			if _, err := c.EmptyCall(callCtx(t), &testgrpc.Empty{}); status.Code(err) != codes.NotFound {
				t.Fatalf("EmptyCall: %v, want NOT_FOUND", err)
			}
		}
		up.fail.Store(uint32(codes.Unavailable))
		for i := range 3 {
			st, tr := unary(t, c, "x")
			if st.Code() != codes.Unavailable || st.Message() != "failing on purpose" {
				t.Fatalf("call %d: %v, want the upstream's UNAVAILABLE", i, st)
			}
			if got := tr.Get("x-trailer"); len(got) != 1 {
				t.Errorf("call %d: the upstream's trailers were lost: %v", i, tr)
			}
		}
		st, _ := unary(t, c, "x")
		if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "circuit") {
			t.Fatalf("after three failures: %v, want UNAVAILABLE from the open breaker", st)
		}
		if n := up.unary.Load(); n != 3 {
			t.Errorf("the upstream got %d calls, want 3 (the fourth never left the gateway)", n)
		}
		if _, err := c.EmptyCall(callCtx(t), &testgrpc.Empty{}); status.Code(err) != codes.Unavailable {
			t.Errorf("EmptyCall through the open breaker: %v, want UNAVAILABLE", err)
		}
	})
}

func TestGRPCRetryOnlyIdempotentMethods(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		fc := clock.NewFake(time.Time{})
		gw := startGatewayClock(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - name: grpc
    upstream: up
    grpc: {idempotent: [/grpc.testing.TestService/UnaryCall]}
    policies:
      retry: {attempts: 3, backoff: {initial: 1ns, max: 1ns, jitter: none}}
`, engine, up.addr), fc)
		pumpClock(t, fc, time.Nanosecond)
		c := grpcClient(t, gw.Addr)

		up.failFirst.Store(2)
		if st, tr := unary(t, c, "retried"); st.Code() != codes.OK || len(tr.Get("x-trailer")) != 1 {
			t.Fatalf("an idempotent call failing twice: %v %v, want OK on the third attempt", st, tr)
		}
		if n := up.unary.Load(); n != 3 {
			t.Errorf("the upstream got %d UnaryCalls, want 3", n)
		}
		// An answer held whole, sent in pieces.
		if st, _ := unary(t, c, strings.Repeat("y", 300<<10)); st.Code() != codes.OK {
			t.Fatalf("an idempotent call of 300 KiB: %v", st)
		}

		up.failFirst.Store(1)
		s, err := c.StreamingInputCall(callCtx(t))
		if err == nil {
			s.Send(&testgrpc.StreamingInputCallRequest{Payload: payload([]byte("once"))})
			_, err = s.CloseAndRecv()
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("a call not named idempotent: %v, want its UNAVAILABLE", err)
		}
		if n := up.input.Load(); n != 1 {
			t.Errorf("the upstream got %d StreamingInputCalls, want 1 (not retried)", n)
		}

		// NOT_FOUND is no failure: an idempotent call is not retried on it.
		gw2up := up.empty.Load()
		if _, err := c.EmptyCall(callCtx(t), &testgrpc.Empty{}); status.Code(err) != codes.NotFound {
			t.Fatalf("EmptyCall: %v", err)
		}
		if n := up.empty.Load() - gw2up; n != 1 {
			t.Errorf("EmptyCall reached the upstream %d times, want 1", n)
		}
	})
}

func TestGRPCRejectionsAreGRPCAnswers(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		t.Run("timeout", func(t *testing.T) {
			up := startGRPCUpstream(t)
			_, c := grpcGateway(t, engine, up, `    policies: {timeout: 1s}`)
			done := make(chan *status.Status, 1)
			go func() {
				_, err := c.UnaryCall(callCtx(t), &testgrpc.SimpleRequest{Payload: payload([]byte("block"))})
				done <- status.Convert(err)
			}()
			<-up.blocked
			// The route's timeout, shorter than the client's, is the
			// attempt's deadline, and the upstream was told so.
			if d := <-up.deadline; d <= 0 || d > time.Second {
				t.Errorf("the upstream's deadline is %v away, want at most the route's 1s", d)
			}
			// (The upstream, told the deadline, may answer it first.)
			if st := <-done; st.Code() != codes.DeadlineExceeded {
				t.Errorf("a call past the route's timeout: %v, want DEADLINE_EXCEEDED", st)
			}
		})
		t.Run("overload", func(t *testing.T) {
			up := startGRPCUpstream(t)
			_, c := grpcGateway(t, engine, up, `    policies: {concurrency: {max: 1}}`)
			ctx, cancel := context.WithCancel(callCtx(t))
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload([]byte("block"))})
			}()
			<-up.blocked
			st, tr := unary(t, c, "second")
			if st.Code() != codes.Unavailable || len(tr.Get("grpc-retry-pushback-ms")) != 1 {
				t.Errorf("a call over the concurrency limit: %v %v, want UNAVAILABLE with a pushback", st, tr)
			}
			cancel()
			<-done
		})
		t.Run("unreachable", func(t *testing.T) {
			gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: grpc, upstream: up}
`, engine, closedAddr(t)))
			c := grpcClient(t, gw.Addr)
			if st, _ := unary(t, c, "x"); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "upstream") {
				t.Errorf("a call to a closed port: %v, want UNAVAILABLE from the gateway", st)
			}
		})
	})
}

// TestGRPCOverTLS makes calls through the TLS listener (HTTP/2 by ALPN):
// a unary call and a bidi stream pass, with their trailers.
func TestGRPCOverTLS(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		up := startGRPCUpstream(t)
		gw := startGateway(t, parseConfig(t, tlsGatewayConfig, engine, certList(ca.Server("localhost", "127.0.0.1")), "http://"+up.addr, ""))
		c := grpcClient(t, serveTLS(t, gw), credentials.NewTLS(&tls.Config{RootCAs: ca.Pool}))
		if st, tr := unary(t, c, "over tls"); st.Code() != codes.OK || len(tr.Get("x-trailer")) != 1 {
			t.Fatalf("UnaryCall: %v %v", st, tr)
		}
		s, err := c.FullDuplexCall(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			b := []byte(strings.Repeat("b", i*1000))
			if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload(b)}); err != nil {
				t.Fatal(err)
			}
			if m, err := s.Recv(); err != nil || len(m.GetPayload().GetBody()) != len(b) {
				t.Fatalf("answer %d: %v", i, err)
			}
		}
		s.CloseSend()
		if _, err := s.Recv(); err != io.EOF {
			t.Fatalf("after CloseSend: %v", err)
		}
	})
}

// TestGRPCStreamOutlivesReadTimeout keeps a bidi stream going longer than
// server.read_timeout, which bounds reading an HTTP request whole: a gRPC
// call's request is bounded by the call's own deadline instead.
func TestGRPCStreamOutlivesReadTimeout(t *testing.T) {
	up := startGRPCUpstream(t)
	gw := startGateway(t, parseConfig(t, `
server: {engine: goroutine, read_timeout: 200ms}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: grpc, upstream: up}
`, up.addr))
	c := grpcClient(t, gw.Addr)
	s, err := c.FullDuplexCall(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 0; time.Since(start) < 600*time.Millisecond; i++ { // three read timeouts at least
		if i > 1000 {
			t.Fatal("too many rounds")
		}
		if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload([]byte("tick"))}); err != nil {
			t.Fatalf("send %d after %v: %v", i, time.Since(start), err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatalf("answer %d after %v: %v", i, time.Since(start), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.CloseSend()
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %v", err)
	}
}

// TestGRPCRouteRulesAndTrustedProxy makes a call from a trusted proxy on a
// route with header rules: the upstream sees the rules' and the proxy's
// headers, the client the response rule's.
func TestGRPCRouteRulesAndTrustedProxy(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		gw := startGateway(t, parseConfig(t, `
trusted_proxies: [127.0.0.1/32]
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - name: grpc
    upstream: up
    headers:
      request: {set: {X-Env: prod}, remove: [X-Secret]}
      response: {set: {X-Served-By: sluice}}
`, engine, up.addr))
		c := grpcClient(t, gw.Addr)
		ctx := metadata.AppendToOutgoingContext(callCtx(t), "x-secret", "s", "x-forwarded-proto", "https", "x-forwarded-host", "example.com")
		var hdr metadata.MD
		if _, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload([]byte("x"))}, grpc.Header(&hdr)); err != nil {
			t.Fatal(err)
		}
		if got := hdr.Get("x-served-by"); len(got) != 1 || got[0] != "sluice" {
			t.Errorf("x-served-by = %q, want the response rule's [sluice]", got)
		}
		md := <-up.md
		for name, want := range map[string]string{"x-env": "prod", "x-secret": "", "x-forwarded-proto": "https",
			"x-forwarded-host": "example.com", "x-forwarded-for": "127.0.0.1"} {
			if got := strings.Join(md.Get(name), ","); got != want {
				t.Errorf("the upstream got %s %q, want %q", name, got, want)
			}
		}
	})
}
