// Package simpeers runs other libraries' adaptive concurrency limits in
// sluice's overload simulator (package sim), next to sluice's own, and
// holds a small real-time harness for the peers that read the clock
// themselves.
//
// Virtual time: go-concurrency-limits' Vegas, Gradient2 and AIMD take every
// sample's time as an argument (OnSample(startTime, rtt, inflight,
// didDrop)), so an adapter makes them a sim.Algorithm and they run the same
// scenarios, with the same requests, as sluice's algorithms. Its Vegas draws
// its probe jitter from the global math/rand source, so its runs are not
// exactly reproducible; the others are.
//
// Real time (RealTime): failsafe-go's adaptivelimiter and go-kratos/aegis'
// BBR measure time themselves; they run against an in-process downstream of
// goroutines with service times compressed by a factor, next to sluice's
// Default in the same run.
//
//	cd bench && go run ./cmd/simpeers            # virtual time, all scenarios
//	cd bench && go run ./cmd/simpeers -realtime  # adds the real-time harness
package simpeers

import (
	"time"

	gcl "github.com/platinummonkey/go-concurrency-limits/core"
	gcllimit "github.com/platinummonkey/go-concurrency-limits/limit"
	"github.com/sluicehq/sluice/sim"
)

// gclAdapter makes a go-concurrency-limits Limit a sim.Algorithm, feeding
// it samples exactly as that library's DefaultLimiter does: the call's start
// time, its round trip in nanoseconds, the in-flight count at its start
// (itself included) and whether it dropped.
type gclAdapter struct{ l gcl.Limit }

func (a gclAdapter) Limit() int { return a.l.EstimatedLimit() }

func (a gclAdapter) Sample(now int64, rtt time.Duration, inflight int, dropped bool) int {
	a.l.OnSample(now-int64(rtt), int64(rtt), inflight, dropped)
	return a.l.EstimatedLimit()
}

// Peers returns the go-concurrency-limits v0.8.0 algorithms with their
// default settings, as sim factories: "gcl-vegas", "gcl-gradient2",
// "gcl-aimd".
func Peers() []sim.Factory {
	return []sim.Factory{
		{Name: "gcl-vegas", New: func(sim.Scenario) (sim.Algorithm, error) {
			return gclAdapter{gcllimit.NewDefaultVegasLimit("vegas", nil, nil)}, nil
		}},
		{Name: "gcl-gradient2", New: func(sim.Scenario) (sim.Algorithm, error) {
			return gclAdapter{gcllimit.NewDefaultGradient2Limit("gradient2", nil, nil)}, nil
		}},
		{Name: "gcl-aimd", New: func(sim.Scenario) (sim.Algorithm, error) {
			return gclAdapter{gcllimit.NewDefaultAIMDLimit("aimd", nil)}, nil
		}},
	}
}

// PeerNames returns the names of Peers' factories.
func PeerNames() []string {
	var names []string
	for _, f := range Peers() {
		names = append(names, f.Name)
	}
	return names
}

// All returns sim.All (baselines and sluice's algorithms) followed by Peers.
func All() []sim.Factory { return append(sim.All(), Peers()...) }
