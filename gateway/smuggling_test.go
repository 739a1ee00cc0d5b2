package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// seenRequest is a request as a raw upstream parsed it from the bytes the
// gateway forwarded.
type seenRequest struct {
	Method, Target string
	Host           string // the Host header (net/http takes it out of Header)
	Header         http.Header
	Body           string
}

// wireUpstream is an upstream that parses what it receives with net/http's
// strict request reader, message by message (serveRequests), and records
// every message; it answers each with respond, or with a 200 naming the
// message's index.
type wireUpstream struct {
	addr    string
	mu      sync.Mutex // protects seen
	seen    []seenRequest
	respond func(i int, r seenRequest) string
}

func startWireUpstream(t *testing.T, respond func(i int, r seenRequest) string) *wireUpstream {
	t.Helper()
	u := &wireUpstream{respond: respond}
	u.addr = startRaw(t, func(c net.Conn, br *bufio.Reader) {
		serveRequests(c, br, func(req *http.Request) bool {
			body, _ := io.ReadAll(req.Body)
			r := seenRequest{Method: req.Method, Target: req.RequestURI, Host: req.Host, Header: req.Header, Body: string(body)}
			u.mu.Lock()
			i := len(u.seen)
			u.seen = append(u.seen, r)
			u.mu.Unlock()
			answer := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%d", len(fmt.Sprint(i)), i)
			if u.respond != nil {
				answer = u.respond(i, r)
			}
			_, err := io.WriteString(c, answer)
			return err == nil
		})
	}).addr
	return u
}

func (u *wireUpstream) requests() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenRequest(nil), u.seen...)
}

// exchangeRaw writes raw to a new connection to the gateway and reads n
// responses from it, each with its body read whole.
func exchangeRaw(t *testing.T, addr, raw string, n int) []result {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitLimit))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var out []result
	for range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d of %d to %q: %v", len(out)+1, n, raw, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("body of response %d to %q: %v", len(out)+1, raw, err)
		}
		out = append(out, result{Code: resp.StatusCode, Header: resp.Header, Body: string(b)})
	}
	return out
}

// TestConnectionNamesFramingHeader is the smuggling of the hardening issue:
// a message whose Connection header names its own Content-Length kept its
// body but lost its length, so the upstream read the body as a second
// request (and a client read past a response's body).
func TestConnectionNamesFramingHeader(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		gw := gatewayTo(t, engine, u.addr)
		hidden := "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
		for _, conn := range []string{"Content-Length", "content-length, Host", "Host"} {
			raw := "POST /a HTTP/1.1\r\nHost: example.com\r\nConnection: " + conn +
				"\r\nContent-Length: " + fmt.Sprint(len(hidden)) + "\r\n\r\n" + hidden
			before := len(u.requests())
			got := exchangeRaw(t, gw.Addr, raw+"GET /b HTTP/1.1\r\nHost: example.com\r\n\r\n", 2)
			seen := u.requests()[before:]
			if len(seen) != 2 || seen[0].Method != "POST" || seen[0].Body != hidden || seen[1].Target != "/b" {
				t.Fatalf("Connection: %s: upstream saw %+v, want POST /a with the body, then GET /b", conn, seen)
			}
			if got[0].Code != 200 || got[1].Code != 200 || got[0].Body == got[1].Body {
				t.Fatalf("Connection: %s: client got %+v", conn, got)
			}
		}
	})
}

// TestResponseConnectionNamesContentLength: an upstream's response naming
// its Content-Length in Connection keeps its length on the way to the
// client, so the client's next response on the connection is its own.
func TestResponseConnectionNamesContentLength(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, func(i int, r seenRequest) string {
			body := "answer-" + r.Target
			return "HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: " +
				fmt.Sprint(len(body)) + "\r\n\r\n" + body
		})
		gw := gatewayTo(t, engine, u.addr)
		got := exchangeRaw(t, gw.Addr, "GET /one HTTP/1.1\r\nHost: x\r\n\r\nGET /two HTTP/1.1\r\nHost: x\r\n\r\n", 2)
		if got[0].Body != "answer-/one" || got[1].Body != "answer-/two" {
			t.Fatalf("client got %q then %q", got[0].Body, got[1].Body)
		}
	})
}

// TestDuplicateForwardedHeaders: an untrusted client's X-Forwarded-For,
// -Host and -Proto, however many, never reach the upstream beside the
// gateway's own values.
func TestDuplicateForwardedHeaders(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		gw := gatewayTo(t, engine, u.addr)
		exchangeRaw(t, gw.Addr, "GET / HTTP/1.1\r\nHost: real.example\r\n"+
			"X-Forwarded-For: 10.1.1.1\r\nx-forwarded-for: 10.2.2.2\r\n"+
			"X-Forwarded-Proto: https\r\nX-Forwarded-Proto: https\r\n"+
			"X-Forwarded-Host: evil.example\r\nX-FORWARDED-HOST: evil.example\r\n\r\n", 1)
		seen := u.requests()
		if len(seen) != 1 {
			t.Fatalf("upstream saw %d requests", len(seen))
		}
		h := seen[0].Header
		for name, want := range map[string]string{
			"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http", "X-Forwarded-Host": "real.example",
		} {
			if got := h.Values(name); len(got) != 1 || got[0] != want {
				t.Errorf("%s upstream: %q, want [%q]", name, got, want)
			}
		}
	})
}

// TestRefusedRequests: what RFC 9112 lets a server refuse and nginx
// refuses is refused on both engines, and never reaches the upstream.
func TestRefusedRequests(t *testing.T) {
	cases := []struct {
		name, raw string
		code      int
	}{
		{"lower-case method", "get / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"mixed-case method", "Get / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"CONNECT", "CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n", 405},
		{"CONNECT origin-form", "CONNECT /x HTTP/1.1\r\nHost: x\r\n\r\n", 405},
		{"TRACE", "TRACE / HTTP/1.1\r\nHost: x\r\n\r\n", 405},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", 400},
		{"obs-fold with tab", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb\r\n\r\n", 400},
		{"Transfer-Encoding identity", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\nabc", 501},
		// fasthttp refuses it before the gateway sees it (nginx: 501).
		{"Transfer-Encoding chunked, identity", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 400},
		{"Content-Length and Transfer-Encoding", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"space before colon", "GET / HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n", 400},
		{"HTTP/2.0 request line", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		{"asterisk-form", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"NUL in the path", "GET /a%00b HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"bare LF in a header line", "GET / HTTP/1.1\r\nHost: x\r\nX-A: b\nX-B: c\r\n\r\n", 400},
	}
	forEngines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		gw := gatewayTo(t, engine, u.addr)
		for _, c := range cases {
			got := exchangeRaw(t, gw.Addr, c.raw, 1)[0]
			if got.Code != c.code {
				t.Errorf("%s: %d %s, want %d", c.name, got.Code, got.Body, c.code)
			}
		}
		if seen := u.requests(); len(seen) != 0 {
			t.Errorf("upstream saw %+v", seen)
		}
	})
}

// TestTrustedForwardedList: several X-Forwarded-For headers from a trusted
// proxy are one list; the client is the right-most untrusted address, and
// the upstream gets the list with the proxy appended.
func TestTrustedForwardedList(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
trusted_proxies: ["127.0.0.1/32"]
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: all, upstream: up}
`, engine, u.addr))
		exchangeRaw(t, gw.Addr, "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 10.1.1.1\r\nX-Forwarded-For: 10.2.2.2\r\n\r\n", 1)
		seen := u.requests()
		if len(seen) != 1 {
			t.Fatalf("upstream saw %d requests", len(seen))
		}
		if got := seen[0].Header.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "10.1.1.1, 10.2.2.2, 127.0.0.1" {
			t.Errorf("X-Forwarded-For upstream: %q", got)
		}
	})
}

// TestSeveralConnectionHeaders: every Connection header's names are
// hop-by-hop, not only the first header's.
func TestSeveralConnectionHeaders(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		gw := gatewayTo(t, engine, u.addr)
		exchangeRaw(t, gw.Addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: X-A\r\nConnection: X-B\r\nX-A: 1\r\nX-B: 2\r\nX-C: 3\r\n\r\n", 1)
		seen := u.requests()
		if len(seen) != 1 {
			t.Fatalf("upstream saw %d requests", len(seen))
		}
		if h := seen[0].Header; h.Get("X-A") != "" || h.Get("X-B") != "" || h.Get("X-C") != "3" {
			t.Errorf("upstream headers %v: want X-A and X-B dropped, X-C kept", h)
		}
	})
}

// TestUpstreamVersion: the gateway speaks HTTP/1.1 upstream whatever the
// client's version.
func TestUpstreamVersion(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		var proto atomic.Value
		up := startRaw(t, func(c net.Conn, br *bufio.Reader) {
			serveRequests(c, br, func(r *http.Request) bool {
				proto.Store(r.Proto)
				_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				return err == nil
			})
		})
		gw := gatewayTo(t, engine, up.addr)
		if r := exchangeRaw(t, gw.Addr, "GET /a HTTP/1.0\r\nHost: x\r\n\r\n", 1)[0]; r.Code != 200 {
			t.Fatalf("%d %s", r.Code, r.Body)
		}
		if got := proto.Load(); got != "HTTP/1.1" {
			t.Errorf("upstream read %v, want HTTP/1.1", got)
		}
	})
}

// TestHTTP09Answered: a request line without a version (HTTP/0.9) is
// answered at once on both engines, not left to the header timeout.
func TestHTTP09Answered(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		gw := gatewayTo(t, engine, u.addr)
		conn, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(waitLimit))
		if _, err := io.WriteString(conn, "GET /a\r\n"); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 4") && !strings.HasPrefix(line, "HTTP/1.1 505") {
			t.Errorf("answer %q, %v: want a refusal", line, err)
		}
		if seen := u.requests(); len(seen) != 0 {
			t.Errorf("upstream saw %+v", seen)
		}
	})
}
