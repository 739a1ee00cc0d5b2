package coalesce_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/coalesce"
)

// Ten concurrent lookups of the same key share one call.
func ExampleGroup_Do() {
	var g coalesce.Group[string, string]
	release := make(chan struct{})
	lookup := func(ctx context.Context) (string, error) {
		<-release // a slow backend
		return "blue", nil
	}

	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err, _ := g.Do(context.Background(), "colour", lookup); err != nil {
				fmt.Println(err)
			}
		}()
	}
	for g.Stats().Calls+g.Stats().Shared < 10 {
		runtime.Gosched() // until every lookup has started or joined the call
	}
	close(release)
	wg.Wait()
	fmt.Printf("%+v\n", g.Stats())
	// Output: {Calls:1 Shared:9 Abandoned:0}
}

// A panic in the shared function reaches every caller as a *PanicError.
func ExamplePanicError() {
	var g coalesce.Group[string, int]
	_, err, _ := g.Do(context.Background(), "k", func(context.Context) (int, error) {
		panic("index out of range")
	})
	var pe *coalesce.PanicError
	if errors.As(err, &pe) {
		fmt.Println("panicked with:", pe.Value)
	}
	// Output: panicked with: index out of range
}

type promptKey struct{}

// A Policy coalesces identical requests inside a Guard. Here the key is the
// request's prompt, taken from the context; requests without one run alone.
func ExamplePolicy() {
	p, err := coalesce.New(coalesce.Options{
		Key: func(ctx context.Context) (string, bool) {
			prompt, ok := ctx.Value(promptKey{}).(string)
			return prompt, ok
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	g := sluice.New(p)
	ctx := context.WithValue(context.Background(), promptKey{}, "what is 2+2?")
	answer, err := sluice.Do(ctx, g, func(ctx context.Context) (string, error) {
		return "4", nil // the shared answer is a string: safe to share
	})
	fmt.Println(answer, err)
	// Output: 4 <nil>
}
