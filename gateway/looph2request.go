//go:build linux

package gateway

import (
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/h2loop"
	"github.com/sluicehq/sluice/internal/http1"
)

// h2Request makes s's request cc's, as the loops read an HTTP/1.1 one: an
// HTTP/1.1 head with s's method and :path (a path that starts with several
// slashes starting with one, as toFast makes it), Host from :authority (or
// from the host field without one: RFC 9113 section 8.3.1; a host field
// beside :authority, naming the same host, is dropped as net/http's server
// drops it), the other fields as they came but the cookie crumbs joined in
// one Cookie field (RFC 9113 section 8.2.3; empty crumbs left out, as
// net/http's HTTP/2 path leaves them) and te (only "trailers", which is
// hop-by-hop), and the body's length; then the body. It reports false when
// the request is not one the loops serve (see http1.ParseRequest), has
// trailers or a :path that is no absolute path or that no request line
// holds (see lineTarget), names no host, or names a second host: a host
// field that is not its :authority (or the first host field, even empty)
// in any case, which nginx and the gateway's net/http path refuse (see
// oneHost). The
// bridge then serves it, and the gateway answers as on net/http's HTTP/2
// server (400 for a :path or host it refuses, or no host).
func h2Request(cc *clientConn, s *h2loop.Stream) bool {
	if s.Trailer != nil || s.Path[0] != '/' || !lineTarget(s.Path) {
		return false
	}
	host := s.Authority
	path := s.Path
	for len(path) > 1 && path[0] == '/' && path[1] == '/' {
		path = path[1:]
	}
	b := append(cc.in[:0], s.Method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\n"...)
	cookies, hostField := 0, false
	for _, f := range s.Header {
		switch f.Name {
		case "host":
			if host == "" && !hostField {
				host = f.Value
			} else if !strings.EqualFold(f.Value, host) {
				return false
			}
			hostField = true
			continue
		case "cookie":
			if f.Value != "" {
				cookies++
			}
			continue
		case "content-length", "te":
			continue
		}
		b = append(b, f.Name...)
		b = append(b, ": "...)
		b = append(b, f.Value...)
		b = append(b, "\r\n"...)
	}
	if cookies > 0 {
		b = append(b, "Cookie: "...)
		sep := false
		for _, f := range s.Header {
			if f.Name == "cookie" && f.Value != "" {
				if sep {
					b = append(b, "; "...)
				}
				b, sep = append(b, f.Value...), true
			}
		}
		b = append(b, "\r\n"...)
	}
	if len(s.Body) > 0 || s.ContentLength >= 0 {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(s.Body)), 10)
		b = append(b, "\r\n"...)
	}
	if host == "" {
		return false
	}
	b = append(b, "Host: "...)
	b = append(b, host...)
	b = append(b, "\r\n\r\n"...)
	hlen := len(b)
	cc.in = append(b, s.Body...)
	cc.body = cc.in[hlen:]
	return http1.ParseRequest(cc.in[:hlen], &cc.head)
}
