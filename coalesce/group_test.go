package coalesce

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// waitUntil yields until cond holds. It never measures time: the test's own
// timeout is the only bound.
func waitUntil(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

type result struct {
	v      string
	err    error
	shared bool
}

// held is a function that reports its context on started and returns what
// release sends it, or the context's error.
type held struct {
	started chan context.Context
	release chan func() (string, error)
	calls   sync.WaitGroup // one per call of fn; Done when fn has returned
}

func newHeld() *held {
	return &held{started: make(chan context.Context, 16), release: make(chan func() (string, error))}
}

func (h *held) fn(ctx context.Context) (string, error) {
	h.calls.Add(1)
	defer h.calls.Done()
	h.started <- ctx
	select {
	case f := <-h.release:
		return f()
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func doAsync(ctx context.Context, g *Group[string, string], key string, fn func(context.Context) (string, error)) <-chan result {
	ch := make(chan result, 1)
	go func() {
		v, err, shared := g.Do(ctx, key, fn)
		ch <- result{v, err, shared}
	}()
	return ch
}

func TestManyWaitersOneCall(t *testing.T) {
	var g Group[string, string]
	h := newHeld()
	const n = 10
	first := doAsync(context.Background(), &g, "k", h.fn)
	<-h.started
	var rest []<-chan result
	for range n - 1 {
		rest = append(rest, doAsync(context.Background(), &g, "k", h.fn))
	}
	waitUntil(func() bool { return g.Stats().Shared == n-1 })
	h.release <- func() (string, error) { return "answer", nil }
	for i, ch := range append(rest, first) {
		r := <-ch
		if r.v != "answer" || r.err != nil || !r.shared {
			t.Errorf("caller %d: got %+v, want answer, nil, shared", i, r)
		}
	}
	h.calls.Wait()
	if got, want := g.Stats(), (Stats{Calls: 1, Shared: n - 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestSingleCallerNotShared(t *testing.T) {
	var g Group[string, int]
	v, err, shared := g.Do(context.Background(), "k", func(context.Context) (int, error) { return 7, nil })
	if v != 7 || err != nil || shared {
		t.Fatalf("Do = %v, %v, %v; want 7, nil, false", v, err, shared)
	}
}

func TestWaiterLeavingDoesNotCancelCall(t *testing.T) {
	for _, leaver := range []string{"first", "joiner"} {
		t.Run(leaver+" leaves", func(t *testing.T) {
			var g Group[string, string]
			h := newHeld()
			ctxA, cancelA := context.WithCancel(context.Background())
			defer cancelA()
			ctxB, cancelB := context.WithCancel(context.Background())
			defer cancelB()
			a := doAsync(ctxA, &g, "k", h.fn)
			fctx := <-h.started
			b := doAsync(ctxB, &g, "k", h.fn)
			waitUntil(func() bool { return g.Stats().Shared == 1 })

			leave, leaveCh, stay := cancelA, a, b
			if leaver == "joiner" {
				leave, leaveCh, stay = cancelB, b, a
			}
			leave()
			if r := <-leaveCh; !errors.Is(r.err, context.Canceled) || !r.shared {
				t.Errorf("leaving caller got %+v, want context.Canceled, shared", r)
			}
			if err := fctx.Err(); err != nil {
				t.Fatalf("call context ended (%v) while a caller still waits", err)
			}
			h.release <- func() (string, error) { return "v", nil }
			if r := <-stay; r.v != "v" || r.err != nil || !r.shared {
				t.Errorf("staying caller got %+v, want v, nil, shared", r)
			}
			h.calls.Wait()
			if got := g.Stats().Abandoned; got != 0 {
				t.Errorf("Abandoned = %d, want 0", got)
			}
		})
	}
}

func TestLastWaiterLeavingCancelsCall(t *testing.T) {
	var g Group[string, string]
	h := newHeld()
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	a := doAsync(ctxA, &g, "k", h.fn)
	fctx := <-h.started
	b := doAsync(ctxB, &g, "k", h.fn)
	waitUntil(func() bool { return g.Stats().Shared == 1 })
	cancelA()
	<-a
	cancelB()
	if r := <-b; !errors.Is(r.err, context.Canceled) {
		t.Errorf("last caller got %+v, want context.Canceled", r)
	}
	<-fctx.Done() // the call is cancelled once nobody waits
	h.calls.Wait()
	if got := g.Stats().Abandoned; got != 1 {
		t.Errorf("Abandoned = %d, want 1", got)
	}

	// The abandoned call is no longer joinable: the next caller starts anew.
	c := doAsync(context.Background(), &g, "k", h.fn)
	if err := (<-h.started).Err(); err != nil {
		t.Fatalf("new call starts with a done context: %v", err)
	}
	h.release <- func() (string, error) { return "fresh", nil }
	if r := <-c; r.v != "fresh" || r.err != nil || r.shared {
		t.Errorf("new caller got %+v, want fresh, nil, not shared", r)
	}
	h.calls.Wait()
	if got := g.Stats().Calls; got != 2 {
		t.Errorf("Calls = %d, want 2", got)
	}
}

func TestCallContextKeepsValues(t *testing.T) {
	type ctxKey struct{}
	var g Group[string, string]
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "tenant-1"))
	defer cancel()
	_, _, _ = g.Do(ctx, "k", func(fctx context.Context) (string, error) {
		if got := fctx.Value(ctxKey{}); got != "tenant-1" {
			t.Errorf("value = %v, want tenant-1", got)
		}
		return "", nil
	})
}

func TestContextAlreadyDone(t *testing.T) {
	var g Group[string, string]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err, _ := g.Do(ctx, "k", func(context.Context) (string, error) {
		t.Error("fn called with a done context")
		return "", nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if got := g.Stats().Calls; got != 0 {
		t.Errorf("Calls = %d, want 0", got)
	}
}

var errBoom = errors.New("boom")

// TestEndingsReachEveryWaiter checks that however fn ends — an error, a
// panic, a panic with an error, runtime.Goexit — every waiter sees it.
func TestEndingsReachEveryWaiter(t *testing.T) {
	tests := []struct {
		name  string
		end   func() (string, error)
		check func(t *testing.T, r result)
	}{
		{
			name: "error",
			end:  func() (string, error) { return "partial", errBoom },
			check: func(t *testing.T, r result) {
				if r.v != "partial" || r.err != errBoom {
					t.Errorf("got %+v, want partial, errBoom", r)
				}
			},
		},
		{
			name: "panic",
			end:  func() (string, error) { panic("kaboom") },
			check: func(t *testing.T, r result) {
				var pe *PanicError
				if !errors.As(r.err, &pe) {
					t.Fatalf("err = %v, want *PanicError", r.err)
				}
				if pe.Value != "kaboom" {
					t.Errorf("Value = %v, want kaboom", pe.Value)
				}
				if !strings.Contains(string(pe.Stack), "coalesce.(*held).fn") {
					t.Errorf("Stack does not show the panicking function:\n%s", pe.Stack)
				}
				if !strings.Contains(pe.Error(), "kaboom") {
					t.Errorf("Error() = %q, want it to name the panic value", pe.Error())
				}
			},
		},
		{
			name: "panic with error",
			end:  func() (string, error) { panic(fmt.Errorf("wrapped: %w", errBoom)) },
			check: func(t *testing.T, r result) {
				if !errors.Is(r.err, errBoom) {
					t.Errorf("err = %v, want errors.Is errBoom", r.err)
				}
			},
		},
		{
			name: "panic nil",
			end:  func() (string, error) { panic(nil) },
			check: func(t *testing.T, r result) {
				var pn *runtime.PanicNilError
				if !errors.As(r.err, &pn) {
					t.Errorf("err = %v, want a *PanicError wrapping *runtime.PanicNilError", r.err)
				}
			},
		},
		{
			name: "goexit",
			end:  func() (string, error) { runtime.Goexit(); return "", nil },
			check: func(t *testing.T, r result) {
				if r.err != ErrGoexit {
					t.Errorf("err = %v, want ErrGoexit", r.err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g Group[string, string]
			h := newHeld()
			const n = 3
			chs := []<-chan result{doAsync(context.Background(), &g, "k", h.fn)}
			<-h.started
			for range n - 1 {
				chs = append(chs, doAsync(context.Background(), &g, "k", h.fn))
			}
			waitUntil(func() bool { return g.Stats().Shared == n-1 })
			h.release <- tt.end
			for i, ch := range chs {
				r := <-ch
				if !r.shared {
					t.Errorf("caller %d: shared = false", i)
				}
				tt.check(t, r)
			}
			h.calls.Wait()
			// The key is free again after a panic or a Goexit.
			v, err, _ := g.Do(context.Background(), "k", func(context.Context) (string, error) { return "ok", nil })
			if v != "ok" || err != nil {
				t.Errorf("Do after %s = %q, %v; want ok, nil", tt.name, v, err)
			}
		})
	}
}

func TestKeysAreIndependent(t *testing.T) {
	var g Group[string, string]
	h := newHeld()
	a := doAsync(context.Background(), &g, "a", h.fn)
	<-h.started
	v, err, shared := g.Do(context.Background(), "b", func(context.Context) (string, error) { return "b", nil })
	if v != "b" || err != nil || shared {
		t.Errorf("Do(b) = %q, %v, %v while a is held; want b, nil, false", v, err, shared)
	}
	h.release <- func() (string, error) { return "a", nil }
	if r := <-a; r.v != "a" || r.shared {
		t.Errorf("Do(a) = %+v, want a, not shared", r)
	}
	h.calls.Wait()
	if got, want := g.Stats(), (Stats{Calls: 2}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestForget(t *testing.T) {
	var g Group[string, string]
	h := newHeld()
	old := doAsync(context.Background(), &g, "k", h.fn)
	<-h.started
	g.Forget("k")
	fresh := doAsync(context.Background(), &g, "k", h.fn)
	<-h.started // a second call started instead of joining the first
	h.release <- func() (string, error) { return "one", nil }
	h.release <- func() (string, error) { return "two", nil }
	got := map[string]bool{(<-old).v: true, (<-fresh).v: true}
	if !got["one"] || !got["two"] {
		t.Errorf("results = %v, want one and two", got)
	}
	h.calls.Wait()
	if got := g.Stats().Calls; got != 2 {
		t.Errorf("Calls = %d, want 2", got)
	}
}

func BenchmarkGroupDo(b *testing.B) {
	var g Group[int, int]
	fn := func(context.Context) (int, error) { return 1, nil }
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err, _ := g.Do(ctx, 1, fn); err != nil {
				b.Fatal(err)
			}
		}
	})
}
