package coalesce

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/invalid/invalidtest"
)

type keyCtx struct{}

func withKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx{}, key)
}

// keyFromCtx coalesces calls that carry a key and runs the others alone.
func keyFromCtx(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(keyCtx{}).(string)
	return k, ok
}

func TestNewRequiresKey(t *testing.T) {
	_, err := New(Options{})
	invalidtest.Check(t, err, nil, "Key is required")
}

func TestPolicySharesOneRun(t *testing.T) {
	p, err := New(Options{Key: keyFromCtx})
	if err != nil {
		t.Fatal(err)
	}
	g := sluice.New(p)
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	var runs sync.WaitGroup
	fn := func(ctx context.Context) (string, error) {
		runs.Add(1)
		defer runs.Done()
		started <- struct{}{}
		<-release
		return "shared answer", nil
	}
	const n = 4
	type res struct {
		v   string
		err error
	}
	out := make(chan res, n)
	call := func() {
		v, err := sluice.Do(withKey(context.Background(), "q"), g, fn)
		out <- res{v, err}
	}
	go call()
	<-started
	for range n - 1 {
		go call()
	}
	waitUntil(func() bool { return p.Stats().Shared == n-1 })
	close(release)
	for range n {
		if r := <-out; r.v != "shared answer" || r.err != nil {
			t.Errorf("got %+v, want shared answer", r)
		}
	}
	runs.Wait()
	if got, want := p.Stats(), (Stats{Calls: 1, Shared: n - 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestPolicyWithoutKeyRunsAlone(t *testing.T) {
	p, err := New(Options{Key: keyFromCtx})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for range 3 {
		r := p.Run(context.Background(), func(context.Context) sluice.Result {
			calls++
			return sluice.Result{Value: calls}
		})
		if r.Value != calls {
			t.Errorf("Value = %v, want %d", r.Value, calls)
		}
	}
	if got := p.Stats(); got != (Stats{}) {
		t.Errorf("Stats() = %+v, want zero: uncoalesced calls are not counted", got)
	}
}

func TestPolicyEndings(t *testing.T) {
	tests := []struct {
		name      string
		next      sluice.Call
		cancelled bool
		wantClass sluice.Class
		wantErr   func(error) bool
	}{
		{
			name: "failure passes through",
			next: func(context.Context) sluice.Result {
				return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Failure, Err: errBoom}}
			},
			wantClass: sluice.Failure,
			wantErr:   func(err error) bool { return err == errBoom },
		},
		{
			name:      "panic becomes a failure",
			next:      func(context.Context) sluice.Result { panic("bad") },
			wantClass: sluice.Failure,
			wantErr:   func(err error) bool { var pe *PanicError; return errors.As(err, &pe) && pe.Value == "bad" },
		},
		{
			name: "caller gone is ignored",
			next: func(ctx context.Context) sluice.Result {
				<-ctx.Done() // cancelled once the only caller has left
				return sluice.Result{}
			},
			cancelled: true,
			wantClass: sluice.Ignored,
			wantErr:   func(err error) bool { return errors.Is(err, context.Canceled) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(Options{Key: keyFromCtx})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(withKey(context.Background(), "k"))
			defer cancel()
			returned := make(chan struct{})
			next := func(ctx context.Context) sluice.Result {
				defer close(returned)
				if tt.cancelled {
					cancel()
				}
				return tt.next(ctx)
			}
			r := p.Run(ctx, next)
			if r.Class != tt.wantClass || !tt.wantErr(r.Err) {
				t.Errorf("Run = %v, %v; want class %v", r.Class, r.Err, tt.wantClass)
			}
			<-returned
		})
	}
}

func BenchmarkPolicyRun(b *testing.B) {
	p, err := New(Options{Key: func(context.Context) (string, bool) { return "k", true }})
	if err != nil {
		b.Fatal(err)
	}
	next := func(context.Context) sluice.Result { return sluice.Result{} }
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p.Run(ctx, next)
		}
	})
}
