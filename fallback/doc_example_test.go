package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/ratelimit"
)

// The package comment's example: the last good answer for the same user,
// then a static one, outside the breaker and the rate limit, so that their
// rejections degrade too.
func Example_placement() {
	type userKey struct{}
	byUser := func(ctx context.Context) (string, bool) {
		u, ok := ctx.Value(userKey{}).(string)
		return u, ok
	}
	defaultAnswer := "no recommendation today"
	br, errB := breaker.New(breaker.Options{Name: "recommendations"})
	limiter, errL := ratelimit.New(ratelimit.Options{Limit: ratelimit.Limit{Limit: 100, Period: time.Second}})
	if err := errors.Join(errB, errL); err != nil {
		log.Fatal(err)
	}

	lg, err := fallback.NewLastGood(fallback.LastGoodOptions{Key: byUser, MaxAge: time.Hour})
	if err != nil {
		log.Fatal(err) // names every unusable option
	}
	g := sluice.New(fallback.New(lg, fallback.Value(defaultAnswer)), br, limiter)

	ctx := context.WithValue(context.Background(), userKey{}, "ada")
	fresh, _ := sluice.Do(ctx, g, func(context.Context) (string, error) { return "a bicycle", nil })
	stale, _ := sluice.Do(ctx, g, func(context.Context) (string, error) { return "", errors.New("timeout") })
	other, _ := sluice.Do(context.Background(), g, func(context.Context) (string, error) { return "", errors.New("timeout") })
	fmt.Println(fresh, "|", stale, "|", other)
	// Output:
	// a bicycle | a bicycle | no recommendation today
}
