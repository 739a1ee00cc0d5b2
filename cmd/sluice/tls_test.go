package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testpki"
)

// TestServeTLS runs `sluice serve` with a tls section: it serves HTTP/2
// over TLS on tls.listen beside the plaintext listener, and on SIGHUP reads
// the certificate files again.
func TestServeTLS(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "up %s %s", r.URL.Path, r.Header.Get("X-Forwarded-Proto"))
	}))
	defer up.Close()
	ca := testpki.NewCA(t)
	first, second := ca.Server("127.0.0.1"), ca.Server("127.0.0.1", "second.test")
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: "off"}
tls: {listen: 127.0.0.1:0, certificates: [{cert_file: %s, key_file: %s}]}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, first.CertFile, first.KeyFile, up.URL))
	p, err := startServe(t, "--config", path, "--watch=false")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: waitLimit}
	resp, err := c.Get("https://" + p.tls + "/x")
	if err != nil {
		t.Fatalf("GET over TLS: %v\n%s", err, p.log)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || string(body) != "up /x https" {
		t.Fatalf("GET over TLS: %d %s %q", resp.StatusCode, resp.Proto, body)
	}
	if code, body := call(t, newClient(t), "GET", "http://"+p.listen+"/y", ""); code != 200 || body != "up /y http" {
		t.Fatalf("plaintext GET: %d %q", code, body)
	}

	copyPair(t, second, first)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitServes(t, p, ca, "second.test", "after SIGHUP")
}

// TestServeWatchesCertificates checks that `sluice serve` reads its
// certificate files again when they change, without a signal, as a
// Kubernetes Secret volume changes them: the files are links through
// ..data, which the kubelet renames a link to a new directory over.
func TestServeWatchesCertificates(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	ca := testpki.NewCA(t)
	first, second := ca.Server("127.0.0.1"), ca.Server("127.0.0.1", "second.test")
	secret := t.TempDir()
	mount := func(version string, pair *testpki.Pair) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(secret, version), 0o755); err != nil {
			t.Fatal(err)
		}
		copyPair(t, pair, &testpki.Pair{CertFile: filepath.Join(secret, version, "tls.crt"), KeyFile: filepath.Join(secret, version, "tls.key")})
		if err := os.Symlink(version, filepath.Join(secret, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(secret, "..data_tmp"), filepath.Join(secret, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	mount("..v1", first)
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(secret, f)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: "off"}
tls: {listen: 127.0.0.1:0, certificates: [{cert_file: %[1]s/tls.crt, key_file: %[1]s/tls.key}]}
upstreams:
  up: {targets: ["%[2]s"]}
routes:
  - {name: all, upstream: up}
`, secret, up.URL))
	p, err := startServe(t, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	waitServes(t, p, ca, "127.0.0.1", "at start")
	mount("..v2", second)
	waitServes(t, p, ca, "second.test", "after the Secret changed")
}

// waitServes waits until p's TLS listener serves a certificate for name,
// which ca signed, and fails the test after waitLimit.
func waitServes(t *testing.T, p *proc, ca *testpki.CA, name, when string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		conn, err := tls.Dial("tcp", p.tls, &tls.Config{RootCAs: ca.Pool, ServerName: name})
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s no certificate for %s is served: %v\n%s", when, name, err, p.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// copyPair writes from's certificate and key over to's files.
func copyPair(t *testing.T, from, to *testpki.Pair) {
	t.Helper()
	for src, dst := range map[string]string{from.CertFile: to.CertFile, from.KeyFile: to.KeyFile} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dst, string(b))
	}
}
