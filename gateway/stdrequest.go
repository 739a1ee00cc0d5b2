package gateway

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/answer"
)

// What the gateway reads of a request net/http parsed (the HTTP/2 and TLS
// listener's): its route and rate-limit key, its client, and the refusals
// it answers.

// stdRequest is a net/http request as routing and rate-limit keys read it.
type stdRequest struct{ r *http.Request }

func (q stdRequest) Path() []byte            { return []byte(q.r.URL.Path) }
func (q stdRequest) Method() []byte          { return []byte(q.r.Method) }
func (q stdRequest) Host() []byte            { return []byte(q.r.Host) }
func (q stdRequest) Peek(name string) []byte { return []byte(q.r.Header.Get(name)) }

func (q stdRequest) PeekAt(name string, i int) []byte {
	if vs := q.r.Header.Values(name); i < len(vs) {
		return []byte(vs[i])
	}
	return nil
}

// stdPeer is the address of r's connection's other end.
func stdPeer(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// stdScheme is r's X-Forwarded-Proto: https on TLS, http otherwise.
func stdScheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// stdForwarded returns the X-Forwarded-Host and -Proto to send for r: its
// Host and scheme, or, from a trusted proxy, the proxy's own values.
func stdForwarded(r *http.Request, st *state) (host, proto string) {
	host, proto = r.Host, stdScheme(r)
	if st.trusted.contains(stdPeer(r)) {
		if v := strings.Join(r.Header.Values("X-Forwarded-Host"), ", "); v != "" {
			host = v
		}
		if v := strings.Join(r.Header.Values("X-Forwarded-Proto"), ", "); v != "" {
			proto = v
		}
	}
	return host, proto
}

// stdLimit takes r, on rt, through rt's rate limit. It returns the
// X-Forwarded-For to send upstream (see forwardedFor), and the limit's
// rejection when it refuses r (errAmbiguousKey when r's key header is
// ambiguous). When the limit decided, its RateLimit and
// RateLimit-Policy headers are set on w, as the goroutine engine sets them.
func stdLimit(w http.ResponseWriter, r *http.Request, st *state, rt *route) ([]byte, error) {
	peer, xff := stdPeer(r), []byte(strings.Join(r.Header.Values("X-Forwarded-For"), ", "))
	if rt.life.rate != nil {
		key, ok := rt.life.rate.keyOf(stdRequest{r}, rt, clientIP(peer, xff, st.trusted))
		if !ok {
			return nil, errAmbiguousKey
		}
		ok, retryAfter, v := rt.life.rate.allow(key, rt, nil)
		rt.metrics.RateLimit(ok)
		if len(v) > 0 {
			w.Header().Set("RateLimit-Policy", string(rt.life.rate.policy))
			w.Header().Set("RateLimit", string(v))
		}
		if !ok {
			return nil, &sluice.Rejection{Reason: sluice.RateLimited, Policy: rt.name, RetryAfter: retryAfter}
		}
	}
	return forwardedFor(nil, peer, xff, st.trusted), nil
}

// writeStdError answers a request the gateway stopped with err as
// writeError does: the status of answer.Classify, a JSON body naming the
// reason, and Retry-After when the hint is known. It returns the reason.
func writeStdError(w http.ResponseWriter, err error) string {
	code, reason := answer.Classify(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	var secs int64
	if d, ok := answer.RetryAfter(err); ok {
		secs = answer.RetryAfterSeconds(d)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	w.WriteHeader(code)
	_, _ = w.Write(answer.AppendJSON(make([]byte, 0, 64), reason, secs))
	return reason
}
