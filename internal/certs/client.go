package certs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Client is how the gateway connects to an https upstream.
type Client struct {
	// CAFile holds the roots that sign the upstream's certificates; empty
	// means the system's roots.
	CAFile string
	// CertFile and KeyFile are the client certificate sent to upstreams
	// that ask for one; both empty means none.
	CertFile, KeyFile string
	// ServerName is sent by SNI and checked against the upstream's
	// certificate; empty means the host of the address dialled.
	ServerName string
	// InsecureSkipVerify accepts any certificate.
	InsecureSkipVerify bool
}

// Config reads c's files and returns a client TLS configuration with TLS
// 1.2 at least. Each call returns a new configuration: the caller may set
// NextProtos on it.
func (c Client) Config() (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, //nolint:gosec // the operator's explicit choice, documented as for tests only
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the CA file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the CA file %s holds no PEM certificate", c.CAFile)
		}
	}
	if c.CertFile != "" || c.KeyFile != "" {
		cert, err := Load(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{*cert}
	}
	return tc, nil
}
