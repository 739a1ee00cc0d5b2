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

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/config"
)

// scope is the instrumentation scope of the gateway's spans.
const scope = "github.com/sluicehq/sluice/gateway"

// Provider records spans and exports them in batches to one collector.
// Its methods are safe for concurrent use.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	cfg    config.Tracing
}

// New starts a provider for c, exporting to c.TracesURL(). Spans of new
// traces are sampled with probability c.Sample; a request with a W3C
// traceparent follows its parent's sampled flag. version is the
// service.version resource attribute. Export failures are logged to log
// (nil: slog.Default()). New does not contact the collector.
func New(c config.Tracing, version string, log *slog.Logger) (*Provider, error) {
	if log == nil {
		log = slog.Default()
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(c.TracesURL()))
	if err != nil {
		return nil, fmt.Errorf("tracing: creating the OTLP exporter for %s: %w", c.TracesURL(), err)
	}
	res := resource.NewSchemaless(semconv.ServiceName(c.ServiceName), semconv.ServiceVersion(version))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(loggingExporter{exp, log, c.TracesURL()}),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.Sample))),
	)
	return &Provider{tp: tp, tracer: tp.Tracer(scope, trace.WithInstrumentationVersion(version)), cfg: c}, nil
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
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flushing spans: %w", err)
	}
	return nil
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
