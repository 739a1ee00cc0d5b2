package gateway_test

import (
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/internal/testpki"
)

// TestProtocolsThroughGateway sends a request with each client protocol
// (HTTP/2 and HTTP/1.1 over TLS, h2c by prior knowledge, HTTP/1.1) through
// the gateway on each engine: each gets the upstream's answer, over the
// protocol it asked for.
func TestProtocolsThroughGateway(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Up-Proto", r.Proto)
			w.Write([]byte("hello " + r.URL.RequestURI() + " " + r.Host))
		})
		tg := startGateway(t, parseConfig(t, tlsGatewayConfig, engine, certList(ca.Server("localhost", "127.0.0.1")), up.URL, ""))
		tlsAddr := serveTLS(t, tg)
		for _, tc := range []struct {
			client, url string
			major       int
		}{
			{"h2", "https://" + tlsAddr, 2},
			{"h1", "https://" + tlsAddr, 1},
			{"h2c", tg.URL, 2},
			{"h1", tg.URL, 1},
		} {
			c := protoClient(t, tc.client, ca.Pool, "")
			for i := range 3 { // several requests on one connection
				resp, err := c.Get(tc.url + "/a?b=1")
				if err != nil {
					t.Fatalf("%s %s: %v", tc.client, tc.url, err)
				}
				body := readAll(t, resp)
				if resp.StatusCode != 200 || resp.ProtoMajor != tc.major || body != "hello /a?b=1 "+up.addr() || resp.Header.Get("X-Up-Proto") != "HTTP/1.1" {
					t.Errorf("%s %s request %d: %d %s %q %v", tc.client, tc.url, i, resp.StatusCode, resp.Proto, body, resp.Header)
				}
			}
		}
	})
}
