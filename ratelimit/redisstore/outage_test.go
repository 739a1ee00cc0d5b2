package redisstore

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestOutage kills redis-server while 8 goroutines are making decisions,
// checks what each error mode decides during the outage and that the
// circuit keeps all but a bounded number of calls from the dead server,
// starts the server again on the same port, steps the fake clock until the
// half-open probe closes the circuit, checks that Redis decides again, and
// finally that no connection or goroutine is left behind.
func TestOutage(t *testing.T) {
	for _, mode := range []ErrorMode{FailOpen, FailClosed, Local} {
		t.Run(mode.String(), func(t *testing.T) { testOutage(t, mode) })
	}
}

func testOutage(t *testing.T, mode ErrorMode) {
	const (
		workers   = 8
		threshold = 3
		openFor   = 5 * time.Second
		limit     = 10
		during    = 50 // calls per worker made after the kill
	)
	baseline := runtime.NumGoroutine()
	srv := redistest.StartServer(t)
	fake := clock.NewFake(time.Time{})
	var redisErrors atomic.Int64
	fallback := &countingStore{}
	opts := Options{
		OnError:          mode,
		Clock:            fake,
		FailureThreshold: threshold,
		OpenDuration:     openFor,
		OnRedisError:     func(error) { redisErrors.Add(1) },
	}
	if mode == Local {
		opts.Fallback = fallback
	}
	s, err := Dial([]string{srv.Addr}, opts)
	if err != nil {
		t.Fatal(err)
	}
	l := ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Limit: limit, Period: 24 * time.Hour}

	// Load: each worker makes limit+1 decisions with Redis up, goes on
	// deciding until the kill (Redis stopped, then killed closed), and then
	// makes `during` decisions, each started after the kill. The decisions
	// in between, made while Redis dies and the circuit opens, may go either
	// way. They are bounded in number, and a worker that reaches the bound
	// waits for the kill: they never take the place of decisions made after
	// it. (With the circuit open they make no round trip, so a worker can
	// make thousands of them while the test goroutine, descheduled on a
	// loaded machine, has yet to close killed.)
	const between = 10000
	var (
		killed                   = make(chan struct{})
		ready, done              sync.WaitGroup
		upAdmitted, downAdmitted atomic.Int64
		downRejected, errs       atomic.Int64
		badDecision              atomic.Value
	)
	ready.Add(workers)
	done.Add(workers)
	for range workers {
		go func() {
			defer done.Done()
			ctx := context.Background()
			for range limit + 1 {
				d, err := s.AllowN(ctx, "outage", l, 1)
				switch {
				case err != nil:
					errs.Add(1)
				case d.Allowed:
					upAdmitted.Add(1)
				}
			}
			ready.Done()
		untilKill:
			for range between {
				select {
				case <-killed:
					break untilKill
				default:
				}
				if _, err := s.AllowN(ctx, "outage", l, 1); err != nil {
					errs.Add(1)
				}
			}
			timer := time.NewTimer(2 * time.Minute) // longer than the test goroutine's wait for ready
			defer timer.Stop()
			select {
			case <-killed:
			case <-timer.C:
				t.Errorf("worker: Redis not killed within 2m")
				return
			}
			for range during {
				d, err := s.AllowN(ctx, "outage", l, 1)
				switch {
				case err != nil:
					errs.Add(1)
				case d.Allowed:
					downAdmitted.Add(1)
					if mode == Local && d.Remaining != 7 {
						badDecision.Store(d)
					}
				default:
					downRejected.Add(1)
					if d.RetryAfter <= 0 || d.RetryAfter > openFor {
						badDecision.Store(d)
					}
				}
			}
		}()
	}
	waitGroup(t, &ready, time.Minute, "the workers' decisions with Redis up")
	srv.Stop()
	close(killed)
	waitGroup(t, &done, time.Minute, "the workers' decisions during the outage")

	if n := errs.Load(); n > 0 {
		t.Fatalf("%d calls returned an error", n)
	}
	if d := badDecision.Load(); d != nil {
		t.Fatalf("bad decision during the outage: %+v", d)
	}
	if got := upAdmitted.Load(); got != limit {
		t.Errorf("admitted %d of the %d calls made with Redis up, want %d", got, workers*(limit+1), limit)
	}
	total := int64(workers * during)
	switch mode {
	case FailOpen:
		if downAdmitted.Load() != total {
			t.Errorf("fail open admitted %d of %d during the outage", downAdmitted.Load(), total)
		}
	case FailClosed:
		if downRejected.Load() != total {
			t.Errorf("fail closed rejected %d of %d during the outage", downRejected.Load(), total)
		}
	case Local:
		// Calls made while the kill was under way used the fallback too.
		if calls := fallback.calls.Load(); downAdmitted.Load() != total || calls < total {
			t.Errorf("local: %d admitted, %d fallback calls, want %d", downAdmitted.Load(), calls, total)
		}
	}
	// The circuit opened after `threshold` failures; only calls already on
	// their way to Redis then could fail after it.
	attempts := redisErrors.Load()
	if attempts < threshold || attempts > threshold+2*workers {
		t.Errorf("%d calls reached the dead Redis of %d made; want %d to %d", attempts, total, threshold, threshold+2*workers)
	}
	if !s.CircuitOpen() {
		t.Fatal("circuit not open after the outage")
	}

	// Redis is back, but the circuit stays open until the fake clock says.
	srv.Restart()
	s.AllowN(context.Background(), "probe", l, 1)
	if got := redisErrors.Load(); got != attempts || !s.CircuitOpen() {
		t.Fatalf("open circuit let a call through (%d errors, was %d)", got, attempts)
	}
	// Half-open: one probe per OpenDuration until one succeeds.
	for round := 0; s.CircuitOpen(); round++ {
		if round == 10 {
			t.Fatalf("circuit still open after %d probes", round)
		}
		fake.Advance(openFor)
		s.AllowN(context.Background(), "probe", l, 1)
	}

	// Redis decides again (it restarted empty, so the key is fresh).
	admitted := 0
	for range 3 * limit {
		if allow(t, s, "outage", l, 1).Allowed {
			admitted++
		}
	}
	if admitted != limit {
		t.Errorf("after recovery admitted %d, want %d (decided by Redis)", admitted, limit)
	}

	// Reconnecting through the outage left no extra connection behind, and
	// Close closes them all (the INFO connection itself is one client).
	// Bounded polls: the client's connections and goroutines end shortly
	// after Close.
	if n := connectedClients(t, srv); n < 2 || n > 5 {
		t.Errorf("%d connections to Redis after recovery, want 1 to 4 (and INFO's)", n-1)
	}
	s.Close()
	for i := 0; connectedClients(t, srv) > 1; i++ {
		if i == 500 {
			t.Fatalf("%d connections to Redis after Close", connectedClients(t, srv)-1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.Stop()
	for i := 0; runtime.NumGoroutine() > baseline; i++ {
		if i == 500 {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before the test:\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTimeoutOpensCircuit pauses redis-server (a hung server), checks that
// the call gives up after Options.Timeout on the injected clock and decides
// as the mode says, that the open circuit then keeps calls from Redis
// without arming any timeout, and that a probe after OpenDuration closes it.
func TestTimeoutOpensCircuit(t *testing.T) {
	const (
		timeout = 50 * time.Millisecond
		openFor = 2 * time.Second
	)
	srv := redistest.StartServer(t)
	fake := clock.NewFake(time.Time{})
	redisErrs := make(chan error, 10)
	s := newStore(t, Options{
		OnError:          FailClosed,
		Clock:            fake,
		Timeout:          timeout,
		FailureThreshold: 1,
		OpenDuration:     openFor,
		OnRedisError:     func(err error) { redisErrs <- err },
	}, srv.Addr)
	l := ratelimit.Limit{Algorithm: ratelimit.GCRA, Limit: 5, Period: time.Hour}
	allow(t, s, "hung", l, 1) // connected, script loaded

	srv.Pause()
	decided := make(chan ratelimit.Decision, 1)
	go func() {
		d, err := s.AllowN(context.Background(), "hung", l, 1)
		if err != nil {
			t.Errorf("AllowN: %v", err)
		}
		decided <- d
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fake.BlockUntil(ctx, 1); err != nil { // the call's timeout is armed
		t.Fatal(err)
	}
	fake.Advance(timeout)
	if d := receive(t, decided, "decision of the timed-out call"); d.Allowed || d.RetryAfter != openFor {
		t.Errorf("timed-out call: %+v, want rejected, retry after %v", d, openFor)
	}
	if err := receive(t, redisErrs, "error reported to OnRedisError"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("OnRedisError got %v, want a deadline error", err)
	}
	if !s.CircuitOpen() {
		t.Fatal("circuit not open after a timeout with FailureThreshold 1")
	}

	// Open: decided at once, without Redis and without arming a timeout.
	fake.Advance(openFor / 2)
	if d := allow(t, s, "hung", l, 1); d.Allowed || d.RetryAfter != openFor/2 {
		t.Errorf("open circuit: %+v, want rejected, retry after %v", d, openFor/2)
	}
	if n := fake.Timers(); n != 0 {
		t.Errorf("%d timers armed by a call the open circuit kept from Redis", n)
	}

	srv.Resume()
	fake.Advance(openFor / 2)
	// The timed-out call was sent before the pause: Redis runs it when it
	// resumes, so it may have consumed quota (a timeout is no proof that a
	// script did not run).
	if d := allow(t, s, "hung", l, 1); !d.Allowed || d.Remaining < 2 || d.Remaining > 3 {
		t.Errorf("probe: %+v, want allowed by Redis with 2 or 3 remaining", d)
	}
	if s.CircuitOpen() {
		t.Error("circuit still open after a successful probe")
	}
	select {
	case err := <-redisErrs:
		t.Errorf("unexpected Redis error: %v", err)
	default:
	}
}

// connectedClients returns INFO's connected_clients of srv.
func connectedClients(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	info := do(t, srv.Addr, "INFO", "clients")
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "connected_clients:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("INFO clients: %q", line)
			}
			return n
		}
	}
	t.Fatalf("INFO clients without connected_clients: %q", info)
	return 0
}

// TestCallerCancelIsNotAFailure: a caller that gives up while Redis is slow
// gets its context's error, and the circuit does not count it.
func TestCallerCancelIsNotAFailure(t *testing.T) {
	srv := redistest.StartServer(t)
	fake := clock.NewFake(time.Time{})
	var redisErrors atomic.Int64
	s := newStore(t, Options{Clock: fake, FailureThreshold: 1, OnRedisError: func(error) { redisErrors.Add(1) }}, srv.Addr)
	l := ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Limit: 5, Period: time.Hour}
	allow(t, s, "slow", l, 1)

	srv.Pause()
	defer srv.Resume()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.AllowN(ctx, "slow", l, 1)
		errc <- err
	}()
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := fake.BlockUntil(wait, 1); err != nil { // the call is under way
		t.Fatal(err)
	}
	cancel()
	if err := receive(t, errc, "answer to the cancelled call"); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if s.CircuitOpen() || redisErrors.Load() != 0 {
		t.Errorf("a cancelled call counted as a failure of Redis (open %v, %d errors)", s.CircuitOpen(), redisErrors.Load())
	}
}
