package sim_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// Run one algorithm on a scenario: here the oracle baseline at 3× overload.
func ExampleRun() {
	sc, _ := sim.Lookup("overload-3x")
	sc.Duration = 10 * time.Second
	var oracle sim.Factory
	for _, f := range sim.Baselines() {
		if f.Name == "oracle" {
			oracle = f
		}
	}
	r, err := sim.RunFactory(sc, oracle)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("optimum %.0f, limit %.0f, goodput %.0f%%, timed out %.0f%%\n",
		r.Optimum, r.MeanLimit, r.Goodput*100, r.TimedOut*100)
	// Output: optimum 16, limit 16, goodput 98%, timed out 0%
}

// Describe a scenario in the file format and run every algorithm on it.
func ExampleParseScenario() {
	sc, err := sim.ParseScenario(stringsReader(`{
		"name": "slow-disk",
		"duration": "20s",
		"service": {"kind": "lognormal", "mean": "20ms", "sigma": 0.5},
		"arrivals": {"load": 2},
		"steps": [{"at": "10s", "workers": 8}]
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	results, err := sim.RunAll([]sim.Scenario{sc}, sim.Baselines())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range results {
		fmt.Printf("%-11s optimum after the step %.0f\n", r.Algorithm, r.Optimum)
	}
	// Output:
	// none        optimum after the step 8
	// oracle      optimum after the step 8
	// static-2x   optimum after the step 8
	// static-0.5x optimum after the step 8
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
