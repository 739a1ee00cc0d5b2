package coalesce

import (
	"context"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/invalid"
)

// KeyFunc returns the coalescing key of a call from its context. ok=false
// means the call must not be coalesced: it runs on its own.
type KeyFunc func(ctx context.Context) (key string, ok bool)

// Options configures a Policy.
type Options struct {
	// Key returns the key of a call; calls with the same key that overlap
	// in time share one run of the rest of the chain. Required.
	Key KeyFunc
}

// Policy is a flow policy that merges concurrent calls with the same key
// into one run of the rest of the chain, whose sluice.Result every caller
// gets. It is safe for concurrent use.
//
// The shared Result, and in particular its Value, is handed to every caller
// at once: the Value must be safe to share (immutable, or safe for
// concurrent use). A value that can be consumed only once, such as an
// *http.Response with its body, must not be coalesced.
//
// A caller whose context ends while it waits gets a Result with Class
// Ignored and ctx.Err() as Err; the shared run goes on for the others and is
// cancelled when the last caller has left (see Group.Do). A panic or a
// runtime.Goexit in the rest of the chain reaches every caller as a Failure
// whose Err is a *PanicError or ErrGoexit.
//
// The shared run's context carries the first caller's values but neither its
// cancellation nor its deadline: put a timeout policy inside the coalescing
// stage to bound the run.
type Policy struct {
	key   KeyFunc
	group Group[string, sluice.Result]
}

var _ sluice.Policy = (*Policy)(nil)

// New returns a Policy configured by opts. For unusable opts (a nil Key) it
// returns an error matching sluice.ErrInvalidOptions (errors.Is) that names
// every unusable option.
func New(opts Options) (*Policy, error) {
	ps := invalid.Problems{Prefix: "coalesce: invalid options"}
	if opts.Key == nil {
		ps.Addf("Key is required")
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return &Policy{key: opts.Key}, nil
}

// Run runs next for ctx, or joins a run under way for the same key.
func (p *Policy) Run(ctx context.Context, next sluice.Call) sluice.Result {
	key, ok := p.key(ctx)
	if !ok {
		return next(ctx)
	}
	r, err, _ := p.group.Do(ctx, key, func(ctx context.Context) (sluice.Result, error) {
		return next(ctx), nil
	})
	if err == nil {
		return r
	}
	if _, panicked := err.(*PanicError); panicked || err == ErrGoexit {
		return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Failure, Err: err}}
	}
	// Only the caller's own context ends a wait with an error.
	return sluice.Result{Outcome: sluice.Outcome{Class: sluice.Ignored, Err: err}}
}

// Forget makes the next call for key start a new run instead of joining the
// one under way.
func (p *Policy) Forget(key string) { p.group.Forget(key) }

// Stats returns the policy's counters.
func (p *Policy) Stats() Stats { return p.group.Stats() }
