package gateway_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice/clock"
)

// TestHeldBodiesBound sends PUTs with a 100-byte body over h2c to a
// retrying route whose target answers each body's first attempt 503:
// with server.max_held_body_bytes 64 the body is not held (it streams,
// the request is not retried: 503) and the overflow is counted; with the
// default it is held and retried (200). (Bodies of up to 1 MiB were held
// on every stream of every connection, with no bound across the gateway.)
func TestHeldBodiesBound(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		var n atomic.Int64
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			if len(b) != 100 {
				http.Error(w, "short body", http.StatusBadRequest)
				return
			}
			if n.Add(1)%2 == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		t.Cleanup(tr.CloseIdleConnections)
		for _, tc := range []struct {
			held string
			want int
		}{{", max_held_body_bytes: 64", http.StatusServiceUnavailable}, {"", http.StatusOK}} {
			// net/http's HTTP/2 server on the loop engine too: a body the
			// loops serve themselves (up to 64 KiB) is held in their own
			// buffer, outside server.max_held_body_bytes, and retried (a
			// gap still to close). The machine's clock: the loops wait for
			// the retry's 1ns on the gateway's clock, which a fake one
			// would hold.
			gw := startGatewayClock(t, parseConfig(t, `
server: {engine: %s%s, http2: {loops: false}}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: r, upstream: up, policies: {retry: {attempts: 2, backoff: {initial: 1ns, max: 1ns, jitter: none}}}}
`, engine, tc.held, up.URL), nil)
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+gw.Addr+"/put", strings.NewReader(strings.Repeat("x", 100)))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("held%q: %d, want %d", tc.held, resp.StatusCode, tc.want)
			}
			m := gw.metricsText(t)
			overflows := "sluice_held_body_overflows_total 0"
			if tc.held != "" {
				overflows = "sluice_held_body_overflows_total 1"
			}
			if !strings.Contains(m, overflows+"\n") || !strings.Contains(m, "sluice_held_body_bytes 0\n") {
				t.Errorf("held%q: metrics want %q and no byte held:\n%s", tc.held, overflows, grepLines(m, "sluice_held_body"))
			}
		}
	})
}

// TestHeldBodiesBoundGRPC makes a unary call, named idempotent on a
// retrying route, whose first attempt fails UNAVAILABLE: with
// server.max_held_body_bytes 4 its request is not held (it streams once,
// and the client gets the UNAVAILABLE), and the overflow is counted; with
// the default it is held and retried (OK). (A call's request was held,
// up to 1 MiB, with no bound across the gateway.)
func TestHeldBodiesBoundGRPC(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		for _, tc := range []struct {
			held string
			want codes.Code
		}{{", max_held_body_bytes: 4", codes.Unavailable}, {"", codes.OK}} {
			fc := clock.NewFake(time.Time{})
			gw := startGatewayClock(t, parseConfig(t, `
server: {engine: %s%s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - name: grpc
    upstream: up
    grpc: {idempotent: [/grpc.testing.TestService/UnaryCall]}
    policies:
      retry: {attempts: 2, backoff: {initial: 1ns, max: 1ns, jitter: none}}
`, engine, tc.held, up.addr), fc)
			pumpClock(t, fc, time.Nanosecond)
			up.failFirst.Store(1)
			if st, _ := unary(t, grpcClient(t, gw.Addr), "retried"); st.Code() != tc.want {
				t.Errorf("held%q: %v, want %v", tc.held, st, tc.want)
			}
			m := gw.metricsText(t)
			overflows := "sluice_held_body_overflows_total 0"
			if tc.held != "" {
				overflows = "sluice_held_body_overflows_total 1"
			}
			if !strings.Contains(m, overflows+"\n") || !strings.Contains(m, "sluice_held_body_bytes 0\n") {
				t.Errorf("held%q: metrics want %q and no byte held:\n%s", tc.held, overflows, grepLines(m, "sluice_held_body"))
			}
		}
	})
}
