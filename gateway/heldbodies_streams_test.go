package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// heldBody is the length of the bodies the tests of held streams send:
// one the loops serve themselves (up to 64 KiB).
const heldBody = 60 << 10

// slowUpstream starts an upstream that takes a request whose body is
// patternBody of its Content-Length (400 otherwise), counts it in arrived,
// and answers it once release is called (or its client leaves): 503 to
// the first request for each path, 200 to the next. A path under /fast/
// is answered 200 at once.
func slowUpstream(t *testing.T) (up *upstream, arrived *atomic.Int64, release func()) {
	arrived = new(atomic.Int64)
	released := make(chan struct{})
	release = sync.OnceFunc(func() { close(released) })
	t.Cleanup(release)
	var mu sync.Mutex
	tried := map[string]bool{}
	up = startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !bytes.Equal(b, patternBody(int(r.ContentLength))) {
			http.Error(w, "not the body sent", http.StatusBadRequest)
			return
		}
		if len(r.URL.Path) > 6 && r.URL.Path[:6] == "/fast/" {
			return
		}
		arrived.Add(1)
		select {
		case <-released:
		case <-r.Context().Done():
			return
		}
		mu.Lock()
		again := tried[r.URL.Path]
		tried[r.URL.Path] = true
		mu.Unlock()
		if !again {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	return up, arrived, release
}

// TestHeldBodiesBoundStreams, on every HTTP/2 engine (h2c, one connection)
// and over HTTP/1.1 (a connection each), with server.max_held_body_bytes
// room for 4 bodies of 60 KiB: 8 requests, each with such a body, go
// one after the other to a retrying route whose target holds them. The 4
// first are held (sluice_held_body_bytes counts 4 bodies, never more than
// the bound); the others overflow, are sent once, and not retried. A
// request without a body is still served meanwhile. Once the target
// answers each first attempt 503, the held requests are retried (200),
// the others get the 503, and nothing stays held. (The loops kept their
// bodies, up to 64 KiB, outside the bound, and retried them all.)
func TestHeldBodiesBoundStreams(t *testing.T) {
	const n, room = 8, 4
	forH2Engines(t, func(t *testing.T, engine string) {
		for _, proto := range []string{"h1", "h2c"} {
			if proto == "h1" && h2LoopsOff {
				continue // HTTP/1.1 is served as in the loop round
			}
			t.Run(proto, func(t *testing.T) {
				up, arrived, release := slowUpstream(t)
				gw := retryGateway(t, engine, fmt.Sprintf("max_held_body_bytes: %d", room*heldBody), up.URL, "r", "")
				c := protoClient(t, proto, nil, "")
				codes := make([]int, n)
				var wg sync.WaitGroup
				defer wg.Wait()
				defer release()
				for i := range n {
					wg.Go(func() {
						codes[i] = do(t, c, http.MethodPut, fmt.Sprintf("%s/slow/%d", gw.URL, i), nil, bytes.NewReader(patternBody(heldBody))).Code
					})
					eventually(t, fmt.Sprintf("request %d upstream", i), func() bool { return arrived.Load() == int64(i+1) })
					if held := heldBytes(t, gw); held > room*heldBody {
						t.Errorf("with %d requests upstream, %v bytes held, past the bound of %d", i+1, held, room*heldBody)
					}
				}
				if held := heldBytes(t, gw); held != room*heldBody {
					t.Errorf("%v bytes held, want %d bodies of %d", held, room, heldBody)
				}
				if res := do(t, c, http.MethodGet, gw.URL+"/fast/get", nil, nil); res.Code != http.StatusOK {
					t.Errorf("a request beside the held ones: %d %q", res.Code, res.Body)
				}
				release()
				wg.Wait()
				for i, code := range codes {
					if want := map[bool]int{true: http.StatusOK, false: http.StatusServiceUnavailable}[i < room]; code != want {
						t.Errorf("request %d: %d, want %d", i, code, want)
					}
				}
				eventually(t, "the held bodies given back", func() bool { return heldBytes(t, gw) == 0 })
				checkOverflows(t, gw, "at the end", n-room)
			})
		}
	})
}

// TestHeldBodiesGivenBack, on every HTTP/2 engine (h2c) and over
// HTTP/1.1, sends requests with 60 KiB bodies, held for retries, over two
// connections to a target that holds them until they leave: once every
// body is held, the requests of one connection are cancelled (a reset
// stream, or a closed HTTP/1.1 connection), then the other connections
// are dropped; every held byte is given back.
func TestHeldBodiesGivenBack(t *testing.T) {
	const perConn = 3
	forH2Engines(t, func(t *testing.T, engine string) {
		for _, proto := range []string{"h1", "h2c"} {
			if proto == "h1" && h2LoopsOff {
				continue // HTTP/1.1 is served as in the loop round
			}
			t.Run(proto, func(t *testing.T) {
				up, arrived, _ := slowUpstream(t)
				gw := retryGateway(t, engine, "", up.URL, "r", "")
				var (
					mu    sync.Mutex
					conns []net.Conn
				)
				var wg sync.WaitGroup
				defer wg.Wait()
				var cancels []context.CancelFunc
				defer func() {
					for _, cancel := range cancels {
						cancel()
					}
				}()
				clients := make([]*http.Client, 2)
				for k := range clients {
					c := protoClient(t, proto, nil, "")
					var d net.Dialer
					c.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
						nc, err := d.DialContext(ctx, network, addr)
						if err == nil && k == 1 {
							mu.Lock()
							conns = append(conns, nc)
							mu.Unlock()
						}
						return nc, err
					}
					clients[k] = c
				}
				for i := range 2 * perConn {
					ctx, cancel := context.WithCancel(context.Background())
					cancels = append(cancels, cancel)
					req, err := http.NewRequestWithContext(ctx, http.MethodPut, fmt.Sprintf("%s/slow/%d", gw.URL, i), bytes.NewReader(patternBody(heldBody)))
					if err != nil {
						t.Fatal(err)
					}
					c := clients[i/perConn]
					wg.Go(func() {
						if resp, err := c.Do(req); err == nil {
							resp.Body.Close()
							t.Errorf("request %d answered %d, want it to leave first", i, resp.StatusCode)
						}
					})
					eventually(t, fmt.Sprintf("request %d upstream", i), func() bool { return arrived.Load() == int64(i+1) })
				}
				if held := heldBytes(t, gw); held != 2*perConn*heldBody {
					t.Fatalf("%v bytes held, want %d bodies of %d", held, 2*perConn, heldBody)
				}
				for _, cancel := range cancels[:perConn] {
					cancel()
				}
				eventually(t, "the cancelled requests' bodies given back", func() bool { return heldBytes(t, gw) == perConn*heldBody })
				mu.Lock()
				for _, nc := range conns {
					nc.Close()
				}
				mu.Unlock()
				eventually(t, "the dropped connections' bodies given back", func() bool { return heldBytes(t, gw) == 0 })
				checkOverflows(t, gw, "at the end", 0)
			})
		}
	})
}

// TestHeldBodiesGivenBackAtShutdown, on the loop engine, over h2c and
// HTTP/1.1: a shutdown cut short while requests whose bodies the loops
// hold are upstream closes their connections, and every held byte is
// given back. (The goroutine engine's requests end with their handlers,
// which a shutdown does not cut.)
func TestHeldBodiesGivenBackAtShutdown(t *testing.T) {
	const n = 3
	for _, proto := range []string{"h1", "h2c"} {
		t.Run(proto, func(t *testing.T) {
			up, arrived, release := slowUpstream(t)
			gw := retryGateway(t, "loop", "", up.URL, "r", "")
			c := protoClient(t, proto, nil, "")
			var wg sync.WaitGroup
			defer wg.Wait()
			defer release()
			for i := range n {
				wg.Go(func() {
					if res, err := tryDo(c, http.MethodPut, fmt.Sprintf("%s/slow/%d", gw.URL, i), nil, bytes.NewReader(patternBody(heldBody))); err == nil {
						t.Errorf("request %d answered %d, want its connection closed", i, res.Code)
					}
				})
				eventually(t, fmt.Sprintf("request %d upstream", i), func() bool { return arrived.Load() == int64(i+1) })
			}
			if held := heldBytes(t, gw); held != n*heldBody {
				t.Fatalf("%v bytes held, want %d bodies of %d", held, n, heldBody)
			}
			shutdownAtOnce(t, gw)
			eventually(t, "the held bodies given back", func() bool { return heldBytes(t, gw) == 0 })
		})
	}
}

// TestHalfClosedHeldBodyGivenBackAtShutdown, on the loop engine: a client
// that sends a GET with a body and shuts its sending side, its request
// upstream, then a shutdown cut short: the loops close the upstream
// connection, which sends the request again (a GET, nothing answered yet)
// while the loops stop, and the held body is given back all the same.
// (The second sending never began nor ended, so its body stayed counted.)
func TestHalfClosedHeldBodyGivenBackAtShutdown(t *testing.T) {
	up, arrived, release := slowUpstream(t)
	defer release()
	gw := retryGateway(t, "loop", "", up.URL, "r", "")
	c, _ := dialClient(t, gw.Addr)
	body := patternBody(heldBody)
	if _, err := fmt.Fprintf(c, "GET /slow/0 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the request upstream", func() bool { return arrived.Load() == 1 })
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if held := heldBytes(t, gw); held != heldBody {
		t.Fatalf("%v bytes held, want %d", held, heldBody)
	}
	shutdownAtOnce(t, gw)
	eventually(t, "the held body given back", func() bool { return heldBytes(t, gw) == 0 })
}

// shutdownAtOnce shuts gw down with a context already ended, so that the
// shutdown waits for nothing and closes what is open, and checks that
// Serve returned nil.
func shutdownAtOnce(t *testing.T, gw *testGateway) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gw.stopped.Store(true)
	_ = gw.Shutdown(ctx)
	if err := <-gw.served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
