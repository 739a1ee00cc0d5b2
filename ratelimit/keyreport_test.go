package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// WithKeyReport keys calls as WithKey does, and each admission is reported
// with the limiter's name, period and decision; a rejection is not.
func TestWithKeyReport(t *testing.T) {
	l, err := ratelimit.New(ratelimit.Options{
		Name:  "api",
		Limit: ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Limit: 2, Period: time.Minute},
		Clock: clock.NewFake(time.Time{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	type report struct {
		name      string
		period    time.Duration
		remaining int
	}
	var got []report
	ctx := ratelimit.WithKeyReport(context.Background(), "a", func(name string, period time.Duration, d ratelimit.Decision) {
		got = append(got, report{name, period, d.Remaining})
	})
	if k, ok := ratelimit.KeyFrom(ctx); k != "a" || !ok {
		t.Errorf("KeyFrom = %q, %v", k, ok)
	}
	for i, wantErr := range []bool{false, false, true} {
		if _, err := l.Acquire(ctx); (err != nil) != wantErr {
			t.Fatalf("call %d: err = %v", i, err)
		}
	}
	if _, err := l.Acquire(ratelimit.WithKey(context.Background(), "b")); err != nil {
		t.Errorf("key b shares key a's limit: %v", err)
	}
	want := []report{{"api", time.Minute, 1}, {"api", time.Minute, 0}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("reports %v, want %v", got, want)
	}
}
