package chain_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/chain"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/concurrency/limit"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/hedge"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/timeout"
)

// Every problem of every policy is reported at once, and no guard is built.
func TestGuardReportsEveryProblem(t *testing.T) {
	g, err := chain.New().
		RateLimit(ratelimit.Options{}).
		Retry(retry.Options{MaxAttempts: -1}).
		Breaker(breaker.Options{FailureRate: 2}).
		Breaker(breaker.Options{}).
		Bulkhead(concurrency.BulkheadOptions{}).
		Adaptive(concurrency.LimiterOptions{}).
		Timeout(timeout.Options{}).
		Guard()
	if g != nil {
		t.Error("a guard was built from unusable options")
	}
	if !errors.Is(err, sluice.ErrInvalidOptions) || !errors.Is(err, breaker.ErrInvalidOptions) || !errors.Is(err, ratelimit.ErrInvalidLimit) {
		t.Errorf("err = %v, want one matching sluice, breaker and ratelimit's sentinels", err)
	}
	for _, want := range []string{
		"chain: invalid options: Breaker is given twice",
		"chain: invalid options: Bulkhead and Adaptive are both given",
		"ratelimit:", "MaxAttempts -1", "FailureRate 2", "MaxConcurrent", "Timeout 0s is not positive",
	} {
		if !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("error does not name %q:\n%v", want, err)
		}
	}
}

// The policies take sluice's recommended order whatever the order of the
// calls.
func TestGuardOrdersPolicies(t *testing.T) {
	g, err := chain.New().
		Timeout(timeout.Options{Timeout: time.Second}).
		Bulkhead(concurrency.BulkheadOptions{MaxConcurrent: 1}).
		Breaker(breaker.Options{}).
		Hedge(hedge.Options{Delay: time.Second}).
		Retry(retry.Options{}).
		Fallback(fallback.Value("stale")).
		Coalesce(coalesce.Options{Key: func(context.Context) (string, bool) { return "", false }}).
		RateLimit(ratelimit.Options{Limit: ratelimit.Limit{Limit: 1, Period: time.Second}}).
		Guard()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range g.Policies() {
		got = append(got, fmt.Sprintf("%T", p))
	}
	want := "*ratelimit.Limiter *coalesce.Policy *fallback.Policy *retry.Retry *hedge.Policy *breaker.Breaker *concurrency.Bulkhead *timeout.Timeout"
	if strings.Join(got, " ") != want {
		t.Errorf("order %v\nwant  %s", got, want)
	}
}

// Clock reaches every policy that has none: a breaker opened on the fake
// clock lets a probe through once the fake clock moved its open duration.
func TestGuardClockReachesPolicies(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	g, err := chain.New().
		Breaker(breaker.Options{ConsecutiveFailures: 1, OpenDuration: time.Minute}).
		Clock(fc).
		Guard()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fail := func(context.Context) (int, error) { return 0, errors.New("boom") }
	ok := func(context.Context) (int, error) { return 1, nil }
	if _, err := sluice.Do(ctx, g, fail); errors.Is(err, sluice.ErrRejected) {
		t.Fatal("the first call was rejected")
	}
	if _, err := sluice.Do(ctx, g, ok); !errors.Is(err, sluice.ErrRejected) {
		t.Fatalf("err = %v, want the open breaker's rejection", err)
	}
	fc.Advance(time.Minute)
	if v, err := sluice.Do(ctx, g, ok); v != 1 || err != nil {
		t.Errorf("after the open duration on the fake clock: %v, %v", v, err)
	}
}

// An empty builder builds a guard that runs calls directly; a Classifier
// reaches the guard.
func TestGuardEmptyAndClassifier(t *testing.T) {
	ignored := func(context.Context, error) sluice.Class { return sluice.Ignored }
	g, err := chain.New().Classifier(ignored).Guard()
	if err != nil {
		t.Fatal(err)
	}
	if v, err := sluice.Do(context.Background(), g, func(context.Context) (string, error) { return "x", nil }); v != "x" || err != nil {
		t.Errorf("Do = %q, %v", v, err)
	}
	if c := g.Classify(context.Background(), errors.New("boom")); c != sluice.Ignored {
		t.Errorf("Classify = %v, want the classifier's Ignored", c)
	}
}

// Adaptive without an Algorithm gets sluice's default one, starting at the
// gateway's default limit.
func TestAdaptiveDefaultAlgorithm(t *testing.T) {
	g, err := chain.New().Adaptive(concurrency.LimiterOptions{}).Guard()
	if err != nil {
		t.Fatal(err)
	}
	l, ok := g.Policies()[0].(*concurrency.Limiter)
	if !ok {
		t.Fatalf("policy %T, want *concurrency.Limiter", g.Policies()[0])
	}
	if got := l.Limit(); got != limit.DefaultInitialLimit {
		t.Errorf("limit %d, want limit.DefaultInitialLimit %d", got, limit.DefaultInitialLimit)
	}
}
