package answer_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/answer"
)

func TestGRPCClassify(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		name   string
		err    error
		code   codes.Code
		reason string
	}{
		{"nil", nil, codes.OK, ""},
		{"rate limit", &sluice.Rejection{Reason: sluice.RateLimited}, codes.ResourceExhausted, "rate_limited"},
		{"breaker open", fmt.Errorf("call: %w", &sluice.Rejection{Reason: sluice.CircuitOpen}), codes.Unavailable, "circuit_open"},
		{"overload", &sluice.Rejection{Reason: sluice.Overloaded}, codes.Unavailable, "overloaded"},
		{"bare rejection", sluice.ErrRejected, codes.Unavailable, answer.Rejected},
		{"timeout policy", sluice.ErrTimeout, codes.DeadlineExceeded, answer.Timeout},
		{"deadline", context.DeadlineExceeded, codes.DeadlineExceeded, answer.Timeout},
		{"client left", context.Canceled, codes.Canceled, answer.ClientClosed},
		{"unreachable", dial, codes.Unavailable, answer.UpstreamUnreachable},
		{"connection reset", syscall.ECONNRESET, codes.Unavailable, answer.UpstreamError},
		{"grpc status", &answer.GRPCStatusError{Code: codes.Internal}, codes.Internal, answer.UpstreamStatus},
		{"http 404 from a plain target", &answer.StatusError{StatusCode: 404}, codes.Unimplemented, answer.UpstreamStatus},
		{"http 503 from a plain target", &answer.StatusError{StatusCode: 503}, codes.Unavailable, answer.UpstreamStatus},
		{"other", errors.New("boom"), codes.Internal, answer.InternalError},
	}
	for _, c := range cases {
		code, reason := answer.GRPCClassify(c.err)
		if code != c.code || reason != c.reason {
			t.Errorf("%s: GRPCClassify = %v, %q; want %v, %q", c.name, code, reason, c.code, c.reason)
		}
	}
}

func TestPolicyCodeOnlyForPolicies(t *testing.T) {
	for _, err := range []error{nil, errors.New("x"), context.DeadlineExceeded, &answer.GRPCStatusError{Code: codes.Unavailable}} {
		if c, ok := answer.PolicyCode(err); ok {
			t.Errorf("PolicyCode(%v) = %v, true; want false", err, c)
		}
	}
}

func TestIsGRPCFailure(t *testing.T) {
	failures := map[codes.Code]bool{codes.Unknown: true, codes.DeadlineExceeded: true, codes.ResourceExhausted: true,
		codes.Internal: true, codes.Unavailable: true, codes.DataLoss: true}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if got := answer.IsGRPCFailure(c); got != failures[c] {
			t.Errorf("IsGRPCFailure(%v) = %v, want %v", c, got, failures[c])
		}
	}
}

func TestCodeForHTTPStatus(t *testing.T) {
	want := map[int]codes.Code{200: codes.OK, 400: codes.Internal, 401: codes.Unauthenticated, 403: codes.PermissionDenied,
		404: codes.Unimplemented, 429: codes.Unavailable, 502: codes.Unavailable, 503: codes.Unavailable,
		504: codes.Unavailable, 500: codes.Unknown, 418: codes.Unknown}
	for s, c := range want {
		if got := answer.CodeForHTTPStatus(s); got != c {
			t.Errorf("CodeForHTTPStatus(%d) = %v, want %v", s, got, c)
		}
	}
}

func TestGRPCStatusError(t *testing.T) {
	e := &answer.GRPCStatusError{Code: codes.Unavailable, Message: "no backend", RetryAfter: 2 * time.Second}
	if got, want := e.Error(), "grpc status 14 Unavailable: no backend (retry after 2s)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if d, ok := sluice.RetryAfter(fmt.Errorf("attempt: %w", e)); !ok || d != 2*time.Second {
		t.Errorf("sluice.RetryAfter = %v, %v; want 2s, true", d, ok)
	}
	if code, reason := answer.Classify(e); code != 200 || reason != answer.UpstreamStatus {
		t.Errorf("Classify = %d, %q; want 200, %q", code, reason, answer.UpstreamStatus)
	}
}
