package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice"
)

// recheckable is a recorder that is a Rechecker: its permits stand while
// stands is true, and a refusal set after the first Acquire rejects
// re-acquisition.
type recheckable struct {
	recorder
	stands  bool
	refuse  error // returned by every Acquire after the first
	granted int
}

func (r *recheckable) Acquire(ctx context.Context) (sluice.Permit, error) {
	if r.granted++; r.granted > 1 {
		r.reject = r.refuse
	}
	return r.recorder.Acquire(ctx)
}

func (r *recheckable) Stands(token uint64) bool {
	*r.log = append(*r.log, fmt.Sprintf("stands %s %d", r.name, token))
	return r.stands
}

func (r *recheckable) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, r, next)
}

// waiting is a recorder whose permits are granted after a wait when waited
// is true.
type waiting struct {
	recorder
	waited bool
}

func (w *waiting) Acquire(ctx context.Context) (sluice.Permit, error) {
	p, err := w.recorder.Acquire(ctx)
	if err == nil && w.waited {
		p = p.AfterWait()
	}
	return p, err
}

func (w *waiting) Run(ctx context.Context, next sluice.Call) sluice.Result {
	return sluice.RunAdmitted(ctx, w, next)
}

// inner is a flow policy that only runs the rest of the chain.
type inner struct{}

func (inner) Run(ctx context.Context, next sluice.Call) sluice.Result { return next(ctx) }

// TestRecheckAfterWait checks that a permit granted after a wait makes the
// Guard ask the Recheckers before it whether their permits stand, and
// re-acquire those that do not, rejecting the call (its waited-for permit
// released as Dropped) if that fails; and that a permit granted at once
// re-checks nothing. Through Do, Do with a flow policy, and Begin.
func TestRecheckAfterWait(t *testing.T) {
	errOpen := errors.New("open")
	cases := []struct {
		name         string
		waited       bool
		stands       bool
		refuse       error
		want         []string
		wantRejected bool
	}{
		{"no wait", false, false, nil, []string{"acquire a", "acquire q", "call", "done a success", "done q success"}, false},
		{"stands", true, true, nil, []string{"acquire a", "acquire q", "stands a 7", "call", "done a success", "done q success"}, false},
		{"stale, admitted again", true, false, nil, []string{"acquire a", "acquire q", "stands a 7", "done a dropped", "acquire a",
			"call", "done a success", "done q success"}, false},
		{"stale, refused", true, false, errOpen, []string{"acquire a", "acquire q", "stands a 7", "done a dropped", "acquire a",
			"done q dropped"}, true},
	}
	for _, tc := range cases {
		for _, mode := range []string{"do", "flow", "begin"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				var log []string
				a := &recheckable{recorder: recorder{name: "a", log: &log}, stands: tc.stands, refuse: tc.refuse}
				q := &waiting{recorder: recorder{name: "q", log: &log}, waited: tc.waited}
				policies := []sluice.Policy{a, q}
				if mode == "flow" {
					policies = append(policies, inner{})
				}
				g := sluice.New(policies...)
				call := func(context.Context) (int, error) {
					log = append(log, "call")
					return 1, nil
				}
				var err error
				if mode == "begin" {
					var adm sluice.Admission
					if adm, err = g.Begin(context.Background()); err == nil {
						_, err = call(context.Background())
						adm.End(context.Background(), err)
					}
				} else {
					_, err = sluice.Do(context.Background(), g, call)
				}
				if tc.wantRejected != (err != nil) || err != nil && !errors.Is(err, errOpen) {
					t.Fatalf("err = %v, want rejected %v", err, tc.wantRejected)
				}
				if fmt.Sprint(log) != fmt.Sprint(tc.want) {
					t.Fatalf("log = %v\nwant  %v", log, tc.want)
				}
			})
		}
	}
}
