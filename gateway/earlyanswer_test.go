package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// answerWhileSending writes head, then body, to a new connection to the
// gateway at addr from a goroutine, and reads the first answer (1xx
// included) on the test's: the client still sends while the gateway
// answers. It returns the answer's status, or the read's error, and the
// error of writing the body.
func answerWhileSending(t *testing.T, addr, head string, body []byte) (int, error, error) {
	t.Helper()
	conn, br := dialClient(t, addr)
	_ = conn.SetDeadline(time.Now().Add(waitLimit))
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(conn, head)
		if err == nil && body != nil {
			_, err = conn.Write(body)
		}
		wrote <- err
	}()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		_ = conn.Close()
		<-wrote
		return 0, err, nil
	}
	resp.Body.Close()
	if body == nil {
		_ = conn.Close()
	}
	err = <-wrote
	_ = conn.Close()
	return resp.StatusCode, nil, err
}

// TestOversizedBodyRefusedAtHead: a request whose declared
// Content-Length is over server.max_body_bytes gets its 413 at its head,
// before any of its body is sent; with Expect: 100-continue, a 413 in
// place of the 100. (The goroutine engine, which the loops hand such a
// request to, waited for the first 8 KiB of the body, and sent the 100
// first.)
func TestOversizedBodyRefusedAtHead(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := serverGateway(t, engine, "max_body_bytes: 1024, read_timeout: 1h", "http://"+u.Addr)
		for _, expect := range []string{"", "Expect: 100-continue\r\n"} {
			code, err, _ := answerWhileSending(t, gw.Addr, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n"+expect+"\r\n", nil)
			if err != nil || code != http.StatusRequestEntityTooLarge {
				t.Errorf("%q: answer %d, %v; want 413 before the body", expect, code, err)
			}
		}
		if n := u.count(); n != 0 {
			t.Errorf("the upstream read %d requests", n)
		}
	})
}

// TestEarlyAnswerLingers: a 404 or a 429, answered before a body of
// 16 MiB is read, reaches a client that sends its whole body, which the
// gateway reads and drops (a lingering close) before it closes the
// connection. (fasthttp closed it at once, with unread bytes: the client's
// sending failed with a reset, and a client that reads only once its body
// is sent got the reset in place of the answer.)
func TestEarlyAnswerLingers(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", nil)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, max_body_bytes: 67108864}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: limited
    upstream: up
    match: {path_prefix: /limited}
    policies:
      rate_limit: {limit: 1, period: 1h}
`, engine, up.URL))
		if r := do(t, http.DefaultClient, "GET", gw.URL+"/limited", nil, nil); r.Code != 200 {
			t.Fatalf("first request: %d", r.Code)
		}
		body := []byte(strings.Repeat("x", 16<<20))
		for path, want := range map[string]int{"/limited": 429, "/nothing": 404} {
			head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", path, len(body))
			code, err, werr := answerWhileSending(t, gw.Addr, head, body)
			if err != nil || code != want || werr != nil {
				t.Errorf("%s: answer %d, %v (sending: %v); want %d", path, code, err, werr, want)
			}
		}
	})
}

// TestAmbiguousKeyLingers: a 400 ambiguous_key, which closes the
// connection, reaches a client that sends 16 MiB more behind its request:
// the gateway reads and drops them (a lingering close) before it closes.
// (The loops closed at once, with unread bytes: the client's sending
// failed with a reset, and one that reads only once it has sent got the
// reset in place of the answer.)
func TestAmbiguousKeyLingers(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", nil)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: keyed
    upstream: up
    policies:
      rate_limit: {limit: 100, period: 1h, key: "header:X-Api-Key"}
`, engine, up.URL))
		next := []byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 16777216\r\n\r\n" + strings.Repeat("x", 16<<20))
		code, err, werr := answerWhileSending(t, gw.Addr, "GET / HTTP/1.1\r\nHost: x\r\nX-Api-Key: a\r\nX-Api-Key: b\r\n\r\n", next)
		if err != nil || code != 400 || werr != nil {
			t.Errorf("answer %d, %v (sending: %v); want 400", code, err, werr)
		}
	})
}

// TestBareLFHeadRefusedAtOnce: a request head with a line ending in LF
// alone gets its 400 as soon as the line is in, before the head ends,
// and reaches no upstream; so does one after a request served on the
// same connection, whose body's bare LFs are no head's. (The loops
// handed it to the goroutine engine, whose fasthttp waits for the CRLF
// CRLF that ends a head: the 400 came at server.read_header_timeout, as
// it came on the goroutine engine until its reads looked for bare LFs in
// heads, see headWatch.)
func TestBareLFHeadRefusedAtOnce(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := serverGateway(t, engine, "read_header_timeout: 1h", "http://"+u.Addr)
		for _, head := range []string{"GET / HTTP/1.1\nHost: x\n\n", "GET / HTTP/1.1\r\nHost: x\r\n\n", "GET / HTTP/1.1\r\nHost: x\nX-A: b", "GET /\n"} {
			code, err, _ := answerWhileSending(t, gw.Addr, head, nil)
			if err != nil || code != 400 {
				t.Errorf("%q: answer %d, %v; want 400 at once", head, code, err)
			}
		}
		if n := u.count(); n != 0 {
			t.Errorf("the upstream read %d requests", n)
		}
		conn, br := dialClient(t, gw.Addr)
		for i, c := range []struct {
			req  string
			want int
		}{
			{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\na\nb\n", 200},
			{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 200},
			{"GET / HTTP/1.1\r\nHost: x\nX-A: b", 400},
		} {
			if _, err := io.WriteString(conn, c.req); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != c.want {
				t.Fatalf("request %d on one connection: %v, %v; want %d", i, resp, err, c.want)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
		}
		if n := u.count(); n != 2 {
			t.Errorf("the upstream read %d requests, want 2", n)
		}
	})
}

// TestBareLFHeadInPieces: both engines look at each piece of a head as it
// comes (http1.HeadScan): a bare LF in a later piece is refused at once,
// and a CRLF split between two pieces is no bare LF. (The pause between
// the pieces lets the loop read them apart; the test holds either way.)
func TestBareLFHeadInPieces(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := serverGateway(t, engine, "read_header_timeout: 1h", "http://"+u.Addr)
		for _, c := range []struct {
			pieces []string
			want   int
		}{
			{[]string{"GET / HTTP/1.1\r\nHost: x\r\n", "X-A: b\r\n", "X-B: c\nX-C"}, 400},
			{[]string{"GET / HTTP/1.1\r", "\nHost: x\r", "\n\r", "\n"}, 200},
			{[]string{"\r", "\nGET / HTTP/1.1\r\nHost: x\r\n", "\r\n"}, 200},
		} {
			conn, br := dialClient(t, gw.Addr)
			_ = conn.SetDeadline(time.Now().Add(waitLimit))
			for _, p := range c.pieces {
				if _, err := io.WriteString(conn, p); err != nil {
					t.Fatal(err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != c.want {
				t.Errorf("%q: %v, %v; want %d", c.pieces, resp, err, c.want)
			}
			_ = conn.Close()
		}
	})
}

// TestStalledHeadClosedUnanswered: a connection whose head does not come
// whole within server.read_header_timeout, none of it or part, is closed
// without an answer on both engines, as nginx and net/http close it.
// (The goroutine engine answered 408 to the first, 400 to the second.)
func TestStalledHeadClosedUnanswered(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := serverGateway(t, engine, "read_header_timeout: 100ms", "http://"+u.Addr)
		for _, sent := range []string{"", "GET / HTTP/1.1\r\nHost: x\r\n"} {
			conn, _ := dialClient(t, gw.Addr)
			_ = conn.SetDeadline(time.Now().Add(waitLimit))
			if _, err := io.WriteString(conn, sent); err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(conn); err != nil || len(got) != 0 {
				t.Errorf("after %q: %q, %v; want the connection closed unanswered", sent, got, err)
			}
		}
		if n := u.count(); n != 0 {
			t.Errorf("the upstream read %d requests", n)
		}
	})
}

// TestBareLFPipelinedHeadRefused: a head that comes behind a request in
// the same read (pipelined), whose bytes the goroutine engine's reads do
// not look at (see headWatch), is refused 400 when its empty line ends in
// a bare LF, on both engines, and reaches no upstream, nor does the
// request after it. (fasthttp ends a head at a bare LF empty line when a
// CRLF CRLF comes later in what it holds, here the next head's, and the
// goroutine engine served both: a proxy in front that ends lines at CRLF
// alone reads one request there.)
func TestBareLFPipelinedHeadRefused(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := serverGateway(t, engine, "read_header_timeout: 1h", "http://"+u.Addr)
		conn, br := dialClient(t, gw.Addr)
		_ = conn.SetDeadline(time.Now().Add(waitLimit))
		if _, err := io.WriteString(conn, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\nGET /c HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		for i, want := range []int{200, 400} {
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != want {
				t.Fatalf("answer %d: %v, %v; want %d", i, resp, err, want)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
		}
		if n := u.count(); n != 1 {
			t.Errorf("the upstream read %d requests, want 1", n)
		}
	})
}

// TestAnswerKeptAtBodyTimeout: the answer to a request is not lost when
// the request pipelined behind it does not send the first bytes of its
// body within server.read_timeout, on both engines (the goroutine engine
// holds that answer while it reads them; the loops close unanswered after
// it, the goroutine engine answers 408 first). (The goroutine engine
// closed the connection with its write deadline passed, that answer
// unsent, though the upstream had served the request.)
func TestAnswerKeptAtBodyTimeout(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := serverGateway(t, engine, "read_header_timeout: 1h, read_timeout: 100ms", "http://"+u.Addr)
		conn, br := dialClient(t, gw.Addr)
		_ = conn.SetDeadline(time.Now().Add(waitLimit))
		if _, err := io.WriteString(conn, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("the answer to the first request: %v, %v; want 200", resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 && !strings.HasPrefix(string(rest), "HTTP/1.1 408 ") {
			t.Errorf("after it: %q, %v; want the connection closed, with a 408 or none", rest, err)
		}
		if n := u.count(); n != 1 {
			t.Errorf("the upstream read %d requests, want 1", n)
		}
	})
}
