package otelmetric_test

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/telemetry/observe"
	"github.com/sluicehq/sluice/telemetry/otelmetric"
)

// A service exports what its guard does through the OpenTelemetry meter
// provider it already has (here the SDK's, with a manual reader where a
// service would have an OTLP or Prometheus exporter).
func Example() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = provider.Shutdown(context.Background()) }()

	sink, err := otelmetric.New(provider.Meter("inventory"))
	if err != nil {
		panic(err)
	}
	obs := observe.New(sink)
	bulkhead, err := concurrency.NewBulkhead(concurrency.BulkheadOptions{Name: "db", MaxConcurrent: 1})
	if err != nil {
		panic(err)
	}
	g := sluice.New(obs.Guard("db"), bulkhead)

	ctx := context.Background()
	held, _ := g.Begin(ctx) // one call holds the bulkhead's only slot
	_, err = sluice.Do(ctx, g, func(context.Context) (int, error) { return 1, nil })
	fmt.Println(err)
	held.End(ctx, errors.New("timeout"))

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
			for _, p := range sum.DataPoints {
				fmt.Println(m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value)
			}
		}
	}
	// Unordered output:
	// sluice: rejected: overloaded (policy "db")
	// sluice.guard.calls class=dropped,guard=db 1
	// sluice.guard.calls class=failure,guard=db 1
	// sluice.guard.rejections guard=db,policy=db,reason=overloaded 1
}
