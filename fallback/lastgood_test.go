package fallback

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/invalid/invalidtest"
)

type userKey struct{}

func forUser(user string) context.Context {
	return context.WithValue(context.Background(), userKey{}, user)
}

func byUser(ctx context.Context) (string, bool) {
	u, ok := ctx.Value(userKey{}).(string)
	return u, ok
}

func TestNewLastGoodValidates(t *testing.T) {
	tests := []struct {
		opts  LastGoodOptions
		names []string
	}{
		{LastGoodOptions{MaxAge: -1}, []string{"MaxAge -1ns"}},
		{LastGoodOptions{MaxKeys: -1}, []string{"MaxKeys -1"}},
		{LastGoodOptions{MaxAge: -time.Second, MaxKeys: -2}, []string{"MaxAge -1s", "MaxKeys -2"}},
	}
	for _, tt := range tests {
		_, err := NewLastGood(tt.opts)
		invalidtest.Check(t, err, nil, tt.names...)
	}
}

func mustLastGood(t *testing.T, opts LastGoodOptions) *LastGood {
	t.Helper()
	l, err := NewLastGood(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// step is one call through a Policy with a LastGood level: the call's
// result, and what the Policy must return.
type step struct {
	user    string
	advance time.Duration
	in      sluice.Result
	want    any   // the Value returned
	wantErr error // errors.Is the returned Err
}

func runSteps(t *testing.T, fc *clock.Fake, p *Policy, steps []step) {
	t.Helper()
	for i, s := range steps {
		fc.Advance(s.advance)
		ctx := context.Background()
		if s.user != "" {
			ctx = forUser(s.user)
		}
		got := p.Run(ctx, returning(s.in))
		if got.Value != s.want || !errors.Is(got.Err, s.wantErr) || (s.wantErr == nil && got.Err != nil) {
			t.Errorf("step %d (%s): Run = %v, %v; want %v, %v", i, s.user, got.Value, got.Err, s.want, s.wantErr)
		}
	}
}

func TestLastGoodPerKey(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	lg := mustLastGood(t, LastGoodOptions{Key: byUser, Clock: fc})
	p := New(lg)
	fail := result(sluice.Failure, nil, errDown)
	runSteps(t, fc, p, []step{
		{user: "ann", in: fail, wantErr: errDown}, // nothing recorded yet
		{user: "ann", in: result(sluice.Success, "ann-1", nil), want: "ann-1"},
		{user: "bob", in: result(sluice.Success, "bob-1", nil), want: "bob-1"},
		{user: "ann", in: fail, want: "ann-1"},
		{user: "bob", in: fail, want: "bob-1"},
		{user: "ann", in: result(sluice.Success, "ann-2", nil), want: "ann-2"},
		{user: "ann", in: result(sluice.Dropped, nil, &sluice.Rejection{}), want: "ann-2"},
		{user: "cat", in: fail, wantErr: errDown},               // another key
		{in: result(sluice.Success, "anon", nil), want: "anon"}, // no key: not recorded
		{in: fail, wantErr: errDown},                            // no key: not served
		{user: "bob", in: result(sluice.Ignored, "x", context.Canceled), want: "x", wantErr: context.Canceled},
		{user: "bob", in: fail, want: "bob-1"}, // Ignored was not recorded
	})
	if n := lg.Len(); n != 2 {
		t.Errorf("Len() = %d, want 2", n)
	}
}

func TestLastGoodErrors(t *testing.T) {
	lg := mustLastGood(t, LastGoodOptions{Key: byUser})
	_, err := lg.Fallback(context.Background(), sluice.Result{})
	if !errors.Is(err, ErrNoLastGood) {
		t.Errorf("no key: err = %v, want ErrNoLastGood", err)
	}
	_, err = lg.Fallback(forUser("ann"), sluice.Result{})
	if !errors.Is(err, ErrNoLastGood) {
		t.Errorf("unknown key: err = %v, want ErrNoLastGood", err)
	}
}

func TestLastGoodMaxAge(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	lg := mustLastGood(t, LastGoodOptions{Key: byUser, MaxAge: time.Minute, Clock: fc})
	p := New(lg, Value("static"))
	fail := result(sluice.Failure, nil, errDown)
	runSteps(t, fc, p, []step{
		{user: "ann", in: result(sluice.Success, "ann-1", nil), want: "ann-1"},
		{user: "ann", advance: time.Minute, in: fail, want: "ann-1"}, // exactly MaxAge old
		{user: "ann", advance: 1, in: fail, want: "static"},          // older: dropped
		{user: "ann", in: fail, want: "static"},
		{user: "ann", in: result(sluice.Success, "ann-2", nil), want: "ann-2"},
		{user: "ann", advance: 30 * time.Second, in: fail, want: "ann-2"},
	})
	fc.Advance(time.Hour)
	_, err := lg.Fallback(forUser("ann"), fail)
	if !errors.Is(err, ErrNoLastGood) {
		t.Errorf("stale: err = %v, want ErrNoLastGood", err)
	}
	if n := lg.Len(); n != 0 {
		t.Errorf("Len() = %d after a stale lookup, want 0", n)
	}
}

func TestLastGoodEvictsLeastRecentlyUsed(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	lg := mustLastGood(t, LastGoodOptions{Key: byUser, MaxKeys: 2, Clock: fc})
	p := New(lg)
	fail := result(sluice.Failure, nil, errDown)
	ok := func(v string) sluice.Result { return result(sluice.Success, v, nil) }
	runSteps(t, fc, p, []step{
		{user: "a", in: ok("a"), want: "a"},
		{user: "b", in: ok("b"), want: "b"},
		{user: "a", in: fail, want: "a"},    // serving a makes b the least recently used
		{user: "c", in: ok("c"), want: "c"}, // evicts b
		{user: "b", in: fail, wantErr: errDown},
		{user: "a", in: fail, want: "a"},
		{user: "c", in: fail, want: "c"},
		{user: "a", in: ok("a2"), want: "a2"}, // updating a key evicts nothing
		{user: "c", in: fail, want: "c"},
		{user: "a", in: fail, want: "a2"},
	})
	if n := lg.Len(); n != 2 {
		t.Errorf("Len() = %d, want 2", n)
	}
	lg.Forget("a")
	if _, err := lg.Fallback(forUser("a"), fail); !errors.Is(err, ErrNoLastGood) {
		t.Errorf("after Forget: err = %v, want ErrNoLastGood", err)
	}
}

func TestLastGoodWithoutKeyFunction(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	p := New(mustLastGood(t, LastGoodOptions{Clock: fc}))
	runSteps(t, fc, p, []step{
		{user: "ann", in: result(sluice.Success, "one", nil), want: "one"},
		{user: "bob", in: result(sluice.Failure, nil, errDown), want: "one"},
		{in: result(sluice.Failure, nil, errDown), want: "one"},
	})
}

// gate is a tiny admission policy standing in for a circuit breaker: while
// open it rejects every call.
type gate struct{ open atomic.Bool }

func (g *gate) Acquire(context.Context) (sluice.Permit, error) {
	if g.open.Load() {
		return sluice.Permit{}, &sluice.Rejection{Reason: sluice.CircuitOpen, Policy: "gate"}
	}
	return sluice.Permit{}, nil
}

func (g *gate) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, g, next)
}

func TestGuardWithBreakerStandIn(t *testing.T) {
	lg := mustLastGood(t, LastGoodOptions{Key: byUser})
	br := &gate{}
	g := sluice.New(New(lg, Value("cached answer")), br)
	calls := 0
	fn := func(ctx context.Context) (string, error) {
		calls++
		u, _ := byUser(ctx)
		return "fresh for " + u, nil
	}
	if v, err := sluice.Do(forUser("ann"), g, fn); v != "fresh for ann" || err != nil {
		t.Fatalf("closed: Do = %q, %v", v, err)
	}
	br.open.Store(true)
	for _, tt := range []struct{ user, want string }{{"ann", "fresh for ann"}, {"bob", "cached answer"}} {
		if v, err := sluice.Do(forUser(tt.user), g, fn); v != tt.want || err != nil {
			t.Errorf("open, %s: Do = %q, %v; want %q", tt.user, v, err, tt.want)
		}
	}
	if calls != 1 {
		t.Errorf("fn called %d times, want 1: the open gate rejects", calls)
	}
}
