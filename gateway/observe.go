package gateway

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/requestid"
	"github.com/sluicehq/sluice/internal/tracing"
)

// observation is what the gateway records of one request besides its
// answer, for its log line and its trace: its id, its spans, its attempts
// and the sizes of its bodies. Every engine keeps one per request in
// flight, reuses it, and drives it through the same steps: begin, then
// beginAttempt and endAttempt around each attempt (call.begin and
// call.settle), then Gateway.finish.
// With tracing off, no step allocates.
type observation struct {
	id    []byte // the request id, in idBuf
	idBuf [requestid.MaxLen]byte
	// trace is the request's server span; nil when tracing is off. The
	// spans of its attempts are theirs (see call).
	trace *tracing.Request
	// attempts counts the attempts begun; target is the last one's (a
	// hedged race's: the winner's, see call.race).
	attempts int
	target   *target
	// bytesIn and bytesOut are the sizes of the request and response
	// bodies (see Gateway.logRequest).
	bytesIn, bytesOut int64
	// coalesced: the request was answered with another's response.
	coalesced bool
	// remote is the client's address, when it must be read before the
	// request is recorded (see detached); nil: the request's own.
	remote net.Addr
}

// hdrRequestID is requestid.Header in fasthttp's canonical form.
var (
	hdrRequestID   = []byte("X-Request-Id")
	hdrTraceparent = []byte("Traceparent")
	hdrTracestate  = []byte("Tracestate")
)

// headerReader reads a request header: http1.Request on the loops,
// fasthttp.RequestHeader on the goroutine engine.
type headerReader interface {
	Peek(name string) []byte
}

// begin starts observing a request: the client's X-Request-Id, clientID,
// is its id when well formed, else one is made.
func (o *observation) begin(clientID []byte) {
	*o = observation{}
	if id := clientID; requestid.Valid(id) {
		o.id = append(o.idBuf[:0], id...)
	} else {
		o.id = requestid.Append(o.idBuf[:0])
	}
}

// startTrace starts the request's server span on tr, a child of the
// client's traceparent (read from h) when it sent one; client is the
// client's address as the gateway determined it. Engines call it only
// when tracing is on (tr not nil), so that with tracing off they need not
// find the client's address.
func (o *observation) startTrace(tr *tracing.Provider, h headerReader, method, path []byte, client netip.Addr) {
	o.trace = tr.Start(tracing.Incoming{
		Method: method, Scheme: "http", Path: path, Client: client, RequestID: o.id,
		Traceparent: h.Peek("Traceparent"), Tracestate: h.Peek("Tracestate"),
	})
}

// beginAttempt records an attempt to t and starts its span (nil when
// tracing is off); reason says why it is not the first: the previous
// attempt's failure (see endAttempt), "fallback", or "" for the first (or
// a hedge).
func (o *observation) beginAttempt(t *target, reason string) *tracing.Attempt {
	o.attempts++
	o.target = t
	return o.trace.Attempt(o.attempts, t.URL, t.Client.Addr, reason)
}

// endAttempt ends the span of an attempt, now, with the upstream's status
// code, or with err (an *UpstreamError) when no response came, and
// returns why an attempt after it would be a retry: the failing status
// code or the error's type (see errorType); "" when it succeeded. It
// touches no observation, so that an attempt that outlives its request (a
// hedge that lost) may end at any time.
func endAttempt(span *tracing.Attempt, code int, err error) string {
	reason := ""
	switch {
	case err != nil:
		reason, code = errorType(err), 0
	case code >= 500:
		reason = strconv.Itoa(code)
	}
	span.End(code, reason, time.Now())
	return reason
}

// errorType names an attempt's error as retry.on does: connect_error (the
// target could not be reached), timeout, or upstream_error.
func errorType(err error) string {
	var ue *UpstreamError
	switch {
	case errors.As(err, &ue) && ue.Connect:
		return "connect_error"
	case errors.Is(err, sluice.ErrTimeout):
		return "timeout"
	}
	return "upstream_error"
}

// end ends the request's server span at now: the route that served it (""
// when none), the status code sent and the reason the gateway answered
// itself ("" when the upstream's answer went out). A policy decision is an
// event of the span: rate_limited, breaker_open, shed, coalesced or
// fallback.
func (o *observation) end(route string, code int, reason string, now time.Time) {
	if o.trace == nil {
		return
	}
	if o.coalesced {
		o.trace.Event("coalesced", now)
	}
	if ev := decisionEvent(reason); ev != "" {
		o.trace.Event(ev, now)
	}
	o.trace.End(route, code, outcomeName(reason), now) // o.trace stays, for the log's trace_id
}

// decisionEvent is the span event of the policy decision a request's
// reason tells, or "".
func decisionEvent(reason string) string {
	switch {
	case reason == string(sluice.RateLimited):
		return "rate_limited"
	case reason == string(sluice.CircuitOpen):
		return "breaker_open"
	case reason == string(sluice.Overloaded):
		return "shed"
	case strings.HasPrefix(reason, "fallback:"):
		return "fallback"
	}
	return ""
}

// bodySize is the size of x's request body: the bytes read of a streamed
// one.
func (x *exchange) bodySize() int64 {
	if b, ok := x.stream.(*clientBody); ok {
		return b.read
	}
	return int64(len(x.body))
}

// detached returns a copy of o that outlives o's reuse by its engine: for
// a request recorded once its streamed body has ended.
func (o *observation) detached() *observation {
	c := new(observation)
	*c = *o
	c.id = c.idBuf[:len(o.id)]
	return c
}
