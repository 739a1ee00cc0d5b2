package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkServeHTTP2 measures one HTTP/2 request of the HTTP/2 engine's
// handler (ServeHTTP) through the route of BenchmarkHandle to a loopback
// upstream: the handler's own work and allocations plus one upstream round
// trip (net/http's server and the client side are not included).
func BenchmarkServeHTTP2(b *testing.B) {
	g := benchGateway(b, benchUpstream(b), "")
	r := httptest.NewRequest(http.MethodGet, "https://example.com/", nil)
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
	r.RequestURI = "/" // :path, as net/http's HTTP/2 server sets it
	r.RemoteAddr = "127.0.0.1:40000"
	w := &benchWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		w.code = 0
		g.h2.ServeHTTP(w, r)
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	}
}

// benchWriter is a ResponseWriter that keeps the status and drops the body;
// its write deadlines, as an HTTP/2 stream's, are supported.
type benchWriter struct {
	h    http.Header
	code int
}

func (w *benchWriter) Header() http.Header              { return w.h }
func (w *benchWriter) WriteHeader(code int)             { w.code = code }
func (w *benchWriter) Write(p []byte) (int, error)      { return len(p), nil }
func (w *benchWriter) SetWriteDeadline(time.Time) error { return nil }
