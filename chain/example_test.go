package chain_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/chain"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/timeout"
)

// Five policies in five lines, and one error check for all of them. A
// flaky call succeeds on its third attempt.
func Example() {
	g, err := chain.New().
		RateLimit(ratelimit.Options{Limit: ratelimit.Limit{Limit: 100, Period: time.Second}}).
		Retry(retry.Options{Backoff: retry.Constant(time.Millisecond)}).
		Breaker(breaker.Options{Name: "inference"}).
		Bulkhead(concurrency.BulkheadOptions{MaxConcurrent: 32}).
		Timeout(timeout.Options{Timeout: 2 * time.Second}).
		Guard()
	if err != nil {
		fmt.Println(err) // every unusable option, one per line
		return
	}

	calls := 0
	answer, err := sluice.Do(context.Background(), g, func(ctx context.Context) (string, error) {
		if calls++; calls < 3 {
			return "", errors.New("connection reset")
		}
		return "42", nil
	})
	fmt.Println(answer, err, calls)
	// Output:
	// 42 <nil> 3
}

// Unusable options do not panic and are not lost: Guard reports every one
// of every policy, and builds nothing.
func Example_errors() {
	g, err := chain.New().
		RateLimit(ratelimit.Options{Limit: ratelimit.Limit{Limit: 100}}).
		Retry(retry.Options{MaxAttempts: -1}).
		Breaker(breaker.Options{FailureRate: 1.5}).
		Guard()
	fmt.Println(g == nil, errors.Is(err, sluice.ErrInvalidOptions))
	fmt.Println(err)
	// Output:
	// true true
	// ratelimit: invalid limit: Period is 0s, want more than 0
	// retry: invalid options: MaxAttempts -1 is negative
	// breaker: invalid options: FailureRate 1.5 is not in [0, 1]
}
