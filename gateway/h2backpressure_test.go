package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testpki"
)

// stallWatch counts the bytes a writer got through and reports, once, that
// a write has waited 100 ms: what was sent is then what the buffers on
// the way hold.
type stallWatch struct {
	n       atomic.Int64
	stalled chan struct{}
	once    sync.Once
}

func newStallWatch() *stallWatch { return &stallWatch{stalled: make(chan struct{})} }

// track runs write, noting the stall when it takes 100 ms.
func (s *stallWatch) track(n int, write func() error) error {
	t := time.AfterFunc(100*time.Millisecond, func() { s.once.Do(func() { close(s.stalled) }) })
	err := write()
	t.Stop()
	s.n.Add(int64(n))
	return err
}

func (s *stallWatch) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.stalled:
	case <-time.After(waitLimit):
		t.Fatalf("%s never waited for its reader", what)
	}
}

// TestHTTP2Backpressure streams 32 MiB each way through the HTTP/2
// engine, over TLS and h2c, on each engine's plaintext hand-over: a client
// that reads nothing of a response stops the upstream's writes, and an
// upstream that reads nothing of a request body stops the client's, before
// the body's end (the test's own sockets have small buffers, so that what
// stays in flight is the gateway's windows and buffers, and the kernel's
// for the gateway's sockets); the gateway's heap does not grow with the
// body. Then the bodies go through whole.
func TestHTTP2Backpressure(t *testing.T) {
	const (
		size  = 32 << 20
		chunk = 64 << 10
	)
	forH2Engines(t, func(t *testing.T, engine string) {
		checkLeaks(t) // first: it checks after the upstream has closed
		ca := testpki.NewCA(t)
		var down, up *stallWatch
		release, ended := make(chan struct{}), make(chan struct{})
		upstream := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				select {
				case <-release:
				case <-ended: // the test failed before release
					return
				}
				n, err := io.Copy(io.Discard, r.Body)
				fmt.Fprintf(w, "%d %v", n, err)
				return
			}
			w.Header().Set("Content-Length", fmt.Sprint(size))
			buf := make([]byte, chunk)
			for sent := 0; sent < size; sent += chunk {
				if down.track(chunk, func() error { _, err := w.Write(buf); return err }) != nil {
					return
				}
			}
		}))
		upstream.Config.ConnState = smallBuffers
		upstream.Start()
		t.Cleanup(upstream.Close)
		t.Cleanup(func() { close(ended) }) // before upstream.Close, which waits for the handlers
		tg := startGateway(t, parseConfig(t, tlsGatewayConfig, engine, certList(ca.Server("127.0.0.1")), upstream.URL, ""))
		tlsAddr := serveTLS(t, tg)
		for _, tc := range []struct{ client, url string }{{"h2", "https://" + tlsAddr}, {"h2c", tg.URL}} {
			c := protoClient(t, tc.client, ca.Pool, "")
			c.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err == nil {
					smallBuffers(conn, http.StateNew)
				}
				return conn, err
			}
			hw := newHeapWatch()

			down = newStallWatch()
			resp, err := c.Get(tc.url + "/down")
			if err != nil {
				t.Fatal(err)
			}
			down.wait(t, tc.client+" upstream")
			hw.sample()
			atStall := down.n.Load()
			if atStall >= size {
				t.Errorf("%s: the upstream wrote the whole body to a client that read nothing", tc.client)
			}
			n, err := io.Copy(io.Discard, &sampledReader{r: resp.Body, h: hw})
			resp.Body.Close()
			if err != nil || n != size {
				t.Errorf("%s: read %d bytes (%v), want %d", tc.client, n, err, size)
			}

			up = newStallWatch()
			release = make(chan struct{})
			pr, pw := io.Pipe()
			go func() {
				buf := make([]byte, chunk)
				for sent := 0; sent < size; sent += chunk {
					if up.track(chunk, func() error { _, err := pw.Write(buf); return err }) != nil {
						return
					}
				}
				pw.Close()
			}()
			req, _ := http.NewRequest("POST", tc.url+"/up", pr)
			req.ContentLength = size
			done := make(chan result, 1)
			go func() {
				r, err := c.Do(req)
				if err != nil {
					done <- result{Body: err.Error()}
					return
				}
				done <- result{Code: r.StatusCode, Body: readAll(t, r)}
			}()
			up.wait(t, tc.client+" client")
			hw.sample()
			upStall := up.n.Load()
			if upStall >= size {
				t.Errorf("%s: the client sent the whole body to an upstream that read nothing", tc.client)
			}
			close(release)
			if r := <-done; r.Code != 200 || r.Body != fmt.Sprintf("%d <nil>", size) {
				t.Errorf("%s upload: %d %q", tc.client, r.Code, r.Body)
			}
			hw.sample()
			t.Logf("%s: %d KiB down and %d KiB up before the stall, heap growth %d KiB", tc.client, atStall>>10, upStall>>10, hw.growth()>>10)
			if g := hw.growth(); g > 16<<20 {
				t.Errorf("%s: heap grew by %d MiB streaming %d MiB", tc.client, g>>20, size>>20)
			}
		}
	})
}

// smallBuffers gives a new TCP connection 64 KiB socket buffers, which
// the kernel then does not grow.
func smallBuffers(c net.Conn, s http.ConnState) {
	if tc, ok := c.(*net.TCPConn); ok && s == http.StateNew {
		_ = tc.SetReadBuffer(64 << 10)
		_ = tc.SetWriteBuffer(64 << 10)
	}
}
