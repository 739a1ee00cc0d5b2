package certs_test

import (
	"crypto/tls"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/certs"
	"github.com/sluicehq/sluice/internal/testpki"
)

func load(t *testing.T, p *testpki.Pair) *tls.Certificate {
	t.Helper()
	c, err := certs.Load(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSetPicksBySNI checks each way a certificate is chosen: exact name,
// case and trailing dot aside; wildcard for one label; the first for no
// name or an unknown one.
func TestSetPicksBySNI(t *testing.T) {
	ca := testpki.NewCA(t)
	def, api, wild := load(t, ca.Server("default.test")), load(t, ca.Server("api.test", "127.0.0.1")), load(t, ca.Server("*.apps.test"))
	s, err := certs.NewSet([]*tls.Certificate{def, api, wild})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sni  string
		want *tls.Certificate
	}{
		{"", def},
		{"api.test", api},
		{"API.Test.", api},
		{"default.test", def},
		{"x.apps.test", wild},
		{"x.y.apps.test", def},
		{"apps.test", def},
		{"other.test", def},
	} {
		got, err := s.Get(&tls.ClientHelloInfo{ServerName: tc.sni})
		if err != nil || got != tc.want {
			t.Errorf("SNI %q: got %v (%v), want %v", tc.sni, got.Leaf.Subject.CommonName, err, tc.want.Leaf.Subject.CommonName)
		}
	}
	if _, err := certs.NewSet(nil); err == nil {
		t.Error("an empty set was accepted")
	}
}

// TestLoadErrors checks that a missing, broken or mismatched file is an
// error naming the files.
func TestLoadErrors(t *testing.T) {
	ca := testpki.NewCA(t)
	a, b := ca.Server("a.test"), ca.Server("b.test")
	broken := t.TempDir() + "/broken.pem"
	if err := os.WriteFile(broken, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, files := range map[string][2]string{
		"missing":  {a.CertFile + ".gone", a.KeyFile},
		"broken":   {broken, a.KeyFile},
		"mismatch": {a.CertFile, b.KeyFile},
	} {
		_, err := certs.Load(files[0], files[1])
		if err == nil || !strings.Contains(err.Error(), files[0]) {
			t.Errorf("%s: err = %v, want an error naming %s", name, err, files[0])
		}
	}
}

// TestClientConfig checks the upstream side: roots from the CA file, the
// client certificate, the server name, and the errors of bad files.
func TestClientConfig(t *testing.T) {
	ca := testpki.NewCA(t)
	cl := ca.Client("gateway")
	tc, err := certs.Client{CAFile: ca.CertFile, CertFile: cl.CertFile, KeyFile: cl.KeyFile, ServerName: "api.internal"}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "api.internal" || tc.MinVersion != tls.VersionTLS12 || tc.InsecureSkipVerify {
		t.Errorf("config %+v", tc)
	}
	if _, err := (certs.Client{CAFile: cl.KeyFile}).Config(); err == nil {
		t.Error("a CA file without a certificate was accepted")
	}
	if _, err := (certs.Client{CAFile: ca.CertFile + ".gone"}).Config(); err == nil {
		t.Error("a missing CA file was accepted")
	}
	if _, err := (certs.Client{CertFile: cl.CertFile}).Config(); err == nil {
		t.Error("a certificate without its key was accepted")
	}
}
