package tracing

import (
	"context"
	"encoding/hex"
	"net"
	"net/netip"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Incoming describes a request as it arrived, for its server span. Its
// byte slices are read during Start only.
type Incoming struct {
	// Method, Scheme ("http" or "https") and Path of the request.
	Method, Path []byte
	Scheme       string
	// Client is the client's address as the gateway determined it (the
	// peer, or X-Forwarded-For from a trusted proxy).
	Client netip.Addr
	// RequestID is the request's id, as logged and sent upstream.
	RequestID []byte
	// Traceparent and Tracestate are the client's W3C trace context
	// headers; empty when absent. A malformed traceparent is ignored: the
	// request starts a new trace.
	Traceparent, Tracestate []byte
}

// Request is the server span of one request. A nil *Request does nothing.
// Its methods must not be called concurrently with End.
type Request struct {
	ctx    context.Context // holds span, the parent of attempts
	span   trace.Span
	tracer trace.Tracer
	method string // the request's method
	known  bool   // method is a standard one (see methodAttr)
	name   string // the spans' name: the method, or HTTP when not known
}

// Prebuilt span options, which would allocate on every call.
var (
	serverKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	clientKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
)

// Start begins the server span of a request, now. It returns nil when p
// is nil. What a span records is built only when the span is sampled, so
// that an unsampled request costs the span's bookkeeping alone.
func (p *Provider) Start(in Incoming) *Request {
	if p == nil {
		return nil
	}
	ctx := context.Background()
	if len(in.Traceparent) > 0 {
		ctx = propagator.Extract(ctx, &carrier{traceparent: string(in.Traceparent), tracestate: string(in.Tracestate)})
	}
	method, known := methodName(in.Method)
	name := method
	if !known {
		name = "HTTP" // as the HTTP semantic conventions name such spans
	}
	ctx, span := p.tracer.Start(ctx, name, serverKind...)
	if span.IsRecording() {
		if !known {
			span.SetAttributes(semconv.HTTPRequestMethodOriginal(method))
		}
		span.SetAttributes(
			semconv.HTTPRequestMethodKey.String(methodAttr(method, known)),
			semconv.URLScheme(in.Scheme),
			semconv.URLPath(string(in.Path)),
			semconv.ClientAddress(in.Client.String()),
			requestIDKey.String(string(in.RequestID)),
		)
	}
	return &Request{ctx: ctx, span: span, tracer: p.tracer, method: method, name: name, known: known}
}

// methodName returns method as a string, and whether it is one of the
// methods of RFC 9110 and RFC 5789 (PATCH), for which it does not allocate.
func methodName(method []byte) (string, bool) {
	for _, m := range [...]string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE"} {
		if string(method) == m {
			return m, true
		}
	}
	return string(method), false
}

// methodAttr is the http.request.method of a request: its method when
// known, else "_OTHER", as the HTTP semantic conventions ask (the method
// itself is then http.request.method_original).
func methodAttr(method string, known bool) string {
	if known {
		return method
	}
	return "_OTHER"
}

// Sampled reports whether the request's trace is recorded and exported.
func (r *Request) Sampled() bool {
	return r != nil && r.span.SpanContext().IsSampled()
}

// TraceID returns the request's trace id in hex when its trace is
// sampled, and "" otherwise: a log line names only traces that can be
// found.
func (r *Request) TraceID() string {
	if !r.Sampled() {
		return ""
	}
	return r.span.SpanContext().TraceID().String()
}

// Event records a policy decision (such as "rate_limited", "breaker_open",
// "shed", "coalesced" or "fallback") on the request's span at time at
// (the zero time means now).
func (r *Request) Event(name string, at time.Time) {
	if r == nil || !r.span.IsRecording() {
		return
	}
	r.span.AddEvent(name, trace.WithTimestamp(at))
}

// End ends the server span at time end (the zero time means now), with the
// route that served the request ("" when none matched), the status code
// sent and the policy outcome ("ok", or the reason the gateway answered
// itself). A status of 500 or more marks the span as an error.
func (r *Request) End(route string, status int, outcome string, end time.Time) {
	if r == nil {
		return
	}
	if !r.span.IsRecording() {
		r.span.End()
		return
	}
	if route != "" {
		r.span.SetName(r.name + " " + route)
		r.span.SetAttributes(routeKey.String(route))
	}
	r.span.SetAttributes(semconv.HTTPResponseStatusCode(status), outcomeKey.String(outcome))
	if status >= 500 {
		r.span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		r.span.SetStatus(codes.Error, outcome)
	}
	r.span.End(trace.WithTimestamp(end))
}

// Attempt is the client span of one upstream attempt. A nil *Attempt does
// nothing.
type Attempt struct {
	span        trace.Span
	traceparent [55]byte // 00-<trace id>-<span id>-<flags>
	tracestate  string
}

// Attempt begins, now, the span of the request's attempt number n (1 for
// the first) to target (the upstream's base URL, whose host:port is addr);
// retryReason says why the attempt is not the first (a retry's reason,
// say; "" for none). It returns nil when r is nil.
func (r *Request) Attempt(n int, target, addr, retryReason string) *Attempt {
	if r == nil {
		return nil
	}
	_, span := r.tracer.Start(r.ctx, r.name, clientKind...)
	if span.IsRecording() {
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		span.SetAttributes(
			semconv.HTTPRequestMethodKey.String(methodAttr(r.method, r.known)),
			semconv.ServerAddress(host),
			semconv.ServerPort(p),
			targetKey.String(target),
			attemptKey.Int(n),
		)
		if n > 1 {
			span.SetAttributes(semconv.HTTPRequestResendCount(n - 1))
		}
		if retryReason != "" {
			span.SetAttributes(retryReasonKey.String(retryReason))
		}
	}
	a := &Attempt{span: span}
	sc := span.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b := append(a.traceparent[:0], "00-"...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	hex.AppendEncode(b, []byte{byte(sc.TraceFlags())})
	if ts := sc.TraceState(); ts.Len() > 0 {
		a.tracestate = ts.String()
	}
	return a
}

// Headers returns the W3C trace context to send upstream with the
// attempt, which makes the attempt's span the upstream's parent;
// tracestate is "" when there is none. traceparent is a's own: it must
// not be changed, and is empty when a is nil.
func (a *Attempt) Headers() (traceparent []byte, tracestate string) {
	if a == nil {
		return nil, ""
	}
	return a.traceparent[:], a.tracestate
}

// End ends the attempt's span at time end (the zero time means now) with
// the upstream's status code, or 0 and errType (such as "connect_error"
// or "timeout") when no response came. An error type or a status of 400
// or more marks the span as an error.
func (a *Attempt) End(status int, errType string, end time.Time) {
	if a == nil {
		return
	}
	if !a.span.IsRecording() {
		a.span.End()
		return
	}
	if status > 0 {
		a.span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
	if errType == "" && status >= 400 {
		errType = strconv.Itoa(status)
	}
	if errType != "" {
		a.span.SetAttributes(semconv.ErrorTypeKey.String(errType))
		a.span.SetStatus(codes.Error, errType)
	}
	a.span.End(trace.WithTimestamp(end))
}

// carrier holds the two W3C trace context headers for the propagator.
type carrier struct{ traceparent, tracestate string }

func (c *carrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.traceparent
	case "tracestate":
		return c.tracestate
	}
	return ""
}

func (c *carrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.traceparent = value
	case "tracestate":
		c.tracestate = value
	}
}

func (c *carrier) Keys() []string { return []string{"traceparent", "tracestate"} }
