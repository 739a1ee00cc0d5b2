package gateway_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
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
			gw := startGateway(t, parseConfig(t, `
server: {engine: %s%s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: r, upstream: up, policies: {retry: {attempts: 2, backoff: {initial: 1ns, max: 1ns, jitter: none}}}}
`, engine, tc.held, up.URL))
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

// TestHeldBodiesCountArrivals, on every HTTP/2 engine and over HTTP/1.1,
// with server.max_held_body_bytes 256 KiB: a client announces a body of
// the whole 256 KiB and sends 9 KiB of it (fasthttp reads the first 8 KiB
// of an HTTP/1.1 body before the gateway sees the request); held counts
// the 16 KiB its
// buffer holds, not the 256 KiB, so that a 100 KiB body (past the 64 KiB
// the loops hold themselves) is still held and retried (200). The bound
// still holds: a 256 KiB body has no room beside the first buffer, and
// streams once (the bytes read before it had no room, then the rest: the
// target checks them), not retried (503). (A body was counted at its
// announced length before any of it came: the trickle took the whole
// bound, and the 100 KiB body was not retried.)
func TestHeldBodiesCountArrivals(t *testing.T) {
	const budget = 256 << 10
	body := func(n int) []byte { return bytes.Repeat([]byte("0123456789abcdef"), n/16) }
	forH2Engines(t, func(t *testing.T, engine string) {
		for _, proto := range []string{"h1", "h2c"} {
			if proto == "h1" && h2LoopsOn {
				continue // HTTP/1.1 is served as in the loop round
			}
			t.Run(proto, func(t *testing.T) {
				var mu sync.Mutex
				tried := map[string]bool{}
				up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					if !bytes.Equal(b, body(int(r.ContentLength))) {
						http.Error(w, "not the body sent", http.StatusBadRequest)
						return
					}
					mu.Lock()
					again := tried[r.URL.Path]
					tried[r.URL.Path] = true
					mu.Unlock()
					if !again {
						w.WriteHeader(http.StatusServiceUnavailable)
						return
					}
					_, _ = w.Write([]byte("ok"))
				})
				fc := clock.NewFake(time.Time{})
				gw := startGatewayClock(t, parseConfig(t, `
server: {engine: %s, max_held_body_bytes: %d}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: r, upstream: up, policies: {retry: {attempts: 2, backoff: {initial: 1ns, max: 1ns, jitter: none}}}}
`, engine, budget, up.URL), fc)
				pumpClock(t, fc, time.Nanosecond)
				c := protoClient(t, proto, nil, "")
				held := func() float64 {
					v, _ := seriesValue(t, gw, "sluice_held_body_bytes")
					return v
				}

				ctx, cancel := context.WithCancel(context.Background())
				pr, pw := io.Pipe()
				trickle, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+gw.Addr+"/trickle", pr)
				if err != nil {
					t.Fatal(err)
				}
				trickle.ContentLength = budget
				done := make(chan struct{})
				go func() {
					defer close(done)
					if resp, err := c.Do(trickle); err == nil {
						resp.Body.Close()
					}
				}()
				stop := sync.OnceFunc(func() {
					pw.CloseWithError(errors.New("the trickle is over"))
					cancel()
					<-done
				})
				defer stop()
				if _, err := pw.Write(body(9 << 10)); err != nil {
					t.Fatal(err)
				}
				eventually(t, "the trickle's body held", func() bool { return held() != 0 })
				if got := held(); got != 16<<10 {
					t.Errorf("with 9 KiB of 256 KiB come, %v bytes held, want 16 KiB", got)
				}

				for _, tc := range []struct {
					path string
					n    int
					want int
				}{{"/held", 100 << 10, http.StatusOK}, {"/bound", budget, http.StatusServiceUnavailable}} {
					if res := do(t, c, http.MethodPut, "http://"+gw.Addr+tc.path, nil, bytes.NewReader(body(tc.n))); res.Code != tc.want {
						t.Errorf("%s, %d bytes: %d %q, want %d", tc.path, tc.n, res.Code, res.Body, tc.want)
					}
				}
				if m := gw.metricsText(t); !strings.Contains(m, "sluice_held_body_overflows_total 1\n") {
					t.Errorf("metrics want one overflow:\n%s", grepLines(m, "sluice_held_body"))
				}
				stop()
				eventually(t, "the trickle's buffer given back", func() bool { return held() == 0 })
			})
		}
	})
}
