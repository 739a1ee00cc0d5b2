package gateway

import (
	"crypto"
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/certs"
)

// tlsVersions maps config's tls.min_version to crypto/tls.
var tlsVersions = map[string]uint16{"1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13}

// serverTLS reads the TLS listener's certificate files and returns the
// configuration its handshakes use: the certificate picked by SNI, HTTP/2
// or HTTP/1.1 by ALPN. Every file that cannot be loaded is an error naming
// its YAML path. A nil c (no TLS listener) gives nil.
func serverTLS(c *config.TLS) (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	var errs []error
	list := make([]*tls.Certificate, 0, len(c.Certificates))
	for i, f := range c.Certificates {
		cert, err := certs.Load(f.CertFile, f.KeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("tls.certificates[%d]: %w", i, err))
			continue
		}
		list = append(list, cert)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	set, err := certs.NewSet(list)
	if err != nil {
		return nil, fmt.Errorf("tls.certificates: %w", err)
	}
	return &tls.Config{
		MinVersion:     tlsVersions[c.MinVersion],
		GetCertificate: set.Get,
		NextProtos:     []string{"h2", "http/1.1"},
	}, nil
}

// upstreamTLS reads the files of an upstream's tls section and returns the
// client configuration for its https targets; nil when it has none, and
// then the defaults (system roots, the target's host) apply.
func upstreamTLS(name string, u *config.Upstream) (*tls.Config, error) {
	t := u.TLS
	if t == nil {
		return nil, nil
	}
	c, err := certs.Client{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile,
		ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}.Config()
	if err != nil {
		return nil, fmt.Errorf("upstreams.%s.tls: %w", name, err)
	}
	return c, nil
}

// sameClientTLS reports whether a and b (from upstreamTLS) trust the same
// roots and present the same certificate, so that a pool built with a can
// keep serving when the files behind b did not change.
func sameClientTLS(a, b *tls.Config) bool {
	if a == nil || b == nil {
		return a == b
	}
	if (a.RootCAs == nil) != (b.RootCAs == nil) || a.RootCAs != nil && !a.RootCAs.Equal(b.RootCAs) ||
		len(a.Certificates) != len(b.Certificates) {
		return false
	}
	for i := range a.Certificates {
		ca, cb := a.Certificates[i], b.Certificates[i]
		if len(ca.Certificate) != len(cb.Certificate) {
			return false
		}
		for j := range ca.Certificate {
			if string(ca.Certificate[j]) != string(cb.Certificate[j]) {
				return false
			}
		}
		ka, ok := ca.PrivateKey.(interface{ Equal(crypto.PrivateKey) bool })
		if !ok || !ka.Equal(cb.PrivateKey) {
			return false
		}
	}
	return true
}
