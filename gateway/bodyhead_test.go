package gateway_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestBodyTooLargeAtHeadHTTP10: an HTTP/1.0 request whose Content-Length
// is over server.max_body_bytes gets its 413 at its head, as an HTTP/1.1
// one does, before a byte of its body comes (it cannot send Expect:
// 100-continue), and the connection closes; on both engines. So does an
// HTTP/1.0 request that sends Expect: 100-continue all the same, and an
// HTTP/1.1 one with an empty Expect line: neither is sent a 100 (RFC 9110
// section 10.1.1).
func TestBodyTooLargeAtHeadHTTP10(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		_, gw := bodyLimitGateway(t, engine)
		for _, host := range []string{"Host: x\r\n", "", "Host: x\r\nExpect: 100-continue\r\n", "Host: x\r\nExpect:\r\n"} {
			proto := "HTTP/1.0"
			if strings.HasSuffix(host, "Expect:\r\n") {
				proto = "HTTP/1.1"
			}
			code, b := answeredAtHead(t, gw.Addr, "POST / "+proto+"\r\n"+host+"Content-Length: 1048576\r\n\r\n")
			if code != 413 || !strings.Contains(b, "body_too_large") {
				t.Errorf("%q: answer %d %q, want 413 body_too_large", host, code, b)
			}
		}
	})
}

// TestOtherVersionRefusedBeforeBody: a request of another version than
// HTTP/1.0 and HTTP/1.1 (or a later HTTP/1.x, read as HTTP/1.1) is refused
// 505 at its head, as nginx refuses it, whatever its body: with a
// Content-Length over server.max_body_bytes too, and without a byte of
// its body read; its connection closes; on both engines. (Over the limit
// it was held as an HTTP/1.1 request with Expect: 100-continue, and
// refused 413; a chunked one was refused 400 by fasthttp, which takes
// Transfer-Encoding in HTTP/1.1 requests only.)
func TestOtherVersionRefusedBeforeBody(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up, gw := bodyLimitGateway(t, engine)
		for _, proto := range []string{"HTTP/2.0", "HTTP/3.0", "HTTP/0.9"} {
			for _, framing := range []string{"Content-Length: 1048576", "Content-Length: 10", "Transfer-Encoding: chunked"} {
				code, b := answeredAtHead(t, gw.Addr, "POST / "+proto+"\r\nHost: x\r\n"+framing+"\r\n\r\n")
				if code != 505 {
					t.Errorf("%s, %s: answer %d %q, want 505", proto, framing, code, b)
				}
			}
		}
		if n := up.calls.Load(); n != 0 {
			t.Errorf("the upstream saw %d requests", n)
		}
	})
}

// TestBodyTooLargeAtHeadOtherExpect: an HTTP/1.1 request whose
// Content-Length is over server.max_body_bytes and whose Expect is not
// 100-continue alone ("foo", "100-continue, foo") gets its 413 at its
// head, without a byte of its body sent and without a 100, and the
// connection closes; on both engines. (It was not held for expect, so
// the gateway waited for its body before the 413.)
func TestBodyTooLargeAtHeadOtherExpect(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up, gw := bodyLimitGateway(t, engine)
		for _, expect := range []string{"foo", "100-continue, foo", "100-continuex"} {
			code, b := answeredAtHead(t, gw.Addr, "POST / HTTP/1.1\r\nHost: x\r\nExpect: "+expect+"\r\nContent-Length: 1048576\r\n\r\n")
			if code != 413 || !strings.Contains(b, "body_too_large") {
				t.Errorf("Expect %q: answer %d %q, want 413 body_too_large", expect, code, b)
			}
		}
		if n := up.calls.Load(); n != 0 {
			t.Errorf("the upstream saw %d requests", n)
		}
	})
}

// answeredAtHead sends head, a request's head without its body, to the
// gateway at addr and returns the answer's status and body, which must
// come before the body (within waitLimit), the connection closing after
// it.
func answeredAtHead(t *testing.T, addr, head string) (int, string) {
	t.Helper()
	c, br := dialClient(t, addr)
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(waitLimit))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%q: no answer before the body: %v", head, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("%q: after the answer: %v, want the connection closed", head, err)
	}
	return resp.StatusCode, string(b)
}

// bodyLimitGateway starts an upstream and, before it, a gateway on engine
// whose max_body_bytes is 1024 and whose read_timeout (1m) outlasts any
// test: an answer that comes comes at the head.
func bodyLimitGateway(t *testing.T, engine string) (*upstream, *testGateway) {
	t.Helper()
	up := startUpstream(t, "up", nil)
	return up, startGateway(t, parseConfig(t, `
server: {engine: %s, max_body_bytes: 1024, read_timeout: 1m}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, engine, up.URL))
}
