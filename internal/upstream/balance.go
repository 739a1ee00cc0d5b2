package upstream

import "math/rand/v2"

// balancers are the pickers of config's upstream balance values (none:
// round robin). Each
// prefers an Available target other than avoid, and falls back to some
// target when there is none.
var balancers = map[string]func(*Pool, *Target) *Target{
	"":               pickRoundRobin,
	"round_robin":    pickRoundRobin,
	"least_inflight": pickLeastInflight,
	"p2c":            pickP2C,
}

// pickRoundRobin takes the targets in turn.
func pickRoundRobin(p *Pool, avoid *Target) *Target {
	n := uint64(len(p.targets))
	start := p.rr.Add(1)
	for i := uint64(0); i < n; i++ {
		t := p.targets[(start+i)%n]
		if t != avoid && t.Available() {
			return t
		}
	}
	return p.targets[start%n]
}

// pickLeastInflight takes the target with the fewest attempts under way,
// ties broken in turn.
func pickLeastInflight(p *Pool, avoid *Target) *Target {
	var best *Target
	start := int(p.rr.Add(1)) // rotate ties so that equal targets share load
	n := len(p.targets)
	for i := 0; i < n; i++ {
		t := p.targets[(start+i)%n]
		if t == avoid || !t.Available() {
			continue
		}
		if best == nil || t.InFlight.Load() < best.InFlight.Load() {
			best = t
		}
	}
	if best == nil {
		return p.targets[start%n]
	}
	return best
}

// pickP2C takes the less busy of two targets drawn at random, three draws
// at most, then falls back to pickLeastInflight.
func pickP2C(p *Pool, avoid *Target) *Target {
	n := len(p.targets)
	for tries := 0; tries < 3; tries++ {
		a, b := p.targets[rand.IntN(n)], p.targets[rand.IntN(n)]
		if b.InFlight.Load() < a.InFlight.Load() {
			a, b = b, a
		}
		if a != avoid && a.Available() {
			return a
		}
		if b != avoid && b.Available() {
			return b
		}
	}
	return pickLeastInflight(p, avoid)
}
