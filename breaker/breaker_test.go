package breaker

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid/invalidtest"
)

func TestTransitions(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		steps []string
	}{{
		name: "failure rate trips closed to open",
		opts: Options{FailureRate: 0.5, MinCalls: 4, CountWindow: 10},
		steps: []string{
			"ok x2", "fail", "state closed", "calls 3 1 0",
			"fail", "state open", "events closed>open",
			"reject 5s", "adv 2s", "reject 3s", "trips 1",
		},
	}, {
		name: "zero options trip at half of 20 calls",
		opts: Options{},
		steps: []string{
			"fail x10", "ok x9", "state closed",
			"ok", "state open", "calls 20 10 0", "reject 5s",
		},
	}, {
		name: "rates are not judged before min calls",
		opts: Options{FailureRate: 0.5, MinCalls: 10, CountWindow: 20},
		steps: []string{
			"fail x9", "state closed", "calls 9 9 0",
			"fail", "state open",
		},
	}, {
		name:  "a success reaching min calls trips",
		opts:  Options{FailureRate: 0.5, MinCalls: 5, CountWindow: 20},
		steps: []string{"fail x4", "state closed", "ok", "state open"},
	}, {
		name: "slow call rate trips closed to open",
		opts: Options{SlowCallRate: 0.5, SlowCallThreshold: time.Second, MinCalls: 4, CountWindow: 10},
		steps: []string{
			"slow", "ok", "fail x2", "state closed", "calls 4 2 1",
			"slowfail", "state closed", "calls 5 3 2",
			"slow", "state open", "calls 6 3 3",
		},
	}, {
		name:  "slow calls are counted but do not trip without a rate",
		opts:  Options{SlowCallThreshold: time.Second, MinCalls: 4, CountWindow: 4},
		steps: []string{"slow x4", "state closed", "calls 4 0 4"},
	}, {
		name: "consecutive failures trip whatever the window",
		opts: Options{ConsecutiveFailures: 3, CountWindow: 100},
		steps: []string{
			"fail x2", "ok", "fail x2", "state closed",
			"ignored", "dropped", "state closed",
			"fail", "state open", "events closed>open",
		},
	}, {
		name: "count window slides",
		opts: Options{FailureRate: 0.75, MinCalls: 4, CountWindow: 4},
		steps: []string{
			"fail x2", "ok x2", "calls 4 2 0",
			"ok x2", "calls 4 0 0", "fail x2", "calls 4 2 0",
			"fail", "state open", "calls 4 3 0",
		},
	}, {
		name: "time window ages failures out while closed",
		opts: Options{FailureRate: 0.5, MinCalls: 5, TimeWindow: 10 * time.Second},
		steps: []string{
			"fail x4", "calls 4 4 0", "adv 5s", "calls 4 4 0",
			"adv 5s", "calls 0 0 0", "ok", "fail x3", "state closed",
			"adv 9s", "calls 4 3 0", "ok", "state open", "calls 5 3 0",
		},
	}, {
		name: "time window ages bucket by bucket",
		opts: Options{FailureRate: 0.9, MinCalls: 3, TimeWindow: 3 * time.Second, Buckets: 3},
		steps: []string{
			"fail", "adv 1s", "fail", "adv 1s", "ok x2", "calls 4 2 0",
			"adv 1s", "calls 3 1 0", "adv 1s", "calls 2 0 0",
			"adv 1h", "calls 0 0 0", "fail x3", "state open",
		},
	}, {
		name: "open turns half-open after the open duration",
		opts: Options{ConsecutiveFailures: 1, OpenDuration: time.Minute, HalfOpenCalls: 1},
		steps: []string{
			"fail", "state open", "adv 59s", "reject 1s", "state open",
			"adv 1s", "state half-open", "events closed>open open>half-open",
			"hold", "probes 1", "reject 0s",
		},
	}, {
		name: "the first call after the open duration is a probe",
		opts: Options{ConsecutiveFailures: 1, OpenDuration: time.Second, HalfOpenCalls: 1},
		steps: []string{
			"fail", "adv 2s", "hold", "state half-open", "reject 0s",
			"done ok", "state closed",
			"events closed>open open>half-open half-open>closed",
		},
	}, {
		name: "half-open closes after the success threshold",
		opts: Options{ConsecutiveFailures: 1, OpenDuration: time.Second, HalfOpenCalls: 2, SuccessThreshold: 3},
		steps: []string{
			"fail", "adv 1s", "hold", "hold", "reject 0s", "probes 2",
			"done ok", "hold", "done ok", "state half-open",
			"done ok", "state closed", "calls 0 0 0", "probes 0",
			"events closed>open open>half-open half-open>closed",
		},
	}, {
		name: "a failed probe opens again",
		opts: Options{ConsecutiveFailures: 1, OpenDuration: time.Second, HalfOpenCalls: 3},
		steps: []string{
			"fail", "adv 1s", "hold", "hold", "done ok", "done fail",
			"state open", "reject 1s", "trips 2",
			"events closed>open open>half-open half-open>open",
		},
	}, {
		name:  "a slow probe opens again when slow calls trip",
		opts:  Options{SlowCallRate: 1, SlowCallThreshold: time.Second, MinCalls: 1, OpenDuration: time.Second},
		steps: []string{"slow", "state open", "adv 1s", "slow", "state open"},
	}, {
		name:  "a slow probe succeeds when slow calls do not trip",
		opts:  Options{ConsecutiveFailures: 1, SlowCallThreshold: time.Second, OpenDuration: time.Second, HalfOpenCalls: 1},
		steps: []string{"fail", "adv 1s", "slow", "state closed"},
	}, {
		name: "open duration grows on repeated trips up to the max",
		opts: Options{ConsecutiveFailures: 1, OpenDuration: time.Second, OpenMultiplier: 2, MaxOpenDuration: 3 * time.Second, HalfOpenCalls: 1},
		steps: []string{
			"fail", "reject 1s", "adv 1s", "fail", "reject 2s",
			"adv 2s", "fail", "reject 3s", "adv 3s", "fail", "reject 3s",
			"adv 3s", "ok", "state closed", "fail", "reject 1s", "trips 5",
		},
	}, {
		name: "default max open duration is ten times the open duration",
		opts: Options{ConsecutiveFailures: 1, OpenDuration: time.Second, OpenMultiplier: 4},
		steps: []string{
			"fail", "adv 1s", "fail", "reject 4s", "adv 4s", "fail", "reject 10s",
		},
	}, {
		name: "ignored and dropped probes free their slot without counting",
		opts: Options{ConsecutiveFailures: 1, OpenDuration: time.Second, HalfOpenCalls: 1},
		steps: []string{
			"fail", "adv 1s", "hold", "reject 0s", "done ignored", "state half-open",
			"probes 0", "hold", "done dropped", "dropped", "ignored", "state half-open",
			"ok", "state closed",
		},
	}, {
		name:  "ignored and dropped calls do not feed the window",
		opts:  Options{FailureRate: 0.5, MinCalls: 2, CountWindow: 2},
		steps: []string{"ignored x50", "dropped x50", "calls 0 0 0", "fail", "ignored", "state closed", "calls 1 1 0"},
	}, {
		name: "a closed call started before a trip is discarded",
		opts: Options{ConsecutiveFailures: 2, CountWindow: 10, MinCalls: 10},
		steps: []string{
			"hold", "hold", "fail x2", "state open", "close",
			"done fail", "done fail", "calls 0 0 0", "state closed",
		},
	}, {
		name:  "a closed call started before a close is discarded",
		opts:  Options{ConsecutiveFailures: 1, CountWindow: 10, MinCalls: 10},
		steps: []string{"hold", "close", "done fail", "state closed", "calls 0 0 0"},
	}, {
		name: "a stale probe frees its slot but decides nothing",
		opts: Options{ConsecutiveFailures: 1, OpenDuration: time.Second, HalfOpenCalls: 2},
		steps: []string{
			"fail", "adv 1s", "hold", "hold", "done fail", "state open",
			"adv 1s", "state half-open", "probes 1", "hold", "reject 0s",
			"done ok", "state half-open", "probes 1", "hold", "done ok", "state half-open",
			"done ok", "state closed",
		},
	}, {
		name: "manual open, close and reset",
		opts: Options{OpenDuration: time.Second},
		steps: []string{
			"open", "state open", "reject 1s", "trips 1", "adv 1s", "state half-open",
			"open", "reject 1s", "close", "state closed", "ok",
			"open", "trips 3", "reset", "trips 0", "state closed",
			"events closed>open open>half-open half-open>open open>closed closed>open open>closed",
		},
	}, {
		name: "forced open rejects until closed",
		opts: Options{OpenDuration: time.Second},
		steps: []string{
			"force", "reject 0s", "adv 1h", "reject 0s", "state forced-open",
			"close", "ok", "state closed", "events closed>forced-open forced-open>closed",
		},
	}, {
		name: "disabled admits and records nothing",
		opts: Options{ConsecutiveFailures: 1},
		steps: []string{
			"disable", "fail x100", "state disabled", "calls 0 0 0",
			"force", "reject 0s", "disable", "ok", "open", "state open",
			"events closed>disabled disabled>forced-open forced-open>disabled disabled>open",
		},
	}, {
		name:  "closing empties the window",
		opts:  Options{FailureRate: 0.5, MinCalls: 4, CountWindow: 10},
		steps: []string{"fail x3", "calls 3 3 0", "close", "calls 0 0 0", "ok x3", "fail", "state closed"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newScript(t, tt.opts).run(tt.steps...)
		})
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"rate above one", Options{FailureRate: 1.5}, "FailureRate 1.5"},
		{"negative rate", Options{SlowCallRate: -0.1, SlowCallThreshold: 1}, "SlowCallRate -0.1"},
		{"slow rate without threshold", Options{SlowCallRate: 0.5}, "needs a positive SlowCallThreshold"},
		{"negative window", Options{CountWindow: -1}, "CountWindow -1 is negative"},
		{"both windows", Options{CountWindow: 10, TimeWindow: time.Second}, "both set"},
		{"min calls above window", Options{CountWindow: 10, MinCalls: 11}, "MinCalls 11 exceeds CountWindow 10"},
		{"tiny time window", Options{TimeWindow: 5, Buckets: 10}, "shorter than Buckets"},
		{"multiplier below one", Options{OpenMultiplier: 0.5}, "OpenMultiplier 0.5"},
		{"max below open", Options{OpenDuration: time.Minute, MaxOpenDuration: time.Second}, "MaxOpenDuration 1s is less"},
		{"negative half-open calls", Options{HalfOpenCalls: -1}, "HalfOpenCalls -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New error = %v, want ErrInvalidOptions mentioning %q", err, tt.want)
			}
			if _, err := NewSet(tt.opts); !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("NewSet error = %v", err)
			}
		})
	}
}

func TestNewNamesEveryBadOption(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		names []string
	}{
		{"rate and window", Options{FailureRate: 2, CountWindow: -1}, []string{"FailureRate 2", "CountWindow -1"}},
		{"slow rate, buckets, half-open", Options{SlowCallRate: 0.5, Buckets: -1, HalfOpenCalls: -2},
			[]string{"SlowCallThreshold", "Buckets -1", "HalfOpenCalls -2"}},
		{"multiplier and durations", Options{OpenMultiplier: 0.5, OpenDuration: time.Minute, MaxOpenDuration: time.Second},
			[]string{"OpenMultiplier 0.5", "MaxOpenDuration 1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			invalidtest.Check(t, err, ErrInvalidOptions, tt.names...)
			_, err = NewSet(tt.opts)
			invalidtest.Check(t, err, ErrInvalidOptions, tt.names...)
		})
	}
}

func TestDefaults(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want config
	}{
		{"zero", Options{}, config{failureRate: 0.5, minCalls: 20, countWindow: 100, openDuration: int64(5 * time.Second), maxOpen: int64(50 * time.Second), multiplier: 1, halfOpenCalls: 3, successes: 3}},
		{"small window caps min calls", Options{CountWindow: 5}, config{failureRate: 0.5, minCalls: 5, countWindow: 5, openDuration: int64(5 * time.Second), maxOpen: int64(50 * time.Second), multiplier: 1, halfOpenCalls: 3, successes: 3}},
		{"consecutive only", Options{ConsecutiveFailures: 5, HalfOpenCalls: 3}, config{consecutive: 5, minCalls: 20, countWindow: 100, openDuration: int64(5 * time.Second), maxOpen: int64(50 * time.Second), multiplier: 1, halfOpenCalls: 3, successes: 3}},
		{"time window", Options{TimeWindow: time.Minute}, config{failureRate: 0.5, minCalls: 20, bucketWidth: int64(6 * time.Second), buckets: 10, openDuration: int64(5 * time.Second), maxOpen: int64(50 * time.Second), multiplier: 1, halfOpenCalls: 3, successes: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.opts.resolve()
			if err != nil {
				t.Fatal(err)
			}
			got.clock = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("resolve = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestCallbackMayUseBreaker is the regression test for gobreaker's
// OnStateChange being called under its mutex: a callback that reads or
// changes the breaker must not deadlock, and its own changes are delivered
// after the one it is handling.
func TestCallbackMayUseBreaker(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	var b *Breaker
	var got []string
	b, err := New(Options{ConsecutiveFailures: 1, Clock: clk, OnStateChange: func(_ string, from, to State) {
		got = append(got, fmt.Sprintf("%s>%s (now %s, %d trips)", from, to, b.State(), b.Metrics().Trips))
		if to == Open {
			b.ForceOpen()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := b.Acquire(context.Background())
	p.Done(sluice.Outcome{Class: sluice.Failure})
	want := "closed>open (now open, 1 trips);open>forced-open (now forced-open, 1 trips)"
	if s := strings.Join(got, ";"); s != want {
		t.Fatalf("events = %q, want %q", s, want)
	}
}

func TestCallbackPanicDoesNotWedge(t *testing.T) {
	var calls int
	b, err := New(Options{OnStateChange: func(string, State, State) {
		if calls++; calls == 1 {
			panic("callback")
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { _ = recover() }()
		b.Open()
	}()
	b.Close()
	if calls != 2 {
		t.Fatalf("callback called %d times, want 2", calls)
	}
}

func TestGuardIntegration(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	b, err := New(Options{Name: "db", Clock: clk, ConsecutiveFailures: 2, OpenDuration: 5 * time.Second, HalfOpenCalls: 1})
	if err != nil {
		t.Fatal(err)
	}
	g := sluice.New(b).WithClock(clk)
	boom := errors.New("boom")
	ctx := context.Background()
	for range 2 {
		if _, err := sluice.Do(ctx, g, func(context.Context) (int, error) { return 0, boom }); !errors.Is(err, boom) {
			t.Fatalf("Do error = %v", err)
		}
	}
	_, err = sluice.Do(ctx, g, func(context.Context) (int, error) { return 1, nil })
	if d, ok := sluice.RetryAfter(err); !errors.Is(err, sluice.ErrRejected) || !ok || d != 5*time.Second {
		t.Fatalf("Do error = %v (retry after %v)", err, d)
	}
	if want := `sluice: rejected: circuit_open (policy "db", retry after 5s)`; err.Error() != want {
		t.Fatalf("error text = %q", err.Error())
	}
	// Through Run, as a flow-policy chain would call it.
	r := b.Run(ctx, func(context.Context) sluice.Result { return sluice.Result{Value: 1} })
	if r.Class != sluice.Dropped || !errors.Is(r.Err, sluice.ErrRejected) {
		t.Fatalf("Run result = %+v", r)
	}
	clk.Advance(5 * time.Second)
	v, err := sluice.Do(ctx, g, func(context.Context) (int, error) { return 7, nil })
	if v != 7 || err != nil || b.State() != Closed {
		t.Fatalf("probe: %v, %v, state %s", v, err, b.State())
	}
}

func TestSet(t *testing.T) {
	var mu sync.Mutex
	var events []string
	s, err := NewSet(Options{Name: "ignored", ConsecutiveFailures: 1, OnStateChange: func(name string, from, to State) {
		mu.Lock()
		events = append(events, name+":"+from.String()+">"+to.String())
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	infer, embed := s.Get("infer"), s.Get("embed")
	if s.Get("infer") != infer || infer == embed || infer.Name() != "infer" {
		t.Fatal("Get must return one breaker per name")
	}
	p, _ := infer.Acquire(context.Background())
	p.Done(sluice.Outcome{Class: sluice.Failure})
	if infer.State() != Open || embed.State() != Closed {
		t.Fatalf("states: infer %s, embed %s", infer.State(), embed.State())
	}
	var names []string
	s.Range(func(name string, b *Breaker) bool {
		names = append(names, name+"="+b.State().String())
		return true
	})
	if len(names) != 2 {
		t.Fatalf("Range saw %v", names)
	}
	if strings.Join(events, ",") != "infer:closed>open" {
		t.Fatalf("events = %v", events)
	}
}

// TestConcurrentProbesAndCounts hammers a breaker from several goroutines
// while the fake clock moves, then checks that every probe slot was given
// back and the window is consistent. Run it with -race.
func TestConcurrentProbesAndCounts(t *testing.T) {
	for _, opts := range []Options{
		{FailureRate: 0.5, MinCalls: 10, CountWindow: 50, OpenDuration: time.Millisecond, HalfOpenCalls: 3},
		{FailureRate: 0.5, MinCalls: 10, TimeWindow: 100 * time.Millisecond, OpenDuration: time.Millisecond, HalfOpenCalls: 3, OpenMultiplier: 2},
	} {
		clk := clock.NewFake(time.Time{})
		opts.Clock = clk
		var mu sync.Mutex
		var maxProbes int
		b, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 2000 {
					p, err := b.Acquire(context.Background())
					if err != nil {
						continue
					}
					if m := b.Metrics(); m.Probes > 0 {
						mu.Lock()
						maxProbes = max(maxProbes, m.Probes)
						mu.Unlock()
					}
					class := sluice.Success
					switch (i + g) % 5 {
					case 0, 1, 3:
						class = sluice.Failure
					case 2:
						class = sluice.Ignored
					}
					p.Done(sluice.Outcome{Class: class})
					if i%50 == 0 {
						clk.Advance(time.Millisecond)
					}
				}
			})
		}
		wg.Wait()
		m := b.Metrics()
		if m.Probes != 0 || maxProbes > 3 || m.Trips == 0 {
			t.Fatalf("probes = %d at the end, %d at most, %d trips", m.Probes, maxProbes, m.Trips)
		}
		if m.Failures > m.Calls || (opts.CountWindow > 0 && m.Calls > opts.CountWindow) {
			t.Fatalf("inconsistent window: %+v", m)
		}
	}
}
