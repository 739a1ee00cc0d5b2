package tracing

import (
	"context"
	"net"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Incoming describes a request as it arrived, for its server span.
type Incoming struct {
	// Method, Scheme ("http" or "https") and Path of the request.
	Method, Scheme, Path string
	// Client is the client's address as the gateway determined it (the
	// peer, or X-Forwarded-For from a trusted proxy).
	Client string
	// RequestID is the request's id, as logged and sent upstream.
	RequestID string
	// Traceparent and Tracestate are the client's W3C trace context
	// headers; "" when absent. A malformed traceparent is ignored: the
	// request starts a new trace.
	Traceparent, Tracestate string
	// Start is when the request began; the zero time means now.
	Start time.Time
}

// Request is the server span of one request. A nil *Request does nothing.
// Its methods must not be called concurrently with End.
type Request struct {
	ctx    context.Context // holds span, the parent of attempts
	span   trace.Span
	tracer trace.Tracer
	method string
}

// Start begins the server span of a request. It returns nil when p is nil.
func (p *Provider) Start(in Incoming) *Request {
	if p == nil {
		return nil
	}
	ctx := context.Background()
	if in.Traceparent != "" {
		ctx = propagator.Extract(ctx, &carrier{traceparent: in.Traceparent, tracestate: in.Tracestate})
	}
	ctx, span := p.tracer.Start(ctx, in.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(in.Start))
	if span.IsRecording() {
		span.SetAttributes(
			semconv.HTTPRequestMethodKey.String(in.Method),
			semconv.URLScheme(in.Scheme),
			semconv.URLPath(in.Path),
			semconv.ClientAddress(in.Client),
			requestIDKey.String(in.RequestID),
		)
	}
	return &Request{ctx: ctx, span: span, tracer: p.tracer, method: in.Method}
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
	if r.span.IsRecording() {
		if route != "" {
			r.span.SetName(r.method + " " + route)
			r.span.SetAttributes(routeKey.String(route))
		}
		r.span.SetAttributes(semconv.HTTPResponseStatusCode(status), outcomeKey.String(outcome))
		if status >= 500 {
			code := strconv.Itoa(status)
			r.span.SetAttributes(semconv.ErrorTypeKey.String(code))
			r.span.SetStatus(codes.Error, outcome)
		}
	}
	r.span.End(trace.WithTimestamp(end))
}

// Attempt is the client span of one upstream attempt. A nil *Attempt does
// nothing.
type Attempt struct {
	span                    trace.Span
	traceparent, tracestate string
}

// Attempt begins the span of the request's attempt number n (1 for the
// first) to target (the upstream's base URL, whose host:port is addr) at
// time start (the zero time means now); retryReason says why the attempt
// is a retry ("" for the first). It returns nil when r is nil.
func (r *Request) Attempt(n int, target, addr, retryReason string, start time.Time) *Attempt {
	if r == nil {
		return nil
	}
	_, span := r.tracer.Start(r.ctx, r.method, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start))
	if span.IsRecording() {
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		span.SetAttributes(
			semconv.HTTPRequestMethodKey.String(r.method),
			semconv.ServerAddress(host),
			semconv.ServerPort(p),
			targetKey.String(target),
			attemptKey.Int(n),
		)
		if n > 1 {
			span.SetAttributes(semconv.HTTPRequestResendCount(n-1), retryReasonKey.String(retryReason))
		}
	}
	c := carrier{}
	propagator.Inject(trace.ContextWithSpan(r.ctx, span), &c)
	return &Attempt{span: span, traceparent: c.traceparent, tracestate: c.tracestate}
}

// Headers returns the W3C trace context to send upstream with the
// attempt, which makes the attempt's span the upstream's parent;
// tracestate is "" when there is none.
func (a *Attempt) Headers() (traceparent, tracestate string) {
	if a == nil {
		return "", ""
	}
	return a.traceparent, a.tracestate
}

// End ends the attempt's span at time end (the zero time means now) with
// the upstream's status code, or 0 and errType (such as "connect_error"
// or "timeout") when no response came. An error type or a status of 400
// or more marks the span as an error.
func (a *Attempt) End(status int, errType string, end time.Time) {
	if a == nil {
		return
	}
	if a.span.IsRecording() {
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
