// Package sluice keeps callers alive when what they call is slow or failing.
//
// A Guard composes policies around a call; Do runs a function behind it.
// Package chain builds the common guard, its policies in the recommended
// order, and reports every unusable option at once:
//
//	g, err := chain.New().
//		RateLimit(ratelimit.Options{Limit: ratelimit.Limit{Limit: 100, Period: time.Second}}).
//		Retry(retry.Options{}).
//		Breaker(breaker.Options{Name: "inference"}).
//		Bulkhead(concurrency.BulkheadOptions{MaxConcurrent: 32}).
//		Timeout(timeout.Options{Timeout: 2 * time.Second}).
//		Guard()
//	if err != nil {
//		return err // every unusable option of every policy, each matching sluice.ErrInvalidOptions
//	}
//	answer, err := sluice.Do(ctx, g, func(ctx context.Context) (string, error) {
//		return client.Infer(ctx, prompt)
//	})
//
// New composes any policies, in the order given: sluice.New(limiter, rt,
// br, bulkhead, to). The defaults of every policy, the same in the library
// and the gateway, are listed in docs/defaults.md.
//
// There are two kinds of policy, with one vocabulary:
//
//   - Admission policies (Admitter) decide whether a call may start: rate
//     limiters, circuit breakers, bulkheads and adaptive concurrency limits.
//     Acquire returns a Permit; the Permit's Done reports how the call ended.
//   - Flow policies shape how a call runs: retry, timeout, hedge, fallback,
//     single-flight. They receive the rest of the chain as a Call that they
//     may run once, several times, concurrently, or not at all.
//
// Every policy is a Policy, so both kinds compose into one Guard in the order
// given, outermost first. The recommended order is
//
//	rate limit → coalesce → fallback → retry → circuit breaker → concurrency limit → timeout → call
//
// so that cheap rejections come first, every retry passes the breaker and the
// concurrency limit again, and the timeout bounds one attempt. A call that
// waited in a concurrency limit's queue passes the breaker before it again
// once it gets its slot (see Rechecker), so that calls queued while the
// breaker opened do not reach what it protects.
//
// A call ends with an Outcome: its error, its latency and a Class decided by
// the Guard's Classifier. Only calls that really ran (Success or Failure)
// may feed a breaker's window or a limiter's latency samples; a call rejected
// before it ran is Dropped, one the caller cancelled is Ignored.
//
// Rejections satisfy errors.Is(err, ErrRejected) and are *Rejection values
// carrying the reason and, where known, when to retry.
//
// Every constructor of sluice's packages checks all of its options: when
// some are unusable it returns an error matching ErrInvalidOptions that
// names each of them.
package sluice
