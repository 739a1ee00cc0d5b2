package limit_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/concurrency/limit"
)

// A Default limit with its defaults. A concurrency.Limiter calls Sample for
// every call that ran and admits calls while fewer than Limit are in flight.
func ExampleNewDefault() {
	d, err := limit.NewDefault(limit.DefaultOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("initial limit:", d.Limit())

	// Samples in virtual time: 20 ms calls with the limit fully used and no
	// queue. The delivery rate follows the calls in flight, so the limit
	// grows to find the capacity.
	var now int64
	for range 5000 {
		l := d.Limit()
		now += int64(20*time.Millisecond) / int64(l)
		d.Sample(now, 20*time.Millisecond, l, false)
	}
	fmt.Println("grew:", d.Limit() > 20)
	// Output:
	// initial limit: 20
	// grew: true
}

// The seed design's scenario: a service answers in 50 ms, then, overloaded,
// in 500 ms. The limiter pulls the limit down by itself.
func ExampleNewLatencyGradient() {
	g, err := limit.NewLatencyGradient(limit.LatencyGradientOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	var now int64
	sample := func(n int, rtt time.Duration) {
		for range n {
			l := g.Limit()
			now += int64(rtt) / int64(l)
			g.Sample(now, rtt, l, false)
		}
	}
	sample(1000, 50*time.Millisecond)
	before := g.Limit()
	sample(300, 500*time.Millisecond)
	fmt.Println("no-load latency:", g.NoLoadLatency().Round(time.Millisecond))
	fmt.Println("limit fell:", g.Limit() < before/2)
	// Output:
	// no-load latency: 50ms
	// limit fell: true
}

// Options are validated: a bad combination is an error wrapping
// ErrInvalidOptions.
func ExampleNewAIMD() {
	_, err := limit.NewAIMD(limit.AIMDOptions{MinLimit: 50, MaxLimit: 10})
	fmt.Println(err)
	// Output:
	// limit: invalid options: AIMD: MinLimit 50 > MaxLimit 10
}
