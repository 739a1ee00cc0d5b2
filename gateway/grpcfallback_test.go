package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestGRPCStaticFallback makes gRPC calls to routes with a static
// fallback whose upstream fails: the fallback answers in gRPC, with its
// grpc_status (UNAVAILABLE by default) and grpc_message, or with OK and a
// message (the body, protobuf bytes, when its content type is gRPC's;
// else an empty one). It replaces a failure of the gateway's (a closed
// port) and the upstream's failing status, held (a call that may be
// retried) or Trailers-Only; an answer that is no failure (NOT_FOUND)
// passes. (A static fallback never answered a gRPC call.)
func TestGRPCStaticFallback(t *testing.T) {
	cached, err := proto.Marshal(&testgrpc.SimpleResponse{Payload: payload([]byte("cached"))})
	if err != nil {
		t.Fatal(err)
	}
	var esc strings.Builder
	for _, b := range cached {
		fmt.Fprintf(&esc, `\x%02x`, b)
	}
	forEngines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		up.fail.Store(uint32(codes.Unavailable))
		closed := closedAddr(t)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
  closed: {targets: ["http://%s"]}
routes:
  - name: message
    match: {headers: {x-route: message}}
    upstream: up
    policies: {fallback: {grpc_status: OK, content_type: application/grpc, body: "%s"}}
  - name: empty
    match: {headers: {x-route: empty}}
    upstream: up
    policies: {fallback: {grpc_status: "0", body: '{"not": "protobuf"}'}}
  - name: closed
    match: {headers: {x-route: closed}}
    upstream: closed
    policies: {fallback: {}}
  - name: held
    match: {headers: {x-route: held}}
    upstream: up
    grpc: {idempotent: ["/grpc.testing.TestService/*"]}
    policies: {retry: {attempts: 1}, fallback: {grpc_message: degraded}}
  - name: plain
    upstream: up
    policies: {fallback: {grpc_status: UNAVAILABLE, grpc_message: "dégradé"}}
`, engine, up.addr, closed, esc.String()))
		c := grpcClient(t, gw.Addr)
		call := func(route string) (*testgrpc.SimpleResponse, *status.Status) {
			ctx := metadataCtx(t, "x-route", route)
			resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload([]byte("x"))})
			return resp, status.Convert(err)
		}
		if resp, st := call("message"); st.Code() != codes.OK || string(resp.GetPayload().GetBody()) != "cached" {
			t.Errorf("grpc_status OK with a gRPC body: %v %v, want OK and the body's message", st, resp)
		}
		if resp, st := call("empty"); st.Code() != codes.OK || resp.GetPayload() != nil {
			t.Errorf("grpc_status 0 with a JSON body: %v %v, want OK and an empty message", st, resp)
		}
		if _, st := call("closed"); st.Code() != codes.Unavailable || st.Message() != "upstream_unreachable" {
			t.Errorf("the default static answer to an unreachable upstream: %v, want UNAVAILABLE naming the reason", st)
		}
		if _, st := call("held"); st.Code() != codes.Unavailable || st.Message() != "degraded" {
			t.Errorf("a held failing answer: %v, want the fallback's UNAVAILABLE degraded", st)
		}
		if _, st := call("plain"); st.Code() != codes.Unavailable || st.Message() != "dégradé" {
			t.Errorf("a Trailers-Only failing answer: %v, want the fallback's UNAVAILABLE dégradé", st)
		}
		// Not a failure: the upstream's answer passes.
		if _, err := c.EmptyCall(metadataCtx(t, "x-route", "plain"), &testgrpc.Empty{}); status.Code(err) != codes.NotFound {
			t.Errorf("EmptyCall: %v, want the upstream's NOT_FOUND", err)
		}
		if n := up.unary.Load(); n != 4 {
			t.Errorf("the upstream got %d UnaryCalls, want 4 (one per route but the closed one)", n)
		}
	})
}

// TestGRPCStaticFallbackIsGRPCOnly gives routes a fallback of another
// upstream (unreachable) and grpc_message alone: a gRPC call gets the
// static answer in gRPC, and an HTTP request, which no level answers,
// the route's own answer, its upstream's 500. (grpc_status and
// grpc_message made the static level HTTP's too: the HTTP request got its
// 503.)
func TestGRPCStaticFallbackIsGRPCOnly(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		up.fail.Store(uint32(codes.Unavailable))
		web := startUpstream(t, "web", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, "web failed")
		})
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
  web: {targets: ["%s"]}
  closed: {targets: ["http://%s"]}
routes:
  - name: web
    match: {path_prefix: /web}
    upstream: web
    policies: {fallback: {upstream: closed, grpc_message: degraded}}
  - name: grpc
    upstream: up
    policies: {fallback: {upstream: closed, grpc_message: degraded}}
`, engine, up.addr, web.URL, closedAddr(t)))
		if res := do(t, newClient(t), "GET", gw.URL+"/web", nil, nil); res.Code != 500 || res.Body != "web failed" {
			t.Errorf("HTTP: %d %q, want the upstream's 500", res.Code, res.Body)
		}
		_, err := grpcClient(t, gw.Addr).UnaryCall(callCtx(t), &testgrpc.SimpleRequest{Payload: payload([]byte("x"))})
		if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != "degraded" {
			t.Errorf("gRPC: %v, want the fallback's UNAVAILABLE degraded", st)
		}
	})
}

// metadataCtx is callCtx with the request metadata kv (name, value, ...).
func metadataCtx(t *testing.T, kv ...string) context.Context {
	return metadata.AppendToOutgoingContext(callCtx(t), kv...)
}
