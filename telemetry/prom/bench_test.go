package prom_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/telemetry/observe"
	"github.com/sluicehq/sluice/telemetry/prom"
)

// BenchmarkObservedDo is a call through a Guard of a bulkhead observed
// into a Prometheus registry: compare with observe's BenchmarkDo.
func BenchmarkObservedDo(b *testing.B) {
	sink, err := prom.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	bulkhead, err := concurrency.NewBulkhead(concurrency.BulkheadOptions{MaxConcurrent: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	g := sluice.New(observe.New(sink).Guard("db"), bulkhead)
	fn := func(context.Context) (int, error) { return 1, nil }
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = sluice.Do(ctx, g, fn)
		}
	})
}
