package ratelimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
)

func newTestLimiter(t *testing.T, opts Options) (*Limiter, *clock.Fake) {
	t.Helper()
	fc := clock.NewFake(time.Time{})
	if opts.Clock == nil {
		opts.Clock = fc
	}
	l, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l, fc
}

func TestLimiterRejection(t *testing.T) {
	l, fc := newTestLimiter(t, Options{Name: "api", Limit: Limit{Limit: 2, Period: time.Second}})
	ctx := context.Background()
	for range 2 {
		if _, err := l.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err := l.Acquire(ctx)
	if !errors.Is(err, sluice.ErrRejected) {
		t.Fatalf("third call: %v, want a rejection", err)
	}
	var le *LimitError
	if !errors.As(err, &le) || le.Decision.Limit != 2 || le.Decision.Remaining != 0 || le.Decision.ResetAfter != time.Second {
		t.Fatalf("LimitError: %#v", le)
	}
	var rej *sluice.Rejection
	if !errors.As(err, &rej) || rej.Reason != sluice.RateLimited || rej.Policy != "api" {
		t.Fatalf("Rejection: %#v", rej)
	}
	if d, ok := sluice.RetryAfter(err); !ok || d != 500*time.Millisecond {
		t.Fatalf("RetryAfter: %v, %v; want 500ms", d, ok)
	}
	fc.Advance(500 * time.Millisecond)
	if _, err := l.Acquire(ctx); err != nil {
		t.Fatalf("after RetryAfter: %v", err)
	}
}

func TestLimiterKeys(t *testing.T) {
	l, _ := newTestLimiter(t, Options{Key: "anonymous", Limit: Limit{Limit: 1, Period: time.Second}})
	alice := WithKey(context.Background(), "alice")
	bob := WithKey(context.Background(), "bob")
	for _, tc := range []struct {
		ctx  context.Context
		want bool
	}{
		{alice, true}, {alice, false}, {bob, true}, {context.Background(), true}, {context.Background(), false},
	} {
		_, err := l.Acquire(tc.ctx)
		if got := err == nil; got != tc.want {
			key, _ := KeyFrom(tc.ctx)
			t.Fatalf("key %q: %v, want admitted %v", key, err, tc.want)
		}
	}
	if d, err := l.Allow(context.Background(), "carol", 1); err != nil || !d.Allowed {
		t.Fatalf("Allow: %+v, %v", d, err)
	}
}

func TestLimiterSetLimit(t *testing.T) {
	l, fc := newTestLimiter(t, Options{Limit: Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Second}})
	ctx := context.Background()
	for range 10 {
		if _, err := l.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A larger burst does not refill the bucket: the state is kept.
	if err := l.SetLimit(Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Second, Burst: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx); err == nil {
		t.Fatal("SetLimit reset the bucket")
	}
	fc.Advance(time.Second)
	d, err := l.Allow(ctx, "", 0)
	if err != nil || d.Remaining != 10 || d.Limit != 100 {
		t.Fatalf("after one second: %+v, %v; want 10 of 100", d, err)
	}
	if err := l.SetLimit(Limit{}); !errors.Is(err, ErrInvalidLimit) || l.Limit().Burst != 100 {
		t.Fatalf("invalid SetLimit: %v, limit now %+v", err, l.Limit())
	}
	if _, err := New(Options{}); !errors.Is(err, ErrInvalidLimit) {
		t.Fatalf("New with the zero limit: %v", err)
	}
}

// failingStore fails every request with err.
type failingStore struct{ err error }

func (f failingStore) AllowN(context.Context, string, Limit, int) (Decision, error) {
	return Decision{}, f.err
}

func TestLimiterOnError(t *testing.T) {
	outage := errors.New("connection refused")
	lim := Limit{Limit: 1, Period: time.Second}
	tests := []struct {
		name    string
		policy  ErrorPolicy
		err     error
		admit   bool
		wantErr error
	}{
		{"fail open", FailOpen, outage, true, nil},
		{"fail closed", FailClosed, outage, false, outage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(Options{Limit: lim, Store: failingStore{tt.err}, OnError: tt.policy})
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.Acquire(context.Background())
			if (err == nil) != tt.admit {
				t.Fatalf("got %v, want admitted %v", err, tt.admit)
			}
			if tt.wantErr != nil && (!errors.Is(err, tt.wantErr) || !errors.Is(err, sluice.ErrRejected)) {
				t.Fatalf("got %v, want a rejection wrapping %v", err, tt.wantErr)
			}
		})
	}
}

// TestLimiterInGuard runs a limiter in a Guard: rejected calls do not run.
func TestLimiterInGuard(t *testing.T) {
	l, _ := newTestLimiter(t, Options{Limit: Limit{Limit: 3, Period: time.Minute}})
	g := sluice.New(l)
	var ran atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				_, _ = sluice.Do(context.Background(), g, func(context.Context) (int, error) {
					ran.Add(1)
					return 0, nil
				})
			}
		})
	}
	wg.Wait()
	if ran.Load() != 3 {
		t.Fatalf("%d calls ran, want 3", ran.Load())
	}
	r := l.Run(context.Background(), func(context.Context) sluice.Result {
		t.Fatal("ran after the limit")
		return sluice.Result{}
	})
	if r.Class != sluice.Dropped || !errors.Is(r.Err, sluice.ErrRejected) {
		t.Fatalf("Run: %+v", r)
	}
}

func TestLocal(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	x, err := NewLocal(Limit{Limit: 10, Period: time.Second, Burst: 5}, LocalOptions{Name: "hot", Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if x.Allow() {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 5 {
		t.Fatalf("admitted %d at one instant, want exactly the burst 5", admitted.Load())
	}
	_, err = x.Acquire(context.Background())
	if d, ok := sluice.RetryAfter(err); !errors.Is(err, sluice.ErrRejected) || !ok || d != 100*time.Millisecond {
		t.Fatalf("Acquire: %v (retry after %v)", err, d)
	}
	fc.Advance(250 * time.Millisecond)
	if d := x.AllowN(3); d.Allowed || d.Remaining != 2 || d.RetryAfter != 50*time.Millisecond {
		t.Fatalf("AllowN(3) after 250ms: %+v", d)
	}
	if d := x.AllowN(2); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("AllowN(2) after 250ms: %+v", d)
	}
	// SetLimit keeps the debt, 450ms: at 100 per second with a burst of 60
	// (600ms), 150ms are left, 15 events.
	if err := x.SetLimit(Limit{Algorithm: TokenBucket, Limit: 100, Period: time.Second, Burst: 60}); err != nil {
		t.Fatal(err)
	}
	if d := x.AllowN(0); d.Remaining != 15 || x.Limit().Burst != 60 {
		t.Fatalf("after SetLimit: %+v", d)
	}
	if err := x.SetLimit(Limit{Algorithm: FixedWindow, Limit: 1, Period: time.Second}); !errors.Is(err, ErrInvalidLimit) {
		t.Fatalf("window algorithm: %v", err)
	}
	if _, err := NewLocal(Limit{}, LocalOptions{}); !errors.Is(err, ErrInvalidLimit) {
		t.Fatalf("zero limit: %v", err)
	}
}

// TestLocalMatchesMemory checks that the lock-free limiter and the GCRA of
// the Memory store make the same decisions.
func TestLocalMatchesMemory(t *testing.T) {
	for _, base := range propertyLimits {
		l := base
		l.Algorithm = GCRA
		reqs := arrivals(3, 500, l)
		x, err := NewLocal(l, LocalOptions{Clock: clock.NewFake(time.Time{})})
		if err != nil {
			t.Fatal(err)
		}
		x.tat.Store(reqs[0].at)
		want := run(t, l, reqs)
		for i, r := range reqs {
			if got := x.AllowNAt(r.at, r.n); got != want[i] {
				t.Fatalf("%+v request %d: Local %+v, Memory %+v", l, i, got, want[i])
			}
		}
	}
}

// keyStore is a Memory store that records the length of the longest key
// it was handed.
type keyStore struct {
	*Memory
	longest atomic.Int64
}

func (s *keyStore) AllowN(ctx context.Context, key string, l Limit, n int) (Decision, error) {
	if n := int64(len(key)); n > s.longest.Load() {
		s.longest.Store(n)
	}
	return s.Memory.AllowN(ctx, key, l, n)
}

// TestLimiterKeySize checks that a Limiter hands its Store no key longer
// than MaxKeyLen+1 bytes, through Allow and Acquire, while keys that
// differ, however long and however alike, keep states of their own, and a
// key of MaxKeyLen bytes is kept as it is. (Keys were kept whole: a Memory
// store bounded in keys held up to MaxKeys times the longest key a client
// sent.)
func TestLimiterKeySize(t *testing.T) {
	store := &keyStore{Memory: NewMemory(MemoryOptions{Clock: clock.NewFake(time.Time{})})}
	l, _ := newTestLimiter(t, Options{Store: store, Limit: Limit{Limit: 1, Period: time.Hour}})
	long := strings.Repeat("k", 1<<20)
	keys := []string{long, long[1:] + "x", long + "k", long[:MaxKeyLen+1], long[:MaxKeyLen+1-64] + strings.Repeat("0", 64)}
	ctx := context.Background()
	for i, key := range keys {
		if d, err := l.Allow(ctx, key, 1); err != nil || !d.Allowed {
			t.Errorf("key %d, first event: %+v, %v; want it admitted (a state of its own)", i, d, err)
		}
		if _, err := l.Acquire(WithKey(ctx, key)); err == nil {
			t.Errorf("key %d, second event: admitted, want it limited", i)
		}
	}
	if n := store.longest.Load(); n > MaxKeyLen+1 {
		t.Errorf("the store was handed a key of %d bytes, want at most %d", n, MaxKeyLen+1)
	}
	short := long[:MaxKeyLen]
	if storeKey(short) != short {
		t.Errorf("a key of MaxKeyLen bytes was not kept as it is")
	}
}
