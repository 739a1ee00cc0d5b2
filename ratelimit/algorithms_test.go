package ratelimit

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

var allAlgorithms = []Algorithm{GCRA, TokenBucket, LeakyBucket, FixedWindow, SlidingWindow, SlidingLog}

// req is one request of a generated arrival pattern.
type req struct {
	at int64
	n  int
}

// arrivals returns count requests in time order from seed: bursts at one
// instant, gaps shorter than an emission interval, and idle stretches; some
// requests for n > 1 are followed by one for n = 1 at the same instant.
func arrivals(seed uint64, count int, l Limit) []req {
	rng := rand.New(rand.NewPCG(seed, 7))
	p := int64(l.Period)
	at := int64(rng.IntN(int(p))) - p/2 // start off any window boundary, maybe negative
	var out []req
	for len(out) < count {
		switch r := rng.IntN(10); {
		case r < 3: // same instant
		case r < 8:
			at += rng.Int64N(2*p/int64(l.Limit) + 1)
		case r < 9:
			at += rng.Int64N(p/4 + 1)
		default:
			at += rng.Int64N(3 * p)
		}
		n := 1
		if rng.IntN(4) == 0 {
			n = 1 + rng.IntN(l.Capacity()+1) // sometimes more than capacity
		}
		out = append(out, req{at, n})
		if n > 1 && rng.IntN(2) == 0 {
			out = append(out, req{at, 1})
		}
	}
	return out
}

var propertyLimits = []Limit{
	{Limit: 5, Period: 1000, Burst: 8},
	{Limit: 3, Period: 1000}, // Period/Limit is not a whole number
	{Limit: 7, Period: 1_000_003, Burst: 2},
	{Limit: 1, Period: 50},
	{Limit: 100, Period: time.Second, Burst: 150},
}

func forEachCase(t *testing.T, f func(t *testing.T, l Limit, seed uint64)) {
	for _, alg := range allAlgorithms {
		for _, base := range propertyLimits {
			l := base
			l.Algorithm = alg
			for seed := range uint64(6) {
				t.Run(fmt.Sprintf("%s/%d per %d burst %d/seed %d", alg, l.Limit, l.Period, l.Burst, seed), func(t *testing.T) {
					f(t, l, seed)
				})
			}
		}
	}
}

// run feeds reqs to one key of a fresh Memory store and returns the decisions.
func run(t *testing.T, l Limit, reqs []req) []Decision {
	t.Helper()
	m := NewMemory(MemoryOptions{MaxKeys: -1})
	out := make([]Decision, len(reqs))
	for i, r := range reqs {
		d, err := m.AllowNAt("k", l, r.n, r.at)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = d
	}
	return out
}

// TestWindowBound checks each algorithm's guarantee: no window admits more
// than the documented bound, for every window that starts at an admitted
// request.
func TestWindowBound(t *testing.T) {
	forEachCase(t, func(t *testing.T, l Limit, seed uint64) {
		reqs := arrivals(seed, 600, l)
		ds := run(t, l, reqs)
		p, lim, c := int64(l.Period), int64(l.Limit), int64(l.Capacity())
		// admittedIn sums the events admitted in [from, to], or [from, to) if open.
		admittedIn := func(from, to int64, open bool) (sum int64) {
			for i, r := range reqs {
				if ds[i].Allowed && r.at >= from && (r.at < to || !open && r.at == to) {
					sum += int64(r.n)
				}
			}
			return sum
		}
		admitted := 0
		for i, r := range reqs {
			d := ds[i]
			if int64(r.n) > c {
				if d.Allowed || d.RetryAfter != RetryNever {
					t.Fatalf("request %d for %d > capacity %d: %+v", i, r.n, c, d)
				}
				continue
			}
			if !d.Allowed {
				if d.RetryAfter <= 0 {
					t.Fatalf("request %d rejected with RetryAfter %v", i, d.RetryAfter)
				}
				continue
			}
			admitted++
			a := r.at
			switch l.Algorithm {
			case GCRA, TokenBucket, LeakyBucket:
				for _, span := range []int64{0, p / 3, p, 2*p + 7, 10 * p} {
					if got, bound := admittedIn(a, a+span, false), c+lim*span/p; got > bound {
						t.Fatalf("%d events in [%d, %d], bound %d", got, a, a+span, bound)
					}
				}
			case SlidingLog:
				if got := admittedIn(a, a+p, true); got > lim {
					t.Fatalf("%d events in [%d, %d), limit %d", got, a, a+p, lim)
				}
			case FixedWindow, SlidingWindow:
				start := floorDiv(a, p) * p
				if got := admittedIn(start, start+p, true); got > lim {
					t.Fatalf("%d events in aligned window [%d, %d), limit %d", got, start, start+p, lim)
				}
				bound := 2 * lim
				if l.Algorithm == SlidingWindow {
					bound = 2*lim - 1
				}
				if got := admittedIn(a, a+p, true); got > bound {
					t.Fatalf("%d events in [%d, %d), bound %d", got, a, a+p, bound)
				}
			}
		}
		if admitted == 0 {
			t.Fatal("nothing admitted: the pattern tests nothing")
		}
	})
}

// TestRejectionConsumesNothing replays only the admitted requests on a second
// store: every decision must be the same as with the rejected requests in
// between, so a rejection (including one followed at the same instant by a
// request for one event) leaves no trace.
func TestRejectionConsumesNothing(t *testing.T) {
	forEachCase(t, func(t *testing.T, l Limit, seed uint64) {
		reqs := arrivals(seed, 400, l)
		ds := run(t, l, reqs)
		var kept []req
		var want []Decision
		for i, r := range reqs {
			if ds[i].Allowed {
				kept = append(kept, r)
				want = append(want, ds[i])
			}
		}
		got := run(t, l, kept)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("admitted request %d at %d: %+v without the rejections, %+v with them", i, kept[i].at, got[i], want[i])
			}
		}
	})
}

// TestRetryAfter checks that a rejected request would be admitted RetryAfter
// later and not a nanosecond earlier, if nothing else happened in between.
func TestRetryAfter(t *testing.T) {
	forEachCase(t, func(t *testing.T, l Limit, seed uint64) {
		p, err := l.params()
		if err != nil {
			t.Fatal(err)
		}
		reqs := arrivals(seed, 300, l)
		s := fresh(p, reqs[0].at)
		for i, r := range reqs {
			before := clone(s)
			d := s.decide(p, int64(r.n), r.at)
			if d.Allowed || d.RetryAfter == RetryNever {
				continue
			}
			later := clone(before)
			if d2 := later.decide(p, int64(r.n), r.at+int64(d.RetryAfter)); !d2.Allowed {
				t.Fatalf("request %d (n=%d at %d) rejected with RetryAfter %v, and rejected again then: %+v", i, r.n, r.at, d.RetryAfter, d2)
			}
			earlier := clone(before)
			if d2 := earlier.decide(p, int64(r.n), r.at+int64(d.RetryAfter)-1); d2.Allowed {
				t.Fatalf("request %d (n=%d at %d) rejected with RetryAfter %v, but admitted 1ns earlier", i, r.n, r.at, d.RetryAfter)
			}
		}
	})
}

// clone copies a state, including its sliding log.
func clone(s state) state {
	if s.log != nil {
		r := *s.log
		r.ts = append([]int64(nil), r.ts...)
		s.log = &r
	}
	return s
}

// TestEvictionChangesNothing runs many keys on a store that sweeps idle keys
// at every request and on one that never does: the decisions must agree.
func TestEvictionChangesNothing(t *testing.T) {
	for _, alg := range allAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			l := Limit{Algorithm: alg, Limit: 4, Period: 1000, Burst: 6}
			sweeping := NewMemory(MemoryOptions{MaxKeys: -1, SweepInterval: 1})
			keeping := NewMemory(MemoryOptions{MaxKeys: -1, SweepInterval: 1 << 62})
			rng := rand.New(rand.NewPCG(1, 2))
			now := int64(0)
			for i := range 20000 {
				now += rng.Int64N(300)
				key := fmt.Sprint(rng.IntN(500))
				n := 1 + rng.IntN(3)
				a, err1 := sweeping.AllowNAt(key, l, n, now)
				b, err2 := keeping.AllowNAt(key, l, n, now)
				if err1 != nil || err2 != nil || a != b {
					t.Fatalf("request %d: %+v, %v with sweeping; %+v, %v without", i, a, err1, b, err2)
				}
			}
			if sweeping.Len() >= keeping.Len() {
				t.Fatalf("sweeping store holds %d keys, the other %d: nothing was evicted", sweeping.Len(), keeping.Len())
			}
		})
	}
}
