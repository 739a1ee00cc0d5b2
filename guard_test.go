package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
)

// recorder is an admission policy that admits while open and records every
// outcome it is told about.
type recorder struct {
	name     string
	reject   error
	outcomes []sluice.Outcome
	log      *[]string
}

func (r *recorder) Acquire(context.Context) (sluice.Permit, error) {
	if r.log != nil {
		*r.log = append(*r.log, "acquire "+r.name)
	}
	if r.reject != nil {
		return sluice.Permit{}, r.reject
	}
	return sluice.NewPermit(r, 7), nil
}

func (r *recorder) Release(token uint64, o sluice.Outcome) {
	if token != 7 {
		panic("token lost")
	}
	if r.log != nil {
		*r.log = append(*r.log, "done "+r.name+" "+o.Class.String())
	}
	r.outcomes = append(r.outcomes, o)
}

func (r *recorder) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, r, next)
}

// twice is a flow policy that runs the rest of the chain twice and returns the
// second result.
type twice struct{}

func (twice) Run(ctx context.Context, next sluice.Call) sluice.Result {
	next(ctx)
	return next(ctx)
}

func TestDoAdmissionOrderAndOutcomes(t *testing.T) {
	errBoom := errors.New("boom")
	cases := []struct {
		name      string
		fnErr     error
		cancel    bool
		wantClass sluice.Class
	}{
		{"success", nil, false, sluice.Success},
		{"failure", errBoom, false, sluice.Failure},
		{"caller cancelled", context.Canceled, true, sluice.Ignored},
		{"cancelled error without caller cancel is a failure", context.Canceled, false, sluice.Failure},
		{"deadline is a failure", context.DeadlineExceeded, false, sluice.Failure},
	}
	for _, tc := range cases {
		for _, withFlow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/flow=%v", tc.name, withFlow), func(t *testing.T) {
				var log []string
				a := &recorder{name: "a", log: &log}
				b := &recorder{name: "b", log: &log}
				fc := clock.NewFake(time.Time{})
				policies := []sluice.Policy{a, b}
				if withFlow {
					policies = []sluice.Policy{a, nil, b}
				}
				g := sluice.New(policies...).WithClock(fc)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				v, err := sluice.Do(ctx, g, func(ctx context.Context) (int, error) {
					fc.Advance(30 * time.Millisecond)
					if tc.cancel {
						cancel()
					}
					return 42, tc.fnErr
				})
				if v != 42 || !errors.Is(err, tc.fnErr) || (tc.fnErr == nil) != (err == nil) {
					t.Fatalf("Do = %v, %v; want 42, %v", v, err, tc.fnErr)
				}
				want := []string{"acquire a", "acquire b", "done a " + tc.wantClass.String(), "done b " + tc.wantClass.String()}
				if fmt.Sprint(log) != fmt.Sprint(want) {
					t.Fatalf("log = %v, want %v", log, want)
				}
				if got := a.outcomes[0].Latency; got != 30*time.Millisecond {
					t.Fatalf("latency = %v, want 30ms", got)
				}
			})
		}
	}
}

func TestDoRejectionDropsOuterPermitsAndSkipsCall(t *testing.T) {
	rej := &sluice.Rejection{Reason: sluice.Overloaded, Policy: "pool"}
	for _, withFlow := range []bool{false, true} {
		t.Run(fmt.Sprintf("flow=%v", withFlow), func(t *testing.T) {
			var log []string
			a := &recorder{name: "a", log: &log}
			b := &recorder{name: "b", reject: rej, log: &log}
			c := &recorder{name: "c", log: &log}
			policies := []sluice.Policy{a, b, c}
			if withFlow {
				policies = []sluice.Policy{a, passthrough{}, b, c}
			}
			g := sluice.New(policies...)
			ran := false
			_, err := sluice.Do(context.Background(), g, func(context.Context) (string, error) {
				ran = true
				return "x", nil
			})
			if ran {
				t.Fatal("the call ran although a policy rejected it")
			}
			if !errors.Is(err, sluice.ErrRejected) || err != error(rej) {
				t.Fatalf("err = %v, want the rejection", err)
			}
			want := []string{"acquire a", "acquire b", "done a dropped"}
			if fmt.Sprint(log) != fmt.Sprint(want) {
				t.Fatalf("log = %v, want %v", log, want)
			}
		})
	}
}

type passthrough struct{}

func (passthrough) Run(ctx context.Context, next sluice.Call) sluice.Result { return next(ctx) }

func TestDoFlowSeesEveryAttempt(t *testing.T) {
	a := &recorder{name: "inner"}
	g := sluice.New(twice{}, a)
	calls := 0
	v, err := sluice.Do(context.Background(), g, func(context.Context) (int, error) {
		calls++
		return calls, nil
	})
	if err != nil || v != 2 || calls != 2 || len(a.outcomes) != 2 {
		t.Fatalf("v=%d err=%v calls=%d outcomes=%d; want 2, nil, 2, 2", v, err, calls, len(a.outcomes))
	}
}

func TestDoPanicReleasesPermits(t *testing.T) {
	for _, withFlow := range []bool{false, true} {
		t.Run(fmt.Sprintf("flow=%v", withFlow), func(t *testing.T) {
			a := &recorder{name: "a"}
			policies := []sluice.Policy{a}
			if withFlow {
				policies = append(policies, passthrough{})
			}
			g := sluice.New(policies...)
			func() {
				defer func() {
					if recover() != "oops" {
						t.Fatal("panic did not reach the caller")
					}
				}()
				_, _ = sluice.Do(context.Background(), g, func(context.Context) (int, error) { panic("oops") })
			}()
			if len(a.outcomes) != 1 || a.outcomes[0].Class != sluice.Failure {
				t.Fatalf("outcomes = %+v, want one failure", a.outcomes)
			}
		})
	}
}

// substitute is a flow policy that replaces every result with a value of the
// wrong type.
type substitute struct{ v any }

func (s substitute) Run(ctx context.Context, next sluice.Call) sluice.Result {
	r := next(ctx)
	r.Value = s.v
	return r
}

func TestDoReportsWrongValueType(t *testing.T) {
	g := sluice.New(substitute{v: "text"})
	_, err := sluice.Do(context.Background(), g, func(context.Context) (int, error) { return 1, nil })
	if err == nil {
		t.Fatal("want an error for a string where an int is returned")
	}
	v, err := sluice.Do(context.Background(), sluice.New(substitute{v: 5}), func(context.Context) (int, error) { return 1, nil })
	if v != 5 || err != nil {
		t.Fatalf("Do = %v, %v; want 5, nil", v, err)
	}
}

func TestNilGuardRunsDirectly(t *testing.T) {
	v, err := sluice.Do(context.Background(), nil, func(context.Context) (int, error) { return 3, nil })
	if v != 3 || err != nil {
		t.Fatalf("Do = %v, %v", v, err)
	}
}

func TestCustomClassifier(t *testing.T) {
	a := &recorder{name: "a"}
	notFound := errors.New("not found")
	g := sluice.New(a).WithClassifier(func(ctx context.Context, err error) sluice.Class {
		if errors.Is(err, notFound) {
			return sluice.Success
		}
		return sluice.DefaultClassifier(ctx, err)
	})
	_, _ = sluice.Do(context.Background(), g, func(context.Context) (int, error) { return 0, notFound })
	if a.outcomes[0].Class != sluice.Success {
		t.Fatalf("class = %v, want success", a.outcomes[0].Class)
	}
	if c := g.Classify(context.Background(), notFound); c != sluice.Success {
		t.Errorf("Classify(notFound) = %v, want success", c)
	}
	if c := sluice.New().Classify(context.Background(), notFound); c != sluice.Failure {
		t.Errorf("default Classify(notFound) = %v, want failure", c)
	}
}

func TestGuardAsPolicy(t *testing.T) {
	a := &recorder{name: "inner"}
	inner := sluice.New(a)
	outer := sluice.New(passthrough{}, inner)
	v, err := sluice.Do(context.Background(), outer, func(context.Context) (int, error) { return 9, nil })
	if v != 9 || err != nil || len(a.outcomes) != 1 {
		t.Fatalf("Do = %v, %v, outcomes %d", v, err, len(a.outcomes))
	}
}

type nopAdmitter struct{}

func (nopAdmitter) IgnoresLatency() bool { return true }

func (nopAdmitter) Acquire(context.Context) (sluice.Permit, error) { return sluice.Permit{}, nil }
func (n nopAdmitter) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, n, next)
}

func TestDoAdmittedAllocatesNothing(t *testing.T) {
	g := sluice.New(nopAdmitter{}, nopAdmitter{})
	fn := func(context.Context) (int, error) { return 1, nil }
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { _, _ = sluice.Do(ctx, g, fn) }); n != 0 {
		t.Fatalf("Do allocates %v times per call, want 0", n)
	}
}

func TestUntimedGuardReportsNoLatency(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	timed := &recorder{name: "timed"}
	for _, tc := range []struct {
		policies []sluice.Policy
		want     time.Duration
	}{
		{[]sluice.Policy{nopAdmitter{}}, 0},
		{[]sluice.Policy{nopAdmitter{}, timed}, time.Second},
	} {
		g := sluice.New(tc.policies...).WithClock(fc)
		_, _ = sluice.Do(context.Background(), g, func(context.Context) (int, error) {
			fc.Advance(time.Second)
			return 0, nil
		})
		if len(tc.policies) == 2 && timed.outcomes[0].Latency != tc.want {
			t.Fatalf("latency = %v, want %v", timed.outcomes[0].Latency, tc.want)
		}
	}
}

func BenchmarkDoAdmitted(b *testing.B) {
	g := sluice.New(nopAdmitter{}, nopAdmitter{})
	fn := func(context.Context) (int, error) { return 1, nil }
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = sluice.Do(ctx, g, fn)
		}
	})
}
