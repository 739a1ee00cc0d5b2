package upstream

import (
	"crypto"
	"crypto/tls"
	"fmt"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/certs"
)

// ClientTLS reads the files of the tls section of u, the upstream called
// name, and returns the client configuration for its https targets; nil
// when it has none, and then the defaults (system roots, the target's
// host) apply. An error names the section's YAML path.
func ClientTLS(name string, u *config.Upstream) (*tls.Config, error) {
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

// SameClientTLS reports whether a and b (from ClientTLS) trust the same
// roots and present the same certificate, so that a pool built with a can
// keep serving when the files behind b did not change.
func SameClientTLS(a, b *tls.Config) bool {
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
