package httpguard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httpguard"
)

func TestStatusFor(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	read := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	tests := []struct {
		name   string
		err    error
		status int
		reason string
	}{
		{"nil", nil, 200, ""},
		{"rate limited", &sluice.Rejection{Reason: sluice.RateLimited}, 429, "rate_limited"},
		{"circuit open", &sluice.Rejection{Reason: sluice.CircuitOpen}, 503, "circuit_open"},
		{"overloaded", &sluice.Rejection{Reason: sluice.Overloaded}, 503, "overloaded"},
		{"other reason", &sluice.Rejection{Reason: "draining"}, 503, "draining"},
		{"no reason", &sluice.Rejection{}, 503, "rejected"},
		{"wrapped rejection", fmt.Errorf("route api: %w", &sluice.Rejection{Reason: sluice.RateLimited}), 429, "rate_limited"},
		{"rejected sentinel", fmt.Errorf("custom: %w", sluice.ErrRejected), 503, "rejected"},
		{"timeout", sluice.ErrTimeout, 504, "timeout"},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), 504, "timeout"},
		{"net timeout", os.ErrDeadlineExceeded, 504, "timeout"},
		{"cancelled", context.Canceled, 499, "client_closed_request"},
		{"dial refused", dial, 502, "upstream_unreachable"},
		{"refused errno", syscall.ECONNREFUSED, 502, "upstream_unreachable"},
		{"dns", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, 502, "upstream_unreachable"},
		{"reset", read, 502, "upstream_error"},
		{"eof", fmt.Errorf("transport: %w", io.ErrUnexpectedEOF), 502, "upstream_error"},
		{"status error", &httpguard.StatusError{StatusCode: 503}, 503, "upstream_status"},
		{"other", errors.New("boom"), 500, "internal_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := httpguard.StatusFor(tt.err); got != tt.status {
				t.Errorf("StatusFor(%v) = %d, want %d", tt.err, got, tt.status)
			}
			if got := httpguard.ReasonFor(tt.err); got != tt.reason {
				t.Errorf("ReasonFor(%v) = %q, want %q", tt.err, got, tt.reason)
			}
		})
	}
}

func TestFormatRetryAfter(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "1"},
		{0, "1"},
		{time.Nanosecond, "1"},
		{time.Second, "1"},
		{time.Second + time.Nanosecond, "2"},
		{1500 * time.Millisecond, "2"},
		{2 * time.Second, "2"},
		{59*time.Second + time.Millisecond, "60"},
		{time.Hour, "3600"},
	}
	for _, tt := range tests {
		if got := httpguard.FormatRetryAfter(tt.d); got != tt.want {
			t.Errorf("FormatRetryAfter(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"120", 120 * time.Second, true},
		{" 5 ", 5 * time.Second, true},
		{"99999999999999999999", time.Duration(1<<63-1) / time.Second * time.Second, true},
		{"Sat, 01 Mar 2025 12:00:30 GMT", 30 * time.Second, true},
		{"Saturday, 01-Mar-25 12:01:00 GMT", time.Minute, true},
		{"Sat, 01 Mar 2025 11:00:00 GMT", 0, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		got, ok := httpguard.ParseRetryAfter(tt.v, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

func TestStatusErrorIsRetryAfterHint(t *testing.T) {
	err := fmt.Errorf("call: %w", &httpguard.StatusError{StatusCode: 503, RetryAfter: 3 * time.Second})
	if d, ok := sluice.RetryAfter(err); !ok || d != 3*time.Second {
		t.Errorf("sluice.RetryAfter = %v, %v; want 3s, true", d, ok)
	}
	want := "status 503 Service Unavailable (retry after 3s)"
	if got := errors.Unwrap(err).Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestWriteError(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		status     int
		retryAfter string
		body       string
		rateLimit  string
	}{
		{
			name:       "rate limited",
			err:        &sluice.Rejection{Reason: sluice.RateLimited, RetryAfter: 1500 * time.Millisecond},
			status:     429,
			retryAfter: "2",
			body:       `{"error":"rate_limited","retry_after":2}`,
		},
		{
			name:       "circuit open, sub-second hint",
			err:        &sluice.Rejection{Reason: sluice.CircuitOpen, RetryAfter: time.Millisecond},
			status:     503,
			retryAfter: "1",
			body:       `{"error":"circuit_open","retry_after":1}`,
		},
		{
			// A shed request is always told when to come back, as the
			// gateway tells it.
			name:       "overloaded, no hint",
			err:        &sluice.Rejection{Reason: sluice.Overloaded},
			status:     503,
			retryAfter: "1",
			body:       `{"error":"overloaded","retry_after":1}`,
		},
		{
			name:   "timeout",
			err:    sluice.ErrTimeout,
			status: 504,
			body:   `{"error":"timeout"}`,
		},
		{
			name: "rate limit reporter",
			err: limited{
				Rejection: &sluice.Rejection{Reason: sluice.RateLimited, Policy: "per-ip", RetryAfter: 30 * time.Second},
				limit:     100, remaining: 0, window: time.Minute, reset: 30 * time.Second,
			},
			status:     429,
			retryAfter: "30",
			body:       `{"error":"rate_limited","retry_after":30}`,
			rateLimit:  `"per-ip";r=0;t=30`,
		},
		{
			name:       "header setter wins",
			err:        fmt.Errorf("%w (%w)", &sluice.Rejection{Reason: sluice.RateLimited, RetryAfter: time.Second}, errHeaders{}),
			status:     429,
			retryAfter: "1",
			body:       `{"error":"rate_limited","retry_after":1}`,
			rateLimit:  `"setter";r=1;t=1`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			httpguard.WriteError(rec, tt.err)
			if rec.Code != tt.status {
				t.Errorf("status = %d, want %d", rec.Code, tt.status)
			}
			if got := rec.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.retryAfter)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q", got)
			}
			if got := rec.Body.String(); got != tt.body+"\n" {
				t.Errorf("body = %q, want %q", got, tt.body+"\n")
			}
			if !json.Valid(rec.Body.Bytes()) {
				t.Errorf("body is not JSON: %q", rec.Body.String())
			}
			if got := rec.Header().Get("RateLimit"); got != tt.rateLimit {
				t.Errorf("RateLimit = %q, want %q", got, tt.rateLimit)
			}
		})
	}
}

// errHeaders is an error that sets a RateLimit header itself.
type errHeaders struct{}

func (errHeaders) Error() string { return "limited" }

func (errHeaders) SetHeaders(h http.Header) {
	httpguard.SetRateLimitHeaders(h, "setter", 1, 1, time.Second, time.Second)
}

func TestWriteErrorNil(t *testing.T) {
	rec := httptest.NewRecorder()
	httpguard.WriteError(rec, nil)
	if rec.Body.Len() != 0 || len(rec.Header()) != 0 {
		t.Errorf("WriteError(nil) wrote %d %v %q", rec.Code, rec.Header(), rec.Body.String())
	}
}

func TestSetRateLimitHeaders(t *testing.T) {
	tests := []struct {
		name              string
		policy            string
		limit, remaining  int
		window, reset     time.Duration
		wantPolicy, wantR string
	}{
		{"draft example", "default", 100, 42, time.Minute, 30 * time.Second, `"default";q=100;w=60`, `"default";r=42;t=30`},
		{"empty name", "", 10, 10, time.Second, 0, `"default";q=10;w=1`, `"default";r=10;t=0`},
		{"rounded up", "burst", 5, 3, 1500 * time.Millisecond, 100 * time.Millisecond, `"burst";q=5;w=2`, `"burst";r=3;t=1`},
		{"negatives", "x", -1, -5, time.Minute, -time.Second, `"x";q=0;w=60`, `"x";r=0;t=0`},
		{"no window", "x", 7, 1, 0, time.Second, `"x";q=7`, `"x";r=1;t=1`},
		{"escaped name", "a\"b\\c\nd", 1, 0, time.Second, time.Second, `"a\"b\\cd";q=1;w=1`, `"a\"b\\cd";r=0;t=1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			httpguard.SetRateLimitHeaders(h, tt.policy, tt.limit, tt.remaining, tt.window, tt.reset)
			if got := h.Get("RateLimit-Policy"); got != tt.wantPolicy {
				t.Errorf("RateLimit-Policy = %s, want %s", got, tt.wantPolicy)
			}
			if got := h.Get("RateLimit"); got != tt.wantR {
				t.Errorf("RateLimit = %s, want %s", got, tt.wantR)
			}
		})
	}
}

func TestSetRateLimitHeadersAddsOnePerPolicy(t *testing.T) {
	h := http.Header{}
	httpguard.SetRateLimitHeaders(h, "minute", 100, 99, time.Minute, time.Minute)
	httpguard.SetRateLimitHeaders(h, "day", 1000, 998, 24*time.Hour, time.Hour)
	if got := h.Values("RateLimit-Policy"); len(got) != 2 || got[1] != `"day";q=1000;w=86400` {
		t.Errorf("RateLimit-Policy = %q", got)
	}
	if got := h.Values("RateLimit"); len(got) != 2 || got[0] != `"minute";r=99;t=60` {
		t.Errorf("RateLimit = %q", got)
	}
}

func TestAddHeadersOutsideMiddleware(t *testing.T) {
	if httpguard.AddHeaders(context.Background(), httpguard.RateLimitHeaders{}) {
		t.Error("AddHeaders outside Middleware reported true")
	}
}

func TestWriteErrorEscapesReason(t *testing.T) {
	rec := httptest.NewRecorder()
	httpguard.WriteError(rec, &sluice.Rejection{Reason: "odd \"reason\"\n"})
	var body struct{ Error string }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error != "odd \"reason\"\n" {
		t.Errorf("body = %q: %v", rec.Body.String(), err)
	}
}
