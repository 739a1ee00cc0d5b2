package upstream

import (
	"crypto/tls"
	"net"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"
)

// hostClient returns the connection pool of the target at u, for
// RoundTrip. A connection unused for idle is closed; connecting takes at
// most connect (less when the request's deadline is sooner). tc configures
// TLS to an https target; nil means the defaults.
func hostClient(u *url.URL, maxConns int, idle, connect time.Duration, tc *tls.Config) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                     hostPort(u),
		IsTLS:                    u.Scheme == "https",
		TLSConfig:                tc,
		MaxConns:                 maxConns,
		MaxIdleConnDuration:      idle,
		NoDefaultUserAgentHeader: true,
		DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
			if timeout <= 0 || timeout > connect {
				timeout = connect
			}
			return fasthttp.DialTimeout(addr, timeout)
		},
	}
}

// hostPort is u's host:port, the scheme's default port when u has none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return u.Host + ":443"
	}
	return u.Host + ":80"
}
