package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/fallback"
)

// openBreaker stands in for a circuit breaker that is open: it rejects
// every call, as breaker.Breaker does while its downstream is failing.
type openBreaker struct{ open bool }

func (b *openBreaker) Acquire(context.Context) (sluice.Permit, error) {
	if b.open {
		return sluice.Permit{}, &sluice.Rejection{Reason: sluice.CircuitOpen, RetryAfter: 5 * time.Second}
	}
	return sluice.Permit{}, nil
}

func (b *openBreaker) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, b, next)
}

type cityKey struct{}

func forCity(city string) context.Context {
	return context.WithValue(context.Background(), cityKey{}, city)
}

// Degrade to the last good forecast of the same city, and to a static
// answer for cities never seen, while the breaker rejects calls.
func ExampleNew() {
	lastGood, err := fallback.NewLastGood(fallback.LastGoodOptions{
		Key: func(ctx context.Context) (string, bool) {
			city, ok := ctx.Value(cityKey{}).(string)
			return city, ok
		},
		MaxAge:  time.Hour,
		MaxKeys: 10000,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	br := &openBreaker{}
	g := sluice.New(fallback.New(lastGood, fallback.Value("forecast unavailable")), br)
	forecast := func(ctx context.Context) (string, error) {
		return "sunny in " + ctx.Value(cityKey{}).(string), nil
	}

	fmt.Println(sluice.Do(forCity("Lyon"), g, forecast))
	br.open = true // the downstream failed: the breaker now rejects
	fmt.Println(sluice.Do(forCity("Lyon"), g, forecast))
	fmt.Println(sluice.Do(forCity("Oslo"), g, forecast))
	// Output:
	// sunny in Lyon <nil>
	// sunny in Lyon <nil>
	// forecast unavailable <nil>
}

// A typed alternative: when the primary store fails, read a replica.
func ExampleFuncOf() {
	errPrimaryDown := errors.New("primary down")
	g := sluice.New(fallback.New(
		fallback.FuncOf(func(ctx context.Context, err error) (int, error) {
			return 41, nil // a stale read from the replica
		}),
	))
	n, err := sluice.Do(context.Background(), g, func(ctx context.Context) (int, error) {
		return 0, errPrimaryDown
	})
	fmt.Println(n, err)
	// Output: 41 <nil>
}

// When every level fails, the original error comes back, wrapped in an
// *Error that still matches it.
func ExampleError() {
	errDown := errors.New("downstream down")
	lastGood, _ := fallback.NewLastGood(fallback.LastGoodOptions{})
	g := sluice.New(fallback.New(lastGood))
	_, err := sluice.Do(context.Background(), g, func(ctx context.Context) (string, error) {
		return "", errDown
	})
	fmt.Println(errors.Is(err, errDown))
	fmt.Println(err)
	// Output:
	// true
	// downstream down (fallback failed: level 1: fallback: no last good value for key "")
}

// Degrade only on rejections, never on the downstream's own errors.
func ExamplePolicy_When() {
	p := fallback.New(fallback.Value("busy, try later")).When(func(r sluice.Result) bool {
		return errors.Is(r.Err, sluice.ErrRejected)
	})
	g := sluice.New(p)
	_, err := sluice.Do(context.Background(), g, func(ctx context.Context) (string, error) {
		return "", errors.New("bad request")
	})
	fmt.Println(err)
	// Output: bad request
}
