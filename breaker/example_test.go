package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
)

// An AI inference service answers in 200 ms and fails 60% of the time until
// it recovers at t=5s. Ten callers share three slots (a channel semaphore
// standing in for a bulkhead), so calls go out in waves of at most three,
// on a fake clock.
//
// The breaker trips once 10 calls have been seen with half of them failed,
// rejects everyone at once while open, lets two probes through when
// half-open (a failed probe opens it again for twice as long) and closes
// after two successful probes.
func Example() {
	clk := clock.NewFake(time.Time{})
	at := func() string { return fmt.Sprintf("t=%.1fs", time.Duration(clk.Nanotime()).Seconds()) }
	var events []string
	br, err := breaker.New(breaker.Options{
		Name:             "ai-inference",
		Clock:            clk,
		FailureRate:      0.5,
		MinCalls:         10,
		CountWindow:      10,
		OpenDuration:     2 * time.Second,
		OpenMultiplier:   2,
		HalfOpenCalls:    2,
		SuccessThreshold: 2,
		OnStateChange: func(name string, from, to breaker.State) {
			events = append(events, fmt.Sprintf("%s %s: %s -> %s", at(), name, from, to))
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	flush := func() {
		for _, e := range events {
			fmt.Println(e)
		}
		events = nil
	}

	// The service: call n fails when n%5 is 0, 2 or 3, until t=5s.
	calls := 0
	infer := func() sluice.Outcome {
		failing := calls%5 == 0 || calls%5 == 2 || calls%5 == 3
		calls++
		if failing && clk.Nanotime() < int64(5*time.Second) {
			return sluice.Outcome{Class: sluice.Failure, Err: errors.New("model overloaded"), Latency: 200 * time.Millisecond}
		}
		return sluice.Outcome{Class: sluice.Success, Latency: 200 * time.Millisecond}
	}

	ctx := context.Background()
	slots := make(chan struct{}, 3)
	for clk.Nanotime() < int64(7500*time.Millisecond) {
		state := br.State()
		flush()
		start := at()
		var running []sluice.Permit
		var rejected int
		var retryAfter time.Duration
		for range 10 { // each caller in turn
			select {
			case slots <- struct{}{}:
			default:
				continue // every slot is busy: this caller waits for the next wave
			}
			p, err := br.Acquire(ctx)
			if err != nil {
				<-slots // rejected at once: the slot goes to the next caller
				rejected++
				retryAfter, _ = sluice.RetryAfter(err)
				continue
			}
			running = append(running, p)
		}
		var line []string
		if len(running) > 0 {
			clk.Advance(200 * time.Millisecond)
			for _, p := range running {
				o := infer()
				if o.Err != nil {
					line = append(line, "fail")
				} else {
					line = append(line, "ok")
				}
				p.Done(o)
				<-slots
			}
		}
		if rejected > 0 {
			line = append(line, fmt.Sprintf("%d rejected at once", rejected))
			if len(running) == 0 {
				line[len(line)-1] += fmt.Sprintf(", retry after %v", retryAfter)
				clk.Advance(retryAfter)
			}
		}
		fmt.Printf("%s %s: %s\n", start, state, strings.Join(line, " "))
		flush()
	}
	m := br.Metrics()
	fmt.Printf("%s, %d trips, %d rejections, window %d calls %d failed\n", m.State, m.Trips, m.Rejections, m.Calls, m.Failures)

	// Output:
	// t=0.0s closed: fail ok fail
	// t=0.2s closed: fail ok fail
	// t=0.4s closed: ok fail fail
	// t=0.6s closed: ok fail ok
	// t=0.8s ai-inference: closed -> open
	// t=0.8s open: 10 rejected at once, retry after 2s
	// t=2.8s ai-inference: open -> half-open
	// t=2.8s half-open: fail fail 8 rejected at once
	// t=3.0s ai-inference: half-open -> open
	// t=3.0s open: 10 rejected at once, retry after 4s
	// t=7.0s ai-inference: open -> half-open
	// t=7.0s half-open: ok ok 8 rejected at once
	// t=7.2s ai-inference: half-open -> closed
	// t=7.2s closed: ok ok ok
	// t=7.4s closed: ok ok ok
	// closed, 2 trips, 36 rejections, window 6 calls 0 failed
}

// A Set gives each method of a downstream its own breaker, so that a failing
// method does not take the healthy ones down with it.
func ExampleSet() {
	clk := clock.NewFake(time.Time{})
	set, err := breaker.NewSet(breaker.Options{Clock: clk, ConsecutiveFailures: 3, OpenDuration: 30 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	g := sluice.New(set.Get("embed"))
	for range 3 {
		_, err = sluice.Do(ctx, g, func(context.Context) (string, error) { return "", errors.New("embedding model down") })
	}
	_, err = sluice.Do(ctx, g, func(context.Context) (string, error) { return "vector", nil })
	fmt.Println("embed:", set.Get("embed").State(), "-", err)

	answer, err := sluice.Do(ctx, sluice.New(set.Get("chat")), func(context.Context) (string, error) { return "hello", nil })
	fmt.Println("chat:", set.Get("chat").State(), "-", answer, err)
	// Output:
	// embed: open - sluice: rejected: circuit_open (policy "embed", retry after 30s)
	// chat: closed - hello <nil>
}
