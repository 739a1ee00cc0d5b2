//go:build linux

package gateway

import "github.com/panjf2000/gnet/v2"

// serveH2TLS serves a TLS connection whose client chose HTTP/2 by ALPN
// (see loopEngine.serveTLS) as the loops serve h2c (serveH2, over the
// loopTLS: its frames are the plaintext of the client's records and its
// answers are encrypted on the loop), once the client's first bytes, buf,
// are the whole HTTP/2 preface. A client that sends anything else is
// closed, as net/http's HTTP/2 server closes it.
func (cc *clientConn) serveH2TLS(buf []byte) gnet.Action {
	if !isH2CPreface(buf) {
		return gnet.Close
	}
	if len(buf) < len(h2cPreface) {
		return gnet.None
	}
	return cc.serveH2()
}

// tlsConn returns the TLS connection h is served over, or nil for h2c.
func (h *loopH2) tlsConn() *loopTLS {
	t, _ := h.c.(*loopTLS)
	return t
}

// overTLS reports whether cc's request came over the TLS listener: cc's
// connection is TLS, or cc is a stream of an HTTP/2 connection that is.
func (cc *clientConn) overTLS() bool {
	if cc.tls != nil {
		return true
	}
	sc, ok := cc.c.(*loopH2StreamConn)
	return ok && sc.st.h.tlsConn() != nil
}
