package gateway

import (
	"crypto/tls"
	"net"
	"net/http"

	"github.com/sluicehq/sluice/config"
)

// h2Transport returns the client of an h2 or h2c upstream: HTTP/2 only (over
// TLS with tc, or by prior knowledge without), one connection per target
// shared by concurrent requests, closed once idle for the upstream's
// idle_timeout; connecting takes at most connect_timeout.
func h2Transport(u *config.Upstream, tc *tls.Config) *http.Transport {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: u.ConnectTimeout.D()}).DialContext,
		TLSHandshakeTimeout: u.ConnectTimeout.D(),
		IdleConnTimeout:     u.IdleTimeout.D(),
		DisableCompression:  true,
		Protocols:           new(http.Protocols),
	}
	if tc != nil {
		tr.TLSClientConfig = tc.Clone()
	}
	if u.Protocol == "h2c" {
		tr.Protocols.SetUnencryptedHTTP2(true)
	} else {
		tr.Protocols.SetHTTP2(true)
	}
	return tr
}
