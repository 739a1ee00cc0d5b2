package gateway

import (
	"io"
	"maps"
	"net/http"
)

// withRequestTrailers makes out, a gRPC call's upstream request, carry the
// trailers of r, the client's, as they came (HTTP/2 lets a request end
// with trailers; gRPC's clients seldom send any). net/http's server keeps
// them only when r announced one in its Trailer header (out announces the
// same ones), and refuses a request with a hop-by-hop one. When r's body
// was read whole (read), they are copied now; else out's body, which ends
// where r's does, copies them when it ends, once r's are known (net/http's
// transport reads out's trailers then).
func withRequestTrailers(out, r *http.Request, read bool) {
	if len(r.Trailer) == 0 {
		return
	}
	out.Trailer = make(http.Header, len(r.Trailer))
	for k := range r.Trailer {
		out.Trailer[k] = nil
	}
	tc := &trailerCopy{ReadCloser: out.Body, dst: out.Trailer, src: r.Trailer}
	if read {
		tc.copy()
		return
	}
	out.Body = tc
}

// trailerCopy is a body that, at its end, copies src's trailers to dst.
type trailerCopy struct {
	io.ReadCloser
	dst, src http.Header
}

func (t *trailerCopy) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if err == io.EOF {
		t.copy()
	}
	return n, err
}

func (t *trailerCopy) copy() {
	maps.Copy(t.dst, t.src)
}
