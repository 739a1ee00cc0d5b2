package gateway_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
)

// engineUpstream answers /echo with the request's body, /chunked with a
// chunked body, and anything else with the method and path.
func engineUpstream(t *testing.T) *upstream {
	return startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			b, _ := io.ReadAll(r.Body) // first: net/http is not full duplex
			_, _ = w.Write(b)
		case "/chunked":
			io.WriteString(w, "part 1, ")
			w.(http.Flusher).Flush()
			io.WriteString(w, "part 2")
		default:
			fmt.Fprintf(w, "%s %s", r.Method, r.URL.Path)
		}
	})
}

// TestEnginesAnswerAlike sends the same pipelined requests, in one write,
// to a gateway on each engine and checks that both answer each of them
// alike and in order. On the event loops they cover what the loops serve
// themselves (GET, HEAD, a small body, no route, a rate limit's 429), a
// streamed chunked response that moves the connection to a goroutine and
// back, and a large body that hands the connection to the goroutine engine
// with the request behind it.
func TestEnginesAnswerAlike(t *testing.T) {
	large := strings.Repeat("x", 100<<10)
	requests := []struct {
		raw, status, body string
	}{
		{"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", "200", "GET /a"},
		{"HEAD /a HTTP/1.1\r\nHost: x\r\n\r\n", "200", ""},
		{"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", "200", "hello"},
		{"GET /limited HTTP/1.1\r\nHost: x\r\n\r\n", "200", "GET /limited"},
		{"GET /limited HTTP/1.1\r\nHost: x\r\n\r\n", "429", `{"error":"rate_limited","retry_after":3600}` + "\n"},
		{"GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n", "200", "part 1, part 2"},
		// Sent once the above are answered: the connection is back on a loop.
		{"GET /b HTTP/1.1\r\nHost: x\r\n\r\n", "200", "GET /b"},
		{"GET /none HTTP/1.1\r\nHost: nowhere\r\n\r\n", "404", `{"error":"no_route"}` + "\n"},
		{"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 102400\r\n\r\n" + large, "200", large},
		{"GET /c HTTP/1.1\r\nHost: x\r\n\r\n", "200", "GET /c"},
	}
	const batch = 6 // requests in the first write
	var first, second bytes.Buffer
	for i, r := range requests {
		if i < batch {
			first.WriteString(r.raw)
		} else {
			second.WriteString(r.raw)
		}
	}
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			up := engineUpstream(t)
			gw := routedGateway(t, engine, up, `
  - name: limited
    match: {path_prefix: /limited}
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: route}
  - name: all
    match: {host: x}
    upstream: up
    policies:
      circuit_breaker: {failure_rate: 0.5}
      concurrency: {adaptive: {algorithm: default}}
`)
			conn, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(waitLimit))
			if _, err := conn.Write(first.Bytes()); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			for i, r := range requests {
				if i == batch {
					if _, err := conn.Write(second.Bytes()); err != nil {
						t.Fatal(err)
					}
				}
				method := strings.Fields(r.raw)[0]
				resp, err := http.ReadResponse(br, &http.Request{Method: method})
				if err != nil {
					t.Fatalf("response %d: %v", i, err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("response %d: %v", i, err)
				}
				if got := fmt.Sprint(resp.StatusCode); got != r.status || string(b) != r.body {
					t.Errorf("response %d to %.40q: %s %.60q (%d bytes), want %s %.60q (%d bytes)", i, r.raw, got, b, len(b), r.status, r.body, len(r.body))
				}
				if method == "HEAD" && resp.ContentLength != int64(len("HEAD /a")) {
					t.Errorf("HEAD: Content-Length %d, want %d", resp.ContentLength, len("HEAD /a"))
				}
			}
			// The loops served all but the large body; that one's hand-over
			// is the only one.
			st := gw.Status()
			want := gateway.EngineStatus{Name: engine}
			if engine == "loop" {
				want.Handovers = 1
			}
			if st.Engine != want || gw.routeStatus(t, "all").Loop != (engine == "loop") {
				t.Errorf("engine %+v, route served by loops: %v; want %+v, %v", st.Engine, gw.routeStatus(t, "all").Loop, want, engine == "loop")
			}
		})
	}
}

// TestSlowHeadersCut checks that a client that does not finish its
// headers within read_header_timeout loses its connection, on each engine.
func TestSlowHeadersCut(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		_, _, conn := dialEngine(t, engine, "read_header_timeout: 50ms")
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(waitLimit))
		b, err := io.ReadAll(conn) // whatever the gateway says, then the end
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open after %v (read %q)", waitLimit, b)
		}
	})
}

// dialEngine starts a gateway on engine, with server settings more (YAML,
// may be empty), whose one route sends everything to an engineUpstream,
// and returns it, the upstream and a connection to it.
func dialEngine(t *testing.T, engine, more string) (*testGateway, *upstream, net.Conn) {
	up := engineUpstream(t)
	gw := startGateway(t, parseConfig(t, `
server: {engine: %s, %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, engine, more, up.URL))
	conn, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return gw, up, conn
}

// TestLoopRoutes checks which routes the event loops serve: those whose
// policies decide at once, to plain-HTTP targets.
func TestLoopRoutes(t *testing.T) {
	up := engineUpstream(t)
	gw := startGateway(t, parseConfig(t, `
upstreams:
  up: {targets: ["%s"]}
  tls: {targets: ["https://127.0.0.1:1"]}
routes:
  - name: deciding
    match: {path_prefix: /a}
    upstream: up
    policies:
      rate_limit: {limit: 10}
      circuit_breaker: {failure_rate: 0.5}
      concurrency: {max: 4}
      timeout: 1s
      fallback: {status: 503, body: "degraded"}
  - {name: retry, match: {path_prefix: /b}, upstream: up, policies: {retry: {attempts: 2}}}
  - {name: coalesce, match: {path_prefix: /c}, upstream: up, policies: {coalesce: true}}
  - {name: queue, match: {path_prefix: /d}, upstream: up, policies: {concurrency: {max: 4, queue: 8}}}
  - {name: tls, match: {path_prefix: /e}, upstream: tls}
`, up.URL))
	if r := get(t, newClient(t), gw.URL+"/a"); r.Code != 200 { // the gateway serves
		t.Fatalf("GET /a: %d", r.Code)
	}
	want := map[string]bool{"deciding": true, "retry": true, "coalesce": false, "queue": false, "tls": false}
	for name, loop := range want {
		if got := gw.routeStatus(t, name).Loop; got != loop {
			t.Errorf("route %s served by the loops: %v, want %v", name, got, loop)
		}
	}
}

// TestRequestInPieces sends a request in pieces (its head cut in the middle
// of a header, then its body in two) and checks that the gateway answers
// nothing before the whole request is in, then answers it once, with the
// whole body, and the request pipelined behind it. Each pause gives the
// gateway time to read the piece alone (it may read two together: the
// answers must be the same).
func TestRequestInPieces(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		gw, up, conn := dialEngine(t, engine, "")
		br := bufio.NewReader(conn)
		for _, piece := range []string{
			"POST /echo HTTP/1.1\r\nHo",
			"st: x\r\nContent-Length: 10\r\n\r\n0123",
			"45678",
			"9GET /after HTTP/1.1\r\nHost: x\r\n\r\n",
		} {
			_ = conn.SetDeadline(time.Now().Add(waitLimit))
			if _, err := conn.Write([]byte(piece)); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(piece, "9") {
				_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				if _, err := br.Peek(1); err == nil {
					t.Fatalf("an answer before the request was whole (after %q)", piece)
				}
			}
		}
		_ = conn.SetDeadline(time.Now().Add(waitLimit))
		for _, want := range []string{"0123456789", "GET /after"} {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != want {
				t.Errorf("answer %d %q, want 200 %q", resp.StatusCode, b, want)
			}
		}
		if n := up.calls.Load(); n != 2 {
			t.Errorf("upstream calls %d, want 2", n)
		}
		if engine == "loop" && gw.Status().Engine.Handovers != 0 {
			t.Errorf("%d hand-overs: the loops left the request", gw.Status().Engine.Handovers)
		}
	})
}

// TestDateAndServerAlike: on both engines every answer, the target's or
// the gateway's own, carries the gateway's Date (the time it leaves, as
// nginx sends it), the target's Server passes, and the gateway adds none.
func TestDateAndServerAlike(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, func(i int, r seenRequest) string {
			switch r.Target {
			case "/bare":
				return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
			case "/fail":
				return "HTTP/1.1 503 Service Unavailable\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Length: 2\r\n\r\nno"
			}
			return "HTTP/1.1 200 OK\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nServer: upstream/1\r\nContent-Length: 2\r\n\r\nok"
		})
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: limited, match: {path_prefix: /limited}, upstream: up, policies: {rate_limit: {limit: 1, period: 1h}}}
  - {name: all, upstream: up}
`, engine, u.addr))
		for _, tt := range []struct{ raw, server string }{
			{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "upstream/1"},
			{"GET /bare HTTP/1.1\r\nHost: x\r\n\r\n", ""},
			{"GET /fail HTTP/1.1\r\nHost: x\r\n\r\n", ""},
			{"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "upstream/1"},
			{"get / HTTP/1.1\r\nHost: x\r\n\r\n", ""},
			{"GET /limited HTTP/1.1\r\nHost: x\r\n\r\n", "upstream/1"},
			{"GET /limited HTTP/1.1\r\nHost: x\r\n\r\n", ""}, // 429
			{"GET /none HTTP/1.1\r\nHost: no.route\r\n\r\n", "upstream/1"},
		} {
			r := exchangeRaw(t, gw.Addr, tt.raw, 1)[0]
			date, err := http.ParseTime(r.Header.Get("Date"))
			if err != nil || date.Year() < 2025 || len(r.Header.Values("Date")) != 1 {
				t.Errorf("%q: Date %q, want one of the gateway's", tt.raw, r.Header.Values("Date"))
			}
			if got := r.Header.Values("Server"); (tt.server == "" && len(got) != 0) || (tt.server != "" && (len(got) != 1 || got[0] != tt.server)) {
				t.Errorf("%q: Server %q, want %q", tt.raw, got, tt.server)
			}
		}
	})
}
