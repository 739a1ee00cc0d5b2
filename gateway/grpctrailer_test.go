package gateway_test

import (
	"bytes"
	"encoding/hex"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"
)

// TestGRPCRequestTrailers sends gRPC calls whose request ends with
// trailers (HTTP/2 allows them; gRPC's protocol has none), streamed and
// held whole (a method that may be retried): the upstream gets the
// request's message, without the trailers.
func TestGRPCRequestTrailers(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		checkLeaks(t)
		up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("X-Got-Trailer", r.Trailer.Get("X-Checksum"))
			w.Header().Set("X-Got-Body", hex.EncodeToString(body))
			w.Header().Set("Trailer", "Grpc-Status")
			if err != nil {
				w.Header().Set("X-Got-Body", err.Error())
			}
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte{0, 0, 0, 0, 0})
			w.Header().Set("Grpc-Status", "0")
		}))
		up.Config.ErrorLog = log.New(io.Discard, "", 0)
		up.Config.Protocols = new(http.Protocols)
		up.Config.Protocols.SetUnencryptedHTTP2(true)
		up.Start()
		t.Cleanup(up.Close)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: grpc
    upstream: up
    grpc: {idempotent: [/svc.S/Held]}
    policies: {retry: {}}
`, engine, up.URL))
		c := protoClient(t, "h2c", nil, "")
		msg := []byte("\x00\x00\x00\x00\x02hi")
		for _, method := range []string{"Streamed", "Held"} {
			req, err := http.NewRequest(http.MethodPost, gw.URL+"/svc.S/"+method, io.NopCloser(bytes.NewReader(msg)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Te", "trailers")
			req.Trailer = http.Header{"X-Checksum": {"c0ffee"}}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if got := resp.Header.Get("X-Got-Trailer"); got != "" || resp.Header.Get("X-Got-Body") != hex.EncodeToString(msg) || resp.Trailer.Get("Grpc-Status") != "0" {
				t.Errorf("%s: the upstream got trailer %q and body %q (status %q), want the message alone",
					method, got, resp.Header.Get("X-Got-Body"), resp.Trailer.Get("Grpc-Status"))
			}
		}
	})
}

// TestGRPCRequestTrailersSpareOtherCalls sends, to a grpc-go upstream, a
// call whose request ends with trailers while another client's stream is
// open on the same upstream connection: the other stream goes on, and
// the call is answered. (gRPC requests have no trailers: grpc-go answers
// a trailing HEADERS frame with GOAWAY PROTOCOL_ERROR and closes the
// connection, so a client that sent one cut every call on it, and could
// trip the route's breaker, while they were passed on.)
func TestGRPCRequestTrailersSpareOtherCalls(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		gw, victim := grpcGateway(t, engine, up, "")
		s, err := victim.FullDuplexCall(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		echo := func(what string) {
			t.Helper()
			if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload([]byte(what))}); err != nil {
				t.Fatalf("%s: send: %v", what, err)
			}
			if _, err := s.Recv(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		echo("before")
		msg, err := proto.Marshal(&testgrpc.SimpleRequest{Payload: payload([]byte("x"))})
		if err != nil {
			t.Fatal(err)
		}
		frame := append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)
		req, err := http.NewRequest(http.MethodPost, gw.URL+"/grpc.testing.TestService/UnaryCall", io.NopCloser(bytes.NewReader(frame)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		req.Trailer = http.Header{"X-Checksum": {"c0ffee"}}
		resp, err := protoClient(t, "h2c", nil, "").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if st := resp.Trailer.Get("Grpc-Status") + resp.Header.Get("Grpc-Status"); st != "0" {
			t.Errorf("the call with trailers: grpc-status %q (%s), want 0", st, resp.Trailer.Get("Grpc-Message")+resp.Header.Get("Grpc-Message"))
		}
		echo("after")
		_ = s.CloseSend()
	})
}
