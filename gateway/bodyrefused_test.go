package gateway_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testpki"
)

// TestBodyTooLargeClosesConnection: a body over server.max_body_bytes is
// answered 413 with Connection: close, and the connection closes after the
// answer, as nginx closes it (its length declared or not): the bytes of the
// refused body are never read as requests. The client that sends its whole
// body before it reads anything still gets the 413, not a reset: the
// gateway reads and drops what comes for a while before it closes.
func TestBodyTooLargeClosesConnection(t *testing.T) {
	const big = 8 << 20 // far more than the socket buffers hold
	cases := []struct {
		name string
		head string
		body func(w io.Writer) error
	}{
		{"declared", fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", big), func(w io.Writer) error {
			_, err := io.Copy(w, io.LimitReader(newPattern(1, big), big))
			return err
		}},
		{"chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", func(w io.Writer) error {
			chunk := fmt.Sprintf("%x\r\n%s\r\n", 64<<10, strings.Repeat("c", 64<<10))
			for range big / (64 << 10) {
				if _, err := io.WriteString(w, chunk); err != nil {
					return err
				}
			}
			_, err := io.WriteString(w, "0\r\n\r\n")
			return err
		}},
	}
	forEngines(t, func(t *testing.T, engine string) {
		var served atomic.Int64
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.Copy(io.Discard, r.Body); err == nil {
				served.Add(1)
			}
		})
		gw := serverGateway(t, engine, "max_body_bytes: 1024", up.URL)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c, br := dialClient(t, gw.Addr)
				// The whole request first, the answer after.
				if _, err := io.WriteString(c, tc.head); err != nil {
					t.Fatal(err)
				}
				if err := tc.body(c); err != nil {
					t.Fatalf("sending the body: %v (the gateway cut the connection before the client read its answer)", err)
				}
				io.WriteString(c, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("reading the answer: %v", err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 413 || !strings.Contains(string(b), "body_too_large") {
					t.Fatalf("answer %d %q, want 413 body_too_large", resp.StatusCode, b)
				}
				if !resp.Close {
					t.Errorf("the 413 has no Connection: close")
				}
				_ = c.SetReadDeadline(time.Now().Add(waitLimit))
				if resp, err := http.ReadResponse(br, nil); err == nil {
					t.Errorf("an answer (%d) after the 413: the connection stayed open", resp.StatusCode)
				} else if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("after the 413: %v, want the connection closed", err)
				}
			})
		}
		if n := served.Load(); n != 0 {
			t.Errorf("the upstream read %d refused bodies whole", n)
		}
	})
}

// TestBodyTooLargeLingerBounded: a client that keeps sending after its
// 413 does not hold the connection open for ever: the gateway stops
// reading after a bounded time and closes it.
func TestBodyTooLargeLingerBounded(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {})
		gw := serverGateway(t, engine, "max_body_bytes: 16", up.URL)
		c, br := dialClient(t, gw.Addr)
		chunk := []byte(strings.Repeat("z", 16<<10))
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000\r\n\r\n")
		c.Write(chunk) // the gateway reads a little of a body before it answers
		_ = c.SetReadDeadline(time.Now().Add(waitLimit))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 413 || !resp.Close {
			t.Fatalf("answer %d (close %v), want 413 with Connection: close", resp.StatusCode, resp.Close)
		}
		// Keep sending, up to a bound, until the gateway gives up.
		deadline := time.Now().Add(4 * waitLimit)
		for time.Now().Before(deadline) {
			_ = c.SetWriteDeadline(time.Now().Add(waitLimit))
			if _, err := c.Write(chunk); err != nil {
				return // the gateway closed the connection
			}
			time.Sleep(10 * time.Millisecond) // a slow sender, under the gateway's read timeout
		}
		t.Errorf("the gateway still read a refused body after %v", 4*waitLimit)
	})
}

// TestRefusedRequestClosesConnection: a request the gateway refuses with
// 400 before it reads the body (a route header or a rate-limit key sent
// on two lines) closes the connection, as nginx closes after a 400: the
// body is never read as requests, on either engine.
func TestRefusedRequestClosesConnection(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startPathsUpstream(t, nil)
		gw := routedGateway(t, engine, up.upstream, `
  - name: tier
    match: {path_prefix: /tier, headers: {X-Tier: small}}
    upstream: up
  - name: keyed
    match: {path_prefix: /keyed}
    upstream: up
    policies:
      rate_limit: {limit: 100, period: 1h, key: "header:X-Key"}
`)
		smuggled := "GET /keyed/smuggled HTTP/1.1\r\nHost: x\r\nX-Key: s\r\n\r\n"
		for _, tc := range []struct{ name, head, reason string }{
			{"route header", "POST /tier HTTP/1.1\r\nHost: x\r\nX-Tier: small\r\nX-Tier: big\r\n", "ambiguous_header"},
			{"rate-limit key", "POST /keyed HTTP/1.1\r\nHost: x\r\nX-Key: a\r\nX-Key: b\r\n", "ambiguous_key"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := len(up.seen())
				c, br := dialClient(t, gw.Addr)
				fmt.Fprintf(c, "%sContent-Length: %d\r\n\r\n%s", tc.head, len(smuggled), smuggled)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 400 || !strings.Contains(string(b), tc.reason) {
					t.Fatalf("answer %d %q, want 400 %s", resp.StatusCode, b, tc.reason)
				}
				if !resp.Close {
					t.Errorf("the 400 has no Connection: close")
				}
				if resp, err := http.ReadResponse(br, nil); err == nil {
					t.Errorf("an answer (%d) after the 400", resp.StatusCode)
				}
				if got := up.seen()[before:]; len(got) != 0 {
					t.Errorf("the target was asked for %q", got)
				}
			})
		}
	})
}

// TestBodyTooLargeLingerEndsAtShutdown: shutdown ends a lingering close
// at once, though the client still sends: the gateway closes the
// connection, and the client's writes fail well before the lingering
// time is up.
func TestBodyTooLargeLingerEndsAtShutdown(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {})
		gw := serverGateway(t, engine, "max_body_bytes: 16", up.URL)
		c, br := dialClient(t, gw.Addr)
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n"+strings.Repeat("z", 1024))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Fatalf("answer %d, want 413", resp.StatusCode)
		}
		failed := make(chan error, 1)
		go func() { // a byte every 20 ms: the lingering never runs out of input
			for i := 0; ; i++ {
				if i == 1000 {
					failed <- nil
					return
				}
				if _, err := c.Write([]byte("z")); err != nil {
					failed <- err
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		gw.stop(t)
		select {
		case err := <-failed:
			if err == nil {
				t.Error("the client's writes never failed")
			}
		case <-time.After(gateway.LingerTime / 2):
			t.Errorf("the gateway still read the client's bytes %v after shutdown", gateway.LingerTime/2)
			<-failed
		}
	})
}

// TestBodyTooLargeClosesOverTLS: over the TLS listener's HTTP/1.1 too, a
// body over max_body_bytes sent whole before the client reads is answered
// 413 with Connection: close, and the connection then ends.
func TestBodyTooLargeClosesOverTLS(t *testing.T) {
	const big = 4 << 20
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		up := startUpstream(t, "up", nil)
		gw := tlsGateway(t, engine, "max_body_bytes: 1024", certList(ca.Server("localhost", "127.0.0.1")), up.URL)
		checkRefusedOverTLS(t, gw, ca, "", big, 413)
	})
}

// checkRefusedOverTLS sends a POST with extra head fields and a body of
// size bytes, whole, over gw's TLS listener before reading, and checks
// the answer is want with Connection: close, and that the connection then
// ends (the client reads its answer: no reset).
func checkRefusedOverTLS(t *testing.T, gw *testGateway, ca *testpki.CA, extra string, size int64, want int) {
	t.Helper()
	c, err := tls.Dial("tcp", serveTLS(t, gw), &tls.Config{RootCAs: ca.Pool, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * waitLimit))
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n", extra, size)
	if _, err := io.Copy(c, io.LimitReader(newPattern(1, size), size)); err != nil {
		t.Fatalf("sending the body: %v (the gateway cut the connection before the client read its answer)", err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want || !resp.Close {
		t.Fatalf("answer %d (close %v), want %d with Connection: close", resp.StatusCode, resp.Close, want)
	}
	if rest, err := io.ReadAll(br); len(rest) > 0 || err != nil {
		t.Errorf("after the %d: %q, %v; want the end of the connection", want, rest, err)
	}
}
