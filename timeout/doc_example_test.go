package timeout_test

import (
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/timeout"
)

// The package comment's example: the timeout innermost, inside the retry,
// so that it bounds one attempt.
func Example_placement() {
	limiter, errL := ratelimit.New(ratelimit.Options{Limit: ratelimit.Limit{Limit: 100, Period: time.Second}})
	retryPolicy, errR := retry.New(retry.Options{})
	br, errB := breaker.New(breaker.Options{Name: "inference"})
	bulkhead, errC := concurrency.NewBulkhead(concurrency.BulkheadOptions{MaxConcurrent: 32})
	if err := errors.Join(errL, errR, errB, errC); err != nil {
		log.Fatal(err)
	}

	t, err := timeout.New(timeout.Options{Timeout: 2 * time.Second})
	if err != nil {
		log.Fatal(err) // names every unusable option
	}
	g := sluice.New(limiter, retryPolicy, br, bulkhead, t)

	fmt.Printf("%d policies, the last bounding each attempt to %v\n", len(g.Policies()), t.Duration())
	// Output:
	// 5 policies, the last bounding each attempt to 2s
}
