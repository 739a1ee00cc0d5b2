package upstream

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
)

// newTestPool builds a pool of n targets (never dialled) balanced by
// balance, on clk.
func newTestPool(t *testing.T, n int, balance string, clk clock.Clock) *Pool {
	t.Helper()
	cfg := &config.Upstream{Balance: balance, Protocol: "http1",
		ConnectTimeout: config.Duration(time.Second), ResponseHeaderTimeout: config.Duration(time.Second)}
	for i := range n {
		cfg.Targets = append(cfg.Targets, "http://127.0.0.1:"+string(rune('1'+i))+"0000")
	}
	p, err := New("u", cfg, Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := New("api", &config.Upstream{Balance: "fastest", Protocol: "h3", Targets: []string{"http://[::1"}}, Options{})
	if !errors.Is(err, sluice.ErrInvalidOptions) || !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("err = %v, want ErrInvalidOptions", err)
	}
	for _, want := range []string{"upstreams.api.balance", "upstreams.api.protocol", "upstreams.api.targets[0]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, does not name %s", err, want)
		}
	}
	if _, err := New("api", &config.Upstream{}, Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("no targets: err = %v, want ErrInvalidOptions", err)
	}
}

func TestRoundRobinTakesTargetsInTurn(t *testing.T) {
	p := newTestPool(t, 3, "round_robin", clock.NewFake(time.Unix(0, 0)))
	got := map[*Target]int{}
	prev := p.Choose(nil)
	for range 30 {
		next := p.Choose(nil)
		if next == prev {
			t.Fatalf("round robin chose %s twice in a row", next.URL)
		}
		got[next]++
		prev = next
	}
	for _, tg := range p.Targets() {
		if got[tg] != 10 {
			t.Errorf("%s chosen %d times of 30, want 10", tg.URL, got[tg])
		}
	}
}

func TestBalancersAvoidAndSkipUnavailable(t *testing.T) {
	for _, balance := range []string{"round_robin", "least_inflight", "p2c"} {
		t.Run(balance, func(t *testing.T) {
			p := newTestPool(t, 3, balance, clock.NewFake(time.Unix(0, 0)))
			ts := p.Targets()
			ts[2].healthy.Store(false)
			for range 100 {
				if got := p.Choose(ts[0]); got != ts[1] {
					t.Fatalf("Choose(avoid %s) = %s with %s unhealthy, want %s", ts[0].URL, got.URL, ts[2].URL, ts[1].URL)
				}
			}
		})
	}
}

func TestLeastInflightPrefersTheIdlest(t *testing.T) {
	p := newTestPool(t, 3, "least_inflight", clock.NewFake(time.Unix(0, 0)))
	ts := p.Targets()
	ts[0].InFlight.Store(3)
	ts[1].InFlight.Store(1)
	ts[2].InFlight.Store(2)
	for range 10 {
		if got := p.Choose(nil); got != ts[1] {
			t.Fatalf("Choose = %s, want the target with the fewest in flight", got.URL)
		}
	}
}

func TestChooseWhenEveryTargetIsOut(t *testing.T) {
	for _, balance := range []string{"round_robin", "least_inflight", "p2c"} {
		p := newTestPool(t, 2, balance, clock.NewFake(time.Unix(0, 0)))
		for _, tg := range p.Targets() {
			tg.healthy.Store(false)
		}
		if p.Choose(nil) == nil {
			t.Errorf("%s: Choose returned no target when every one is out", balance)
		}
	}
}

// transitions records a target's breaker transitions.
type transitions struct {
	noMetrics
	mu sync.Mutex
	to []breaker.State
}

func (r *transitions) BreakerTransition(to breaker.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.to = append(r.to, to)
}

func (r *transitions) list() []breaker.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]breaker.State(nil), r.to...)
}

func TestPassiveHealthTakesAFailingTargetOut(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	rec := &transitions{}
	p, err := New("u", &config.Upstream{Targets: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}},
		Options{Clock: clk, Metrics: func(string) Metrics { return rec }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	tg := p.Targets()[0]
	fail := sluice.Outcome{Class: sluice.Failure, Err: errors.New("refused")}
	for i := range 5 {
		if !tg.Available() {
			t.Fatalf("out after %d failures, want 5", i)
		}
		tg.Permit().Done(fail)
	}
	if tg.Available() {
		t.Fatal("available after 5 failures in a row")
	}
	if _, err := tg.Acquire(); err == nil {
		t.Fatal("Acquire admitted an attempt to a target taken out")
	}
	if s, ok := tg.Breaker(); !ok || s != breaker.Open {
		t.Fatalf("Breaker() = %v, %v; want open", s, ok)
	}
	for range 10 {
		if p.Choose(nil) == tg {
			t.Fatal("Choose picked the target taken out")
		}
	}
	clk.Advance(5 * time.Second)
	probe, err := tg.Acquire()
	if err != nil {
		t.Fatalf("no probe after 5s: %v", err)
	}
	if _, err := tg.Acquire(); err == nil {
		t.Fatal("a second attempt went during the probe")
	}
	probe.Done(sluice.Outcome{Class: sluice.Success})
	if !tg.Available() {
		t.Fatal("still out after a successful probe")
	}
	got := rec.list()
	want := []breaker.State{breaker.Open, breaker.HalfOpen, breaker.Closed}
	if len(got) != len(want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("transitions %v, want %v", got, want)
		}
	}
}
