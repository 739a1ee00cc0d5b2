package gateway

import (
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
