package gateway_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// connTrailerUpstream is a grpcUpstream whose UnaryCall ends with
// connection-specific trailer fields beside x-trailer.
type connTrailerUpstream struct{ *grpcUpstream }

func (u connTrailerUpstream) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	_ = grpc.SetTrailer(ctx, metadata.Pairs("connection", "close", "keep-alive", "timeout=5",
		"proxy-connection", "close", "transfer-encoding", "chunked", "upgrade", "websocket"))
	return u.grpcUpstream.UnaryCall(ctx, req)
}

// TestGRPCAnswerTrailersDropConnectionFields has an upstream end a call
// with connection-specific trailer fields (Connection, Keep-Alive,
// Proxy-Connection, Transfer-Encoding, Upgrade): RFC 9113 section 8.2.2
// makes an HTTP/2 message with them malformed, so the client gets the
// call's other trailers without them, on every HTTP/2 engine.
func TestGRPCAnswerTrailersDropConnectionFields(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		base := startGRPCUpstream(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer()
		testgrpc.RegisterTestServiceServer(s, connTrailerUpstream{base})
		go s.Serve(ln)
		t.Cleanup(s.Stop)
		_, c := grpcGateway(t, engine, &grpcUpstream{addr: ln.Addr().String()}, "")
		st, tr := unary(t, c, "hello")
		if st.Err() != nil {
			t.Fatalf("UnaryCall: %v", st.Err())
		}
		if got := tr.Get("x-trailer"); len(got) != 1 || got[0] != "kept" {
			t.Errorf("trailer x-trailer = %q, want [kept]", got)
		}
		for _, k := range []string{"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"} {
			if v := tr.Get(k); v != nil {
				t.Errorf("the client got the trailer %s: %q", k, v)
			}
		}
	})
}
