package concurrency

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
)

// queuedPolicy is a concurrency limit with a queue, as these tests use it.
type queuedPolicy interface {
	sluice.Policy
	sluice.Admitter
	InFlight() int
	Queued() int
}

// passThrough is a flow policy that only runs the rest of the chain: it
// makes a Guard run its stages one by one instead of admitting them all
// at once.
type passThrough struct{}

func (passThrough) Run(ctx context.Context, next sluice.Call) sluice.Result { return next(ctx) }

// TestQueuedCallsPassBreakerAgain queues calls behind a call that holds the
// only slot of a bulkhead or an adaptive limiter, opens the breaker in
// front of it, and lets the slot go: every queued call, handed the slot in
// turn, passes the breaker again and is rejected as circuit_open, and none
// reaches the function. It does so through Do on a guard of admission
// policies, Do on a guard that also has a flow policy, and Guard.Begin.
// (The breaker used to be consulted only before the wait.)
func TestQueuedCallsPassBreakerAgain(t *testing.T) {
	limits := map[string]func(c clock.Clock) (queuedPolicy, error){
		"bulkhead": func(c clock.Clock) (queuedPolicy, error) {
			return NewBulkhead(BulkheadOptions{MaxConcurrent: 1, MaxQueue: 3, Clock: c})
		},
		"adaptive": func(c clock.Clock) (queuedPolicy, error) {
			return NewLimiter(LimiterOptions{Algorithm: fixedLimit(1), MaxQueue: 3, Clock: c})
		},
	}
	for name, newLimit := range limits {
		for _, mode := range []string{"admission", "chain", "begin"} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				fc := clock.NewFake(time.Time{})
				br, err := breaker.New(breaker.Options{Name: "cb", Clock: fc, ConsecutiveFailures: 1})
				if err != nil {
					t.Fatal(err)
				}
				lim, err := newLimit(fc)
				if err != nil {
					t.Fatal(err)
				}
				stages := []sluice.Policy{br, lim}
				if mode == "chain" {
					stages = append(stages, passThrough{})
				}
				g := sluice.New(stages...).WithClock(fc)
				release := make(chan struct{})
				ran := make(chan struct{}, 4)
				call := func(context.Context) (int, error) {
					ran <- struct{}{}
					<-release
					return 0, nil
				}
				results := make(chan error, 4)
				start := func() { go func() { results <- runGuarded(g, mode, call) }() }
				start()
				<-ran // the first call holds the only slot
				for range 3 {
					start()
				}
				eventually(t, func() bool { return lim.Queued() == 3 })
				br.Open()
				close(release)
				var admitted, open int
				for range 4 {
					err := <-results
					var rej *sluice.Rejection
					switch {
					case err == nil:
						admitted++
					case errors.As(err, &rej) && rej.Reason == sluice.CircuitOpen:
						open++
					default:
						t.Errorf("unexpected result %v", err)
					}
				}
				if admitted != 1 || open != 3 || len(ran) != 0 {
					t.Fatalf("%d calls ran, %d rejected as circuit_open, %d more reached the function; want 1, 3, 0",
						admitted, open, len(ran))
				}
				if n := lim.InFlight(); n != 0 {
					t.Fatalf("%d slots still held", n)
				}
			})
		}
	}
}

// runGuarded runs call behind g with Do, or with Begin and End in mode
// "begin".
func runGuarded(g *sluice.Guard, mode string, call func(context.Context) (int, error)) error {
	ctx := context.Background()
	if mode != "begin" {
		_, err := sluice.Do(ctx, g, call)
		return err
	}
	adm, err := g.Begin(ctx)
	if err != nil {
		return err
	}
	_, err = call(ctx)
	adm.End(ctx, err)
	return err
}
