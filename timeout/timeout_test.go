package timeout

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid/invalidtest"
)

const d = time.Second

var errBoom = errors.New("boom")

func result(v any, c sluice.Class, err error, latency time.Duration) sluice.Result {
	return sluice.Result{Value: v, Outcome: sluice.Outcome{Class: c, Err: err, Latency: latency}}
}

func mustNew(t *testing.T, opts Options) *Timeout {
	t.Helper()
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNew(t *testing.T) {
	for _, bad := range []time.Duration{0, -time.Second} {
		_, err := New(Options{Timeout: bad})
		invalidtest.Check(t, err, nil, "Timeout "+bad.String())
	}
	if p := mustNew(t, Options{Timeout: d}); p.Duration() != d {
		t.Errorf("Duration() = %v, want %v", p.Duration(), d)
	}
}

// The call runs on the caller's goroutine and moves the fake clock itself,
// so every case is deterministic. (A fake timer fires inside Advance.)
func TestRunSync(t *testing.T) {
	tests := []struct {
		name    string
		took    time.Duration // how far the call moves the clock
		returns sluice.Result
		// parent, if set, wraps the caller's context (sharing the fake clock).
		parent  func(context.Context, *clock.Fake) (context.Context, context.CancelFunc)
		want    sluice.Result // compared field by field, Err with errors.Is
		timeout bool          // whether Err must match ErrTimeout
	}{
		{name: "fast success", took: d - 1, returns: result("v", sluice.Success, nil, d-1),
			want: result("v", sluice.Success, nil, d-1)},
		{name: "fast failure", took: 0, returns: result(nil, sluice.Failure, errBoom, 0),
			want: result(nil, sluice.Failure, errBoom, 0)},
		{name: "failure at the deadline", took: d, returns: result(nil, sluice.Failure, context.DeadlineExceeded, d),
			want: result(nil, sluice.Failure, context.DeadlineExceeded, d), timeout: true},
		{name: "late failure keeps its error", took: 2 * d, returns: result(nil, sluice.Failure, errBoom, 2*d),
			want: result(nil, sluice.Failure, errBoom, 2*d), timeout: true},
		{name: "late success is a timeout", took: d, returns: result("late", sluice.Success, nil, d),
			want: result(nil, sluice.Failure, nil, d), timeout: true},
		{name: "late rejection stays dropped", took: d, returns: result(nil, sluice.Dropped, errBoom, 0),
			want: result(nil, sluice.Dropped, errBoom, 0), timeout: true},
		{name: "caller's shorter deadline", took: d,
			parent: func(ctx context.Context, fc *clock.Fake) (context.Context, context.CancelFunc) {
				return fc.WithTimeout(ctx, d/2)
			},
			returns: result(nil, sluice.Failure, context.DeadlineExceeded, d),
			want:    result(nil, sluice.Failure, context.DeadlineExceeded, d)},
		{name: "caller cancelled", took: d,
			parent: func(ctx context.Context, _ *clock.Fake) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(ctx)
				cancel()
				return ctx, cancel
			},
			returns: result(nil, sluice.Ignored, context.Canceled, d),
			want:    result(nil, sluice.Ignored, context.Canceled, d)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clock.NewFake(time.Time{})
			p := mustNew(t, Options{Timeout: d, Clock: fc})
			ctx := context.Background()
			if tt.parent != nil {
				var cancel context.CancelFunc
				ctx, cancel = tt.parent(ctx, fc)
				defer cancel()
			}
			got := p.Run(ctx, func(ctx context.Context) sluice.Result {
				fc.Advance(tt.took)
				return tt.returns
			})
			check(t, got, tt.want, tt.timeout)
			if n := fc.Timers(); n != 0 {
				t.Errorf("%d timers left", n)
			}
		})
	}
}

func check(t *testing.T, got, want sluice.Result, timeout bool) {
	t.Helper()
	if got.Value != want.Value || got.Class != want.Class || got.Latency != want.Latency {
		t.Errorf("Run = %+v, want %+v", got, want)
	}
	if want.Err != nil && !errors.Is(got.Err, want.Err) || want.Err == nil && !timeout && got.Err != nil {
		t.Errorf("Err = %v, want %v", got.Err, want.Err)
	}
	if errors.Is(got.Err, sluice.ErrTimeout) != timeout {
		t.Errorf("Err = %v; timeout %v", got.Err, timeout)
	}
	if timeout && !strings.HasPrefix(got.Err.Error(), "sluice: timeout after 1s") {
		t.Errorf("Err = %q", got.Err)
	}
}

// A call that honours ctx is ended by the fake clock reaching the deadline.
func TestRunSyncHonoursContext(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	p := mustNew(t, Options{Timeout: d, Clock: fc})
	started := make(chan context.Context)
	out := make(chan sluice.Result)
	go func() {
		out <- p.Run(context.Background(), func(ctx context.Context) sluice.Result {
			started <- ctx
			<-ctx.Done()
			return result(nil, sluice.Failure, ctx.Err(), d)
		})
	}()
	ctx := <-started
	if err := fc.BlockUntil(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(d - 1)
	if ctx.Err() != nil {
		t.Fatalf("expired early: %v", ctx.Err())
	}
	fc.Advance(1)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("ctx.Err() = %v at the deadline", ctx.Err())
	}
	check(t, <-out, result(nil, sluice.Failure, context.DeadlineExceeded, d), true)
}

// With the real clock the call's context carries a real deadline, so that
// clients and servers can propagate it.
func TestRunRealDeadline(t *testing.T) {
	p := mustNew(t, Options{Timeout: time.Hour})
	before := time.Now()
	var deadline time.Time
	var ok bool
	p.Run(context.Background(), func(ctx context.Context) sluice.Result {
		deadline, ok = ctx.Deadline()
		return sluice.Result{}
	})
	after := time.Now()
	if !ok || deadline.Before(before.Add(time.Hour)) || deadline.After(after.Add(time.Hour)) {
		t.Fatalf("deadline %v, %v; want between %v and %v", deadline, ok, before.Add(time.Hour), after.Add(time.Hour))
	}
}

// Async returns at the deadline although the call ignores ctx; the call
// finishes in the background.
func TestRunAsyncAbandons(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	p := mustNew(t, Options{Timeout: d, Async: true, Clock: fc})
	release, finished := make(chan struct{}), make(chan struct{})
	out := make(chan sluice.Result)
	go func() {
		out <- p.Run(context.Background(), func(context.Context) sluice.Result {
			defer close(finished)
			<-release // ignores ctx
			return result("late", sluice.Success, nil, 5*d)
		})
	}()
	if err := fc.BlockUntil(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(d)
	check(t, <-out, result(nil, sluice.Failure, nil, d), true)
	close(release)
	<-finished
}

func TestRunAsyncFast(t *testing.T) {
	tests := []struct {
		name    string
		returns sluice.Result
	}{
		{"success", result(42, sluice.Success, nil, time.Millisecond)},
		{"failure", result(nil, sluice.Failure, errBoom, time.Millisecond)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clock.NewFake(time.Time{})
			p := mustNew(t, Options{Timeout: d, Async: true, Clock: fc})
			got := p.Run(context.Background(), func(context.Context) sluice.Result { return tt.returns })
			check(t, got, tt.returns, false)
			if n := fc.Timers(); n != 0 {
				t.Errorf("%d timers left", n)
			}
		})
	}
}

// A call that returns after the deadline is a timeout in Async mode too,
// whichever of the two Run notices first.
func TestRunAsyncLate(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	p := mustNew(t, Options{Timeout: d, Async: true, Clock: fc})
	got := p.Run(context.Background(), func(context.Context) sluice.Result {
		fc.Advance(d)
		return result("late", sluice.Success, nil, d)
	})
	check(t, got, result(nil, sluice.Failure, nil, d), true)
}

// The caller cancelling ends an Async run at once, as Ignored.
func TestRunAsyncCallerCancels(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	p := mustNew(t, Options{Timeout: d, Async: true, Clock: fc})
	ctx, cancel := context.WithCancel(context.Background())
	release, started := make(chan struct{}), make(chan struct{})
	out := make(chan sluice.Result)
	go func() {
		out <- p.Run(ctx, func(context.Context) sluice.Result {
			close(started)
			<-release
			return sluice.Result{}
		})
	}()
	<-started
	cancel()
	check(t, <-out, result(nil, sluice.Ignored, context.Canceled, 0), false)
	close(release)
}

// A panic in an Async call reaches the caller, as it would without Async.
func TestRunAsyncPanic(t *testing.T) {
	p := mustNew(t, Options{Timeout: d, Async: true, Clock: clock.NewFake(time.Time{})})
	defer func() {
		if got := recover(); got != "kaboom" {
			t.Fatalf("recovered %v, want kaboom", got)
		}
	}()
	p.Run(context.Background(), func(context.Context) sluice.Result { panic("kaboom") })
	t.Fatal("Run returned")
}

// runtime.Goexit in an Async call ends the attempt with an error instead of
// leaving Run to wait for the deadline.
func TestRunAsyncGoexit(t *testing.T) {
	p := mustNew(t, Options{Timeout: d, Async: true, Clock: clock.NewFake(time.Time{})})
	got := p.Run(context.Background(), func(context.Context) sluice.Result {
		runtime.Goexit()
		return sluice.Result{}
	})
	check(t, got, result(nil, sluice.Failure, errGoexit, 0), false)
}
