package httpguard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/retry"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httpguard"
)

// A request is sent more than once only when it may be (RFC 9110, section
// 9.2.2: an idempotent method, or an Idempotency-Key header): a POST that
// reached the upstream is never sent again, and its caller gets the
// upstream's answer.
func TestTransportRetriesOnlyIdempotentRequests(t *testing.T) {
	tests := []struct {
		method string
		key    string // Idempotency-Key; "" for none
		body   string
		sends  int // requests the upstream must get
	}{
		{"GET", "", "", 3},
		{"HEAD", "", "", 3},
		{"OPTIONS", "", "", 3},
		{"PUT", "", "payload", 3},
		{"DELETE", "", "", 3},
		{"TRACE", "", "", 3},
		{"POST", "", "payload", 1},
		{"POST", "", "", 1},
		{"PATCH", "", "payload", 1},
		{"POST", "order-17", "payload", 3},
		{"PATCH", "order-17", "payload", 3},
	}
	for _, tt := range tests {
		t.Run(tt.method+" key="+tt.key, func(t *testing.T) {
			up := newUpstream(t, 503)
			rec := newRecorder()
			c := client(t, sluice.New(retryFailures{max: 3}, rec), httpguard.Options{}, nil)
			req, _ := http.NewRequest(tt.method, up.URL, strings.NewReader(tt.body))
			if tt.key != "" {
				req.Header.Set("Idempotency-Key", tt.key)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if resp.StatusCode != 503 {
				t.Errorf("status %d, want the upstream's 503", resp.StatusCode)
			}
			if got := len(up.received()); got != tt.sends {
				t.Errorf("upstream got %d requests, want %d", got, tt.sends)
			}
			for i, b := range up.received() {
				if b != tt.body {
					t.Errorf("attempt %d sent %q, want %q", i+1, b, tt.body)
				}
			}
		})
	}
}

// A POST that never reached the upstream (no connection could be made) may
// be sent again: nothing was sent.
func TestTransportRetriesPostNeverSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rec := newRecorder()
	c := client(t, sluice.New(retryFailures{max: 3}, rec), httpguard.Options{}, nil)
	resp, err := c.Post("http://"+addr, "text/plain", strings.NewReader("payload"))
	if err == nil {
		resp.Body.Close()
		t.Fatal("no error from an unreachable upstream")
	}
	if got := rec.classes(); !equalClasses(got, []sluice.Class{sluice.Failure, sluice.Failure, sluice.Failure}) {
		t.Errorf("classes = %v, want three attempts that failed to connect", got)
	}
}

// With sluice's retry policy and NotRetryable as its AbortIf, a POST's
// failure is returned at once (no retry started, no budget spent), while a
// GET is retried.
func TestTransportNotRetryableAbortsRetry(t *testing.T) {
	for _, tt := range []struct {
		method  string
		body    io.Reader
		retries uint64
		sends   int
	}{
		{"POST", strings.NewReader("x"), 0, 1},
		{"GET", nil, 2, 3},
	} {
		t.Run(tt.method, func(t *testing.T) {
			up := newUpstream(t, 503)
			rt, err := retry.New(retry.Options{
				MaxAttempts: 3, Backoff: retry.Constant(0), AbortIf: httpguard.NotRetryable,
				Clock: clock.NewFake(time.Time{}), NoBudget: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			c := client(t, sluice.New(rt), httpguard.Options{}, nil)
			req, _ := http.NewRequest(tt.method, up.URL, tt.body)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if resp.StatusCode != 503 {
				t.Errorf("status %d, want 503", resp.StatusCode)
			}
			if got := rt.Stats().Retries; got != tt.retries {
				t.Errorf("%d retries, want %d", got, tt.retries)
			}
			if got := len(up.received()); got != tt.sends {
				t.Errorf("upstream got %d requests, want %d", got, tt.sends)
			}
		})
	}
}

// A handler that ran is never run again, and its attempt says so.
func TestMiddlewareAttemptIsNotRetryable(t *testing.T) {
	rec := newRecorder()
	h := httpguard.Middleware(sluice.New(rec), httpguard.Options{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	o := rec.outcome(0)
	if o.Class != sluice.Failure || !httpguard.NotRetryable(sluice.Result{Outcome: o}) {
		t.Errorf("outcome %v %v: want a Failure that NotRetryable matches", o.Class, o.Err)
	}
	var se *httpguard.StatusError
	if !errors.As(o.Err, &se) || se.StatusCode != 503 {
		t.Errorf("outcome error %v does not carry the 503", o.Err)
	}
}

// RetryIf retries what the gateway retries by default: a failure to
// connect, 502, 503 and 504; not a 500 or a 429, and never a POST that was
// sent.
func TestTransportRetryIfAsGateway(t *testing.T) {
	for _, tt := range []struct {
		method string
		status int
		sends  int
	}{
		{"GET", 500, 1}, {"GET", 429, 1}, {"GET", 502, 3}, {"GET", 503, 3}, {"GET", 504, 3}, {"POST", 503, 1},
	} {
		t.Run(fmt.Sprint(tt.method, tt.status), func(t *testing.T) {
			up := newUpstream(t, tt.status)
			rt, err := retry.New(retry.Options{Backoff: retry.Constant(0), RetryIf: httpguard.RetryIf, NoBudget: true})
			if err != nil {
				t.Fatal(err)
			}
			c := client(t, sluice.New(rt), httpguard.Options{}, nil)
			req, _ := http.NewRequest(tt.method, up.URL, nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if got := len(up.received()); got != tt.sends || resp.StatusCode != tt.status {
				t.Errorf("upstream got %d requests (answer %d), want %d (%d)", got, resp.StatusCode, tt.sends, tt.status)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		rec := newRecorder()
		rt, err := retry.New(retry.Options{Backoff: retry.Constant(0), RetryIf: httpguard.RetryIf, NoBudget: true})
		if err != nil {
			t.Fatal(err)
		}
		c := client(t, sluice.New(rt, rec), httpguard.Options{}, nil)
		if resp, err := c.Post("http://"+addr, "text/plain", strings.NewReader("x")); err == nil {
			resp.Body.Close()
			t.Fatal("no error")
		}
		if n := len(rec.classes()); n != 3 {
			t.Errorf("%d attempts, want 3", n)
		}
	})
}

// hedgeWhileRunning runs a second attempt while the first is in flight, as
// a hedge does: started is closed once the first reached the upstream.
type hedgeWhileRunning struct{ started <-chan struct{} }

func (h hedgeWhileRunning) Run(ctx context.Context, next sluice.Call) sluice.Result {
	first := make(chan sluice.Result, 1)
	go func() { first <- next(ctx) }()
	<-h.started
	second := next(ctx)
	r := <-first
	if second.Class == sluice.Success {
		return second
	}
	return r
}

// A hedge cannot send a POST twice either: the attempt started while the
// first may be reaching the upstream is refused.
func TestTransportHedgeDoesNotDuplicatePost(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		once.Do(func() { close(started) })
		<-release
	}))
	defer srv.Close()
	rec := newRecorder()
	c := client(t, sluice.New(hedgeWhileRunning{started}, rec), httpguard.Options{}, nil)
	done := make(chan error, 1)
	go func() {
		resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("order"))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	o := <-rec.ch // the second attempt, refused while the first waits
	if o.Class != sluice.Dropped || !errors.Is(o.Err, httpguard.ErrNotReplayable) {
		t.Errorf("second attempt: %v %v, want Dropped with ErrNotReplayable", o.Class, o.Err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("upstream got %d requests, want 1", n)
	}
}
