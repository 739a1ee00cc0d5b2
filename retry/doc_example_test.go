package retry_test

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

// The package comment's example: the retry outside the breaker, the
// concurrency limit and the per-attempt timeout, so that every attempt
// passes them again.
func Example_placement() {
	limiter, errL := ratelimit.New(ratelimit.Options{Limit: ratelimit.Limit{Limit: 100, Period: time.Second}})
	br, errB := breaker.New(breaker.Options{Name: "inference"})
	bulkhead, errC := concurrency.NewBulkhead(concurrency.BulkheadOptions{MaxConcurrent: 32})
	perAttemptTimeout, errT := timeout.New(timeout.Options{Timeout: 2 * time.Second})
	if err := errors.Join(errL, errB, errC, errT); err != nil {
		log.Fatal(err)
	}

	p, err := retry.New(retry.Options{MaxAttempts: 3})
	if err != nil {
		log.Fatal(err) // names every unusable option
	}
	g := sluice.New(limiter, p, br, bulkhead, perAttemptTimeout)

	for _, p := range g.Policies() {
		fmt.Printf("%T\n", p)
	}
	// Output:
	// *ratelimit.Limiter
	// *retry.Retry
	// *breaker.Breaker
	// *concurrency.Bulkhead
	// *timeout.Timeout
}
