package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
)

func TestBeginEnd(t *testing.T) {
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name string
		err  error
		want sluice.Class
	}{
		{"success", nil, sluice.Success},
		{"failure", errBoom, sluice.Failure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			a := &recorder{name: "a", log: &log}
			b := &recorder{name: "b", log: &log}
			fc := clock.NewFake(time.Time{})
			g := sluice.New(a, b).WithClock(fc)
			adm, err := g.Begin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			fc.Advance(25 * time.Millisecond) // the call runs elsewhere meanwhile
			adm.End(context.Background(), tc.err)
			adm.End(context.Background(), tc.err) // a second End does nothing
			want := []string{"acquire a", "acquire b", "done a " + tc.want.String(), "done b " + tc.want.String()}
			if fmt.Sprint(log) != fmt.Sprint(want) {
				t.Fatalf("log = %v, want %v", log, want)
			}
			if o := a.outcomes[0]; o.Latency != 25*time.Millisecond || o.Err != tc.err {
				t.Fatalf("outcome = %+v, want latency 25ms and err %v", o, tc.err)
			}
		})
	}
}

func TestBeginRejectionDropsOuterPermits(t *testing.T) {
	var log []string
	rej := &sluice.Rejection{Reason: sluice.Overloaded, Policy: "pool"}
	a := &recorder{name: "a", log: &log}
	b := &recorder{name: "b", reject: rej, log: &log}
	adm, err := sluice.New(a, b).Begin(context.Background())
	if err != error(rej) {
		t.Fatalf("err = %v, want the rejection", err)
	}
	adm.End(context.Background(), nil) // the zero Admission: nothing to release
	want := []string{"acquire a", "acquire b", "done a dropped"}
	if fmt.Sprint(log) != fmt.Sprint(want) {
		t.Fatalf("log = %v, want %v", log, want)
	}
}

func TestBeginNeedsAdmissionPolicies(t *testing.T) {
	if _, err := sluice.New(&recorder{name: "a"}, passthrough{}).Begin(context.Background()); !errors.Is(err, sluice.ErrNotAdmissionOnly) {
		t.Fatalf("err = %v, want ErrNotAdmissionOnly", err)
	}
	for _, g := range []*sluice.Guard{nil, sluice.New()} {
		adm, err := g.Begin(context.Background())
		if err != nil {
			t.Fatalf("empty guard: %v", err)
		}
		adm.End(context.Background(), nil)
	}
}

func TestBeginEndAllocatesNothing(t *testing.T) {
	g := sluice.New(nopAdmitter{}, nopAdmitter{})
	if n := testing.AllocsPerRun(100, func() {
		adm, _ := g.Begin(context.Background())
		adm.End(context.Background(), nil)
	}); n != 0 {
		t.Fatalf("%v allocations per Begin/End, want 0", n)
	}
}
