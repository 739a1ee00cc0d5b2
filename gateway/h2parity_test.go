package gateway_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/sluicehq/sluice/internal/testpki"
)

// h2Both dials tg over h2c (prior knowledge) and over TLS with h2
// negotiated (tlsAddr, certified by ca), in that order.
func h2Both(t *testing.T, tg *testGateway, tlsAddr string, ca *testpki.CA) map[string]*h2raw {
	t.Helper()
	tc, err := tls.Dial("tcp", tlsAddr, &tls.Config{RootCAs: ca.Pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*h2raw{"h2c": dialH2(t, tg.Addr), "h2": newH2(t, tc)}
}

// TestHTTP2AsteriskRefused sends OPTIONS with the :path "*" over h2c and
// over TLS: every HTTP/2 engine answers 400, as nginx does (its log:
// "client sent invalid :path header") and as the gateway refuses the
// asterisk form on HTTP/1.1, and the upstream sees nothing. (net/http's
// HTTP/2 server answered 200 itself, with its general OPTIONS handler,
// where the loops answered 400.)
func TestHTTP2AsteriskRefused(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		tg, ca := caGateway(t, engine, "http://"+u.addr)
		for proto, h := range h2Both(t, tg, serveTLS(t, tg), ca) {
			h.headers(t, 1, true, ":method", "OPTIONS", ":scheme", "http", ":authority", "a.test", ":path", "*")
			if st, _ := h.read(t, 1); st != "400" {
				t.Errorf("%s OPTIONS *: %s, want 400", proto, st)
			}
		}
		for _, r := range u.requests() {
			t.Errorf("the upstream saw %s %q", r.Method, r.Target)
		}
	})
}

// TestHTTP2ConnectionTrailerDropped sends HTTP/2 requests whose trailers
// carry a connection-specific field (RFC 9113 section 8.2.2) beside
// X-Checksum, with and without a content-length: unannounced, every HTTP/2
// engine forwards the whole request without them (net/http's server drops
// trailers a request did not announce, and the loops drop the field, as
// the gateway drops a trailer field it never passes, then the trailers
// unannounced); announced in Trailer, every engine resets the stream
// (PROTOCOL_ERROR) when the field is one a trailer section may not carry
// (httpguts.ValidTrailerHeader: all but upgrade), as net/http's server
// does, and forwards X-Checksum alone otherwise.
// (The loops forwarded X-Checksum alone; before that, they reset the
// stream unannounced too.)
func TestHTTP2ConnectionTrailerDropped(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		type seen struct {
			path    string
			body    string
			trailer http.Header
		}
		got := make(chan seen, 64) // every request's, the reset ones' too
		up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
			serveRequests(c, br, func(r *http.Request) bool {
				b, err := io.ReadAll(r.Body)
				if err != nil {
					b = append(b, " (cut: "+err.Error()+")"...)
				}
				got <- seen{r.URL.Path, string(b), r.Trailer}
				_, err = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				return err == nil
			})
		})
		tg := gatewayTo(t, engine, up.addr)
		n := 0
		for _, field := range [][2]string{
			{"transfer-encoding", "chunked"}, {"connection", "close"}, {"keep-alive", "timeout=5"},
			{"proxy-connection", "close"}, {"upgrade", "websocket"}, {"te", "gzip"},
		} {
			for _, length := range []string{"", "5"} {
				for _, announce := range []bool{false, true} {
					n++
					path := fmt.Sprintf("/t%d", n)
					head := []string{":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", path}
					if length != "" {
						head = append(head, "content-length", length)
					}
					if announce {
						head = append(head, "trailer", "x-checksum")
					}
					h := dialH2(t, tg.Addr)
					h.headers(t, 1, false, head...)
					if err := h.fr.WriteData(1, false, []byte("hello")); err != nil {
						t.Fatal(err)
					}
					h.headers(t, 1, true, "x-checksum", "abc", field[0], field[1])
					name := fmt.Sprintf("trailer %s, content-length %q, announced %v", field[0], length, announce)
					if announce && !httpguts.ValidTrailerHeader(http.CanonicalHeaderKey(field[0])) {
						if st, _ := h.read(t, 1); st != "RST PROTOCOL_ERROR" {
							t.Errorf("%s: %s, want RST PROTOCOL_ERROR", name, st)
						}
						continue // what went upstream before the reset may be cut short
					}
					if st, _ := h.read(t, 1); st != "200" {
						t.Errorf("%s: %s, want 200", name, st)
					}
					timeout := time.After(waitLimit)
					for found := false; !found; {
						select {
						case s := <-got:
							want := http.Header{}
							if announce {
								want.Set("X-Checksum", "abc")
							}
							if found = s.path == path; found && (s.body != "hello" || fmt.Sprint(s.trailer) != fmt.Sprint(want) && len(s.trailer)+len(want) > 0) {
								t.Errorf("%s: the upstream got body %q and trailers %v, want hello and %v", name, s.body, s.trailer, want)
							}
						case <-timeout:
							t.Fatalf("%s: the upstream saw no request", name)
						}
					}
				}
			}
		}
	})
}
