package gateway_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestUnaskedUpgrade has a target answer 101 Switching Protocols to a
// request that asked for no upgrade (the gateway forwards none yet): the
// client gets a 502 at once, the target's connection is closed, and the
// next request is served.
func TestUnaskedUpgrade(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := sickUpstream(t, func(c net.Conn, r *http.Request) {
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			untilClosed(c)
		})
		gw := gatewayTo(t, engine, up.addr)
		c, br := dialClient(t, gw.Addr)
		if resp, body, err := roundTripRaw(t, c, br, "GET", "/upgrade"); err != nil || resp.StatusCode != 502 {
			t.Fatalf("%v %q %v, want 502", resp, body, err)
		}
		eventually(t, "the target's connection to close", func() bool { return up.open.Load() == 0 })
		if resp, body, err := roundTripRaw(t, c, br, "GET", "/ok"); err != nil || body != "ok" {
			t.Fatalf("next request: %v %q %v", resp, body, err)
		}
	})
}

// TestBadStatusCode has a target answer with a status code outside 100
// to 599, which RFC 9110 section 15 makes invalid: the client gets a 502
// on every engine and protocol, and the next request is served. (A code
// below 100 went out as it came, which no HTTP/1.1 client reads and which
// reset an HTTP/2 stream; 600 to 999 went out on HTTP/1.1 and on
// net/http's HTTP/2, and reset the stream on the loops' HTTP/2.)
func TestBadStatusCode(t *testing.T) {
	forEnginesAndProtos(t, func(t *testing.T, engine, proto string) {
		for _, status := range []string{"099", "99", "600", "999"} {
			up := sickUpstream(t, func(c net.Conn, r *http.Request) {
				io.WriteString(c, "HTTP/1.1 "+status+" Odd\r\nContent-Length: 2\r\n\r\nhi")
			})
			gw := gatewayTo(t, engine, up.addr)
			c := protoClient(t, proto, nil, "")
			if r, err := tryDo(c, "GET", gw.URL+"/odd", nil, nil); err != nil || r.Code != 502 {
				t.Errorf("status %s: %d %q %v, want 502", status, r.Code, r.Body, err)
			}
			if r, err := tryDo(c, "GET", gw.URL+"/ok", nil, nil); err != nil || r.Body != "ok" {
				t.Errorf("status %s, next request: %d %q %v", status, r.Code, r.Body, err)
			}
		}
	})
}

// TestMalformedResponseFields has targets answer with a field name that
// is not a token, or a framing field with spaces before its colon: on
// every engine and protocol the client gets a 502 for a name with a space
// ("X A", which went out as it came to HTTP/1.1 clients, was dropped by
// net/http's HTTP/2 and reset the loops' HTTP/2 stream, where names with
// other such characters were 502 already) and for a Content-Length beside
// a "Transfer-Encoding :" (the body was read as chunked, and the client got
// no answer), and a "Transfer-Encoding :" alone frames the body (RFC 9112
// section 5.1 has a proxy remove the spaces). The next request is served.
func TestMalformedResponseFields(t *testing.T) {
	forEnginesAndProtos(t, func(t *testing.T, engine, proto string) {
		for _, tt := range []struct {
			head string
			code int
		}{
			{"X A: a\r\nContent-Length: 2\r\n", 502},
			{"Content-Length: 2\r\nX-A : a\r\nX B : b\r\n", 502},
			{"Content-Length: 2\r\nTransfer-Encoding : chunked\r\n", 502},
			{"Transfer-Encoding\t: chunked\r\nContent-Length: 2\r\n", 502},
			{"Transfer-Encoding : chunked\r\n", 200},
		} {
			up := sickUpstream(t, func(c net.Conn, r *http.Request) {
				body := "hi"
				if strings.Contains(tt.head, "chunked") && tt.code == 200 {
					body = "2\r\nhi\r\n0\r\n\r\n"
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\n"+tt.head+"\r\n"+body)
			})
			gw := gatewayTo(t, engine, up.addr)
			c := protoClient(t, proto, nil, "")
			r, err := tryDo(c, "GET", gw.URL+"/odd", nil, nil)
			if err != nil || r.Code != tt.code || (tt.code == 200 && r.Body != "hi") {
				t.Errorf("%q: %d %q %v, want %d", tt.head, r.Code, r.Body, err, tt.code)
			}
			if r, err := tryDo(c, "GET", gw.URL+"/ok", nil, nil); err != nil || r.Body != "ok" {
				t.Errorf("%q, next request: %d %q %v", tt.head, r.Code, r.Body, err)
			}
		}
	})
}

// TestCloseDelimitedResponse has targets answer with a body that ends
// with their connection (HTTP/1.0, or HTTP/1.1 without a length): an
// HTTP/1.1 client on a kept-alive connection gets it in an HTTP/1.1
// response, chunked (as from nginx), whole and ended by the last chunk,
// and its connection serves the next request. (It was sent chunked under
// the target's HTTP/1.0 status line, which the client reads up to the
// close.) An HTTP/1.0 client, which cannot read chunks, gets the body as
// it came, ended by the close. (It was sent chunked.)
func TestCloseDelimitedResponse(t *testing.T) {
	body := strings.Repeat("close-delimited ", 8<<10) // 128 KiB: streamed
	for _, tt := range []struct{ name, head string }{
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n"},
		{"HTTP/1.1 without a length", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n"},
		{"small", "HTTP/1.0 200 OK\r\n\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := body
			if tt.name == "small" {
				want = "small body"
			}
			forEngines(t, func(t *testing.T, engine string) {
				up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
					serveRequests(c, br, func(r *http.Request) bool {
						if r.URL.Path == "/ok" {
							_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
							return err == nil
						}
						io.WriteString(c, tt.head+want)
						return false // the end of the body
					})
				})
				gw := gatewayTo(t, engine, up.addr)
				c, br := dialClient(t, gw.Addr)
				resp, got, err := roundTripRaw(t, c, br, "GET", "/doc")
				if err != nil || resp.StatusCode != 200 || got != want {
					t.Fatalf("%v, %d bytes, %v; want 200 and %d bytes", resp, len(got), err, len(want))
				}
				if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" || resp.Close {
					t.Errorf("framing: Transfer-Encoding %q, close %v; want chunked on a kept-alive connection", resp.TransferEncoding, resp.Close)
				}
				if resp, got, err := roundTripRaw(t, c, br, "GET", "/ok"); err != nil || got != "ok" {
					t.Fatalf("next request on the connection: %v %q %v", resp, got, err)
				}

				c10, br10 := dialClient(t, gw.Addr)
				io.WriteString(c10, "GET /doc HTTP/1.0\r\nHost: x\r\n\r\n")
				resp, err = http.ReadResponse(br10, nil)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(resp.Body)
				if err != nil || string(b) != want || len(resp.TransferEncoding) != 0 || resp.ContentLength != -1 {
					t.Fatalf("HTTP/1.0 client: %d bytes, %v, Transfer-Encoding %q, Content-Length %d; want %d bytes ended by the close",
						len(b), err, resp.TransferEncoding, resp.ContentLength, len(want))
				}
			})
		})
	}
}
