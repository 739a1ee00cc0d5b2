package gateway_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/gateway"
)

// readCodes reads an answer for each of codes from br and checks its
// status; when closes, it checks then that the last one says
// "Connection: close" and that the connection ends after it.
func readCodes(t *testing.T, br *bufio.Reader, closes bool, codes ...int) {
	t.Helper()
	for i, code := range codes {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Fatalf("answer %d: %d, want %d", i, resp.StatusCode, code)
		}
		if closes && i == len(codes)-1 && !resp.Close {
			t.Errorf("answer %d has no Connection: close, and the connection closes after it", i)
		}
	}
	if !closes {
		return
	}
	if resp, err := http.ReadResponse(br, nil); err == nil {
		t.Fatalf("an answer (%d) after the one that closes the connection: a request that followed it was served", resp.StatusCode)
	} else if err != io.EOF && err != io.ErrUnexpectedEOF {
		t.Fatalf("after the last answer: %v, want the connection closed", err)
	}
}

// TestPipelinedAfterCloseNotServed: a request pipelined after one with
// "Connection: close" is never served (RFC 9112 section 9.6: the server
// closes after that request's response and processes nothing after it; a
// proxy in front takes the connection to have ended, so serving more is a
// request-smuggling hazard), even when the client shuts down its sending
// side (as FuzzForward's client does) just as the gateway answers the
// closing request: on the loops, when the end of the client's stream was
// read before the loop came back to close the connection, the request
// after it went to the goroutine engine and was served
// (FuzzForward/seed#116, intermittent under load). The loops are held so
// that the target's answer and the client's end of stream both wait for
// the loop, which then reads them in that order. On the goroutine engine,
// which has no loops to hold, the client shuts its side after the answer
// (before it, a wait upstream of more than watchDelay would take the
// client to have left).
func TestPipelinedAfterCloseNotServed(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		g := newGate(1)
		t.Cleanup(g.open)
		flushed := make(chan struct{}, 1)
		up := startPathsUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/2" {
				return
			}
			g.wait(r)
			w.Header().Set("Content-Length", "2")
			io.WriteString(w, "ok")
			w.(http.Flusher).Flush()
			flushed <- struct{}{}
		})
		gw := gatewayTo(t, engine, up.addr())
		c, br := dialClient(t, gw.Addr)
		io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"+
			"GET /2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"+
			"GET /3 HTTP/1.1\r\nHost: x\r\n\r\n")
		g.awaitArrivals(t, 1)
		if engine == "loop" {
			resume := gateway.PauseLoops(t, gw.Gateway, waitLimit)
			g.open()
			<-flushed
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			resume()
		} else {
			g.open()
		}
		readCodes(t, br, true, 200, 200)
		if engine != "loop" {
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
		}
		if got := up.seen(); !slices.Equal(got, []string{"/1", "/2"}) {
			t.Errorf("the target was asked for %q, want /1 and /2", got)
		}
	})
}

// TestPipelinedAfterClosingAnswerNotServed: a request pipelined after one
// whose answer closes the connection is never served, whether the client
// shuts down its sending side after its requests or not: after an HTTP/1.0
// request without keep-alive, after "close" among other tokens, and after
// a head the gateway refuses (400) because it cannot trust its framing,
// and after a body over server.max_body_bytes, refused (413) as nginx
// refuses it: a request its bytes hold is never served, nor any after it.
func TestPipelinedAfterClosingAnswerNotServed(t *testing.T) {
	cases := []struct {
		name, second string
		closes       bool
		codes        []int
		paths        []string // what the target is asked for
	}{
		{"client closes", "GET /2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", true, []int{200, 200}, []string{"/1", "/2"}},
		{"client closes, among other tokens", "GET /2 HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Close\r\n\r\n", true, []int{200, 200}, []string{"/1", "/2"}},
		{"HTTP/1.0", "GET /2 HTTP/1.0\r\nHost: x\r\n\r\n", true, []int{200, 200}, []string{"/1", "/2"}},
		{"HTTP/1.0 after keep-alive", "GET /2 HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\nGET /2 HTTP/1.0\r\nHost: x\r\n\r\n", true, []int{200, 200, 200}, []string{"/1", "/2", "/2"}},
		{"400", "GET /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", true, []int{200, 400}, []string{"/1"}},
		{"413", "POST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 28\r\n\r\nGET /4 HTTP/1.1\r\nHost: x\r\n\r\n", true, []int{200, 413}, []string{"/1"}},
	}
	forEngines(t, func(t *testing.T, engine string) {
		up := startPathsUpstream(t, nil)
		gw := serverGateway(t, engine, "max_body_bytes: 16", up.URL)
		for _, tc := range cases {
			for _, shut := range []bool{false, true} {
				name := tc.name
				if shut {
					name += ", client shuts its side"
				}
				t.Run(name, func(t *testing.T) {
					before := len(up.seen())
					c, br := dialClient(t, gw.Addr)
					io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"+tc.second+"GET /3 HTTP/1.1\r\nHost: x\r\n\r\n")
					if shut {
						if err := c.(*net.TCPConn).CloseWrite(); err != nil {
							t.Fatal(err)
						}
					}
					readCodes(t, br, tc.closes, tc.codes...)
					if got := up.seen()[before:]; !slices.Equal(got, tc.paths) {
						t.Errorf("the target was asked for %q, want %q", got, tc.paths)
					}
				})
			}
		}
	})
}
