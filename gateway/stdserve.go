package gateway

import (
	"net/http"
	"time"

	"github.com/valyala/fasthttp"
)

// serveStd serves, on net/http's own stream, what the goroutine engine's
// handler cannot carry for the HTTP/2 engine: a gRPC call (trailers, both
// ways at once). A gRPC call is a POST: a request of another method is a
// plain one whatever its Content-Type, so that it reaches the upstream
// with the method its route admitted. It reports whether r was one; ctx
// holds r in fasthttp's form, for routing, metrics and the log. A request
// that matches no route is left to the handler (404), as is one the
// routes cannot tell (400, see state.route).
func (g *Gateway) serveStd(ctx *fasthttp.RequestCtx, w http.ResponseWriter, r *http.Request) bool {
	grpc := r.ProtoMajor == 2 && r.Method == http.MethodPost && isGRPC(r.Header.Get("Content-Type"))
	if !grpc {
		return false
	}
	start := time.Now()
	st, rt, o := g.beginStd(ctx)
	if rt == nil {
		return false // the handler refuses it, with the reason
	}
	// The call goes upstream with the path it was routed by, as an
	// HTTP/1.1 request does: percent-decoded, dot segments resolved,
	// slashes merged. Its raw :path, sent on, let an upstream that
	// resolves dot segments (Envoy's normalize_path) read what the route
	// did not match or its rewrite did not mean (/tenant/../admin.S/M).
	r.URL.Path, r.URL.RawPath = string(ctx.Request.URI().Path()), ""
	sw := &statusWriter{ResponseWriter: w}
	reason := g.serveGRPC(sw, r, st, rt, o)
	ctx.Response.SetStatusCode(sw.status())
	g.finish(ctx, rt, start, reason, o)
	return true
}

// beginStd routes a request net/http serves itself (a gRPC call, a
// WebSocket over HTTP/2) and begins its observation (request id, trace),
// counting it in its route's in-flight gauge, which finish gives back. rt
// is nil, and nothing begun, when the request matches no route or the
// routes cannot tell.
func (g *Gateway) beginStd(ctx *fasthttp.RequestCtx) (st *state, rt *route, o *observation) {
	st = g.state.Load()
	if rt, _ = st.route(fastRequest{&ctx.Request}); rt == nil {
		return st, nil, nil
	}
	rt.inflight.Add(1)
	o = new(observation)
	h := &ctx.Request.Header
	o.begin(h.PeekBytes(hdrRequestID))
	if st.tracer != nil {
		o.startTrace(st.tracer, h, h.Method(), ctx.Path(), clientIP(peerAddr(ctx), forwardedList(h), st.trusted))
	}
	return st, rt, o
}

// statusWriter is a ResponseWriter that keeps the status written, for the
// log and metrics.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the ResponseWriter (to flush, set
// deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// status is the status written, else 200, as net/http answers a handler
// that wrote none.
func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}
