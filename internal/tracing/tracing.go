// Package tracing exports the gateway's OpenTelemetry traces over OTLP/HTTP
// (protobuf): a server span per request, a client span per upstream
// attempt, policy decisions as events, and the W3C trace context read from
// the client and written to the upstream.
//
// A Provider is built from a config.Tracing; a nil *Provider, *Request or
// *Attempt does nothing, so that a gateway with tracing off pays one nil
// check per step and allocates nothing.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/invalid"
)

// scope is the instrumentation scope of the gateway's spans.
const scope = "github.com/sluicehq/sluice/gateway"

// exportTimeout bounds one export to the collector; closeTimeout bounds
// Close.
const (
	exportTimeout = 10 * time.Second
	closeTimeout  = 5 * time.Second
)

// Provider records spans and exports them in batches to one collector.
// Its methods are safe for concurrent use.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	cfg    config.Tracing
	// transport is the exporter's own, whose idle connections Shutdown
	// closes.
	transport *http.Transport
	log       *slog.Logger
}

// New starts a provider for c, exporting to c.TracesURL(); an unusable
// option is an error matching sluice.ErrInvalidOptions. Spans of new
// traces are sampled with probability c.Sample; a request with a W3C
// traceparent follows its parent's sampled flag. version is the
// service.version resource attribute. Ended spans wait in a queue of
// 2048 (more are dropped, never waited for) and leave in batches of up to
// 512, every 5 seconds or as soon as a batch is full; a batch the
// collector does not take within 10 seconds is dropped and logged to log
// (nil: slog.Default()) at warn level. New does not contact the collector.
func New(c config.Tracing, version string, log *slog.Logger) (*Provider, error) {
	if err := check(c); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: exportTimeout}).DialContext,
		TLSHandshakeTimeout: exportTimeout,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     time.Minute,
	}
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(c.TracesURL()),
		otlptracehttp.WithTimeout(exportTimeout),
		// A batch that fails is logged and dropped: retrying it would
		// hold up the batches behind it, and shutdown.
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
		otlptracehttp.WithHTTPClient(&http.Client{Transport: tr, Timeout: exportTimeout}))
	if err != nil {
		return nil, fmt.Errorf("tracing: creating the OTLP exporter for %s: %w", c.TracesURL(), err)
	}
	res := resource.NewSchemaless(semconv.ServiceName(c.ServiceName), semconv.ServiceVersion(version))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(loggingExporter{exp, log, c.TracesURL()}),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.Sample))),
	)
	return &Provider{tp: tp, tracer: tp.Tracer(scope, trace.WithInstrumentationVersion(version)), cfg: c, transport: tr, log: log}, nil
}

// check reports every unusable option of c, each matching
// sluice.ErrInvalidOptions (config.Parse refuses them first, with their
// YAML paths).
func check(c config.Tracing) error {
	ps := invalid.Problems{Prefix: "tracing"}
	if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		ps.Addf("Endpoint %q is not an http or https URL with a host", c.Endpoint)
	}
	if c.Sample < 0 || c.Sample > 1 || c.Sample != c.Sample {
		ps.Addf("Sample %v is not a fraction in [0, 1]", c.Sample)
	}
	if c.ServiceName == "" {
		ps.Addf("ServiceName is empty")
	}
	return ps.Err()
}

// Config returns the configuration p was built from.
func (p *Provider) Config() config.Tracing { return p.cfg }

// ForceFlush exports every span ended so far, waiting at most until ctx
// ends.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.ForceFlush(ctx)
}

// Shutdown exports the spans ended so far and stops p; spans ended later
// are dropped. It waits at most until ctx ends.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	err := p.tp.Shutdown(ctx)
	p.transport.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("tracing: flushing spans: %w", err)
	}
	return nil
}

// Close is Shutdown within closeTimeout; it logs a failure to flush.
func (p *Provider) Close() {
	if p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		p.log.Warn("stopping the tracer", "error", err)
	}
}

// loggingExporter logs a failed export to the gateway's logger, rather
// than to OpenTelemetry's global error handler.
type loggingExporter struct {
	sdktrace.SpanExporter
	log *slog.Logger
	url string
}

func (e loggingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil {
		e.log.Warn("exporting spans", "collector", e.url, "spans", len(spans), "error", err)
	}
	return nil
}

// propagator reads and writes W3C traceparent and tracestate.
var propagator propagation.TraceContext

// attribute keys of sluice's own.
const (
	routeKey       = attribute.Key("sluice.route")
	outcomeKey     = attribute.Key("sluice.outcome")
	requestIDKey   = attribute.Key("sluice.request_id")
	targetKey      = attribute.Key("sluice.target")
	attemptKey     = attribute.Key("sluice.attempt")
	retryReasonKey = attribute.Key("sluice.retry_reason")
)
