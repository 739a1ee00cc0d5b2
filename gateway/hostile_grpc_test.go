package gateway_test

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// Hostile input on gRPC calls: what a client can make the upstream
// receive, and what the gateway tells it.

// TestGRPCContentTypeKeepsMethod sends, over h2c, a GET whose
// Content-Type is gRPC's to a route that admits only GET: a gRPC call is
// a POST (the gRPC over HTTP/2 protocol), so this one is a plain request
// and reaches the upstream as the GET it is. (It was taken for a gRPC
// call and sent upstream as a POST with its body: a route's methods rule
// let a POST through.)
func TestGRPCContentTypeKeepsMethod(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startProtoUpstream(t, "h2c", nil, nil)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"], protocol: h2c}
routes:
  - {name: read-only, upstream: up, match: {methods: [GET]}}
`, engine, u.URL))
		c := protoClient(t, "h2c", nil, "")
		r := do(t, c, http.MethodGet, tg.URL+"/svc/Delete", http.Header{"Content-Type": {"application/grpc"}},
			strings.NewReader("\x00\x00\x00\x00\x02hi"))
		if r.Code != http.StatusOK || !strings.HasPrefix(r.Body, "HTTP/2.0 GET /svc/Delete") {
			t.Errorf("a GET with gRPC's content type: %d %q, want the upstream's answer to a GET", r.Code, r.Body)
		}
	})
}

// TestGRPCRequestBoundedByMaxBody makes gRPC calls whose request is
// longer than server.max_body_bytes: the upstream never gets one whole
// (the gateway cuts the request there, as for any request body), and the
// client gets RESOURCE_EXHAUSTED; a call within the bound passes. (A gRPC
// call's request was never bounded: any HTTP/2 client could stream past
// max_body_bytes with gRPC's Content-Type.)
func TestGRPCRequestBoundedByMaxBody(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, max_body_bytes: 4096}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: grpc, upstream: up}
`, engine, up.addr))
		c := grpcClient(t, gw.Addr)
		if st, _ := unary(t, c, strings.Repeat("x", 1000)); st.Code() != codes.OK {
			t.Fatalf("a call within max_body_bytes: %v", st)
		}
		if st, _ := unary(t, c, strings.Repeat("x", 64<<10)); st.Code() != codes.ResourceExhausted {
			t.Errorf("a unary call past max_body_bytes: %v, want RESOURCE_EXHAUSTED", st)
		}
		s, err := c.StreamingInputCall(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		for range 64 {
			if s.Send(&testgrpc.StreamingInputCallRequest{Payload: payload(make([]byte, 1024))}) != nil {
				break // the gateway ended the call
			}
		}
		if _, err := s.CloseAndRecv(); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("a client stream past max_body_bytes: %v, want RESOURCE_EXHAUSTED", err)
		}
		if n := up.unary.Load(); n != 1 {
			t.Errorf("the upstream answered %d unary calls, want only the one within the bound", n)
		}
	})
}

// TestGRPCErrorsNameNoUpstream makes gRPC calls the gateway fails: to a
// target that refuses connections, and to one that breaks its answer off.
// The grpc-message names the reason (as the JSON error body of other
// requests does), never the target's address or the transport's error
// text. (Both went to the client: the network's layout, told to anyone.)
func TestGRPCErrorsNameNoUpstream(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		breaks := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/grpc")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte{0, 0, 0, 0, 0}) // one empty message, then no trailers
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		}))
		breaks.Config.ErrorLog = log.New(io.Discard, "", 0)
		breaks.Config.Protocols = new(http.Protocols)
		breaks.Config.Protocols.SetUnencryptedHTTP2(true)
		checkLeaks(t)
		breaks.Start()
		t.Cleanup(breaks.Close)
		closed := closedAddr(t)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  closed: {targets: ["http://%s"]}
  breaks: {targets: ["%s"]}
routes:
  - {name: closed, upstream: closed, match: {path_prefix: /grpc.testing.TestService/UnaryCall}}
  - {name: breaks, upstream: breaks}
`, engine, closed, breaks.URL))
		c := grpcClient(t, gw.Addr)
		if st, _ := unary(t, c, "x"); st.Code() != codes.Unavailable || strings.Contains(st.Message(), "127.0.0.1") {
			t.Errorf("a call to a closed port: %v, want UNAVAILABLE naming no address", st)
		}
		_, err := c.EmptyCall(callCtx(t), &testgrpc.Empty{})
		if st := status.Convert(err); st.Code() != codes.Unavailable || strings.Contains(st.Message(), "127.0.0.1") {
			t.Errorf("a call whose answer broke off: %v, want UNAVAILABLE naming no address", st)
		}
	})
}
