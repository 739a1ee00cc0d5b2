package fallback

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

var (
	errDown = errors.New("downstream down")
	errL1   = errors.New("level 1 empty")
)

func result(class sluice.Class, v any, err error) sluice.Result {
	return sluice.Result{Value: v, Outcome: sluice.Outcome{Class: class, Err: err, Latency: 3 * time.Millisecond}}
}

func returning(r sluice.Result) sluice.Call {
	return func(context.Context) sluice.Result { return r }
}

func TestDefaultCondition(t *testing.T) {
	rejection := &sluice.Rejection{Reason: sluice.CircuitOpen}
	tests := []struct {
		name     string
		in       sluice.Result
		want     sluice.Result
		degraded bool
	}{
		{"success passes", result(sluice.Success, "real", nil), result(sluice.Success, "real", nil), false},
		{"failure degrades", result(sluice.Failure, nil, errDown), result(sluice.Success, "static", nil), true},
		{"rejection degrades", result(sluice.Dropped, nil, rejection), result(sluice.Success, "static", nil), true},
		{"ignored passes", result(sluice.Ignored, nil, context.Canceled), result(sluice.Ignored, nil, context.Canceled), false},
	}
	for _, tt := range tests {
		p := New(Value("static"))
		got := p.Run(context.Background(), returning(tt.in))
		if got != tt.want {
			t.Errorf("%s: Run = %+v, want %+v", tt.name, got, tt.want)
		}
		if d := p.Stats().Degraded == 1; d != tt.degraded {
			t.Errorf("%s: degraded = %v, want %v", tt.name, d, tt.degraded)
		}
	}
}

func TestLevelsInOrder(t *testing.T) {
	var tried []string
	level := func(name string, v any, err error) Level {
		return Func(func(_ context.Context, r sluice.Result) (any, error) {
			tried = append(tried, name)
			if r.Err != errDown {
				t.Errorf("level %s got Err %v, want the call's error", name, r.Err)
			}
			return v, err
		})
	}
	p := New(level("a", nil, errL1), nil, level("b", "from b", nil), level("c", "from c", nil))
	got := p.Run(context.Background(), returning(result(sluice.Failure, nil, errDown)))
	if got.Value != "from b" || got.Err != nil || got.Class != sluice.Success {
		t.Errorf("Run = %+v, want from b", got)
	}
	if strings.Join(tried, ",") != "a,b" {
		t.Errorf("tried %v, want a then b", tried)
	}
	if got, want := p.Stats(), (Stats{Degraded: 1, Served: 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestAllLevelsFailKeepsOriginalError(t *testing.T) {
	rejection := &sluice.Rejection{Reason: sluice.RateLimited, RetryAfter: 2 * time.Second}
	errL2 := errors.New("level 2 empty")
	p := New(
		Func(func(context.Context, sluice.Result) (any, error) { return nil, errL1 }),
		FuncOf(func(context.Context, error) (int, error) { return 0, errL2 }),
	)
	got := p.Run(context.Background(), returning(result(sluice.Dropped, nil, rejection)))
	if got.Class != sluice.Dropped {
		t.Errorf("Class = %v, want the original dropped", got.Class)
	}
	var fe *Error
	if !errors.As(got.Err, &fe) || len(fe.Levels) != 2 || fe.Levels[0] != errL1 || fe.Levels[1] != errL2 {
		t.Fatalf("Err = %v, want an *Error listing both levels' errors", got.Err)
	}
	var rej *sluice.Rejection
	if !errors.Is(got.Err, sluice.ErrRejected) || !errors.As(got.Err, &rej) || rej != rejection {
		t.Errorf("Err %v does not lead to the original rejection", got.Err)
	}
	if d, ok := sluice.RetryAfter(got.Err); !ok || d != 2*time.Second {
		t.Errorf("RetryAfter = %v, %v; want 2s", d, ok)
	}
	want := "sluice: rejected: rate_limited (retry after 2s) (fallback failed: level 1: level 1 empty; level 2: level 2 empty)"
	if got.Err.Error() != want {
		t.Errorf("Error() = %q, want %q", got.Err.Error(), want)
	}
	if got, want := p.Stats(), (Stats{Degraded: 1, Exhausted: 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestNoLevelsReturnsResultUnchanged(t *testing.T) {
	in := result(sluice.Failure, "partial", errDown)
	if got := New().Run(context.Background(), returning(in)); got != in {
		t.Errorf("Run = %+v, want %+v", got, in)
	}
}

func TestWhen(t *testing.T) {
	errNotFound := errors.New("not found")
	base := New(Value("default"))
	p := base.When(func(r sluice.Result) bool { return errors.Is(r.Err, errNotFound) })
	if got := p.Run(context.Background(), returning(result(sluice.Failure, nil, errDown))); got.Err != errDown {
		t.Errorf("unselected failure: Run = %+v, want it unchanged", got)
	}
	if got := p.Run(context.Background(), returning(result(sluice.Failure, nil, errNotFound))); got.Value != "default" {
		t.Errorf("selected failure: Run = %+v, want default", got)
	}
	if got := base.When(nil).Run(context.Background(), returning(result(sluice.Failure, nil, errDown))); got.Value != "default" {
		t.Errorf("When(nil): Run = %+v, want the default condition", got)
	}
	if got := base.Stats(); got != (Stats{}) {
		t.Errorf("base Stats() = %+v, want zero: When returns a new Policy", got)
	}
}

func TestFuncOfThroughGuard(t *testing.T) {
	g := sluice.New(New(FuncOf(func(_ context.Context, err error) (int, error) {
		if !errors.Is(err, errDown) {
			t.Errorf("FuncOf got %v, want the call's error", err)
		}
		return 42, nil
	})))
	n, err := sluice.Do(context.Background(), g, func(context.Context) (int, error) { return 0, errDown })
	if n != 42 || err != nil {
		t.Errorf("Do = %d, %v; want 42, nil", n, err)
	}
}

func BenchmarkRunSuccess(b *testing.B) {
	lg, err := NewLastGood(LastGoodOptions{})
	if err != nil {
		b.Fatal(err)
	}
	p := New(lg, Value("static"))
	next := returning(result(sluice.Success, "v", nil))
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p.Run(ctx, next)
		}
	})
}

func BenchmarkRunFallback(b *testing.B) {
	p := New(Value("static"))
	next := returning(result(sluice.Failure, nil, errDown))
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p.Run(ctx, next)
		}
	})
}
