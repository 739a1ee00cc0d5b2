package gateway_test

import (
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testpki"
)

// TestProtocolsThroughGateway sends requests with each client protocol
// (HTTP/2 and HTTP/1.1 over TLS, h2c by prior knowledge, HTTP/1.1) through
// the gateway on each engine: each gets the upstream's answer, over the
// protocol it asked for, and the upstream sees X-Forwarded-Proto https for
// the requests that came over TLS, http for the others.
func TestProtocolsThroughGateway(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Up-Proto", r.Proto)
			w.Write([]byte("hello " + r.URL.RequestURI() + " " + r.Host + " " + r.Header.Get("X-Forwarded-Proto")))
		})
		tg := startGateway(t, parseConfig(t, tlsGatewayConfig, engine, certList(ca.Server("localhost", "127.0.0.1")), up.URL, ""))
		tlsAddr := serveTLS(t, tg)
		for _, tc := range []struct {
			client, url string
			major       int
			proto       string
		}{
			{"h2", "https://" + tlsAddr, 2, "https"},
			{"h1", "https://" + tlsAddr, 1, "https"},
			{"h2c", tg.URL, 2, "http"},
			{"h1", tg.URL, 1, "http"},
		} {
			c := protoClient(t, tc.client, ca.Pool, "")
			for i := range 3 { // several requests on one connection
				resp, err := c.Get(tc.url + "/a?b=1")
				if err != nil {
					t.Fatalf("%s %s: %v", tc.client, tc.url, err)
				}
				body := readAll(t, resp)
				if resp.StatusCode != 200 || resp.ProtoMajor != tc.major || body != "hello /a?b=1 "+up.addr()+" "+tc.proto || resp.Header.Get("X-Up-Proto") != "HTTP/1.1" {
					t.Errorf("%s %s request %d: %d %s %q %v", tc.client, tc.url, i, resp.StatusCode, resp.Proto, body, resp.Header)
				}
			}
		}
	})
}

// TestAnswersAlikeOverHTTP2 checks that the gateway's own answers (a rate
// limit's 429, a fallback, a 502 for an unreachable upstream) are the same
// over HTTP/2, by TLS and h2c, as over HTTP/1.1: status, body and the
// headers that go with them.
func TestAnswersAlikeOverHTTP2(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		up := startUpstream(t, "up", nil)
		dead := "http://" + closedAddr(t)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
tls: {listen: 127.0.0.1:0, certificates: %s}
upstreams:
  up: {targets: ["%s"]}
  dead: {targets: ["%s"]}
routes:
  - {name: limited, upstream: up, match: {path_prefix: /limited}, policies: {rate_limit: {limit: 1, period: 1m, key: route}}}
  - {name: fallback, upstream: dead, match: {path_prefix: /fallback}, policies: {fallback: {status: 200, content_type: text/plain, body: cached}}}
  - {name: dead, upstream: dead}
`, engine, certList(ca.Server("127.0.0.1")), up.URL, dead))
		tlsAddr := serveTLS(t, tg)
		h1 := protoClient(t, "h1", ca.Pool, "")
		if r := get(t, h1, tg.URL+"/limited"); r.Code != 200 {
			t.Fatalf("first request: %d %q", r.Code, r.Body)
		}
		clients := []struct{ name, base string }{
			{"h1", tg.URL}, {"h2", "https://" + tlsAddr}, {"h1 over TLS", "https://" + tlsAddr}, {"h2c", tg.URL},
		}
		for _, path := range []string{"/limited", "/fallback", "/dead"} {
			var want result
			for i, c := range clients {
				cl := protoClient(t, strings.Fields(c.name)[0], ca.Pool, "")
				r := get(t, cl, c.base+path)
				got := result{Code: r.Code, Body: r.Body, Header: http.Header{}}
				for _, k := range []string{"Content-Type", "Retry-After", "Ratelimit-Policy", "Ratelimit"} {
					if v := r.Header.Values(k); v != nil {
						got.Header[k] = v
					}
				}
				if i == 0 {
					want = got
					if (path == "/limited") != (want.Code == 429) || path == "/fallback" && want.Body != "cached" || path == "/dead" && want.Code != 502 {
						t.Errorf("%s over h1: %d %q", path, want.Code, want.Body)
					}
					continue
				}
				if got.Code != want.Code || got.Body != want.Body || !reflect.DeepEqual(got.Header, want.Header) {
					t.Errorf("%s over %s: %d %v %q, want as over h1: %d %v %q", path, c.name, got.Code, got.Header, got.Body, want.Code, want.Header, want.Body)
				}
			}
		}
	})
}

// TestTLSResponseLength checks that a response the gateway reads whole
// (here 40 KiB) reaches an HTTP/1.1 client over TLS with its
// Content-Length, not chunked, as on the plaintext listener.
func TestTLSResponseLength(t *testing.T) {
	ca := testpki.NewCA(t)
	body := strings.Repeat("x", 40<<10)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write([]byte(body))
	})
	tg := startGateway(t, parseConfig(t, tlsGatewayConfig, "goroutine", certList(ca.Server("127.0.0.1")), up.URL, ""))
	addr := serveTLS(t, tg)
	resp, err := protoClient(t, "h1", ca.Pool, "").Get("https://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, resp)
	if resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) > 0 || got != body {
		t.Errorf("Content-Length %d, Transfer-Encoding %v, %d bytes; want %d bytes with their length", resp.ContentLength, resp.TransferEncoding, len(got), len(body))
	}
}
