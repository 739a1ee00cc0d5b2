package prom_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/telemetry/observe"
	"github.com/sluicehq/sluice/telemetry/prom"
)

// readmeGuard is README.md's example of an observed Guard.
func readmeGuard(bulk *concurrency.Bulkhead) (*sluice.Guard, *prometheus.Registry) {
	reg := prometheus.NewRegistry() // served by promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	sink, err := prom.New(reg)      // or otelmetric.New(meter)
	if err != nil {
		log.Fatal(err)
	}
	obs := observe.New(sink)
	br, err1 := breaker.New(breaker.Options{Name: "inference", OnStateChange: obs.Breaker("inference")})
	rt, err2 := retry.New(retry.Options{OnRetry: obs.Retry("inference"), OnGiveUp: obs.GiveUp("inference")})
	if err := errors.Join(err1, err2); err != nil {
		log.Fatal(err)
	}
	g := sluice.New(obs.Guard("inference"), rt, br, bulk)
	return g, reg
}

// The guard of README.md's example counts its calls.
func Example_readme() {
	bulk, err := concurrency.NewBulkhead(concurrency.BulkheadOptions{MaxConcurrent: 8})
	if err != nil {
		panic(err)
	}
	g, reg := readmeGuard(bulk)
	for range 3 {
		_, _ = sluice.Do(context.Background(), g, func(context.Context) (string, error) { return "answer", nil })
	}
	fmt.Println(testutil.CollectAndCount(reg, "sluice_guard_calls_total"), "classes counted")
	// Output: 4 classes counted
}
