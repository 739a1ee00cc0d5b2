package hedge_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/hedge"
)

// The first replica hangs; after the delay a hedge goes to the second one,
// which answers, and the first is cancelled.
func ExamplePolicy() {
	fc := clock.NewFake(time.Time{}) // a fake clock, so that the example is exact
	h, err := hedge.New(hedge.Options{Delay: 50 * time.Millisecond, Clock: fc})
	if err != nil {
		fmt.Println(err)
		return
	}
	g := sluice.New(h)

	var attempt atomic.Int32
	primaryGone := make(chan error, 1)
	lookup := func(ctx context.Context) (string, error) {
		if attempt.Add(1) == 1 {
			<-ctx.Done() // the slow replica
			primaryGone <- context.Cause(ctx)
			return "", ctx.Err()
		}
		return "answer from replica 2", nil
	}

	answer := make(chan string)
	go func() {
		v, _ := sluice.Do(context.Background(), g, lookup)
		answer <- v
	}()
	_ = fc.BlockUntil(context.Background(), 1) // the hedge timer is armed
	fc.Advance(50 * time.Millisecond)
	fmt.Println(<-answer)
	fmt.Println("primary:", <-primaryGone)
	// Output:
	// answer from replica 2
	// primary: hedge: another attempt won
}

// A typical configuration: hedge the calls slower than the 95th percentile
// of recent ones (but never sooner than 20ms), with a budget of tokens so
// that hedges stay a small fraction of the traffic, and close the bodies of
// the responses that lost.
func ExampleNew() {
	var budget hedge.Budget // for example a retry.Budget shared with retries
	h, err := hedge.New(hedge.Options{
		Delay:    20 * time.Millisecond,
		Quantile: 0.95,
		MaxDelay: time.Second,
		Budget:   budget,
		Discard: func(v any) {
			if resp, ok := v.(*http.Response); ok {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(h.Delay())
	// Output: 20ms
}
