package gateway_test

import (
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestRateLimitKeyAuthorization checks, on both engines over HTTP/1.1, h2c
// and gRPC, that key: "header:Authorization" keys Digest credentials,
// whose parameters are comma-separated, by the whole value: Authorization
// is no list (RFC 9110 section 11.6.2), so a comma in it is not a second
// value. Repeated lines are still refused. (Every Digest client was
// refused 400 ambiguous_key.)
func TestRateLimitKeyAuthorization(t *testing.T) {
	alice := `Digest username="alice", realm="r", nonce="1", uri="/", response="x"`
	bob := `Digest username="bob", realm="r", nonce="1", uri="/", response="y"`
	forEngines(t, func(t *testing.T, engine string) {
		for _, proto := range []string{"h1", "h2c"} {
			t.Run(proto, func(t *testing.T) {
				up := startUpstream(t, "up", nil)
				gw := routedGateway(t, engine, up, `
  - name: keyed
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: "header:Authorization"}
`)
				c := protoClient(t, proto, nil, "")
				for i, s := range []struct {
					header http.Header
					code   int
				}{
					{http.Header{"Authorization": {alice}}, 200},
					{http.Header{"Authorization": {alice}}, 429},
					{http.Header{"Authorization": {" " + alice + " "}}, 429},
					{http.Header{"Authorization": {bob}}, 200},
					{http.Header{"Authorization": {bob, alice}}, 400},
				} {
					if r := do(t, c, "GET", gw.URL+"/", s.header, nil); r.Code != s.code {
						t.Errorf("step %d: status %d %q, want %d", i, r.Code, r.Body, s.code)
					}
				}
			})
		}
		t.Run("grpc", func(t *testing.T) {
			up := startGRPCUpstream(t)
			_, c := grpcGateway(t, engine, up, `    policies: {rate_limit: {limit: 1, period: 1h, key: "header:Authorization"}}`)
			ctx := metadata.AppendToOutgoingContext(callCtx(t), "authorization", alice)
			for i, want := range []codes.Code{codes.OK, codes.ResourceExhausted} {
				_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload([]byte("x"))})
				if st := status.Convert(err); st.Code() != want {
					t.Errorf("call %d: %v, want %v", i, st, want)
				}
			}
		})
	})
}
