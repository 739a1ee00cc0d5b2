package timeout_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/timeout"
)

// A call that honours ctx is cut short at the deadline.
func Example() {
	t, err := timeout.New(timeout.Options{Timeout: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	g := sluice.New(t)

	_, err = sluice.Do(context.Background(), g, func(ctx context.Context) (string, error) {
		<-ctx.Done() // a slow call that stops when told to
		return "", ctx.Err()
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, sluice.ErrTimeout), errors.Is(err, context.DeadlineExceeded))
	// Output:
	// sluice: timeout after 10ms: context deadline exceeded
	// true true
}

// Async bounds a call that ignores ctx: Do returns at the deadline and the
// call finishes in the background.
func Example_async() {
	t, err := timeout.New(timeout.Options{Timeout: 10 * time.Millisecond, Async: true})
	if err != nil {
		panic(err)
	}
	g := sluice.New(t)

	release := make(chan struct{})
	finished := make(chan struct{})
	_, err = sluice.Do(context.Background(), g, func(ctx context.Context) (string, error) {
		defer close(finished)
		<-release // ignores ctx
		return "too late", nil
	})
	fmt.Println(err)

	close(release) // the abandoned call ends by itself, its result discarded
	<-finished
	// Output:
	// sluice: timeout after 10ms
}
