package gateway_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testpki"
)

// TestTLSUpstreamKeyUpdateAfterResponse has a TLS 1.3 target send, with
// each response, a KeyUpdate that asks the gateway to update its keys too,
// and the gateway's next request on that connection come after the
// previous one's response-header deadline: every request is answered.
// (The look into a pooled TLS connection for stray bytes read the
// KeyUpdate, and crypto/tls's answer to it was written under the last
// request's deadline, long past: it failed, and so did the next request's
// write on the connection.)
func TestTLSUpstreamKeyUpdateAfterResponse(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		up := startRaw(t, func(c net.Conn, _ *bufio.Reader) {
			var keys bytes.Buffer
			tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{ca.Server("api.internal").TLS},
				MinVersion: tls.VersionTLS13, SessionTicketsDisabled: true, KeyLogWriter: &keys})
			if tc.Handshake() != nil {
				return
			}
			// The server's records are written here, with its secret
			// under the name newRecordWriter looks for.
			var log string
			for line := range strings.Lines(keys.String()) {
				if strings.HasPrefix(line, "SERVER_TRAFFIC_SECRET_0 ") {
					log = strings.Replace(line, "SERVER_", "CLIENT_", 1)
				}
			}
			w := newRecordWriter(t, tc.ConnectionState().CipherSuite, log)
			br := bufio.NewReader(tc)
			for range 10 {
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				out := w.seal(nil, 23, []byte(okAnswer))
				if _, err := c.Write(w.keyUpdate(out)); err != nil {
					return
				}
			}
		})
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["https://%s"], response_header_timeout: 50ms, tls: {ca_file: %s, server_name: api.internal}}
routes:
  - {name: all, upstream: up}
`, engine, up.addr, ca.CertFile))
		c, br := dialClient(t, tg.Addr)
		for i := range 3 {
			if i > 0 {
				time.Sleep(100 * time.Millisecond) // past the last request's deadline
			}
			resp, body, err := roundTripRaw(t, c, br, "GET", "/r")
			if err != nil || resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("request %d: %v %q %v, want 200 \"ok\"", i, resp, body, err)
			}
		}
	})
}
