// Package testpki makes a certificate authority and certificates signed by
// it for tests: server certificates for loopback names and addresses,
// client certificates for mTLS, written as PEM files in the test's
// temporary directory.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority for one test.
type CA struct {
	t      testing.TB
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	dir    string
	serial atomic.Int64
	// CertFile is the CA's certificate as a PEM file (for ca_file).
	CertFile string
	// Pool holds the CA's certificate, for a client's or server's roots.
	Pool *x509.CertPool
}

// Pair is a certificate and its key, as PEM files and loaded.
type Pair struct {
	CertFile, KeyFile string
	TLS               tls.Certificate
	Leaf              *x509.Certificate
}

// NewCA makes a CA valid for a day around now, with its files in a new
// temporary directory of t.
func NewCA(t testing.TB) *CA {
	t.Helper()
	ca := &CA{t: t, dir: t.TempDir(), Pool: x509.NewCertPool()}
	ca.key = newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sluice test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	ca.serial.Store(1)
	ca.Pool.AddCert(ca.cert)
	ca.CertFile = ca.write("ca.pem", "CERTIFICATE", der)
	return ca
}

// Server makes a server certificate for names: DNS names, or IP addresses
// such as 127.0.0.1. Its common name is the first name.
func (ca *CA) Server(names ...string) *Pair {
	ca.t.Helper()
	return ca.issue(names, x509.ExtKeyUsageServerAuth)
}

// Client makes a client certificate with the common name cn.
func (ca *CA) Client(cn string) *Pair {
	ca.t.Helper()
	return ca.issue([]string{cn}, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(names []string, usage x509.ExtKeyUsage) *Pair {
	t := ca.t
	t.Helper()
	key := newKey(t)
	n := ca.serial.Add(1)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(n),
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	for _, name := range names {
		if ip := net.ParseIP(name); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames = append(tmpl.DNSNames, name)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := &Pair{}
	base := "cert" + big.NewInt(n).String()
	p.CertFile = ca.write(base+".pem", "CERTIFICATE", der)
	p.KeyFile = ca.write(base+"-key.pem", "EC PRIVATE KEY", kder)
	if p.TLS, err = tls.LoadX509KeyPair(p.CertFile, p.KeyFile); err != nil {
		t.Fatal(err)
	}
	p.Leaf = p.TLS.Leaf
	return p
}

func (ca *CA) write(name, kind string, der []byte) string {
	ca.t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
