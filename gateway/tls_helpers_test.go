package gateway_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/internal/testpki"
)

// serveTLS serves tg's TLS listener on 127.0.0.1:0 as well, until the test
// ends, and returns its address.
func serveTLS(t testing.TB, tg *testGateway) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveTLSOn(t, tg, ln)
}

// serveTLSOn serves tg's TLS listener on ln as serveTLS does, and returns
// ln's address.
func serveTLSOn(t testing.TB, tg *testGateway, ln net.Listener) string {
	t.Helper()
	served := make(chan error, 1)
	go func() { served <- tg.ServeTLS(ln) }()
	t.Cleanup(func() {
		tg.stop(t)
		if err := <-served; err != nil {
			t.Errorf("ServeTLS: %v", err)
		}
	})
	return ln.Addr().String()
}

// protoClient returns a client that speaks only the protocols named:
// "h1" (HTTP/1.1, over TLS for https URLs), "h2" (HTTP/2 over TLS) or
// "h2c" (HTTP/2 without TLS, by prior knowledge). roots verify the
// gateway's certificate; serverName is sent by SNI (empty: the URL's
// host).
func protoClient(t testing.TB, proto string, roots *x509.CertPool, serverName string) *http.Client {
	t.Helper()
	tr := &http.Transport{Proxy: nil, DisableCompression: true, Protocols: new(http.Protocols),
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName}}
	switch proto {
	case "h1":
		tr.Protocols.SetHTTP1(true)
	case "h2":
		tr.Protocols.SetHTTP2(true)
	case "h2c":
		tr.Protocols.SetUnencryptedHTTP2(true)
	default:
		t.Fatalf("no protocol %q", proto)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: waitLimit}
}

// tlsGatewayConfig is a gateway on engine with a TLS listener serving the
// certificates (cert_file, key_file pairs, the first the default), one
// route "all" to the plain target upstream, and extra YAML appended to
// the route.
const tlsGatewayConfig = `
server: {engine: %s}
tls:
  listen: 127.0.0.1:0
  certificates: %s
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: all
    upstream: up
%s`

// certList writes pairs as tls.certificates in YAML flow style.
func certList(pairs ...*testpki.Pair) string {
	s := "["
	for i, p := range pairs {
		if i > 0 {
			s += ", "
		}
		s += "{cert_file: " + p.CertFile + ", key_file: " + p.KeyFile + "}"
	}
	return s + "]"
}

// readAll reads and closes resp's body.
func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return string(b)
}
