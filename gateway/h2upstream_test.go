package gateway_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/testpki"
)

// protoUpstream is an upstream server that speaks only proto ("h1", "h2" or
// "h2c"; h1 and h2 over TLS with cert when cert is not nil) and counts the
// connections it accepted. clientCAs, when not nil, makes it require a
// client certificate they sign.
type protoUpstream struct {
	*httptest.Server
	conns atomic.Int64
}

func startProtoUpstream(t *testing.T, proto string, cert *testpki.Pair, clientCAs *testpki.CA) *protoUpstream {
	t.Helper()
	checkLeaks(t)
	u := &protoUpstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := "-"
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			peer = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		fmt.Fprintf(w, "%s %s %s peer=%s", r.Proto, r.Method, r.URL.RequestURI(), peer)
	}))
	u.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}
	u.Config.Protocols = new(http.Protocols)
	switch proto {
	case "h1":
		u.Config.Protocols.SetHTTP1(true)
	case "h2":
		u.Config.Protocols.SetHTTP2(true)
	case "h2c":
		u.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	if cert == nil {
		u.Start()
	} else {
		u.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
		if proto == "h2" {
			u.TLS.NextProtos = []string{"h2"}
		}
		if clientCAs != nil {
			u.TLS.ClientAuth, u.TLS.ClientCAs = tls.RequireAndVerifyClientCert, clientCAs.Pool
		}
		u.StartTLS()
	}
	t.Cleanup(u.Close)
	return u
}

// TestHTTP2Upstreams sends a request, then many from several clients at
// once, through each engine to h2c and h2 upstreams: each reaches the
// upstream over HTTP/2, and all share the first request's connection.
func TestHTTP2Upstreams(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		for _, proto := range []string{"h2c", "h2"} {
			var up *protoUpstream
			tlsLine := ""
			if proto == "h2" {
				up = startProtoUpstream(t, proto, ca.Server("api.internal"), nil)
				tlsLine = fmt.Sprintf(", tls: {ca_file: %s, server_name: api.internal}", ca.CertFile)
			} else {
				up = startProtoUpstream(t, proto, nil, nil)
			}
			tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"], protocol: %s%s}
routes:
  - {name: all, upstream: up}
`, engine, up.URL, proto, tlsLine))
			c := newClient(t)
			if r := get(t, c, tg.URL+"/first"); r.Code != 200 {
				t.Fatalf("%s: first request: %d %q", proto, r.Code, r.Body)
			}
			const n = 20
			errs := make(chan error, n)
			for i := range n {
				go func() {
					r, err := tryDo(c, "GET", fmt.Sprintf("%s/r%d?q=1", tg.URL, i), nil, nil)
					if err == nil && (r.Code != 200 || r.Body != fmt.Sprintf("HTTP/2.0 GET /r%d?q=1 peer=-", i)) {
						err = fmt.Errorf("request %d: %d %q", i, r.Code, r.Body)
					}
					errs <- err
				}()
			}
			for range n {
				if err := <-errs; err != nil {
					t.Errorf("%s: %v", proto, err)
				}
			}
			if got := up.conns.Load(); got != 1 {
				t.Errorf("%s: the upstream accepted %d connections for %d requests, want 1 shared", proto, got, n)
			}
			if r := do(t, c, "POST", tg.URL+"/post", nil, strings.NewReader("body")); r.Code != 200 || r.Body != "HTTP/2.0 POST /post peer=-" {
				t.Errorf("%s POST: %d %q", proto, r.Code, r.Body)
			}
			tg.stop(t)
		}
	})
}

// TestUpstreamMutualTLS sends requests to https upstreams that require a
// client certificate, over HTTP/1.1 and HTTP/2: the gateway presents the
// one its upstream's tls section names, checks the upstream's against the
// CA file and server name, and without a client certificate the upstream
// refuses the handshake (502).
func TestUpstreamMutualTLS(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		client := ca.Client("sluice-gateway")
		for _, proto := range []string{"h1", "h2"} {
			up := startProtoUpstream(t, proto, ca.Server("api.internal"), ca)
			protocol := map[string]string{"h1": "http1", "h2": "h2"}[proto]
			cfg := `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"], protocol: %s, tls: {ca_file: %s, server_name: api.internal%s}}
routes:
  - {name: all, upstream: up}
`
			tg := startGateway(t, parseConfig(t, cfg, engine, up.URL, protocol, ca.CertFile,
				fmt.Sprintf(", cert_file: %s, key_file: %s", client.CertFile, client.KeyFile)))
			c := newClient(t)
			want := map[string]string{"h1": "HTTP/1.1", "h2": "HTTP/2.0"}[proto] + " GET /m peer=sluice-gateway"
			if r := get(t, c, tg.URL+"/m"); r.Code != 200 || r.Body != want {
				t.Errorf("%s with a client certificate: %d %q, want 200 %q", proto, r.Code, r.Body, want)
			}
			tg.stop(t)
			tg = startGateway(t, parseConfig(t, cfg, engine, up.URL, protocol, ca.CertFile, ""))
			if r := get(t, c, tg.URL+"/m"); r.Code != 502 {
				t.Errorf("%s without a client certificate: %d %q, want 502", proto, r.Code, r.Body)
			}
			tg.stop(t)
		}
	})
}

// TestUpstreamCertificateReload replaces the gateway's client certificate
// file for an mTLS upstream and applies the same configuration again: the
// upstream's pool is rebuilt with the new certificate (the configuration
// did not change, the files did); a broken file refuses the reload and the
// old certificate goes on.
func TestUpstreamCertificateReload(t *testing.T) {
	ca := testpki.NewCA(t)
	first, second := ca.Client("first"), ca.Client("second")
	up := startProtoUpstream(t, "h1", ca.Server("api.internal"), ca)
	text := fmt.Sprintf(`
server: {engine: goroutine}
upstreams:
  up: {targets: ["%s"], tls: {ca_file: %s, server_name: api.internal, cert_file: %s, key_file: %s}}
routes:
  - {name: all, upstream: up}
`, up.URL, ca.CertFile, first.CertFile, first.KeyFile)
	tg := startGateway(t, parseConfig(t, text))
	c := newClient(t)
	if r := get(t, c, tg.URL+"/m"); r.Body != "HTTP/1.1 GET /m peer=first" {
		t.Fatalf("before the reload: %d %q", r.Code, r.Body)
	}
	copyFile(t, second.CertFile, first.CertFile)
	copyFile(t, second.KeyFile, first.KeyFile)
	if err := tg.Apply(parseConfig(t, text)); err != nil {
		t.Fatal(err)
	}
	if r := get(t, c, tg.URL+"/m"); r.Body != "HTTP/1.1 GET /m peer=second" {
		t.Errorf("after the reload: %d %q, want the new certificate", r.Code, r.Body)
	}
	if err := os.WriteFile(first.CertFile, []byte("broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tg.Apply(parseConfig(t, text)); err == nil || !strings.Contains(err.Error(), "upstreams.up.tls") {
		t.Errorf("reload with a broken client certificate: %v, want an error naming upstreams.up.tls", err)
	}
	if r := get(t, c, tg.URL+"/m"); r.Body != "HTTP/1.1 GET /m peer=second" {
		t.Errorf("after the refused reload: %d %q", r.Code, r.Body)
	}
}

// TestHTTP2FallbackAndHedgeUpstreams sends a request on a route whose
// fallback upstream speaks h2c, its own upstream unreachable, and one on
// a hedged route to an h2c upstream: both are answered by the h2c
// upstream over HTTP/2. (The fallback's attempt and the hedged attempts
// went over HTTP/1.1, which an h2c upstream does not speak: a 502.)
func TestHTTP2FallbackAndHedgeUpstreams(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startProtoUpstream(t, "h2c", nil, nil)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  down: {targets: ["http://%s"]}
  h2c: {targets: ["%s"], protocol: h2c}
routes:
  - name: fallback
    match: {path_prefix: /fallback}
    upstream: down
    policies:
      fallback: {upstream: h2c}
  - name: hedged
    upstream: h2c
    policies:
      hedge: {delay: 1s, budget: 1}
`, engine, closedAddr(t), up.URL))
		c := newClient(t)
		for _, path := range []string{"/fallback", "/hedged"} {
			res := get(t, c, tg.URL+path)
			if res.Code != http.StatusOK || !strings.HasPrefix(res.Body, "HTTP/2.0 GET "+path) {
				t.Errorf("GET %s: %d %q, want 200 from the h2c upstream over HTTP/2", path, res.Code, res.Body)
			}
		}
	})
}

// TestHTTP2UpstreamBadStatus has an h2c upstream answer with a status
// outside 200 to 599 (net/http's HTTP/2 client takes any number, and
// skips interim answers itself): the client gets a 502, as from an
// HTTP/1.1 target (TestBadStatusCode), and the next request is served.
// (The status went out as it came.)
func TestHTTP2UpstreamBadStatus(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		checkLeaks(t)
		up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/odd" {
				w.WriteHeader(600)
			}
			io.WriteString(w, "ok")
		}))
		up.Config.Protocols = new(http.Protocols)
		up.Config.Protocols.SetUnencryptedHTTP2(true)
		up.Start()
		t.Cleanup(up.Close)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  h2c: {targets: ["%s"], protocol: h2c}
routes:
  - {name: all, upstream: h2c}
`, engine, up.URL))
		c := newClient(t)
		if r := get(t, c, tg.URL+"/odd"); r.Code != http.StatusBadGateway {
			t.Errorf("status 600: %d %q, want 502", r.Code, r.Body)
		}
		if r := get(t, c, tg.URL+"/ok"); r.Code != http.StatusOK || r.Body != "ok" {
			t.Errorf("next request: %d %q", r.Code, r.Body)
		}
	})
}
