package observe_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/telemetry/observe"
)

// recorder is a Sink that keeps what it is told, for checking what the
// Observer reports; prom and otelmetric test the real sinks.
type recorder struct {
	mu     sync.Mutex
	events []string
}

type guardRecorder struct {
	r    *recorder
	name string
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) Guard(name string) observe.GuardSink      { return &guardRecorder{r: r, name: name} }
func (r *recorder) BreakerState(string, breaker.State, bool) {}
func (r *recorder) Limit(string, int)                        {}
func (r *recorder) Retry(string)                             {}
func (r *recorder) GiveUp(string, retry.StopReason)          {}

func (g *guardRecorder) Call(c sluice.Class, d time.Duration) {
	g.r.add(g.name + " " + c.String() + " " + d.String())
}

func (g *guardRecorder) Rejected(policy string, reason sluice.Reason) {
	g.r.add(g.name + " rejected by " + policy + ": " + string(reason))
}

// TestCallsAsTheCallerSeesThem checks what the observer's policy reports
// when it is first in a Guard: the latency from admission to the end,
// queueing in a later policy included; a call a later policy rejects, as
// Dropped with that policy's name and reason; the same through Begin and
// End, for callers that run calls themselves.
func TestCallsAsTheCallerSeesThem(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	rec := &recorder{}
	obs := observe.New(nil, rec).WithClock(clk)
	bulkhead, err := concurrency.NewBulkhead(concurrency.BulkheadOptions{Name: "pool", MaxConcurrent: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	g := sluice.New(obs.Guard("db"), bulkhead).WithClock(clk)
	ctx := context.Background()

	held, err := g.Begin(ctx) // takes the bulkhead's one slot
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(70 * time.Millisecond)
	if _, err := sluice.Do(ctx, g, func(context.Context) (int, error) { return 0, nil }); !errors.Is(err, sluice.ErrRejected) {
		t.Fatalf("second call with the slot taken: %v", err)
	}
	held.End(ctx, errors.New("broken"))
	if _, err := sluice.Do(ctx, g, func(context.Context) (int, error) {
		clk.Advance(5 * time.Millisecond)
		return 1, nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"db dropped 0s",
		"db rejected by pool: overloaded",
		"db failure 70ms",
		"db success 5ms",
	}
	if len(rec.events) != len(want) {
		t.Fatalf("events %q, want %q", rec.events, want)
	}
	for i := range want {
		if rec.events[i] != want[i] {
			t.Errorf("event %d: %q, want %q", i, rec.events[i], want[i])
		}
	}
}

// TestCallsAllocateNothing checks that the observer's policy keeps Do free
// of allocations for a Guard of admission policies.
func TestCallsAllocateNothing(t *testing.T) {
	obs := observe.New(nopSink{})
	bulkhead, err := concurrency.NewBulkhead(concurrency.BulkheadOptions{MaxConcurrent: 4})
	if err != nil {
		t.Fatal(err)
	}
	g := sluice.New(obs.Guard("db"), bulkhead)
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	if n := testing.AllocsPerRun(100, func() { _, _ = sluice.Do(ctx, g, fn) }); n != 0 {
		t.Fatalf("%v allocations per call, want 0", n)
	}
}

// nopSink is a Sink that drops everything.
type nopSink struct{}

func (nopSink) Guard(string) observe.GuardSink           { return nopSink{} }
func (nopSink) BreakerState(string, breaker.State, bool) {}
func (nopSink) Limit(string, int)                        {}
func (nopSink) Retry(string)                             {}
func (nopSink) GiveUp(string, retry.StopReason)          {}
func (nopSink) Call(sluice.Class, time.Duration)         {}
func (nopSink) Rejected(string, sluice.Reason)           {}

// BenchmarkDo measures what the observer's policy adds to a call through a
// Guard of a bulkhead: compare with and without it.
func BenchmarkDo(b *testing.B) {
	bulkhead, err := concurrency.NewBulkhead(concurrency.BulkheadOptions{MaxConcurrent: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	fn := func(context.Context) (int, error) { return 1, nil }
	for _, bc := range []struct {
		name string
		g    *sluice.Guard
	}{
		{"bulkhead", sluice.New(bulkhead)},
		{"observed", sluice.New(observe.New(nopSink{}).Guard("db"), bulkhead)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, _ = sluice.Do(ctx, bc.g, fn)
				}
			})
		})
	}
}

// observedGuard is the package documentation's example.
func observedGuard(sink observe.Sink, bulkhead *concurrency.Bulkhead) *sluice.Guard {
	obs := observe.New(sink)
	br, _ := breaker.New(breaker.Options{Name: "db", OnStateChange: obs.Breaker("db")})
	rt, _ := retry.New(retry.Options{OnRetry: obs.Retry("db"), OnGiveUp: obs.GiveUp("db")})
	g := sluice.New(obs.Guard("db"), rt, br, bulkhead)
	return g
}

// A Guard observed by a sink: here one that prints the calls.
func Example() {
	bulkhead, err := concurrency.NewBulkhead(concurrency.BulkheadOptions{Name: "db", MaxConcurrent: 2})
	if err != nil {
		panic(err)
	}
	g := observedGuard(printer{}, bulkhead)
	_, err = sluice.Do(context.Background(), g, func(context.Context) (int, error) { return 42, nil })
	fmt.Println(err)
	// Output:
	// breaker db is closed
	// call through db: success
	// <nil>
}

// printer is a Sink that prints breaker states and calls.
type printer struct{ nopSink }

func (printer) Guard(name string) observe.GuardSink { return printerGuard(name) }

func (printer) BreakerState(name string, s breaker.State, _ bool) {
	fmt.Println("breaker", name, "is", s)
}

type printerGuard string

func (g printerGuard) Call(c sluice.Class, _ time.Duration) {
	fmt.Println("call through", string(g)+":", c)
}
func (printerGuard) Rejected(string, sluice.Reason) {}
