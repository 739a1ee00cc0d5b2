package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// parityCase is one request of the parity suite: sent as raw, answered with
// status, whatever the engine.
type parityCase struct {
	name, raw string
	status    int
}

// parityCases are the answers the gateway can give, each asked for by one
// request (in this order: a 429 and an open breaker follow the request that
// used the limit up or tripped the breaker).
var parityCases = []parityCase{
	{"no route", "GET /none HTTP/1.1\r\nHost: nowhere\r\n\r\n", 404},
	{"rate limited: first", "GET /limited HTTP/1.1\r\nHost: x\r\n\r\n", 200},
	{"rate limited: 429", "GET /limited HTTP/1.1\r\nHost: x\r\n\r\n", 429},
	{"breaker: 5xx that trips it", "GET /breaker HTTP/1.1\r\nHost: x\r\n\r\n", 500},
	{"breaker open", "GET /breaker HTTP/1.1\r\nHost: x\r\n\r\n", 503},
	{"unreachable", "GET /dead HTTP/1.1\r\nHost: x\r\n\r\n", 502},
	{"5xx passes", "GET /5xx HTTP/1.1\r\nHost: x\r\n\r\n", 503},
	{"fallback", "GET /fallback HTTP/1.1\r\nHost: x\r\n\r\n", 200},
	{"HEAD", "HEAD /head HTTP/1.1\r\nHost: x\r\n\r\n", 200},
	{"204", "GET /204 HTTP/1.1\r\nHost: x\r\n\r\n", 204},
	{"304", "GET /304 HTTP/1.1\r\nHost: x\r\n\r\n", 304},
	{"chunked", "GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n", 200},
	{"over 64 KiB", "GET /big HTTP/1.1\r\nHost: x\r\n\r\n", 200},
	{"1 MiB", "GET /huge HTTP/1.1\r\nHost: x\r\n\r\n", 200},
	{"interim 100 and 103", "GET /interim HTTP/1.1\r\nHost: x\r\n\r\n", 200},
	{"POST with a body", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 200},
	{"client closes", "GET /5xx HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 503},
	{"rules", "GET /rules/small HTTP/1.1\r\nHost: x\r\n\r\n", 200},
	{"rules, chunked", "GET /rules/chunked HTTP/1.1\r\nHost: x\r\n\r\n", 200},
	{"rules, 5xx", "GET /rules/5xx HTTP/1.1\r\nHost: x\r\n\r\n", 503},
	{"rules, rate limited", "GET /rlrules/small HTTP/1.1\r\nHost: x\r\n\r\n", 200},
	{"upstream 404 passes", "GET /missing HTTP/1.1\r\nHost: x\r\n\r\n", 404},
	{"POST not retried", "POST /retry-post HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", 502},
	{"body too large", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2048\r\n\r\n" + strings.Repeat("b", 2048), 413},
	{"HTTP/1.0", "GET /http10 HTTP/1.0\r\nHost: x\r\n\r\n", 404},
	{"upstream frames twice", "GET /both HTTP/1.1\r\nHost: x\r\n\r\n", 502},
	{"unasked 101", "GET /101 HTTP/1.1\r\nHost: x\r\n\r\n", 502},
	{"too many interim", "GET /interim11 HTTP/1.1\r\nHost: x\r\n\r\n", 502},
	{"ten interim", "GET /interim10 HTTP/1.1\r\nHost: x\r\n\r\n", 200},
	{"HEAD, client closes", "HEAD /head HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 200},
	{"bad percent in the query", "GET /echo?a=%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400},
}

// The requests whose answers need a clock or a second request: they run
// apart from parityCases (see answerAll).
var (
	parityRetry    = parityCase{"retry then success", "GET /retry HTTP/1.1\r\nHost: x\r\n\r\n", 200}
	parityRetries  = parityCase{"retries exhausted", "GET /retry-fail HTTP/1.1\r\nHost: x\r\n\r\n", 502}
	parityTimeout  = parityCase{"timeout", "GET /timeout HTTP/1.1\r\nHost: x\r\n\r\n", 504}
	parityHeld     = parityCase{"held while overloaded", "GET /overload HTTP/1.1\r\nHost: x\r\n\r\n", 200}
	parityOverload = parityCase{"overload", "GET /overload/2 HTTP/1.1\r\nHost: x\r\n\r\n", 503}
)

// TestEngineParity sends the same requests to a gateway on each engine and
// checks that both give every answer alike: the status each case expects,
// the same headers (the gateway's Date on both, no Server header added) and
// the same body, byte for byte.
func TestEngineParity(t *testing.T) {
	answers := map[string][]result{}
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			answers[engine] = answerAll(t, engine)
		})
	}
	loop, gor := answers["loop"], answers["goroutine"]
	if len(loop) != len(gor) {
		t.Fatalf("answers: %d on the loops, %d on the goroutine engine", len(loop), len(gor))
	}
	cases := allParityCases()
	for i, c := range cases {
		l, g := loop[i], gor[i]
		for engine, r := range map[string]result{"loop": l, "goroutine": g} {
			if r.Code != c.status {
				t.Errorf("%s on %s: %d %.80q, want %d", c.name, engine, r.Code, r.Body, c.status)
			}
			if date, err := http.ParseTime(r.Header.Get("Date")); err != nil || date.Year() < 2025 || len(r.Header.Values("Date")) != 1 {
				t.Errorf("%s on %s: Date %q, want one of the gateway's", c.name, engine, r.Header.Values("Date"))
			}
			if s := r.Header.Values("Server"); len(s) != 0 {
				t.Errorf("%s on %s: Server %q, want none", c.name, engine, s)
			}
			if strings.HasPrefix(c.name, "rules") && (r.Header.Get("X-Served") != "sluice" || r.Header.Get("X-Extra") != "1" || r.Header.Values("X-Internal") != nil) {
				t.Errorf("%s on %s: headers %v, want the route's response rules applied", c.name, engine, r.Header)
			}
			if c.name == "rules, rate limited" && (len(r.Header.Values("RateLimit")) != 1 || r.Header.Get("RateLimit") == "forged" || len(r.Header.Values("RateLimit-Policy")) != 1) {
				t.Errorf("%s on %s: RateLimit %q, RateLimit-Policy %q, want the limit's own, once", c.name, engine, r.Header.Values("RateLimit"), r.Header.Values("RateLimit-Policy"))
			}
			// An HTTP/1.0 client without keep-alive asks to close too, and
			// the gateway closes after refusing a request (400) or its
			// body (413).
			closes := strings.Contains(c.raw, "Connection: close") || strings.Contains(c.raw, " HTTP/1.0\r\n") ||
				c.status == http.StatusBadRequest || c.status == http.StatusRequestEntityTooLarge
			if closes != (r.Header.Get("Connection") == "close") {
				t.Errorf("%s on %s: Connection %q, want close: %v", c.name, engine, r.Header.Get("Connection"), closes)
			}
		}
		lh, gh := l.Header.Clone(), g.Header.Clone()
		lh.Del("Date")
		gh.Del("Date")
		if l.Code != g.Code || !reflect.DeepEqual(lh, gh) || l.Body != g.Body {
			t.Errorf("%s: the engines differ:\nloop:      %d %v %.200q\ngoroutine: %d %v %.200q", c.name, l.Code, lh, l.Body, g.Code, gh, g.Body)
		}
	}
}

func allParityCases() []parityCase {
	return append(append([]parityCase(nil), parityCases...), parityRetry, parityRetries, parityTimeout, parityHeld, parityOverload)
}

// answerAll starts a gateway on engine, on a fake clock, and returns its
// answers to allParityCases, in order.
func answerAll(t *testing.T, engine string) []result {
	var retries atomic.Int64
	hang, held := make(chan struct{}), make(chan struct{})
	arrived := make(chan string, 4)
	u := startWireUpstream(t, func(_ int, r seenRequest) string {
		switch r.Target {
		case "/limited", "/echo":
			return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(r.Body)+2, "ok"+r.Body)
		case "/breaker", "/fallback":
			return "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 6\r\n\r\nbroken"
		case "/5xx":
			return "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\nX-Up: 1\r\nX-Internal: 1\r\nContent-Length: 11\r\n\r\nunavailable"
		case "/small":
			if r.Header.Get("X-Env") != "prod" {
				return "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
			}
			return "HTTP/1.1 200 OK\r\nX-Internal: 1\r\nX-Served: up\r\nContent-Length: 5\r\n\r\nsmall"
		case "/retry":
			if retries.Add(1) == 1 {
				return "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 5\r\n\r\nfirst"
			}
			return "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond"
		case "/retry-fail", "/retry-post":
			return "HTTP/1.1 502 Bad Gateway\r\nX-Up: 1\r\nContent-Length: 6\r\n\r\nfailed"
		case "/timeout":
			arrived <- r.Target
			<-hang
			return ""
		case "/overload":
			arrived <- r.Target
			<-held
			return "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nheld"
		case "/head":
			return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n"
		case "/204":
			return "HTTP/1.1 204 No Content\r\nX-Up: 1\r\n\r\n"
		case "/304":
			return "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n"
		case "/chunked":
			return "HTTP/1.1 200 OK\r\nX-Internal: 1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
		case "/big":
			return "HTTP/1.1 200 OK\r\nContent-Length: 102400\r\n\r\n" + strings.Repeat("b", 100<<10)
		case "/huge":
			return "HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n" + strings.Repeat("h", 1<<20)
		case "/both":
			return "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
		case "/101":
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
		case "/interim10", "/interim11":
			n := 10
			if r.Target == "/interim11" {
				n = 11
			}
			return strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n", n) +
				"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal"
		case "/interim":
			return "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n" +
				"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal"
		}
		return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
	})
	t.Cleanup(func() { close(hang) }) // before the upstream's own cleanup
	fc := clock.NewFake(time.Time{})
	gw := startGatewayClock(t, parseConfig(t, `
server: {engine: %s, max_body_bytes: 1024}
upstreams:
  up: {targets: ["http://%s"]}
  dead: {targets: ["http://%s"]}
routes:
  - {name: limited, match: {path_prefix: /limited}, upstream: up, policies: {rate_limit: {limit: 1, period: 1h, key: route}}}
  - {name: breaker, match: {path_prefix: /breaker}, upstream: up, policies: {circuit_breaker: {consecutive_failures: 1, open_for: 1h}}}
  - {name: overload, match: {path_prefix: /overload}, upstream: up, policies: {concurrency: {max: 1}}}
  - {name: timeout, match: {path_prefix: /timeout}, upstream: up, policies: {timeout: 1s}}
  - {name: dead, match: {path_prefix: /dead}, upstream: dead}
  - name: fallback
    match: {path_prefix: /fallback}
    upstream: up
    policies: {fallback: {status: 200, content_type: text/plain, body: "from the fallback"}}
  - name: retry
    match: {path_prefix: /retry}
    upstream: up
    policies: {retry: {attempts: 2, on: ["502"], backoff: {initial: 1ms, max: 1ms, jitter: none}}}
  - name: rules
    match: {path_prefix: /rules}
    upstream: up
    rewrite: {strip_prefix: /rules}
    headers:
      request: {set: {X-Env: prod}}
      response: {set: {X-Served: sluice}, add: {X-Extra: "1"}, remove: [X-Internal]}
  - name: rlrules
    match: {path_prefix: /rlrules}
    upstream: up
    policies: {rate_limit: {limit: 100, period: 1h, key: route}}
    rewrite: {strip_prefix: /rlrules}
    headers:
      request: {set: {X-Env: prod}}
      response: {set: {X-Served: sluice, RateLimit: forged}, add: {X-Extra: "1"}, remove: [X-Internal, RateLimit-Policy]}
  - {name: plain, match: {host: x}, upstream: up}
`, engine, u.addr, closedAddr(t)), fc)
	var out []result
	for _, c := range parityCases {
		out = append(out, paritySend(t, gw.Addr, c))
	}
	// The retry waits on the gateway's clock: it moves on, a millisecond at
	// a time, until the answer is in.
	res := sendAsync(gw.Addr, parityRetry.raw)
	out = append(out, awaitAnswer(t, res, func() { fc.Advance(time.Millisecond) }))
	res = sendAsync(gw.Addr, parityRetries.raw)
	out = append(out, awaitAnswer(t, res, func() { fc.Advance(time.Millisecond) }))
	// The attempt that hangs ends at the route's timeout.
	res = sendAsync(gw.Addr, parityTimeout.raw)
	awaitArrival(t, arrived)
	fc.Advance(time.Second)
	out = append(out, awaitAnswer(t, res, nil))
	// One request holds the route's only slot; the next is refused.
	res = sendAsync(gw.Addr, parityHeld.raw)
	awaitArrival(t, arrived)
	refused := paritySend(t, gw.Addr, parityOverload)
	close(held)
	out = append(out, awaitAnswer(t, res, nil), refused)
	return out
}

// paritySend sends c's request on a connection of its own and reads the
// answer whole.
func paritySend(t *testing.T, addr string, c parityCase) result {
	t.Helper()
	r, err := sendRaw(addr, c.raw)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return r
}

// sendRaw writes raw on a new connection to addr and reads one answer.
func sendRaw(addr, raw string) (result, error) {
	conn, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		return result{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitLimit))
	if _, err := io.WriteString(conn, raw); err != nil {
		return result{}, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: strings.Fields(raw)[0]})
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return result{}, err
	}
	// net/http takes these out of Header: put back, they are compared too.
	h := resp.Header.Clone()
	if len(resp.TransferEncoding) > 0 {
		h["Transfer-Encoding"] = resp.TransferEncoding
	}
	if resp.Close {
		h["Connection"] = []string{"close"}
	}
	return result{Code: resp.StatusCode, Header: h, Body: string(b)}, nil
}

type asyncAnswer struct {
	r   result
	err error
}

// sendAsync sends raw to addr from a goroutine; the answer comes on the
// channel.
func sendAsync(addr, raw string) <-chan asyncAnswer {
	res := make(chan asyncAnswer, 1)
	go func() {
		r, err := sendRaw(addr, raw)
		res <- asyncAnswer{r, err}
	}()
	return res
}

// awaitAnswer waits for an answer from sendAsync, calling tick (when not
// nil) every millisecond meanwhile, at most waitLimit in all.
func awaitAnswer(t *testing.T, res <-chan asyncAnswer, tick func()) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	every := time.NewTicker(time.Millisecond)
	defer every.Stop()
	for {
		select {
		case a := <-res:
			if a.err != nil {
				t.Fatal(a.err)
			}
			return a.r
		case <-every.C:
			if tick != nil {
				tick()
			}
		case <-ctx.Done():
			t.Fatal("no answer")
		}
	}
}

// awaitArrival waits for a request to reach the upstream's hanging paths.
func awaitArrival(t *testing.T, arrived <-chan string) {
	t.Helper()
	select {
	case <-arrived:
	case <-time.After(waitLimit):
		t.Fatal("the request did not reach the upstream")
	}
}
