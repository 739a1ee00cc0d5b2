package upstream

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/http1"
	"github.com/valyala/fasthttp"
)

// rawServer is a target on loopback that answers each request read from a
// connection with answer's bytes (nil: no answer, the connection waits
// for its client to close it).
type rawServer struct {
	ln       net.Listener
	answer   func(req *http.Request) []byte
	accepted atomic.Int32
	got      chan struct{} // a request has arrived (buffered; never blocks)
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func newRawServer(t *testing.T, answer func(req *http.Request) []byte) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, answer: answer, got: make(chan struct{}, 100)}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.close)
	return s
}

func (s *rawServer) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.accepted.Add(1)
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			br := bufio.NewReader(c)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				select {
				case s.got <- struct{}{}:
				default:
				}
				b := s.answer(req)
				if b == nil {
					_, _ = io.Copy(io.Discard, br) // until the client closes
					return
				}
				if _, err := c.Write(b); err != nil {
					return
				}
			}
		}()
	}
}

func (s *rawServer) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// client returns a HostClient of s, its idle connections closed when the
// test ends.
func (s *rawServer) client(t *testing.T) *fasthttp.HostClient {
	hc := &fasthttp.HostClient{Addr: s.ln.Addr().String(), MaxIdleConnDuration: 100 * time.Millisecond}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

// exchange sends a request of method to hc within tr, and returns the
// response (released when the test ends).
func exchange(t *testing.T, hc *fasthttp.HostClient, method string, tr Trip) (*fasthttp.Response, error) {
	t.Helper()
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.SetRequestURI("/x")
	req.Header.SetHost(hc.Addr)
	req.Header.SetMethod(method)
	resp := fasthttp.AcquireResponse()
	t.Cleanup(func() { releaseResponse(resp) })
	return resp, RoundTrip(hc, req, resp, tr)
}

func TestRoundTripReadsASmallBodyWholeAndReusesTheConnection(t *testing.T) {
	s := newRawServer(t, func(*http.Request) []byte {
		return []byte("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nhello")
	})
	hc := s.client(t)
	for i := range 3 {
		resp, err := exchange(t, hc, "GET", Trip{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.IsBodyStream() || string(resp.Body()) != "hello" {
			t.Fatalf("request %d: body %q (stream %v), want hello read whole", i, resp.Body(), resp.IsBodyStream())
		}
		if p := string(resp.Header.Protocol()); p != "HTTP/1.1" {
			t.Fatalf("protocol %s, want HTTP/1.1", p)
		}
		if ct := resp.Header.ContentType(); len(ct) != 0 {
			t.Fatalf("Content-Type %q added", ct)
		}
	}
	if n := s.accepted.Load(); n != 1 {
		t.Fatalf("%d connections for 3 requests, want 1", n)
	}
}

func TestRoundTripStreamsBodies(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	for _, tc := range []struct {
		name, resp, body string
		readAll, reused  bool
	}{
		{"large", "HTTP/1.1 200 OK\r\nContent-Length: 102400\r\n\r\n" + big, big, true, true},
		{"chunked with trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n", "abc", true, true},
		{"closed before its end", "HTTP/1.1 200 OK\r\nContent-Length: 102400\r\n\r\n" + big, "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRawServer(t, func(*http.Request) []byte { return []byte(tc.resp) })
			hc := s.client(t)
			resp, err := exchange(t, hc, "GET", Trip{})
			if err != nil {
				t.Fatal(err)
			}
			body, ok := resp.BodyStream().(*ConnBody)
			if !ok {
				t.Fatalf("body stream %T, want *ConnBody", resp.BodyStream())
			}
			ended := false
			body.AtEnd(func() { ended = true })
			if tc.readAll {
				b, err := io.ReadAll(body)
				if err != nil || string(b) != tc.body {
					t.Fatalf("read %d bytes, %v; want %d", len(b), err, len(tc.body))
				}
			}
			_ = resp.CloseBodyStream()
			if !ended {
				t.Fatal("AtEnd's function did not run at Close")
			}
			if _, err := exchange(t, hc, "GET", Trip{}); err != nil {
				t.Fatal(err)
			}
			want := int32(2)
			if tc.reused {
				want = 1
			}
			if n := s.accepted.Load(); n != want {
				t.Fatalf("%d connections for 2 requests, want %d", n, want)
			}
		})
	}
}

func TestRoundTripReadsNoBodyForHead(t *testing.T) {
	s := newRawServer(t, func(*http.Request) []byte {
		return []byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
	})
	hc := s.client(t)
	for range 2 {
		resp, err := exchange(t, hc, "HEAD", Trip{})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.SkipBody || resp.IsBodyStream() || resp.Header.ContentLength() != 100 {
			t.Fatalf("HEAD: SkipBody %v, stream %v, Content-Length %d", resp.SkipBody, resp.IsBodyStream(), resp.Header.ContentLength())
		}
	}
	if n := s.accepted.Load(); n != 1 {
		t.Fatalf("%d connections for 2 HEADs, want 1", n)
	}
}

func TestRoundTripSkipsInterimResponses(t *testing.T) {
	interim := "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
	s := newRawServer(t, func(*http.Request) []byte {
		return []byte(interim + interim + "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
	})
	resp, err := exchange(t, s.client(t), "GET", Trip{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != 201 || string(resp.Body()) != "ok" {
		t.Fatalf("got %d %q, want 201 ok", resp.StatusCode(), resp.Body())
	}

	s = newRawServer(t, func(*http.Request) []byte {
		return []byte(strings.Repeat(interim, 11) + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	})
	if _, err := exchange(t, s.client(t), "GET", Trip{}); err == nil {
		t.Fatal("11 interim responses accepted")
	}
}

func TestRoundTripRefusesBothFramings(t *testing.T) {
	s := newRawServer(t, func(*http.Request) []byte {
		return []byte("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
	})
	if _, err := exchange(t, s.client(t), "GET", Trip{}); !errors.Is(err, http1.ErrFraming) {
		t.Fatalf("err = %v, want http1.ErrFraming", err)
	}
}

func TestRoundTripHeadLimit(t *testing.T) {
	s := newRawServer(t, func(*http.Request) []byte { return nil })
	_, err := exchange(t, s.client(t), "GET", Trip{Head: time.Now().Add(50 * time.Millisecond)})
	if !errors.Is(err, fasthttp.ErrTimeout) {
		t.Fatalf("err = %v, want fasthttp.ErrTimeout", err)
	}
	if _, err := exchange(t, s.client(t), "GET", Trip{Head: time.Now().Add(-time.Second)}); !errors.Is(err, fasthttp.ErrTimeout) {
		t.Fatalf("a head limit passed already: err = %v, want fasthttp.ErrTimeout", err)
	}
}

func TestRoundTripEndsWhenInterrupted(t *testing.T) {
	s := newRawServer(t, func(*http.Request) []byte { return nil })
	gone := errors.New("client gone")
	cut := &Interrupt{}
	left := cut.Left()
	go func() {
		<-s.got
		cut.Fire(gone)
	}()
	_, err := exchange(t, s.client(t), "GET", Trip{Cut: cut})
	if !errors.Is(err, gone) {
		t.Fatalf("err = %v, want the interrupt's", err)
	}
	select {
	case <-left:
	default:
		t.Fatal("Left's channel open after Fire")
	}
	if _, err := exchange(t, s.client(t), "GET", Trip{Cut: cut}); !errors.Is(err, gone) {
		t.Fatalf("an exchange after the cut: err = %v, want the interrupt's", err)
	}
}
