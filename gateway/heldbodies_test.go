package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/sluicehq/sluice/clock"
)

// retryGateway starts a gateway on engine, with the settings in server
// added to its server section (as serverGateway takes them), one
// upstream, "up", whose one target is at the URL target, and one route
// to it, named name, with the YAML lines of extra (indented as a
// route's fields; "" for none) and a retry policy of two attempts whose
// backoff the gateway's fake clock, pumped, lets pass at once.
func retryGateway(t *testing.T, engine, server, target, name, extra string) *testGateway {
	t.Helper()
	if server != "" {
		server = ", " + server
	}
	fc := clock.NewFake(time.Time{})
	gw := startGatewayClock(t, parseConfig(t, `
server: {engine: %s%s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: %s
    upstream: up
%s    policies:
      retry: {attempts: 2, backoff: {initial: 1ns, max: 1ns, jitter: none}}
`, engine, server, target, name, extra), fc)
	pumpClock(t, fc, time.Nanosecond)
	return gw
}

// failFirstUpstream starts an upstream that answers 503 to the first
// request for each path and 200 to the next, and 400 to a request whose
// body is not patternBody of its Content-Length.
func failFirstUpstream(t *testing.T) *upstream {
	var mu sync.Mutex
	tried := map[string]bool{}
	return startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !bytes.Equal(b, patternBody(int(r.ContentLength))) {
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
}

// patternBody is a body of n bytes (a multiple of 16).
func patternBody(n int) []byte { return bytes.Repeat([]byte("0123456789abcdef"), n/16) }

// heldBytes returns the gateway's sluice_held_body_bytes.
func heldBytes(t *testing.T, gw *testGateway) float64 {
	t.Helper()
	v, _ := seriesValue(t, gw, "sluice_held_body_bytes")
	return v
}

// checkOverflows checks that the gateway counted overflows overflows of
// its held bodies (sluice_held_body_overflows_total) and holds no byte.
func checkOverflows(t *testing.T, gw *testGateway, what string, overflows float64) {
	t.Helper()
	n, _ := seriesValue(t, gw, "sluice_held_body_overflows_total")
	if held := heldBytes(t, gw); n != overflows || held != 0 {
		t.Errorf("%s: %v overflows and %v bytes held, want %v and none", what, n, held, overflows)
	}
}

// startTrickle sends with c a PUT to url that announces a body of n
// bytes and sends the first of them (patternBody), then nothing more
// until the function it returns (also called at the test's end) ends the
// request.
func startTrickle(t *testing.T, c *http.Client, url string, n, first int) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	stop := sync.OnceFunc(func() {
		pw.CloseWithError(errors.New("the trickle is over"))
		cancel()
		<-done
	})
	t.Cleanup(stop)
	if _, err := pw.Write(patternBody(first)); err != nil {
		t.Fatal(err)
	}
	return stop
}

// TestHeldBodiesBound sends PUTs with a 96-byte body over h2c to a
// retrying route whose target answers each body's first attempt 503:
// with server.max_held_body_bytes 64 the body is not held (it streams,
// the request is not retried: 503) and the overflow is counted; with the
// default it is held and retried (200). (Bodies of up to 1 MiB were held
// on every stream of every connection, with no bound across the gateway;
// on the loops' HTTP/2, bodies of up to 64 KiB outside the bound.)
func TestHeldBodiesBound(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := failFirstUpstream(t)
		c := protoClient(t, "h2c", nil, "")
		for _, tc := range []struct {
			held      string
			want      int
			overflows float64
		}{{"max_held_body_bytes: 64", http.StatusServiceUnavailable, 1}, {"", http.StatusOK, 0}} {
			gw := retryGateway(t, engine, tc.held, up.URL, "r", "")
			if res := do(t, c, http.MethodPut, gw.URL+"/put/"+fmt.Sprint(tc.overflows), nil, bytes.NewReader(patternBody(96))); res.Code != tc.want {
				t.Errorf("held %q: %d, want %d", tc.held, res.Code, tc.want)
			}
			checkOverflows(t, gw, "held "+tc.held, tc.overflows)
		}
	})
}

// TestHeldBodiesBoundGRPC makes a unary call, named idempotent on a
// retrying route, whose first attempt fails UNAVAILABLE: with
// server.max_held_body_bytes 4 its request is not held (it streams once,
// and the client gets the UNAVAILABLE), and the overflow is counted; with
// the default it is held and retried (OK), and so it is with a bound under
// the 16 KiB first buffer of a body of unknown length (8 KiB: the first
// buffer takes the bound at most). (A call's request was held, up to 1
// MiB, with no bound across the gateway; under 16 KiB, none ever was.)
func TestHeldBodiesBoundGRPC(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		for _, tc := range []struct {
			held      string
			want      codes.Code
			overflows float64
		}{{"max_held_body_bytes: 4", codes.Unavailable, 1}, {"", codes.OK, 0}, {"max_held_body_bytes: 8192", codes.OK, 0}} {
			gw := retryGateway(t, engine, tc.held, "http://"+up.addr, "grpc", "    grpc: {idempotent: [/grpc.testing.TestService/UnaryCall]}\n")
			up.failFirst.Store(1)
			if st, _ := unary(t, grpcClient(t, gw.Addr), "retried"); st.Code() != tc.want {
				t.Errorf("held %q: %v, want %v", tc.held, st, tc.want)
			}
			checkOverflows(t, gw, "held "+tc.held, tc.overflows)
		}
	})
}

// TestHeldBodiesCountArrivals, on every HTTP/2 engine and over HTTP/1.1,
// with server.max_held_body_bytes 256 KiB: a client announces a body of
// the whole 256 KiB and sends 9 KiB of it (fasthttp reads the first 8 KiB
// of an HTTP/1.1 body before the gateway sees the request); held counts
// the 16 KiB its buffer holds, not the 256 KiB, so that a 100 KiB body
// (past the 64 KiB the loops hold themselves) is still held and retried
// (200). The bound still holds: a 256 KiB body has no room beside the
// first buffer, and streams once (the bytes read before it had no room,
// then the rest: the target checks them), not retried (503). (A body was
// counted at its announced length before any of it came: the trickle
// took the whole bound, and the 100 KiB body was not retried.)
func TestHeldBodiesCountArrivals(t *testing.T) {
	const budget = 256 << 10
	forH2Engines(t, func(t *testing.T, engine string) {
		for _, proto := range []string{"h1", "h2c"} {
			if proto == "h1" && h2LoopsOff {
				continue // HTTP/1.1 is served as in the loop round
			}
			t.Run(proto, func(t *testing.T) {
				gw := retryGateway(t, engine, "max_held_body_bytes: 262144", failFirstUpstream(t).URL, "r", "")
				c := protoClient(t, proto, nil, "")
				stop := startTrickle(t, c, gw.URL+"/trickle", budget, 9<<10)
				eventually(t, "the trickle's body held", func() bool { return heldBytes(t, gw) != 0 })
				if got := heldBytes(t, gw); got != 16<<10 {
					t.Errorf("with 9 KiB of 256 KiB come, %v bytes held, want 16 KiB", got)
				}

				for _, tc := range []struct {
					path string
					n    int
					want int
				}{{"/held", 100 << 10, http.StatusOK}, {"/bound", budget, http.StatusServiceUnavailable}} {
					if res := do(t, c, http.MethodPut, gw.URL+tc.path, nil, bytes.NewReader(patternBody(tc.n))); res.Code != tc.want {
						t.Errorf("%s, %d bytes: %d %q, want %d", tc.path, tc.n, res.Code, res.Body, tc.want)
					}
				}
				stop()
				eventually(t, "the trickle's buffer given back", func() bool { return heldBytes(t, gw) == 0 })
				checkOverflows(t, gw, "at the end", 1)
			})
		}
	})
}

// TestHeldBodiesCountStreamedHead, on every HTTP/2 engine and over
// HTTP/1.1, with server.max_held_body_bytes 48 KiB and a concurrency
// limit of one slot and a queue: a client announces a body of 1 MiB and
// sends 40 KiB of it; its buffer grows to 32 KiB, has no room to grow to
// 64 KiB, and the body streams, the 32 KiB read first, then the rest.
// While the request waits in the queue (another holds the slot) it keeps
// the 32 KiB, and held counts them (sluice_held_body_bytes 32 KiB); once
// they are sent upstream they are let go, and no longer counted, though
// the rest still streams. (Their count was given back as the body began
// to stream, while the request kept them until it ended: each such
// request kept up to 512 KiB that the bound did not count, as many as
// the clients had streams.)
func TestHeldBodiesCountStreamedHead(t *testing.T) {
	const sent = 40 << 10
	forH2Engines(t, func(t *testing.T, engine string) {
		for _, proto := range []string{"h1", "h2c"} {
			if proto == "h1" && h2LoopsOff {
				continue // HTTP/1.1 is served as in the loop round
			}
			t.Run(proto, func(t *testing.T) {
				var got atomic.Int64
				arrived, release := make(chan struct{}), make(chan struct{})
				free := sync.OnceFunc(func() { close(release) })
				up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/block" {
						close(arrived)
						select {
						case <-release:
						case <-r.Context().Done():
						}
						return
					}
					buf := make([]byte, 4<<10)
					for {
						n, err := r.Body.Read(buf)
						got.Add(int64(n))
						if err != nil {
							return
						}
					}
				})
				gw := startGateway(t, parseConfig(t, `
server: {engine: %s, max_held_body_bytes: 49152}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: r, upstream: up, policies: {concurrency: {max: 1, queue: 1}}}
`, engine, up.URL))
				c := protoClient(t, proto, nil, "")
				blocked := make(chan result, 1)
				go func() { blocked <- do(t, c, http.MethodGet, gw.URL+"/block", nil, nil) }()
				awaitClosed(t, arrived, "the request that holds the slot")

				stopTrickle := startTrickle(t, c, gw.URL+"/trickle", 1<<20, sent)
				stop := sync.OnceFunc(func() {
					free()
					stopTrickle()
					<-blocked
				})
				defer stop()
				eventually(t, "the trickle queued", func() bool { return gw.routeStatus(t, "r").ConcurrencyQueued == 1 })
				if held := heldBytes(t, gw); held != 32<<10 {
					t.Errorf("while the body waits in the queue, %v bytes held, want its 32 KiB buffer", held)
				}
				free()
				eventually(t, "the bytes sent streamed to the target", func() bool { return got.Load() == sent })
				eventually(t, "the buffer given back once sent", func() bool { return heldBytes(t, gw) == 0 })
				stop()
				checkOverflows(t, gw, "at the end", 1)
			})
		}
	})
}

// TestHeldBodiesGRPCCountsItsLength makes, on a retrying route with
// server.max_held_body_bytes 24 KiB, a unary call that the target holds
// open, then, beside it, one whose first attempt fails UNAVAILABLE: the
// first call's request, of a few bytes, is held (and counted) at its
// length, so the second one's is held too and retried (OK), no overflow.
// (A request of unknown length is read into a first buffer of 16 KiB,
// which the call kept, and held counted, to its end: the second call had
// no room, streamed once, and failed; each held call took 16 KiB of the
// bound however short its request.)
func TestHeldBodiesGRPCCountsItsLength(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startGRPCUpstream(t)
		gw := retryGateway(t, engine, "max_held_body_bytes: 24576", "http://"+up.addr, "grpc", "    grpc: {idempotent: [/grpc.testing.TestService/UnaryCall]}\n")
		c := grpcClient(t, gw.Addr)
		ctx, cancel := context.WithCancel(callCtx(t))
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload([]byte("block"))})
		}()
		defer func() { cancel(); <-done }()
		select {
		case <-up.blocked:
		case <-time.After(waitLimit):
			t.Fatal("the first call did not reach the target")
		}
		if held := heldBytes(t, gw); held == 0 || held > 64 {
			t.Errorf("a call of a few bytes in flight: %v bytes held, want its length", held)
		}
		up.failFirst.Store(1)
		if st, _ := unary(t, c, "retried"); st.Code() != codes.OK {
			t.Errorf("the second call: %v, want OK (held, retried)", st)
		}
		cancel()
		<-done
		eventually(t, "the first call's request given back", func() bool { return heldBytes(t, gw) == 0 })
		checkOverflows(t, gw, "at the end", 0)
	})
}
