package gateway_test

import (
	"crypto/tls"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testpki"
)

// peerCert makes a TLS handshake with the gateway at addr, sending sni,
// and returns the common name of the certificate it served.
func peerCert(t *testing.T, addr, sni string, ca *testpki.CA) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, ServerName: sni, InsecureSkipVerify: sni == ""})
	if err != nil {
		t.Fatalf("handshake with SNI %q: %v", sni, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestSNI checks that the TLS listener serves the certificate that names
// the client's SNI name, and the first for an unknown name or none.
func TestSNI(t *testing.T) {
	ca := testpki.NewCA(t)
	up := startUpstream(t, "up", nil)
	certs := certList(ca.Server("default.test"), ca.Server("api.test"), ca.Server("*.apps.test"))
	tg := startGateway(t, parseConfig(t, tlsGatewayConfig, "goroutine", certs, up.URL, ""))
	addr := serveTLS(t, tg)
	for sni, want := range map[string]string{"api.test": "api.test", "x.apps.test": "*.apps.test", "default.test": "default.test", "": "default.test"} {
		if got := peerCert(t, addr, sni, ca); got != want {
			t.Errorf("SNI %q: served %q, want %q", sni, got, want)
		}
	}
	c := protoClient(t, "h2", ca.Pool, "api.test")
	if r := do(t, c, "GET", "https://"+addr+"/x", nil, nil); r.Code != 200 || r.Body != "up /x" {
		t.Errorf("request with SNI api.test: %d %q", r.Code, r.Body)
	}
}

// TestCertificateReload replaces the certificate file and applies the
// configuration again: new handshakes get the new certificate. Then the
// file is broken: Apply and Check refuse the configuration, naming the
// file's YAML path, and the certificate in use keeps serving.
func TestCertificateReload(t *testing.T) {
	ca := testpki.NewCA(t)
	up := startUpstream(t, "up", nil)
	first, second := ca.Server("first.test"), ca.Server("second.test")
	// The gateway reads first's files; second's contents replace them.
	text := tlsGatewayConfig
	tg := startGateway(t, parseConfig(t, text, "goroutine", certList(first), up.URL, ""))
	addr := serveTLS(t, tg)
	if got := peerCert(t, addr, "", ca); got != "first.test" {
		t.Fatalf("served %q, want first.test", got)
	}
	copyFile(t, second.CertFile, first.CertFile)
	copyFile(t, second.KeyFile, first.KeyFile)
	if got := peerCert(t, addr, "", ca); got != "first.test" {
		t.Fatalf("before the reload: served %q, want first.test", got)
	}
	cfg := parseConfig(t, text, "goroutine", certList(first), up.URL, "")
	if err := tg.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if got := peerCert(t, addr, "", ca); got != "second.test" {
		t.Fatalf("after the reload: served %q, want second.test", got)
	}

	if err := os.WriteFile(first.KeyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := tg.Apply(cfg)
	if err == nil || !strings.Contains(err.Error(), "tls.certificates[0]") || !strings.Contains(err.Error(), first.KeyFile) {
		t.Fatalf("Apply with a broken key file: %v, want an error naming tls.certificates[0] and the file", err)
	}
	if err := gateway.Check(cfg); err == nil || !strings.Contains(err.Error(), "tls.certificates[0]") {
		t.Errorf("Check with a broken key file: %v", err)
	}
	if st := tg.LastReload(); st.OK || st.Version != 2 {
		t.Errorf("last reload %+v, want refused at version 2", st)
	}
	if got := peerCert(t, addr, "", ca); got != "second.test" {
		t.Errorf("after the refused reload: served %q, want second.test still", got)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTLSMinVersion checks tls.min_version: at "1.3" a client that offers
// at most TLS 1.2 is refused, one that offers 1.3 is served; the default
// 1.2 serves a 1.2 client. (The TLS listener is the HTTP/2 engine's,
// whatever server.engine says.)
func TestTLSMinVersion(t *testing.T) {
	ca := testpki.NewCA(t)
	up := startUpstream(t, "up", nil)
	cert := certList(ca.Server("127.0.0.1"))
	for _, tc := range []struct {
		min      string
		client   uint16
		accepted bool
	}{
		{`"1.3"`, tls.VersionTLS12, false},
		{`"1.3"`, tls.VersionTLS13, true},
		{`"1.2"`, tls.VersionTLS12, true},
	} {
		tg := startGateway(t, parseConfig(t, `
server: {engine: goroutine}
tls: {listen: 127.0.0.1:0, min_version: %s, certificates: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, tc.min, cert, up.URL))
		addr := serveTLS(t, tg)
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, MaxVersion: tc.client})
		if err == nil {
			c.Close()
		}
		if (err == nil) != tc.accepted {
			t.Errorf("min_version %s, client at most %x: handshake error %v, want accepted %v", tc.min, tc.client, err, tc.accepted)
		}
		tg.stop(t)
	}
}
