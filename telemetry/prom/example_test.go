package prom_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/telemetry/observe"
	"github.com/sluicehq/sluice/telemetry/prom"
)

// A service guards its database calls with a circuit breaker and exports
// what the guard and the breaker do to Prometheus. (A service serves reg
// with promhttp.HandlerFor. The example's breaker runs on a fake clock so
// that its Retry-After prints the same every time.)
func Example() {
	clk := clock.NewFake(time.Time{})
	reg := prometheus.NewRegistry()
	sink, err := prom.New(reg)
	if err != nil {
		panic(err)
	}
	obs := observe.New(sink)
	br, err := breaker.New(breaker.Options{Name: "db", Clock: clk, ConsecutiveFailures: 2, OpenDuration: time.Minute,
		OnStateChange: obs.Breaker("db")})
	if err != nil {
		panic(err)
	}
	g := sluice.New(obs.Guard("db"), br)

	query := func(fail bool) func(context.Context) (int, error) {
		return func(context.Context) (int, error) {
			if fail {
				return 0, errors.New("connection refused")
			}
			return 42, nil
		}
	}
	ctx := context.Background()
	for _, fail := range []bool{false, true, true, false} {
		_, err := sluice.Do(ctx, g, query(fail))
		fmt.Println(err)
	}

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			if f.GetName() == "sluice_guard_call_duration_seconds" || v == 0 {
				continue
			}
			fmt.Print(f.GetName(), "{")
			for i, l := range m.GetLabel() {
				if i > 0 {
					fmt.Print(",")
				}
				fmt.Printf("%s=%q", l.GetName(), l.GetValue())
			}
			fmt.Println("}", v)
		}
	}
	// Output:
	// <nil>
	// connection refused
	// connection refused
	// sluice: rejected: circuit_open (policy "db", retry after 1m0s)
	// sluice_circuit_breaker_state{breaker="db",state="open"} 1
	// sluice_circuit_breaker_transitions_total{breaker="db",to="open"} 1
	// sluice_guard_calls_total{class="dropped",guard="db"} 1
	// sluice_guard_calls_total{class="failure",guard="db"} 2
	// sluice_guard_calls_total{class="success",guard="db"} 1
	// sluice_guard_rejections_total{guard="db",policy="db",reason="circuit_open"} 1
}
