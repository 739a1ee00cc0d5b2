package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid/invalidtest"
	"github.com/sluicehq/sluice/timeout"
)

var errBoom = errors.New("boom")

func result(c sluice.Class, err error) sluice.Result {
	return sluice.Result{Outcome: sluice.Outcome{Class: c, Err: err}}
}

var (
	ok      = result(sluice.Success, nil)
	failed  = result(sluice.Failure, errBoom)
	ignored = result(sluice.Ignored, context.Canceled)
	dropped = result(sluice.Dropped, &sluice.Rejection{Reason: sluice.Overloaded})
)

// hinted is an error carrying a retry-after hint, like an HTTP 503 with a
// Retry-After header.
type hinted time.Duration

func (h hinted) Error() string                 { return "busy" }
func (h hinted) RetryAfterHint() time.Duration { return time.Duration(h) }
func failedAfter(d time.Duration) sluice.Result {
	return result(sluice.Failure, fmt.Errorf("call: %w", hinted(d)))
}
func rejectedAfter(d time.Duration) sluice.Result {
	return result(sluice.Dropped, &sluice.Rejection{Reason: sluice.CircuitOpen, RetryAfter: d})
}
func withValue(v any, r sluice.Result) sluice.Result { r.Value = v; return r }

// script returns a Call that returns rs in turn (then the last one again)
// and a pointer to how many times it was called.
func script(rs ...sluice.Result) (sluice.Call, *int) {
	n := new(int)
	return func(context.Context) sluice.Result {
		r := rs[min(*n, len(rs)-1)]
		*n++
		return r
	}, n
}

// deadlineCtx reports a deadline on the fake clock's time line without ever
// expiring by itself.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func mustNew(t *testing.T, opts Options) *Retry {
	t.Helper()
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// stepper runs a Retry in a goroutine on a fake clock and steps it through
// its waits.
type stepper struct {
	t   *testing.T
	fc  *clock.Fake
	out chan sluice.Result
}

func start(t *testing.T, fc *clock.Fake, p *Retry, ctx context.Context, next sluice.Call) *stepper {
	s := &stepper{t: t, fc: fc, out: make(chan sluice.Result, 1)}
	go func() { s.out <- p.Run(ctx, next) }()
	return s
}

// wait checks that the retry is waiting exactly d (d > 0) and lets it go on.
func (s *stepper) wait(d time.Duration) {
	s.t.Helper()
	if err := s.fc.BlockUntil(s.t.Context(), 1); err != nil {
		s.t.Fatal(err)
	}
	s.fc.Advance(d - 1)
	if n := s.fc.Timers(); n != 1 {
		s.t.Fatalf("the wait ended before %v", d)
	}
	s.fc.Advance(1)
}

// result returns what Run returned, or fails the test if the retry begins
// another wait instead.
func (s *stepper) result() sluice.Result {
	s.t.Helper()
	ctx, cancel := context.WithCancel(s.t.Context())
	defer cancel()
	waiting := make(chan struct{})
	go func() {
		if s.fc.BlockUntil(ctx, 1) == nil {
			close(waiting)
		}
	}()
	select {
	case r := <-s.out:
		return r
	case <-waiting:
		s.t.Fatal("the retry began another wait")
		return sluice.Result{}
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		opts Options
		want string
	}{
		{Options{MaxAttempts: -1}, "MaxAttempts -1 is negative"},
		{Options{Initial: -time.Second}, "Initial -1s is negative"},
		{Options{Max: -time.Second}, "Max -1s is negative"},
		{Options{Initial: time.Second, Max: time.Millisecond}, "Max 1ms is below Initial 1s"},
		{Options{Max: time.Millisecond}, "Max 1ms is below Initial 50ms"},
		{Options{Multiplier: 0.5}, "Multiplier 0.5 is not a finite number of at least 1"},
		{Options{Jitter: 3}, "Jitter 3 is unknown"},
		{Options{MaxRetryAfter: -1}, "MaxRetryAfter -1ns is negative"},
		{Options{NoBudget: true, Budget: &Budget{}}, "NoBudget is set together with a Budget"},
	}
	for _, tt := range tests {
		_, err := New(tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "retry: ") {
			t.Errorf("New(%+v) error = %v, want one containing %q", tt.opts, err, tt.want)
		}
	}
	if _, err := New(Options{Max: time.Millisecond, Backoff: Constant(0)}); err != nil {
		t.Errorf("New with a Backoff and a small Max: %v", err)
	}
}

func TestNewNamesEveryBadOption(t *testing.T) {
	tests := []struct {
		name  string
		new   func() error
		names []string
	}{
		{"retry", func() error {
			_, err := New(Options{MaxAttempts: -1, Jitter: 9, Multiplier: 0.5})
			return err
		}, []string{"MaxAttempts -1", "Jitter 9", "Multiplier 0.5"}},
		{"retry delays", func() error {
			_, err := New(Options{Initial: time.Second, Max: time.Millisecond, MaxRetryAfter: -1, NoBudget: true, Budget: &Budget{}})
			return err
		}, []string{"Max 1ms is below Initial 1s", "MaxRetryAfter -1ns", "NoBudget"}},
		{"budget", func() error {
			_, err := NewBudget(BudgetOptions{Ratio: math.NaN(), MinPerSecond: math.Inf(-1), Window: 9})
			return err
		}, []string{"Ratio NaN", "MinPerSecond -Inf", "Window 9ns"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			invalidtest.Check(t, tt.new(), nil, tt.names...)
		})
	}
}

// Which results are retried, with no wait between attempts.
func TestRetryDecisions(t *testing.T) {
	pending := withValue("pending", ok)
	done := withValue("done", ok)
	tests := []struct {
		name     string
		opts     Options
		results  []sluice.Result
		want     sluice.Result
		attempts int
		gaveUp   []StopReason
	}{
		{"success", Options{}, []sluice.Result{ok}, ok, 1, nil},
		{"failure then success", Options{}, []sluice.Result{failed, ok}, ok, 2, nil},
		{"failures up to MaxAttempts", Options{}, []sluice.Result{failed}, failed, 3, []StopReason{AttemptsExhausted}},
		{"MaxAttempts 5", Options{MaxAttempts: 5}, []sluice.Result{failed}, failed, 5, []StopReason{AttemptsExhausted}},
		{"MaxAttempts 1", Options{MaxAttempts: 1}, []sluice.Result{failed}, failed, 1, []StopReason{AttemptsExhausted}},
		{"ignored is never retried", Options{}, []sluice.Result{ignored}, ignored, 1, nil},
		{"ignored even if RetryIf says so", Options{RetryIf: func(sluice.Result) bool { return true }},
			[]sluice.Result{ignored}, ignored, 1, nil},
		{"dropped without hint", Options{}, []sluice.Result{dropped}, dropped, 1, nil},
		{"AbortIf", Options{AbortIf: func(r sluice.Result) bool { return errors.Is(r.Err, errBoom) }},
			[]sluice.Result{failed}, failed, 1, nil},
		{"AbortIf false", Options{AbortIf: func(sluice.Result) bool { return false }},
			[]sluice.Result{failed, ok}, ok, 2, nil},
		{"RetryIf false", Options{RetryIf: func(sluice.Result) bool { return false }},
			[]sluice.Result{failed}, failed, 1, nil},
		{"RetryIf on a value", Options{MaxAttempts: 9, RetryIf: func(r sluice.Result) bool { return r.Value == "pending" }},
			[]sluice.Result{pending, pending, done}, done, 3, nil},
		{"AbortIf beats RetryIf", Options{
			RetryIf: func(sluice.Result) bool { return true },
			AbortIf: func(r sluice.Result) bool { return r.Class == sluice.Success }},
			[]sluice.Result{failed, ok}, ok, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gaveUp []StopReason
			tt.opts.Backoff = Constant(0)
			tt.opts.Clock = clock.NewFake(time.Time{})
			tt.opts.OnGiveUp = func(reason StopReason, attempts int, last sluice.Result) {
				if attempts != tt.attempts || last != tt.want {
					t.Errorf("OnGiveUp(%v, %d, %v), want attempts %d", reason, attempts, last, tt.attempts)
				}
				gaveUp = append(gaveUp, reason)
			}
			p := mustNew(t, tt.opts)
			next, n := script(tt.results...)
			got := p.Run(context.Background(), next)
			if got != tt.want || *n != tt.attempts {
				t.Errorf("Run = %v after %d attempts, want %v after %d", got, *n, tt.want, tt.attempts)
			}
			if fmt.Sprint(gaveUp) != fmt.Sprint(tt.gaveUp) {
				t.Errorf("gave up %v, want %v", gaveUp, tt.gaveUp)
			}
			if s := p.Stats(); s.Retries != uint64(tt.attempts-1) {
				t.Errorf("Stats().Retries = %d, want %d", s.Retries, tt.attempts-1)
			}
		})
	}
}

// The waits between attempts follow the backoff, step by step on the fake
// clock, and OnRetry sees each of them.
func TestRetryWaits(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name  string
		opts  Options
		waits []time.Duration
	}{
		{"default exponential, no jitter", Options{MaxAttempts: 5, Jitter: NoJitter},
			[]time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms}},
		{"capped", Options{MaxAttempts: 5, Initial: 300 * ms, Max: time.Second, Multiplier: 3, Jitter: NoJitter},
			[]time.Duration{300 * ms, 900 * ms, time.Second, time.Second}},
		{"full jitter with a seeded source", Options{MaxAttempts: 4, Rand: seq(0.5, 0.25, 0.75)},
			[]time.Duration{25 * ms, 25 * ms, 150 * ms}},
		{"equal jitter", Options{MaxAttempts: 3, Jitter: EqualJitter, Rand: seq(0.5)},
			[]time.Duration{37500 * time.Microsecond, 75 * ms}},
		{"constant", Options{MaxAttempts: 3, Backoff: Constant(time.Second)},
			[]time.Duration{time.Second, time.Second}},
		{"decorrelated", Options{MaxAttempts: 4, Backoff: DecorrelatedJitter(10*ms, time.Second, seq(0.5))},
			[]time.Duration{20 * ms, 35 * ms, 57500 * time.Microsecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clock.NewFake(time.Time{})
			var seen []string
			tt.opts.Clock = fc
			tt.opts.NoBudget = true
			tt.opts.OnRetry = func(attempt int, delay time.Duration, last sluice.Result) {
				seen = append(seen, fmt.Sprintf("%d:%v:%v", attempt, delay, last.Err))
			}
			p := mustNew(t, tt.opts)
			next, n := script(failed)
			s := start(t, fc, p, context.Background(), next)
			var want []string
			for i, d := range tt.waits {
				s.wait(d)
				want = append(want, fmt.Sprintf("%d:%v:boom", i+1, d))
			}
			if r := s.result(); r != failed || *n != len(tt.waits)+1 {
				t.Fatalf("Run = %v after %d attempts", r, *n)
			}
			if fmt.Sprint(seen) != fmt.Sprint(want) {
				t.Errorf("OnRetry saw %v, want %v", seen, want)
			}
		})
	}
}

// A wait that would end at or after the context's deadline is not begun.
func TestRetryDeadline(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name     string
		left     time.Duration // before the deadline, at the start
		results  []sluice.Result
		waits    []time.Duration
		attempts int
		stopped  StopReason
	}{
		// waits of 100ms, 200ms, 400ms
		{"all fit", 701 * ms, []sluice.Result{failed}, []time.Duration{100 * ms, 200 * ms}, 3, AttemptsExhausted},
		{"second ends at the deadline", 300 * ms, []sluice.Result{failed}, []time.Duration{100 * ms}, 2, DeadlineReached},
		{"second ends after it", 250 * ms, []sluice.Result{failed}, []time.Duration{100 * ms}, 2, DeadlineReached},
		{"first does not fit", 100 * ms, []sluice.Result{failed}, nil, 1, DeadlineReached},
		{"a long hint does not fit", time.Second, []sluice.Result{failedAfter(time.Second)}, nil, 1, DeadlineReached},
		{"a short hint fits", time.Second, []sluice.Result{failedAfter(500 * ms), ok}, []time.Duration{500 * ms}, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clock.NewFake(time.Time{})
			p := mustNew(t, Options{MaxAttempts: 3, Initial: 100 * ms, Jitter: NoJitter, Clock: fc, NoBudget: true})
			ctx := deadlineCtx{context.Background(), fc.Now().Add(tt.left)}
			next, n := script(tt.results...)
			s := start(t, fc, p, ctx, next)
			for _, d := range tt.waits {
				s.wait(d)
			}
			r := s.result()
			if *n != tt.attempts || r != tt.results[len(tt.results)-1] {
				t.Fatalf("Run = %v after %d attempts, want %d", r, *n, tt.attempts)
			}
			want := Stats{Retries: uint64(len(tt.waits))}
			if r.Class != sluice.Success {
				want.Stopped[tt.stopped] = 1
			}
			if got := p.Stats(); got != want {
				t.Errorf("Stats() = %+v, want %+v", got, want)
			}
		})
	}
}

// A retry-after hint lengthens the wait; one above MaxRetryAfter stops the
// retries; a rejection with a hint is retried.
func TestRetryAfterHint(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name     string
		opts     Options
		results  []sluice.Result
		waits    []time.Duration
		attempts int
		stopped  []StopReason
	}{
		{"hint longer than the backoff", Options{}, []sluice.Result{failedAfter(500 * ms), ok},
			[]time.Duration{500 * ms}, 2, nil},
		{"hint shorter than the backoff", Options{Initial: time.Second}, []sluice.Result{failedAfter(ms), ok},
			[]time.Duration{time.Second}, 2, nil},
		{"hint above MaxRetryAfter", Options{MaxRetryAfter: time.Second}, []sluice.Result{failedAfter(2 * time.Second)},
			nil, 1, []StopReason{RetryAfterTooLong}},
		{"MaxRetryAfter defaults to Max", Options{Max: 5 * time.Second}, []sluice.Result{failedAfter(6 * time.Second)},
			nil, 1, []StopReason{RetryAfterTooLong}},
		{"hint equal to MaxRetryAfter", Options{MaxRetryAfter: time.Second}, []sluice.Result{failedAfter(time.Second), ok},
			[]time.Duration{time.Second}, 2, nil},
		{"rejection with a hint", Options{}, []sluice.Result{rejectedAfter(700 * ms), ok},
			[]time.Duration{700 * ms}, 2, nil},
		{"rejections until attempts run out", Options{}, []sluice.Result{rejectedAfter(ms)},
			[]time.Duration{50 * ms, 100 * ms}, 3, []StopReason{AttemptsExhausted}},
		{"rejection with a long hint", Options{}, []sluice.Result{rejectedAfter(time.Minute)},
			nil, 1, []StopReason{RetryAfterTooLong}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clock.NewFake(time.Time{})
			var stopped []StopReason
			tt.opts.Clock = fc
			tt.opts.Jitter = NoJitter
			tt.opts.OnGiveUp = func(r StopReason, _ int, _ sluice.Result) { stopped = append(stopped, r) }
			p := mustNew(t, tt.opts)
			next, n := script(tt.results...)
			s := start(t, fc, p, context.Background(), next)
			for _, d := range tt.waits {
				s.wait(d)
			}
			r := s.result()
			if *n != tt.attempts || r != tt.results[len(tt.results)-1] {
				t.Fatalf("Run = %v after %d attempts, want %d", r, *n, tt.attempts)
			}
			if fmt.Sprint(stopped) != fmt.Sprint(tt.stopped) {
				t.Errorf("stopped %v, want %v", stopped, tt.stopped)
			}
		})
	}
}

// The caller cancelling during a wait ends it at once, with the last result.
func TestRetryCancelledDuringWait(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	p := mustNew(t, Options{Clock: fc, NoBudget: true})
	ctx, cancel := context.WithCancel(context.Background())
	next, n := script(failed)
	s := start(t, fc, p, ctx, next)
	if err := fc.BlockUntil(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	// Its timer may still be there for a moment, so s.result cannot tell.
	if r := <-s.out; r != failed || *n != 1 {
		t.Fatalf("Run = %v after %d attempts, want the failure after 1", r, *n)
	}
	if got := p.Stats().Stopped[Cancelled]; got != 1 {
		t.Errorf("Stopped[Cancelled] = %d, want 1", got)
	}
}

// A context that ended during an attempt is not retried: its error says
// whether the caller cancelled or the deadline passed.
func TestRetryContextDoneAfterAttempt(t *testing.T) {
	tests := []struct {
		name string
		end  func(context.Context) (context.Context, context.CancelFunc)
		want StopReason
	}{
		{"cancelled", func(ctx context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx, cancel
		}, Cancelled},
		{"deadline", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithDeadline(ctx, time.Unix(0, 0))
		}, DeadlineReached},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustNew(t, Options{Clock: clock.NewFake(time.Time{}), NoBudget: true})
			ctx, cancel := tt.end(context.Background())
			defer cancel()
			// The attempt failed with its own error (a classifier may call an
			// expired deadline a Failure): the context still stops the retry.
			next, n := script(failed)
			if r := p.Run(ctx, next); r != failed || *n != 1 {
				t.Fatalf("Run = %v after %d attempts", r, *n)
			}
			if got := p.Stats().Stopped[tt.want]; got != 1 {
				t.Errorf("Stopped[%v] = %d, want 1", tt.want, got)
			}
		})
	}
}

// A burst of failing calls spends the budget; the budget refills as the
// window slides.
func TestRetryBudgetBurstAndRefill(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	b, err := NewBudget(BudgetOptions{Ratio: 0.2, MinPerSecond: 1, Window: 10 * time.Second, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	p := mustNew(t, Options{Backoff: Constant(0), Budget: b, Clock: fc})
	next, n := script(failed)
	for range 100 {
		if r := p.Run(context.Background(), next); r != failed {
			t.Fatalf("Run = %v", r)
		}
	}
	// 100 calls allow 0.2·100 + 1/s·10s = 30 retries.
	s := p.Stats()
	if s.Retries != 30 || *n != 130 {
		t.Fatalf("%d retries, %d attempts; want 30, 130", s.Retries, *n)
	}
	if got := s.Stopped[BudgetExhausted] + s.Stopped[AttemptsExhausted]; got != 100 {
		t.Fatalf("stopped %d calls, want 100", got)
	}
	if s.Stopped[BudgetExhausted] == 0 || b.Refused() != s.Stopped[BudgetExhausted] {
		t.Fatalf("budget refused %d, stats say %d", b.Refused(), s.Stopped[BudgetExhausted])
	}
	// Nothing left now...
	*n = 0
	p.Run(context.Background(), next)
	if *n != 1 {
		t.Fatalf("%d attempts with the budget spent, want 1", *n)
	}
	// ...and all of it again once the window has passed.
	fc.Advance(10 * time.Second)
	*n = 0
	p.Run(context.Background(), next)
	if *n != 3 {
		t.Fatalf("%d attempts after the window, want 3", *n)
	}
}

// Over many calls that all fail, retries stay within Ratio of the calls plus
// the reserve, whatever MaxAttempts allows.
func TestRetryBudgetRatio(t *testing.T) {
	tests := []struct {
		name string
		opts BudgetOptions
		want uint64
	}{
		{"defaults", BudgetOptions{}, 300}, // 0.2·1000 + 10/s·10s
		{"no minimum", BudgetOptions{MinPerSecond: -1}, 200},
		{"ratio 0.05", BudgetOptions{Ratio: 0.05, MinPerSecond: -1}, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clock.NewFake(time.Time{})
			tt.opts.Clock = fc
			b, err := NewBudget(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			p := mustNew(t, Options{MaxAttempts: 10, Backoff: Constant(0), Budget: b, Clock: fc})
			next, _ := script(failed)
			for range 1000 {
				p.Run(context.Background(), next)
			}
			if got := p.Stats().Retries; got != tt.want {
				t.Errorf("%d retries, want %d", got, tt.want)
			}
		})
	}
}

// Two policies that share a budget draw from one pool.
func TestRetrySharedBudget(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	b, err := NewBudget(BudgetOptions{Ratio: -1, MinPerSecond: 0.5, Window: 10 * time.Second, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	p1 := mustNew(t, Options{MaxAttempts: 4, Backoff: Constant(0), Budget: b, Clock: fc})
	p2 := mustNew(t, Options{MaxAttempts: 4, Backoff: Constant(0), Budget: b, Clock: fc})
	next, n := script(failed)
	p1.Run(context.Background(), next) // 3 retries of the 5
	p2.Run(context.Background(), next) // the last 2
	if *n != 7 || p2.Stats().Stopped[BudgetExhausted] != 1 || p1.Budget() != b {
		t.Fatalf("%d attempts, p2 stats %+v", *n, p2.Stats())
	}
}

// The private default budget lets a quiet service retry fully.
func TestRetryDefaultBudget(t *testing.T) {
	p := mustNew(t, Options{Backoff: Constant(0), Clock: clock.NewFake(time.Time{})})
	if p.Budget() == nil || p.Budget().Available() != 100 {
		t.Fatalf("default budget %v", p.Budget())
	}
	if mustNew(t, Options{NoBudget: true}).Budget() != nil {
		t.Fatal("NoBudget still has a budget")
	}
}

func TestStopReasonString(t *testing.T) {
	want := []string{"attempts_exhausted", "budget_exhausted", "deadline_reached", "retry_after_too_long", "cancelled", "unknown"}
	for i, w := range want {
		if got := StopReason(i).String(); got != w {
			t.Errorf("StopReason(%d) = %q, want %q", i, got, w)
		}
	}
}

// Composed with a per-attempt timeout inside it, each attempt that times out
// is retried, and each gets a fresh bound.
func TestRetryAroundTimeout(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	p := mustNew(t, Options{Jitter: NoJitter, Clock: fc})
	per, err := timeout.New(timeout.Options{Timeout: time.Second, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	g := sluice.New(p, per).WithClock(fc)
	attempts := 0
	out := make(chan error, 1)
	go func() {
		_, err := sluice.Do(context.Background(), g, func(ctx context.Context) (string, error) {
			attempts++
			if attempts == 3 {
				return "ok", nil
			}
			<-ctx.Done()
			return "", ctx.Err()
		})
		out <- err
	}()
	for _, step := range []time.Duration{time.Second, 100 * time.Millisecond, time.Second, 200 * time.Millisecond} {
		if err := fc.BlockUntil(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		fc.Advance(step)
	}
	if err := <-out; err != nil || attempts != 3 {
		t.Fatalf("Do = %v after %d attempts, want success after 3", err, attempts)
	}
	if s := p.Stats(); s.Retries != 2 {
		t.Fatalf("Stats() = %+v", s)
	}
}

// TestAttemptsSteps drives a call's attempts by hand, as an event loop does:
// the decisions, waits and counts are Run's.
func TestAttemptsSteps(t *testing.T) {
	p, err := New(Options{MaxAttempts: 3, Initial: 10 * time.Millisecond, Max: time.Second, Jitter: NoJitter, NoBudget: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := p.Start()
	for i, want := range []time.Duration{10 * time.Millisecond, 20 * time.Millisecond} {
		if d, ok := a.Next(ctx, failed); !ok || d != want {
			t.Fatalf("after attempt %d: wait %v, %v; want %v, true", i+1, d, ok, want)
		}
	}
	if _, ok := a.Next(ctx, failed); ok {
		t.Fatal("a fourth attempt after three")
	}
	b := p.Start()
	if _, ok := b.Next(ctx, ok); ok {
		t.Fatal("a success retried")
	}
	c := p.Start()
	if _, ok := c.Next(ctx, failed); !ok {
		t.Fatal("a first failure not retried")
	}
	c.Cancelled(failed)
	s := p.Stats()
	if s.Retries != 3 || s.Stopped[AttemptsExhausted] != 1 || s.Stopped[Cancelled] != 1 {
		t.Errorf("stats %+v: want 3 retries, one stop for exhausted attempts, one for a cancelled wait", s)
	}
}
