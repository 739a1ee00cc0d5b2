package grpcguard_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpcguard"
)

func TestStatusFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want codes.Code
	}{
		{"nil", nil, codes.OK},
		{"rate limited", &sluice.Rejection{Reason: sluice.RateLimited}, codes.ResourceExhausted},
		{"circuit open", &sluice.Rejection{Reason: sluice.CircuitOpen}, codes.Unavailable},
		{"overloaded", fmt.Errorf("wrapped: %w", &sluice.Rejection{Reason: sluice.Overloaded}), codes.Unavailable},
		{"timeout", sluice.ErrTimeout, codes.DeadlineExceeded},
		{"timeout over a status", fmt.Errorf("%w: %w", sluice.ErrTimeout, status.Error(codes.Internal, "x")), codes.DeadlineExceeded},
		{"status", status.Error(codes.NotFound, "x"), codes.NotFound},
		{"wrapped status", fmt.Errorf("call: %w", status.Error(codes.Aborted, "x")), codes.Aborted},
		{"deadline", context.DeadlineExceeded, codes.DeadlineExceeded},
		{"cancelled", context.Canceled, codes.Canceled},
		{"plain", errors.New("boom"), codes.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := grpcguard.StatusFor(tc.err).Code(); got != tc.want {
				t.Errorf("StatusFor: %v, want %v", got, tc.want)
			}
			err := grpcguard.Error(tc.err)
			if got := status.Code(err); got != tc.want {
				t.Errorf("status.Code(Error): %v, want %v", got, tc.want)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("Error(%v) = %v does not match the error it carries", tc.err, err)
			}
		})
	}
}

func TestErrorKeepsRejectionAndStatus(t *testing.T) {
	rej := &sluice.Rejection{Reason: sluice.RateLimited, Policy: "api", RetryAfter: 2 * time.Second}
	err := grpcguard.Error(rej)
	if !errors.Is(err, sluice.ErrRejected) {
		t.Error("Error(rejection) does not match sluice.ErrRejected")
	}
	if d, ok := sluice.RetryAfter(err); !ok || d != 2*time.Second {
		t.Errorf("RetryAfter %v, %v, want 2s", d, ok)
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted || st.Message() != rej.Error() {
		t.Errorf("status %v (%v), want RESOURCE_EXHAUSTED with the rejection's text", st, ok)
	}
	plain := status.Error(codes.NotFound, "x")
	if got := grpcguard.Error(plain); got != plain {
		t.Errorf("Error(status error) = %v, want it unchanged", got)
	}
}

func TestDefaultIsFailure(t *testing.T) {
	failures := map[codes.Code]bool{
		codes.Unknown: true, codes.DeadlineExceeded: true, codes.ResourceExhausted: true,
		codes.Internal: true, codes.Unavailable: true, codes.DataLoss: true,
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if got := grpcguard.DefaultIsFailure(c); got != failures[c] {
			t.Errorf("DefaultIsFailure(%v) = %v, want %v", c, got, failures[c])
		}
	}
}
