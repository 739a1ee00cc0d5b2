package gateway_test

import (
	"testing"

	"google.golang.org/grpc/metadata"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/sluicehq/sluice/internal/tracing/tracingtest"
)

// TestTraceOfGRPCCall checks a gRPC call through the HTTP/2 engine: the
// client's request id and sampled trace context are followed, the
// upstream gets the id and the attempt's span as parent, and the call is
// a server span with its attempt.
func TestTraceOfGRPCCall(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		rcv := tracingtest.Start(t)
		up := startGRPCUpstream(t)
		gw, logs := startObserved(t, parseConfig(t, `
server: {engine: %s}
tracing: {endpoint: "%s", sample: 0}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: grpc, upstream: up}
`, engine, rcv.URL, up.addr))
		c := grpcClient(t, gw.Addr)
		ctx := metadata.AppendToOutgoingContext(callCtx(t), "x-request-id", "grpc-1", "traceparent", "00-"+clientTrace+"-"+clientSpan+"-01")
		if _, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload([]byte("hi"))}); err != nil {
			t.Fatal(err)
		}
		md := <-up.md
		flushTraces(t, gw, logs, 1)
		servers, attempts := spansBy(rcv.WaitFor(t, 2, waitLimit))
		server := servers["grpc-1"]
		as := attempts[server.SpanID]
		if server.TraceID != clientTrace || server.ParentSpanID != clientSpan || server.Attrs["sluice.route"] != "grpc" || len(as) != 1 {
			t.Fatalf("server span %+v with attempts %+v, want the client's child on route grpc, one attempt", server, as)
		}
		if ids := md.Get("x-request-id"); len(ids) != 1 || ids[0] != "grpc-1" {
			t.Errorf("upstream got x-request-id %q, want [grpc-1]", ids)
		}
		tps := md.Get("traceparent")
		if len(tps) != 1 {
			t.Fatalf("upstream got traceparent %q, want one", tps)
		}
		if traceID, spanID, flags := splitTraceparent(t, tps[0]); traceID != clientTrace || spanID != as[0].SpanID || flags != "01" {
			t.Errorf("upstream got traceparent %s, want trace %s, the attempt's span %s, sampled", tps[0], clientTrace, as[0].SpanID)
		}
	})
}
