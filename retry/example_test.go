package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/retry"
)

// A flaky call succeeds on its third attempt.
func Example() {
	p, err := retry.New(retry.Options{
		MaxAttempts: 3,
		Initial:     time.Millisecond,
		Jitter:      retry.NoJitter,
		OnRetry: func(attempt int, delay time.Duration, last sluice.Result) {
			fmt.Printf("attempt %d failed (%v); next in %v\n", attempt, last.Err, delay)
		},
	})
	if err != nil {
		panic(err)
	}
	g := sluice.New(p)

	calls := 0
	answer, err := sluice.Do(context.Background(), g, func(ctx context.Context) (string, error) {
		calls++
		if calls < 3 {
			return "", errors.New("connection reset")
		}
		return "42", nil
	})
	fmt.Println(answer, err)
	// Output:
	// attempt 1 failed (connection reset); next in 1ms
	// attempt 2 failed (connection reset); next in 2ms
	// 42 <nil>
}

// RetryIf and AbortIf decide what is retried: here, never an error the
// downstream calls permanent, and also a successful answer that is not ready.
func Example_predicates() {
	errInvalid := errors.New("invalid request")
	p, err := retry.New(retry.Options{
		MaxAttempts: 5,
		Backoff:     retry.Constant(time.Millisecond),
		AbortIf:     func(r sluice.Result) bool { return errors.Is(r.Err, errInvalid) },
		RetryIf: func(r sluice.Result) bool {
			return r.Class == sluice.Failure || r.Value == "pending"
		},
	})
	if err != nil {
		panic(err)
	}
	g := sluice.New(p)

	polls := 0
	status, err := sluice.Do(context.Background(), g, func(ctx context.Context) (string, error) {
		polls++
		if polls < 3 {
			return "pending", nil
		}
		return "ready", nil
	})
	fmt.Println(status, err, polls)

	attempts := 0
	_, err = sluice.Do(context.Background(), g, func(ctx context.Context) (string, error) {
		attempts++
		return "", errInvalid
	})
	fmt.Println(err, attempts)
	// Output:
	// ready <nil> 3
	// invalid request 1
}

// One Budget shared by the retries of two routes to the same downstream caps
// their retries together: here, with no traffic-proportional share, at two
// retries per window.
func ExampleBudget() {
	budget, err := retry.NewBudget(retry.BudgetOptions{
		Ratio:        -1,  // no share of calls: only the floor below
		MinPerSecond: 0.2, // 0.2/s over the 10s window: 2 retries
	})
	if err != nil {
		panic(err)
	}
	opts := retry.Options{MaxAttempts: 3, Backoff: retry.Constant(0), Budget: budget}
	search, _ := retry.New(opts)
	suggest, _ := retry.New(opts)

	attempts := 0
	fail := func(ctx context.Context) (int, error) {
		attempts++
		return 0, errors.New("unavailable")
	}
	_, _ = sluice.Do(context.Background(), sluice.New(search), fail)
	_, _ = sluice.Do(context.Background(), sluice.New(suggest), fail)

	fmt.Println("attempts:", attempts)
	fmt.Println("refused retries:", budget.Refused())
	fmt.Println("suggest stopped by the budget:", suggest.Stats().Stopped[retry.BudgetExhausted])
	// Output:
	// attempts: 4
	// refused retries: 1
	// suggest stopped by the budget: 1
}

// An overloaded downstream says when to come back; the retry waits that long
// rather than its shorter backoff.
func Example_retryAfter() {
	p, err := retry.New(retry.Options{
		Backoff: retry.Constant(time.Microsecond),
		OnRetry: func(attempt int, delay time.Duration, last sluice.Result) {
			fmt.Println("waiting", delay, "after:", last.Err)
		},
	})
	if err != nil {
		panic(err)
	}
	g := sluice.New(p)

	calls := 0
	_, err = sluice.Do(context.Background(), g, func(ctx context.Context) (int, error) {
		calls++
		if calls == 1 {
			return 0, &sluice.Rejection{Reason: sluice.Overloaded, Policy: "upstream", RetryAfter: 2 * time.Millisecond}
		}
		return 1, nil
	})
	fmt.Println(err)
	// Output:
	// waiting 2ms after: sluice: rejected: overloaded (policy "upstream", retry after 2ms)
	// <nil>
}
