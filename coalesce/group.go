// Package coalesce merges concurrent calls for the same key into one call
// whose result every caller shares ("single-flight").
//
// Group is the building block, like golang.org/x/sync/singleflight but
// generic, context-aware and with counters:
//
//   - A caller whose context ends stops waiting at once and gets ctx.Err(),
//     without cancelling the call for the callers still waiting.
//   - The call runs in its own goroutine with a context detached from every
//     caller: it keeps the first caller's values (context.WithoutCancel) and
//     is cancelled only when the last waiting caller has left.
//   - A panic or runtime.Goexit in the function reaches every waiter as an
//     error (*PanicError or ErrGoexit); no waiter panics.
//
// Policy adapts a Group to a sluice.Policy so that coalescing can be a stage
// of a sluice.Guard, keyed by a function of the call's context.
package coalesce

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// ErrGoexit is the error every waiter gets when the function called
// runtime.Goexit (as testing.T.FailNow does) instead of returning.
var ErrGoexit = errors.New("coalesce: function called runtime.Goexit")

// PanicError is the error every waiter gets when the function panicked. It
// carries the value given to panic and the stack of the goroutine that ran
// the function, taken when the panic was recovered.
//
// Design note: the function runs in a goroutine of its own (so that any
// waiter, the first included, can stop waiting when its context ends), so
// there is no caller whose stack the panic belongs to. Rather than re-panic
// in one waiter and not the others, every waiter gets the same *PanicError;
// a caller that wants the crash can re-panic with it.
type PanicError struct {
	// Value is the value the function passed to panic.
	Value any
	// Stack is the stack trace of the panicking goroutine.
	Stack []byte
}

// Error returns the panic value and the stack.
func (p *PanicError) Error() string {
	return fmt.Sprintf("coalesce: function panicked: %v\n\n%s", p.Value, p.Stack)
}

// Unwrap returns the panic value if it is an error, so that errors.Is and
// errors.As see through a panic(err).
func (p *PanicError) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

// Stats counts what a Group has done since it was created.
type Stats struct {
	// Calls is how many times a function was called: one per flight.
	Calls uint64
	// Shared is how many Do calls joined a flight already under way instead
	// of starting one.
	Shared uint64
	// Abandoned is how many flights were cancelled because every waiter
	// left before the function returned.
	Abandoned uint64
}

// Group merges concurrent Do calls that have the same key. The zero value is
// ready to use; a Group must not be copied after first use. It is safe for
// concurrent use.
type Group[K comparable, V any] struct {
	mu sync.Mutex       // protects m and the waiters, joined and finished fields of every flight
	m  map[K]*flight[V] // flights under way that new callers may join

	calls, shared, abandoned atomic.Uint64 // the counters of Stats
}

// flight is one call of a function and the callers waiting for it.
type flight[V any] struct {
	done   chan struct{}      // closed when val and err are set
	cancel context.CancelFunc // cancels the function's context
	val    V                  // written before done is closed
	err    error              // written before done is closed

	waiters  int  // callers still waiting; protected by Group.mu
	joined   int  // callers that joined after the first; protected by Group.mu
	finished bool // the function has returned; protected by Group.mu
}

// Do calls fn once for all concurrent callers that pass the same key and
// returns its result to each of them. shared reports whether the result was
// delivered to, or awaited by, more than one caller.
//
// fn runs in its own goroutine with a context that carries ctx's values but
// not its cancellation or deadline. If ctx ends before fn returns, Do returns
// at once with ctx.Err(); fn goes on for the other waiters, and its context
// is cancelled when the last waiter has left. A ctx that is already done
// returns its error without calling fn.
//
// If fn panics, every waiter gets a *PanicError; if it calls runtime.Goexit,
// every waiter gets ErrGoexit. The value v is given to every waiter as is:
// it must be safe to share (immutable, or safe for concurrent use).
func (g *Group[K, V]) Do(ctx context.Context, key K, fn func(ctx context.Context) (V, error)) (v V, err error, shared bool) {
	if err := ctx.Err(); err != nil {
		return v, err, false
	}
	g.mu.Lock()
	if g.m == nil {
		g.m = make(map[K]*flight[V])
	}
	f, ok := g.m[key]
	if ok {
		f.waiters++
		f.joined++
		g.mu.Unlock()
		g.shared.Add(1)
		return g.wait(ctx, key, f)
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f = &flight[V]{done: make(chan struct{}), cancel: cancel, waiters: 1}
	g.m[key] = f
	g.mu.Unlock()
	g.calls.Add(1)
	go g.run(fctx, key, f, fn)
	return g.wait(ctx, key, f)
}

// wait waits for f to finish or ctx to end, whichever comes first.
func (g *Group[K, V]) wait(ctx context.Context, key K, f *flight[V]) (v V, err error, shared bool) {
	select {
	case <-f.done:
		return f.val, f.err, f.joined > 0
	case <-ctx.Done():
	}
	g.mu.Lock()
	if f.finished {
		// The function returned while ctx was ending: the result is there.
		g.mu.Unlock()
		<-f.done
		return f.val, f.err, f.joined > 0
	}
	f.waiters--
	shared = f.joined > 0
	abandon := f.waiters == 0
	if abandon && g.m[key] == f {
		delete(g.m, key)
	}
	g.mu.Unlock()
	if abandon {
		g.abandoned.Add(1)
		f.cancel()
	}
	return v, ctx.Err(), shared
}

// run calls fn and publishes its result, turning a panic or a Goexit into an
// error for the waiters.
func (g *Group[K, V]) run(ctx context.Context, key K, f *flight[V], fn func(context.Context) (V, error)) {
	returned := false
	defer func() {
		if !returned {
			// recover returns nil only for runtime.Goexit: since Go 1.21
			// panic(nil) panics with a *runtime.PanicNilError.
			if r := recover(); r != nil {
				f.err = &PanicError{Value: r, Stack: debug.Stack()}
			} else {
				f.err = ErrGoexit
			}
		}
		g.mu.Lock()
		f.finished = true
		if g.m[key] == f {
			delete(g.m, key)
		}
		g.mu.Unlock()
		close(f.done)
		f.cancel()
	}()
	f.val, f.err = fn(ctx)
	returned = true
}

// Forget makes the next Do for key start a new call instead of joining the
// one under way. Callers already waiting keep waiting for the old call.
func (g *Group[K, V]) Forget(key K) {
	g.mu.Lock()
	delete(g.m, key)
	g.mu.Unlock()
}

// Stats returns the group's counters. Each counter is read atomically; the
// three are not a consistent snapshot while calls are under way.
func (g *Group[K, V]) Stats() Stats {
	return Stats{
		Calls:     g.calls.Load(),
		Shared:    g.shared.Load(),
		Abandoned: g.abandoned.Load(),
	}
}
