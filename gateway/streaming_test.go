package gateway_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStreamingResponses checks that SSE and chunked responses flow
// through as the upstream produces them: the client reads the first event
// before the upstream sends the second.
func TestStreamingResponses(t *testing.T) {
	for _, tt := range []struct{ name, contentType string }{
		{"sse", "text/event-stream"},
		{"chunked", "application/octet-stream"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			next := make(chan struct{})
			up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.Header().Set("Cache-Control", "no-cache")
				for i := range 3 {
					if i > 0 {
						select {
						case <-next:
						case <-r.Context().Done():
							return
						}
					}
					fmt.Fprintf(w, "data: event %d\n\n", i)
					w.(http.Flusher).Flush()
				}
			})
			gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: stream, upstream: up}
`, up.URL))
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", gw.URL+"/events", nil)
			resp, err := newClient(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); ct != tt.contentType {
				t.Errorf("Content-Type %q", ct)
			}
			br := bufio.NewReader(resp.Body)
			for i := range 3 {
				if i > 0 {
					next <- struct{}{} // the upstream sends event i only now
				}
				var got strings.Builder
				for !strings.HasSuffix(got.String(), "\n\n") {
					line, err := br.ReadString('\n')
					if err != nil {
						t.Fatalf("event %d: read %q, then %v: the gateway held the stream back", i, got.String()+line, err)
					}
					got.WriteString(line)
				}
				if want := fmt.Sprintf("data: event %d\n\n", i); got.String() != want {
					t.Fatalf("event %d: %q, want %q", i, got.String(), want)
				}
			}
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Errorf("after the last event: %q, %v", rest, err)
			}
		})
	}
}

// patternReader produces n pseudo-random bytes from a seed, without holding
// them.
type patternReader struct {
	rnd  *rand.ChaCha8
	left int64
}

func newPattern(seed byte, n int64) *patternReader {
	var s [32]byte
	s[0] = seed
	return &patternReader{rnd: rand.NewChaCha8(s), left: n}
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	n, _ := p.rnd.Read(b)
	p.left -= int64(n)
	return n, nil
}

func sha(r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// heapWatch records the largest heap seen, sampled as data flows (every
// few megabytes, not on a timer).
type heapWatch struct {
	base, peak uint64
}

func newHeapWatch() *heapWatch {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &heapWatch{base: ms.HeapAlloc, peak: ms.HeapAlloc}
}

func (h *heapWatch) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > atomic.LoadUint64(&h.peak) {
		atomic.StoreUint64(&h.peak, ms.HeapAlloc)
	}
}

func (h *heapWatch) growth() uint64 { return atomic.LoadUint64(&h.peak) - h.base }

// sampledReader samples the heap every 4 MiB that pass through it.
type sampledReader struct {
	r     io.Reader
	h     *heapWatch
	since int
}

func (s *sampledReader) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	if s.since += n; s.since >= 4<<20 {
		s.since = 0
		s.h.sample()
	}
	return n, err
}

// TestLargeBodiesStream sends 50 MB request bodies (with and without a
// length) and a 50 MB response through the gateway: the bytes arrive intact
// (the upstream and the client compare SHA-256) and the process heap does
// not grow by anything near the body's size.
func TestLargeBodiesStream(t *testing.T) {
	const size = 50 << 20
	const maxGrowth = 24 << 20
	want, _, _ := sha(newPattern(7, size))
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case "POST":
			got, n, err := sha(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			fmt.Fprintf(w, "%s %d", got, n)
		case "GET":
			w.Header().Set("Content-Length", fmt.Sprint(size))
			_, _ = io.Copy(w, newPattern(7, size))
		}
	})
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: big, upstream: up}
`, up.URL))
	c := newClient(t)
	for _, tt := range []struct {
		name  string
		known bool
	}{{"upload with Content-Length", true}, {"chunked upload", false}} {
		t.Run(tt.name, func(t *testing.T) {
			hw := newHeapWatch()
			var body io.Reader = &sampledReader{r: newPattern(7, size), h: hw}
			req, _ := http.NewRequest("POST", gw.URL+"/upload", body)
			if tt.known {
				req.ContentLength = size
			} else {
				req.ContentLength = -1 // chunked
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != fmt.Sprintf("%s %d", want, size) {
				t.Fatalf("%d %q, want the upstream to see %s %d", resp.StatusCode, b, want, size)
			}
			t.Logf("heap growth %d KiB", hw.growth()>>10)
			if g := hw.growth(); g > maxGrowth {
				t.Errorf("heap grew by %d MiB while 50 MiB went up: the body was buffered", g>>20)
			}
		})
	}
	t.Run("download", func(t *testing.T) {
		hw := newHeapWatch()
		resp, err := c.Get(gw.URL + "/download")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, n, err := sha(&sampledReader{r: resp.Body, h: hw})
		if err != nil || got != want || n != size {
			t.Fatalf("downloaded %d bytes, hash %s, err %v; want %d bytes, %s", n, got, err, size, want)
		}
		t.Logf("heap growth %d KiB", hw.growth()>>10)
		if g := hw.growth(); g > maxGrowth {
			t.Errorf("heap grew by %d MiB while 50 MiB came down: the body was buffered", g>>20)
		}
	})
}

// blockSignalConn reports, once, that a write could not complete because
// the peer stopped reading (a short write deadline expired with the socket
// buffers full), and then goes on writing.
type blockSignalConn struct {
	net.Conn
	blocked chan<- struct{}
	once    *sync.Once
}

func (c blockSignalConn) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
		n, err := c.Conn.Write(p[done:])
		done += n
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				c.once.Do(func() { close(c.blocked) })
				continue
			}
			return done, err
		}
	}
	return done, nil
}

type blockSignalListener struct {
	net.Listener
	blocked chan<- struct{}
	once    *sync.Once
}

func (l blockSignalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(64 << 10)
	}
	return blockSignalConn{Conn: c, blocked: l.blocked, once: l.once}, nil
}

// TestSlowSSEClientFlatMemory streams 128 MiB of events to a client that
// stops reading after the first one: the upstream is made to wait (it is
// paced by the client through bounded buffers) instead of the gateway
// buffering the stream, and the heap stays flat while the client then reads
// the rest.
func TestSlowSSEClientFlatMemory(t *testing.T) {
	const total = 128 << 20
	const event = 1 << 10
	blocked := make(chan struct{})
	var written atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		msg := []byte("data: " + strings.Repeat("x", event-8) + "\n\n")
		for written.Load() < total {
			if _, err := w.Write(msg); err != nil {
				return
			}
			written.Add(int64(len(msg)))
			if written.Load() == int64(len(msg)) {
				w.(http.Flusher).Flush()
			}
		}
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = blockSignalListener{Listener: ln, blocked: blocked, once: &sync.Once{}}
	srv.Start()
	t.Cleanup(srv.Close)
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: sse, upstream: up}
`, srv.URL))

	hw := newHeapWatch()
	conn, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(64 << 10)
	_ = conn.SetWriteDeadline(time.Now().Add(waitLimit))
	fmt.Fprintf(conn, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
	// 128 MiB under -race may take longer than any fixed bound on a busy
	// machine: each read has waitLimit instead.
	br := bufio.NewReaderSize(readLimited{conn}, 4<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, event)
	if _, err := io.ReadFull(resp.Body, first); err != nil || !strings.HasPrefix(string(first), "data: x") {
		t.Fatalf("first event: %q %v", first[:16], err)
	}
	// The client reads nothing more: the upstream must end up blocked.
	select {
	case <-blocked:
	case <-time.After(waitLimit):
		t.Fatalf("the upstream never blocked: it wrote %d MiB to a client that stopped reading", written.Load()>>20)
	}
	// What the upstream could write is what the socket buffers (and the
	// gateway's bounded buffers) hold; with the gateway's receive buffer
	// autotuning up to 32 MiB on Linux, allow 48 MiB.
	t.Logf("the upstream blocked after writing %d KiB", written.Load()>>10)
	if w := written.Load(); w > 48<<20 {
		t.Errorf("the upstream wrote %d MiB to a client that read 1 KiB: the gateway is buffering the stream", w>>20)
	}
	hw.sample()
	n, err := io.Copy(io.Discard, &sampledReader{r: resp.Body, h: hw})
	if err != nil || n+event != total {
		t.Fatalf("read %d bytes after the first event (err %v), want %d", n, err, total-event)
	}
	t.Logf("heap growth %d KiB", hw.growth()>>10)
	if g := hw.growth(); g > 32<<20 {
		t.Errorf("heap grew by %d MiB while 128 MiB streamed to a slow client", g>>20)
	}
}

// TestMaxBodyBytes checks server.max_body_bytes: a body over the limit is
// refused with 413, whether its length is declared or not, and never
// reaches the upstream cut short as if it were whole.
func TestMaxBodyBytes(t *testing.T) {
	var mu sync.Mutex
	var seen []int64
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			// The body broke off: the upstream knows it is not whole.
			http.Error(w, err.Error(), 400)
			return
		}
		mu.Lock()
		seen = append(seen, n) // bodies read whole
		mu.Unlock()
		fmt.Fprint(w, n)
	})
	gw := startGateway(t, parseConfig(t, `
server: {max_body_bytes: 4096}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, up.URL))
	c := newClient(t)
	for _, tt := range []struct {
		name    string
		size    int64
		chunked bool
		code    int
	}{
		{"declared, within", 4096, false, 200},
		{"chunked, within", 4096, true, 200},
		{"declared, over", 4097, false, 413},
		{"chunked, over", 64 << 10, true, 413},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			req, _ := http.NewRequest("POST", gw.URL+"/", io.LimitReader(newPattern(1, tt.size), tt.size))
			req.ContentLength = tt.size
			if tt.chunked {
				req.ContentLength = -1
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode != tt.code {
				t.Errorf("status %d %q, want %d; the upstream read bodies of %v bytes", resp.StatusCode, b, tt.code, seen)
			}
			if tt.code == 413 && !strings.Contains(string(b), "body_too_large") {
				t.Errorf("413 body %q", b)
			}
			if tt.code == 200 && string(b) != fmt.Sprint(tt.size) {
				t.Errorf("the upstream read %q bytes, want %d", b, tt.size)
			}
			for _, n := range seen {
				if tt.code != 200 {
					t.Errorf("the upstream read %d of the %d bytes of a refused body as a whole body", n, tt.size)
				}
			}
		})
	}
}

// TestClientBodyErrorsSpareTheUpstream sends uploads that are too long or
// broken off by the client: they are answered 413 (or dropped with the
// connection), and they count against neither the route's breaker nor the
// target's passive health, so that a client cannot take an upstream out.
func TestClientBodyErrorsSpareTheUpstream(t *testing.T) {
	var broken atomic.Int64
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			broken.Add(1)
			return
		}
		fmt.Fprint(w, "ok")
	})
	gw := startGateway(t, parseConfig(t, `
server: {max_body_bytes: 1024}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: up
    upstream: up
    policies:
      circuit_breaker: {consecutive_failures: 2, open_for: 1h}
`, up.URL))
	c := newClient(t)
	for i := range 6 {
		req, _ := http.NewRequest("POST", gw.URL+"/", io.LimitReader(newPattern(1, 8192), 8192))
		req.ContentLength = -1
		r, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 413 {
			t.Errorf("oversized upload %d: %d, want 413", i, r.StatusCode)
		}
	}
	base := broken.Load()
	for i := range 6 {
		conn, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n%s", strings.Repeat("y", 100))
		conn.Close()
		want := base + int64(i) + 1
		eventually(t, "the upstream to see the upload break off", func() bool { return broken.Load() >= want })
	}
	eventually(t, "the gateway to finish the broken uploads", func() bool { return gw.routeStatus(t, "up").InFlight == 0 })
	if s := gw.routeStatus(t, "up").Breaker; s != "closed" {
		t.Errorf("route breaker %q after client-side body errors, want closed", s)
	}
	if s := gw.Status().Upstreams[0].Targets[0].Breaker; s != "closed" {
		t.Errorf("target breaker %q after client-side body errors, want closed", s)
	}
	if r := do(t, c, "POST", gw.URL+"/", nil, strings.NewReader("fine")); r.Code != 200 {
		t.Errorf("a good request after the broken uploads: %d %q", r.Code, r.Body)
	}
}
