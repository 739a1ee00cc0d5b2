package concurrency_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/concurrency"
)

// fixed is a limit.Algorithm whose limit never moves; real code uses one of
// package limit's algorithms.
type fixed int

func (f fixed) Limit() int                                 { return int(f) }
func (f fixed) Sample(int64, time.Duration, int, bool) int { return int(f) }

// A bulkhead of two slots without a queue: the third concurrent call is
// rejected at once.
func ExampleBulkhead() {
	b, err := concurrency.NewBulkhead(concurrency.BulkheadOptions{MaxConcurrent: 2, Name: "db"})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	p1, _ := b.Acquire(ctx)
	p2, _ := b.Acquire(ctx)
	_, err = b.Acquire(ctx)
	fmt.Println(err)
	fmt.Println(errors.Is(err, sluice.ErrRejected), b.InFlight())

	p1.Done(sluice.Outcome{Class: sluice.Success})
	p2.Done(sluice.Outcome{Class: sluice.Success})
	fmt.Println(b.InFlight())
	// Output:
	// sluice: rejected: overloaded (policy "db")
	// true 2
	// 0
}

// A Limiter inside a Guard: sluice.Do admits the call, runs it and reports
// its outcome, whose latency feeds the algorithm.
func ExampleLimiter() {
	l, err := concurrency.NewLimiter(concurrency.LimiterOptions{
		Algorithm: fixed(10),
		MaxQueue:  100,
		MaxWait:   50 * time.Millisecond,
		Name:      "inference",
		OnLimitChange: func(old, new int) {
			// Called outside the limiter's locks; never here, since the
			// fixed algorithm does not move.
			fmt.Printf("limit %d -> %d\n", old, new)
		},
	})
	if err != nil {
		panic(err)
	}
	g := sluice.New(l)
	answer, err := sluice.Do(context.Background(), g, func(ctx context.Context) (string, error) {
		return "42", nil
	})
	fmt.Println(answer, err, l.Limit(), l.InFlight())
	// Output: 42 <nil> 10 0
}

// Priority classes share the limit: here Critical is guaranteed half of it,
// Normal a third and BestEffort the rest. While Critical calls are being
// refused, best-effort calls get no more than their own share.
func ExampleWithPriority() {
	l, _ := concurrency.NewLimiter(concurrency.LimiterOptions{
		Algorithm:  fixed(6),
		Priorities: []concurrency.Share{{Fraction: 0.5}, {Fraction: 0.3}, {Fraction: 0.2}},
	})
	critical := concurrency.WithPriority(context.Background(), concurrency.Critical)
	bestEffort := concurrency.WithPriority(context.Background(), concurrency.BestEffort)

	// Best effort borrows the idle shares of the others.
	var held []sluice.Permit
	for range 6 {
		p, _ := l.Acquire(bestEffort)
		held = append(held, p)
	}
	_, err := l.Acquire(critical)
	fmt.Println("critical at the limit:", err)

	// Three best-effort calls end; their slots are kept for Critical.
	for _, p := range held[:3] {
		p.Done(sluice.Outcome{Class: sluice.Success})
	}
	_, err = l.Acquire(bestEffort)
	fmt.Println("best effort:", err)
	for range 3 {
		if _, err := l.Acquire(critical); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println("critical in flight:", l.InFlightOf(concurrency.Critical))
	// Output:
	// critical at the limit: sluice: rejected: overloaded
	// best effort: sluice: rejected: overloaded
	// critical in flight: 3
}
