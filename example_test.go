package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/concurrency"
)

// The seed scenario: an "AI inference" service answers in 200 ms and fails
// 60% of the time until it recovers at t=1.5s. Ten callers call it at once,
// in waves, through one Guard: a circuit breaker, then a bulkhead that lets
// at most 3 calls run. Time is a fake clock, so the run is exact.
//
// The bulkhead rejects the 7 callers it has no slot for; the breaker trips
// once half of the last 6 calls failed, then rejects every caller at once
// without touching the service; after 1 s it lets 2 probes through, and
// closes when they succeed.
func Example() {
	clk := clock.NewFake(time.Time{})
	now := func() string { return fmt.Sprintf("t=%.1fs", time.Duration(clk.Nanotime()).Seconds()) }
	var transitions []string
	var mu sync.Mutex
	br, _ := breaker.New(breaker.Options{
		Name: "inference", Clock: clk,
		FailureRate: 0.5, CountWindow: 6, MinCalls: 6,
		OpenDuration: time.Second, HalfOpenCalls: 2,
		OnStateChange: func(name string, from, to breaker.State) {
			mu.Lock()
			defer mu.Unlock()
			transitions = append(transitions, fmt.Sprintf("%s breaker %s -> %s", now(), from, to))
		},
	})
	bulkhead, _ := concurrency.NewBulkhead(concurrency.BulkheadOptions{Name: "inference", MaxConcurrent: 3, Clock: clk})
	guard := sluice.New(br, bulkhead).WithClock(clk)

	var calls atomic.Int64
	infer := func(ctx context.Context) (string, error) {
		n := calls.Add(1)
		started <- struct{}{}
		if err := clock.Sleep(ctx, clk, 200*time.Millisecond); err != nil {
			return "", err
		}
		if clk.Nanotime() < int64(1500*time.Millisecond) && n%5 < 3 { // 3 calls in 5 fail
			return "", errors.New("inference timed out")
		}
		return "answer", nil
	}

	for wave := 0; wave < 8; wave++ {
		start := now()
		before := calls.Load()
		var wg sync.WaitGroup
		results := make(chan string, 10)
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := sluice.Do(context.Background(), guard, infer)
				var rej *sluice.Rejection
				switch {
				case err == nil:
					results <- "ok"
				case errors.As(err, &rej):
					results <- string(rej.Reason)
					started <- struct{}{} // a rejected caller never reaches infer
				default:
					results <- "failed"
				}
			}()
		}
		for range 10 { // every caller is now running or rejected
			<-started
		}
		if running := int(calls.Load() - before); running > 0 {
			// A caller signals before it sleeps: wait for every sleep to
			// be on the clock, or the advance could miss one.
			_ = clk.BlockUntil(context.Background(), running)
			clk.Advance(200 * time.Millisecond)
		} else {
			clk.Advance(500 * time.Millisecond) // nothing ran: the callers come back later
		}
		wg.Wait()
		close(results)
		count := map[string]int{}
		for r := range results {
			count[r]++
		}
		var parts []string
		for k, v := range count {
			parts = append(parts, fmt.Sprintf("%d %s", v, k))
		}
		sort.Strings(parts)
		mu.Lock()
		fmt.Printf("%s: %s\n", start, strings.Join(parts, ", "))
		for _, t := range transitions {
			fmt.Println("  " + t)
		}
		transitions = nil
		mu.Unlock()
	}
	fmt.Println("calls that reached the service:", calls.Load())

	// Output:
	// t=0.0s: 1 ok, 2 failed, 7 overloaded
	// t=0.2s: 1 ok, 2 failed, 7 overloaded
	//   t=0.4s breaker closed -> open
	// t=0.4s: 10 circuit_open
	// t=0.9s: 10 circuit_open
	// t=1.4s: 2 ok, 8 circuit_open
	//   t=1.4s breaker open -> half-open
	//   t=1.6s breaker half-open -> closed
	// t=1.6s: 3 ok, 7 overloaded
	// t=1.8s: 3 ok, 7 overloaded
	// t=2.0s: 3 ok, 7 overloaded
	// calls that reached the service: 17
}

// started receives a signal from every caller of Example once it is either
// running the service or rejected.
var started = make(chan struct{}, 10)
