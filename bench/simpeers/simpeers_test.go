package simpeers

import (
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// TestSimPeers prints the comparison table of sluice's algorithms and the
// peers on every standard scenario, in virtual time (a few seconds):
//
//	cd bench && go test -run TestSimPeers -v ./simpeers
func TestSimPeers(t *testing.T) {
	scs := sim.Standard()
	if testing.Short() {
		scs = scs[:3]
	}
	res, err := sim.RunAll(scs, All())
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		if err := sim.WriteTable(os.Stdout, scs, res); err != nil {
			t.Fatal(err)
		}
		if err := sim.WriteGoals(os.Stdout, res); err != nil {
			t.Fatal(err)
		}
	}
	// The adapters drive the peers: at 3× overload each peer's limit moves
	// and protects the downstream from collapse, which no limit does not.
	for _, r := range res {
		if r.Scenario != "overload-3x" {
			continue
		}
		switch r.Algorithm {
		case "none":
			if r.Goodput > 0.05 {
				t.Errorf("none: goodput %.2f at 3× overload, want a collapse", r.Goodput)
			}
		case "gcl-vegas", "gcl-gradient2", "gcl-aimd":
			if !(r.CV > 0) || r.Goodput < 0.2 || r.TimedOut > 0.5 {
				t.Errorf("%s: CV %v, goodput %v, timed out %v: the adapter does not drive it", r.Algorithm, r.CV, r.Goodput, r.TimedOut)
			}
		}
	}
}

func TestGCLAdaptersAreDeterministic(t *testing.T) {
	sc, err := sim.Lookup("capacity-half")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = 20 * time.Second
	sc.Steps[0].At = 10 * time.Second
	for _, f := range Peers() {
		if f.Name == "gcl-vegas" {
			continue // its probe jitter comes from the global math/rand source
		}
		a, err := sim.RunFactory(sc, f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sim.RunFactory(sc, f)
		if err != nil {
			t.Fatal(err)
		}
		if a.Goodput != b.Goodput || a.P99 != b.P99 || a.MeanLimit != b.MeanLimit {
			t.Errorf("%s: two runs differ", f.Name)
		}
	}
}

// TestRealTime runs the real-time harness; it takes about a minute, so it
// runs only when SIMPEERS_REALTIME is set:
//
//	cd bench && SIMPEERS_REALTIME=1 go test -run TestRealTime -v ./simpeers
func TestRealTime(t *testing.T) {
	if os.Getenv("SIMPEERS_REALTIME") == "" {
		t.Skip("set SIMPEERS_REALTIME=1 to run the real-time harness")
	}
	res, err := RealTime(RealTimeScenarios(), RealTimePeers())
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteRealTime(os.Stdout, res); err != nil {
		t.Fatal(err)
	}
}
