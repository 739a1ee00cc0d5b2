package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestRejectionError(t *testing.T) {
	cases := []struct {
		r    sluice.Rejection
		want string
	}{
		{sluice.Rejection{Reason: sluice.RateLimited}, "sluice: rejected: rate_limited"},
		{sluice.Rejection{Reason: sluice.CircuitOpen, Policy: "db"}, `sluice: rejected: circuit_open (policy "db")`},
		{sluice.Rejection{Reason: sluice.Overloaded, RetryAfter: time.Second}, "sluice: rejected: overloaded (retry after 1s)"},
		{sluice.Rejection{Reason: sluice.CircuitOpen, Policy: "db", RetryAfter: 5 * time.Second}, `sluice: rejected: circuit_open (policy "db", retry after 5s)`},
	}
	for _, tc := range cases {
		if got := tc.r.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestRejectionMatchesErrRejectedThroughWrapping(t *testing.T) {
	var err error = &sluice.Rejection{Reason: sluice.RateLimited, RetryAfter: 2 * time.Second}
	wrapped := fmt.Errorf("calling upstream: %w", err)
	if !errors.Is(wrapped, sluice.ErrRejected) {
		t.Fatal("wrapped rejection does not match ErrRejected")
	}
	var r *sluice.Rejection
	if !errors.As(wrapped, &r) || r.Reason != sluice.RateLimited {
		t.Fatal("errors.As does not find the rejection")
	}
	if d, ok := sluice.RetryAfter(wrapped); !ok || d != 2*time.Second {
		t.Fatalf("RetryAfter = %v, %v", d, ok)
	}
	joined := errors.Join(errors.New("other"), wrapped)
	if d, ok := sluice.RetryAfter(joined); !ok || d != 2*time.Second {
		t.Fatalf("RetryAfter(joined) = %v, %v", d, ok)
	}
	if _, ok := sluice.RetryAfter(errors.New("plain")); ok {
		t.Fatal("RetryAfter found a hint in a plain error")
	}
}

func TestErrTimeoutIsDeadlineExceeded(t *testing.T) {
	if !errors.Is(sluice.ErrTimeout, context.DeadlineExceeded) {
		t.Fatal("ErrTimeout does not match context.DeadlineExceeded")
	}
	if errors.Is(sluice.ErrTimeout, sluice.ErrRejected) {
		t.Fatal("a timeout is not a rejection")
	}
}

func TestClassString(t *testing.T) {
	for c, want := range map[sluice.Class]string{sluice.Success: "success", sluice.Failure: "failure", sluice.Ignored: "ignored", sluice.Dropped: "dropped", 9: "unknown"} {
		if c.String() != want {
			t.Errorf("%d.String() = %q, want %q", c, c.String(), want)
		}
	}
	if !sluice.Success.Ran() || !sluice.Failure.Ran() || sluice.Ignored.Ran() || sluice.Dropped.Ran() {
		t.Fatal("Ran is wrong")
	}
}
