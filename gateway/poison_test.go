package gateway_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/testpki"
)

// evil is a whole response hidden after another one, which a pooled
// connection would serve to the next request if its stray bytes were
// left in it. The padding outgrows a connection's read buffer.
var evil = strings.Repeat("x", 8<<10) + "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nEVIL"

// TestPoolNotPoisoned has a target, plain or over TLS, send bytes after a
// complete response: a body after a 204, after a HEAD answer, more than a
// Content-Length said, or data on an idle connection. The connection must
// be closed, not pooled: the next requests, from another client, get their
// own answers and never those bytes. (Over TLS, bytes that came after the
// response's last read went to the next request: a pooled TLS connection
// was not looked into.)
func TestPoolNotPoisoned(t *testing.T) {
	for _, tt := range []struct {
		name, method, answer string
		code                 int
	}{
		{"body after 204", "GET", "HTTP/1.1 204 No Content\r\n\r\n" + evil, 204},
		{"body after 304", "GET", "HTTP/1.1 304 Not Modified\r\n\r\n" + evil, 304},
		{"body after a HEAD answer", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n" + evil, 200},
		{"more than Content-Length", "GET", okAnswer + evil, 200},
		{"data on an idle connection", "GET", okAnswer, 200},
	} {
		for _, secure := range []bool{false, true} {
			name := tt.name
			if secure {
				name += " over TLS"
			}
			t.Run(name, func(t *testing.T) {
				forEngines(t, func(t *testing.T, engine string) {
					poisonCase(t, engine, secure, tt.method, tt.answer, tt.code, tt.name == "data on an idle connection")
				})
			})
		}
	}
}

// okAnswer is the target's answer to the requests after the first.
const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// poisonCase is one case of TestPoolNotPoisoned on engine, to a target
// over TLS when secure: the target answers the client's request for
// /first (method) with answer, which the client gets with code, and (when
// idle) sends evil once the gateway has its connection back.
func poisonCase(t *testing.T, engine string, secure bool, method, answer string, code int, idle bool) {
	var tc *tls.Config
	scheme, tlsLine := "http", ""
	if secure {
		ca := testpki.NewCA(t)
		tc = &tls.Config{Certificates: []tls.Certificate{ca.Server("api.internal").TLS}}
		scheme, tlsLine = "https", fmt.Sprintf(", tls: {ca_file: %s, server_name: api.internal}", ca.CertFile)
	}
	spoke := make(chan struct{})
	speak := make(chan struct{})
	up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
		if tc != nil {
			c = tls.Server(c, tc)
			br = bufio.NewReader(c)
		}
		serveRequests(c, br, func(r *http.Request) bool {
			if r.URL.Path != "/first" {
				_, err := io.WriteString(c, okAnswer)
				return err == nil
			}
			if _, err := io.WriteString(c, answer); err != nil {
				return false
			}
			if idle {
				<-speak // once the gateway has pooled the connection
				_, _ = io.WriteString(c, evil)
				close(spoke)
			}
			return true
		})
	})
	gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s://%s"]%s}
routes:
  - {name: all, upstream: up}
`, engine, scheme, up.addr, tlsLine))
	c, br := dialClient(t, gw.Addr)
	resp, _, err := roundTripRaw(t, c, br, method, "/first")
	if err != nil || resp.StatusCode != code {
		t.Fatalf("first request: %v %v, want %d", resp, err, code)
	}
	if idle {
		close(speak)
		<-spoke
		if engine == "loop" && !secure {
			// The loops see a pooled connection speak when it does; the
			// goroutine engine (and TLS targets) when it is taken.
			eventually(t, "the connection to close", func() bool { return up.open.Load() == 0 })
		}
	}
	c2, br2 := dialClient(t, gw.Addr) // another client
	for i := range 3 {
		resp, body, err := roundTripRaw(t, c2, br2, "GET", "/next")
		if err != nil || resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("request %d after the stray bytes: %v %q %v, want 200 \"ok\"", i, resp, body, err)
		}
	}
}

// TestTLSUpstreamConnectionReused sends requests one after another to an
// HTTP/1.1 target over TLS 1.3 and 1.2: the look into a pooled TLS
// connection for stray bytes (TestPoolNotPoisoned) finds none in the
// server's own records (its session tickets), and one connection carries
// every request.
func TestTLSUpstreamConnectionReused(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		for _, version := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
			var conns atomic.Int64
			up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "ok")
			}))
			up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server("api.internal").TLS}, MaxVersion: version}
			up.StartTLS()
			tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"], tls: {ca_file: %s, server_name: api.internal}}
routes:
  - {name: all, upstream: up}
`, engine, up.URL, ca.CertFile))
			c := newClient(t)
			for i := range 5 {
				if r := get(t, c, fmt.Sprintf("%s/r%d", tg.URL, i)); r.Code != 200 {
					t.Fatalf("request %d: %d %q", i, r.Code, r.Body)
				}
			}
			if n := conns.Load(); n != 1 {
				t.Errorf("TLS %x: the target accepted %d connections for 5 requests, want 1", version, n)
			}
			tg.stop(t)
			up.Close()
		}
	})
}

// TestNoContentLengthOn204 has a target answer a 204 with a
// Content-Length, which RFC 9110 section 8.6 forbids: on every engine the
// client gets the 204 without it, and its connection's next answer whole.
// (The loops sent it on as it came, where the goroutine engine drops it:
// a client or proxy in front that reads the length waits for a body and
// takes the next answer's bytes for it.)
func TestNoContentLengthOn204(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := sickUpstream(t, func(c net.Conn, r *http.Request) {
			io.WriteString(c, "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n")
		})
		gw := gatewayTo(t, engine, up.addr)
		c, br := dialClient(t, gw.Addr)
		resp, _, err := roundTripRaw(t, c, br, "GET", "/nothing")
		if err != nil || resp.StatusCode != 204 || resp.Header.Get("Content-Length") != "" {
			t.Fatalf("%v %v, want 204 without a Content-Length", resp, err)
		}
		if resp, body, err := roundTripRaw(t, c, br, "GET", "/ok"); err != nil || body != "ok" {
			t.Fatalf("next request: %v %q %v", resp, body, err)
		}
	})
}

// TestNoContentLengthOn304 has a target answer a 304 with a
// Content-Length (of the representation, as RFC 9110 section 8.6 allows):
// an HTTP/1.1 client gets it, and an HTTP/2 client gets the 304 without
// it on every engine, as net/http's HTTP/2 server sends it. (The loops'
// HTTP/2 sent it, and Go's client read the answer, without DATA, as cut
// short.)
func TestNoContentLengthOn304(t *testing.T) {
	forEnginesAndProtos(t, func(t *testing.T, engine, proto string) {
		up := sickUpstream(t, func(c net.Conn, r *http.Request) {
			io.WriteString(c, "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\nETag: \"v1\"\r\n\r\n")
		})
		gw := gatewayTo(t, engine, up.addr)
		c := protoClient(t, proto, nil, "")
		want := map[string]string{"h1": "5", "h2c": ""}[proto]
		r, err := tryDo(c, "GET", gw.URL+"/same", nil, nil)
		if err != nil || r.Code != 304 || r.Header.Get("ETag") != `"v1"` || r.Header.Get("Content-Length") != want {
			t.Errorf("%d %v %v, want 304 with the ETag and Content-Length %q", r.Code, r.Header, err, want)
		}
	})
}

// TestPoolManyPoisoned has a target send bytes on every one of more idle
// pooled connections than an attempt closes before it takes the next
// (upstream's maxDirty, 4): the next request still gets its own answer.
// (The connection taken after the fourth was used unchecked, and its
// stray bytes read as the next client's answer.)
func TestPoolManyPoisoned(t *testing.T) {
	const conns = 8
	forEngines(t, func(t *testing.T, engine string) {
		g := newGate(conns)
		speak := make(chan struct{})
		var spoke sync.WaitGroup
		spoke.Add(conns)
		up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
			serveRequests(c, br, func(r *http.Request) bool {
				if r.URL.Path != "/first" {
					_, err := io.WriteString(c, okAnswer)
					return err == nil
				}
				g.arrived <- struct{}{}
				<-g.release
				if _, err := io.WriteString(c, okAnswer); err != nil {
					return false
				}
				<-speak // once the gateway has pooled the connection
				_, _ = io.WriteString(c, evil)
				spoke.Done()
				return true
			})
		})
		gw := gatewayTo(t, engine, up.addr)
		var wg sync.WaitGroup
		for range conns {
			wg.Go(func() {
				c, br := dialClient(t, gw.Addr)
				if resp, body, err := roundTripRaw(t, c, br, "GET", "/first"); err != nil || body != "ok" {
					t.Errorf("first requests: %v %q %v", resp, body, err)
				}
			})
		}
		g.awaitArrivals(t, conns)
		g.open()
		wg.Wait()
		close(speak)
		spoke.Wait()
		c, br := dialClient(t, gw.Addr) // another client
		for i := range 3 {
			resp, body, err := roundTripRaw(t, c, br, "GET", "/next")
			if err != nil || resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("request %d after the stray bytes: %v %q %v, want 200 \"ok\"", i, resp, body, err)
			}
		}
	})
}
