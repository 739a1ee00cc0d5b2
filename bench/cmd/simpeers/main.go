// Command simpeers prints the overload simulator's comparison of sluice's
// adaptive limits with go-concurrency-limits' (virtual time, every standard
// scenario), and with -realtime the real-time comparison with failsafe-go's
// adaptivelimiter and go-kratos/aegis' BBR.
//
//	cd bench && go run ./cmd/simpeers [-scenario a,b] [-json] [-realtime]
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/sluicehq/sluice/bench/simpeers"
	"github.com/sluicehq/sluice/sim"
)

func main() {
	scenarios := flag.String("scenario", "all", "standard scenarios, comma-separated, or all")
	jsonOut := flag.Bool("json", false, "print JSON instead of tables")
	svg := flag.String("svg", "", "write the limit over time of each scenario to FILE-SCENARIO.svg")
	realtime := flag.Bool("realtime", false, "also run the real-time harness (about 1 minute)")
	flag.Parse()
	if err := run(*scenarios, *jsonOut, *svg, *realtime); err != nil {
		fmt.Fprintln(os.Stderr, "simpeers:", err)
		os.Exit(1)
	}
}

func run(names string, jsonOut bool, svg string, realtime bool) error {
	scs := sim.Standard()
	if names != "all" {
		scs = nil
		for _, n := range strings.Split(names, ",") {
			sc, err := sim.Lookup(n)
			if err != nil {
				return err
			}
			scs = append(scs, sc)
		}
	}
	res, err := sim.RunAll(scs, simpeers.All())
	if err != nil {
		return err
	}
	if svg != "" {
		for _, sc := range scs {
			f, err := os.Create(strings.TrimSuffix(svg, ".svg") + "-" + sc.Name + ".svg")
			if err != nil {
				return err
			}
			err = sim.WriteSVG(f, sc, res)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
	if jsonOut {
		return sim.WriteJSON(os.Stdout, scs, res)
	}
	fmt.Println("# Virtual time (package sim): sluice's algorithms and go-concurrency-limits (gcl-*)")
	if err := sim.WriteTable(os.Stdout, scs, res); err != nil {
		return err
	}
	fmt.Println()
	if err := sim.WriteGoals(os.Stdout, res); err != nil {
		return err
	}
	fmt.Println("\n# Default against each peer. Default wins when it does not collapse and its p99 is")
	fmt.Println("# within 2× the no-load p99, and either its goodput is at most 1 point below the peer's")
	fmt.Println("# with p99 at most 1.05× the peer's, or it leads one axis by a large margin (5 points of")
	fmt.Println("# goodput, or p99 1.15× lower) losing at most 3 points or a factor 1.15 on the other.")
	fmt.Println("# A peer that collapses or whose p99 exceeds 2× the no-load p99 is beaten.")
	if err := simpeers.WriteVerdicts(os.Stdout, scs, res, simpeers.PeerNames()); err != nil {
		return err
	}
	if !realtime {
		return nil
	}
	fmt.Println("\n# Real time (in-process downstream, times compressed 4×; figures scaled back)")
	rt, err := simpeers.RealTime(simpeers.RealTimeScenarios(), simpeers.RealTimePeers())
	if err != nil {
		return err
	}
	return simpeers.WriteRealTime(os.Stdout, rt)
}
