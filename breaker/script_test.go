package breaker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
)

// The transition tests are scripts of steps run against a breaker on a fake
// clock:
//
//	ok | fail | slow | slowfail | ignored | dropped [xN]
//	                     acquire (must be admitted) and finish at once, N times
//	hold                 acquire (must be admitted) and keep the permit
//	done CLASS           finish the oldest held permit (CLASS as above)
//	reject DUR           acquire must be rejected with RetryAfter DUR
//	adv DUR              advance the fake clock
//	state S              State() must be S
//	calls N F S          the window must hold N calls, F failures, S slow
//	probes N             Metrics().Probes must be N
//	trips N              Metrics().Trips must be N
//	open|close|reset|force|disable   the manual operations
//	events A>B,...       the state changes delivered since the last check
type script struct {
	t      *testing.T
	clk    *clock.Fake
	b      *Breaker
	held   []sluice.Permit
	mu     sync.Mutex
	events []string
}

func newScript(t *testing.T, opts Options) *script {
	t.Helper()
	s := &script{t: t, clk: clock.NewFake(time.Time{})}
	opts.Clock = s.clk
	opts.Name = "test"
	opts.OnStateChange = func(name string, from, to State) {
		if name != "test" {
			t.Errorf("OnStateChange name = %q", name)
		}
		s.mu.Lock()
		s.events = append(s.events, from.String()+">"+to.String())
		s.mu.Unlock()
	}
	b, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.b = b
	return s
}

func outcomeOf(class string) (sluice.Outcome, bool) {
	switch class {
	case "ok":
		return sluice.Outcome{Class: sluice.Success, Latency: 10 * time.Millisecond}, true
	case "fail":
		return sluice.Outcome{Class: sluice.Failure, Err: errors.New("boom"), Latency: 10 * time.Millisecond}, true
	case "slow":
		return sluice.Outcome{Class: sluice.Success, Latency: 10 * time.Second}, true
	case "slowfail":
		return sluice.Outcome{Class: sluice.Failure, Err: errors.New("boom"), Latency: 10 * time.Second}, true
	case "ignored":
		return sluice.Outcome{Class: sluice.Ignored, Err: context.Canceled}, true
	case "dropped":
		return sluice.Outcome{Class: sluice.Dropped}, true
	}
	return sluice.Outcome{}, false
}

func (s *script) run(steps ...string) {
	t := s.t
	t.Helper()
	ctx := context.Background()
	for i, step := range steps {
		f := strings.Fields(step)
		where := fmt.Sprintf("step %d %q", i, step)
		arg := func(j int) string {
			if j >= len(f) {
				t.Fatalf("%s: missing argument", where)
			}
			return f[j]
		}
		dur := func(j int) time.Duration {
			d, err := time.ParseDuration(arg(j))
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			return d
		}
		num := func(j int) int {
			n, err := strconv.Atoi(arg(j))
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			return n
		}
		if o, ok := outcomeOf(f[0]); ok {
			n := 1
			if len(f) > 1 {
				c, err := strconv.Atoi(strings.TrimPrefix(f[1], "x"))
				if err != nil || !strings.HasPrefix(f[1], "x") {
					t.Fatalf("%s: want xN", where)
				}
				n = c
			}
			for range n {
				p, err := s.b.Acquire(ctx)
				if err != nil {
					t.Fatalf("%s: Acquire: %v", where, err)
				}
				p.Done(o)
			}
			continue
		}
		switch f[0] {
		case "hold":
			p, err := s.b.Acquire(ctx)
			if err != nil {
				t.Fatalf("%s: Acquire: %v", where, err)
			}
			s.held = append(s.held, p)
		case "done":
			o, ok := outcomeOf(arg(1))
			if !ok || len(s.held) == 0 {
				t.Fatalf("%s: bad class or no permit held", where)
			}
			p := s.held[0]
			s.held = s.held[1:]
			p.Done(o)
		case "reject":
			want := dur(1)
			_, err := s.b.Acquire(ctx)
			var r *sluice.Rejection
			if !errors.As(err, &r) || !errors.Is(err, sluice.ErrRejected) {
				t.Fatalf("%s: Acquire error = %v, want a rejection", where, err)
			}
			if r.Reason != sluice.CircuitOpen || r.Policy != "test" || r.RetryAfter != want {
				t.Fatalf("%s: rejection = %+v, want circuit_open by test, RetryAfter %v", where, *r, want)
			}
		case "adv":
			s.clk.Advance(dur(1))
		case "state":
			if got := s.b.State().String(); got != arg(1) {
				t.Fatalf("%s: State = %s", where, got)
			}
		case "calls":
			m := s.b.Metrics()
			if m.Calls != num(1) || m.Failures != num(2) || m.SlowCalls != num(3) {
				t.Fatalf("%s: window = %d calls, %d failures, %d slow", where, m.Calls, m.Failures, m.SlowCalls)
			}
		case "probes":
			if got := s.b.Metrics().Probes; got != num(1) {
				t.Fatalf("%s: Probes = %d", where, got)
			}
		case "trips":
			if got := s.b.Metrics().Trips; got != uint64(num(1)) {
				t.Fatalf("%s: Trips = %d", where, got)
			}
		case "open":
			s.b.Open()
		case "close":
			s.b.Close()
		case "reset":
			s.b.Reset()
		case "force":
			s.b.ForceOpen()
		case "disable":
			s.b.Disable()
		case "events":
			s.mu.Lock()
			got := strings.Join(s.events, ",")
			s.events = nil
			s.mu.Unlock()
			if want := strings.Join(f[1:], ","); got != want {
				t.Fatalf("%s: events = %q", where, got)
			}
		default:
			t.Fatalf("%s: unknown step", where)
		}
	}
}
