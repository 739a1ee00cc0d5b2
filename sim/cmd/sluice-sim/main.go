// Command sluice-sim runs sluice's overload simulator: every adaptive
// concurrency limit of concurrency/limit, and the baselines (no limit, the
// oracle, static limits 2× off), against a simulated downstream in virtual
// time, and prints a table of goodput, latency, rejections and the
// behaviour of the limit, followed by the goals of the adaptive-limit work.
//
// Usage:
//
//	go run ./sim/cmd/sluice-sim                         # all standard scenarios
//	go run ./sim/cmd/sluice-sim -scenario overload-3x,capacity-half -svg limit.svg
//	go run ./sim/cmd/sluice-sim -scenario capacity-half -workers 32 -load 2
//	go run ./sim/cmd/sluice-sim -file my.json -alg default,gradient2 -json
//	go run ./sim/cmd/sluice-sim -list
//	go run ./sim/cmd/sluice-sim -seeds 4 -alg default   # seeds 1..4: worst case over seeds
//	go run ./sim/cmd/sluice-sim -seeds 1,7,9
//
// With -seeds, every scenario runs once per seed; the table and the goals
// of the first seed are printed, then the goals over all seeds: each
// figure's worst value, its mean in brackets, and how many seeds met the
// goal ("ok" only when all did). -json then holds every seed's runs.
// Scenario flags (-workers, -service, -load, -step, ...) override the one
// scenario named by -scenario, or the default scenario when none is named.
// A scenario file is JSON in the format of sim.ScenarioFile; the scenarios
// in the -json output are in that format too.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sim"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-sim:", err)
		os.Exit(2)
	}
}

// stepList collects repeated -step flags.
type stepList []sim.Step

func (s *stepList) String() string { return fmt.Sprint(len(*s), " steps") }

// Set parses "AT:workers=N", "AT:delay=+60ms" or "AT:load=X" (several
// changes separated by commas).
func (s *stepList) Set(v string) error {
	at, changes, ok := strings.Cut(v, ":")
	if !ok {
		return errors.New(`want AT:change[,change], e.g. 30s:workers=8 or 30s:delay=+60ms`)
	}
	d, err := time.ParseDuration(at)
	if err != nil {
		return fmt.Errorf("step time: %w", err)
	}
	st := sim.Step{At: d}
	for _, c := range strings.Split(changes, ",") {
		k, val, _ := strings.Cut(c, "=")
		switch k {
		case "workers":
			if _, err := fmt.Sscan(val, &st.Workers); err != nil {
				return fmt.Errorf("workers: %w", err)
			}
		case "delay":
			if st.AddNetDelay, err = time.ParseDuration(strings.TrimPrefix(val, "+")); err != nil {
				return fmt.Errorf("delay: %w", err)
			}
		case "load":
			if _, err := fmt.Sscan(val, &st.Load); err != nil {
				return fmt.Errorf("load: %w", err)
			}
		default:
			return fmt.Errorf("unknown change %q (want workers, delay or load)", k)
		}
	}
	*s = append(*s, st)
	return nil
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sluice-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		scenarios = fs.String("scenario", "all", "standard scenarios to run, comma-separated, or all")
		file      = fs.String("file", "", "run the scenario in this JSON file instead")
		algs      = fs.String("alg", "all", "algorithms to run, comma-separated, or all")
		jsonOut   = fs.Bool("json", false, "print machine-readable JSON instead of the table")
		svgOut    = fs.String("svg", "", "write the limit over time as SVG to this file (one file per scenario: NAME-SCENARIO.svg when several)")
		list      = fs.Bool("list", false, "list the standard scenarios and algorithms, then exit")
		workers   = fs.Int("workers", 0, "downstream workers")
		service   = fs.String("service", "", "service-time distribution: exponential, lognormal, bimodal, constant")
		mean      = fs.Duration("mean", 0, "mean service time")
		sigma     = fs.Float64("sigma", 0, "lognormal sigma")
		load      = fs.Float64("load", 0, "arrival rate as a fraction of capacity")
		rate      = fs.Float64("rate", 0, "arrival rate in requests per second (overrides -load)")
		arrivals  = fs.String("arrivals", "", "arrival process: poisson or bursty")
		deadline  = fs.Duration("deadline", 0, "per-request deadline")
		netDelay  = fs.Duration("netdelay", 0, "initial network delay")
		duration  = fs.Duration("duration", 0, "simulated duration")
		seed      = fs.Uint64("seed", 0, "random seed")
		retries   = fs.Int("retries", 0, "retries of a rejected request")
		queue     = fs.Int("queue", 0, "admission queue length (0: reject at once)")
		maxWait   = fs.Duration("maxwait", 0, "admission queue max wait")
		seedList  = fs.String("seeds", "", "run every scenario with several seeds: N (seeds 1..N) or a comma-separated list")
		steps     stepList
	)
	fs.Var(&steps, "step", "a step, repeatable: AT:workers=N | AT:delay=+D | AT:load=X, e.g. 30s:workers=8")
	if err := fs.Parse(args); err != nil {
		return err
	}
	factories := sim.All()
	if *list {
		for _, sc := range sim.Standard() {
			fmt.Fprintf(stdout, "%-16s %s\n", sc.Name, sc.About)
		}
		var names []string
		for _, f := range factories {
			names = append(names, f.Name)
		}
		fmt.Fprintln(stdout, "algorithms:", strings.Join(names, ", "))
		return nil
	}
	factories, err := pickFactories(factories, *algs)
	if err != nil {
		return err
	}
	overridden := false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "scenario", "file", "alg", "json", "svg", "list", "seeds":
		default:
			overridden = true
		}
	})
	var scs []sim.Scenario
	switch {
	case *file != "":
		f, err := os.Open(*file)
		if err != nil {
			return err
		}
		sc, err := sim.ParseScenario(f)
		f.Close()
		if err != nil {
			return err
		}
		scs = []sim.Scenario{sc}
	case *scenarios == "all" && !overridden:
		scs = sim.Standard()
	default:
		base := sim.Scenario{Name: "custom", About: "from flags", Seed: 1}
		if *scenarios != "all" {
			for _, name := range strings.Split(*scenarios, ",") {
				sc, err := sim.Lookup(strings.TrimSpace(name))
				if err != nil {
					return err
				}
				scs = append(scs, sc)
			}
			if overridden && len(scs) != 1 {
				return errors.New("scenario flags need exactly one -scenario (or none)")
			}
			base = scs[0]
		}
		if overridden {
			if base.Name != "custom" {
				base.Name += "+flags"
			}
			set := func(name string, apply func()) {
				fs.Visit(func(f *flag.Flag) {
					if f.Name == name {
						apply()
					}
				})
			}
			set("workers", func() { base.Workers = *workers })
			set("service", func() { base.Service.Kind = sim.DistKind(*service) })
			set("mean", func() { base.Service.Mean = *mean })
			set("sigma", func() { base.Service.Sigma = *sigma })
			set("load", func() { base.Arrivals.Load, base.Arrivals.Rate = *load, 0 })
			set("rate", func() { base.Arrivals.Rate = *rate })
			set("arrivals", func() { base.Arrivals.Kind = sim.ArrivalKind(*arrivals) })
			set("deadline", func() { base.Deadline = *deadline })
			set("netdelay", func() { base.NetDelay = *netDelay })
			set("duration", func() { base.Duration = *duration })
			set("seed", func() { base.Seed = *seed })
			set("retries", func() { base.Retry.MaxRetries = *retries })
			set("queue", func() { base.Queue.Max = *queue })
			set("maxwait", func() { base.Queue.MaxWait = *maxWait })
			set("step", func() { base.Steps = steps })
			scs = []sim.Scenario{base}
		}
	}
	seeds, err := parseSeeds(*seedList)
	if err != nil {
		return err
	}
	all := scs
	if seeds != nil {
		all = nil
		for _, seed := range seeds {
			for _, sc := range scs {
				sc.Seed = seed
				all = append(all, sc)
			}
		}
	}
	start := time.Now()
	allResults, err := sim.RunAll(all, factories)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	// runs[i] holds the results of the i-th seed, scenario-major.
	per := len(scs) * len(factories)
	var runs [][]*sim.Result
	for i := 0; i < len(allResults); i += per {
		runs = append(runs, allResults[i:i+per])
	}
	results := runs[0]
	if *svgOut != "" {
		if err := writeSVGs(*svgOut, scs, results); err != nil {
			return err
		}
	}
	if *jsonOut {
		return sim.WriteJSON(stdout, all, allResults)
	}
	if seeds != nil {
		fmt.Fprintf(stdout, "# seed %d\n", seeds[0])
	}
	if err := sim.WriteTable(stdout, scs, results); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	if err := sim.WriteGoals(stdout, results); err != nil {
		return err
	}
	if len(runs) > 1 {
		fmt.Fprintf(stdout, "\n# goals over seeds %s: worst [mean] seeds met\n", joinSeeds(seeds))
		if err := sim.WriteGoalsSeeds(stdout, runs); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "\n%d runs in %.1fs of wall time\n", len(allResults), elapsed.Seconds())
	return nil
}

// parseSeeds parses -seeds: "" (nil: each scenario's own seed), "N" (seeds
// 1 to N) or a comma-separated list of seeds.
func parseSeeds(v string) ([]uint64, error) {
	if v == "" {
		return nil, nil
	}
	if !strings.Contains(v, ",") {
		var n uint64
		if _, err := fmt.Sscan(v, &n); err != nil || n < 1 || n > 1000 {
			return nil, fmt.Errorf("-seeds %q: want a count in [1, 1000] or a list of seeds", v)
		}
		seeds := make([]uint64, n)
		for i := range seeds {
			seeds[i] = uint64(i) + 1
		}
		return seeds, nil
	}
	var seeds []uint64
	for _, f := range strings.Split(v, ",") {
		var s uint64
		if _, err := fmt.Sscan(strings.TrimSpace(f), &s); err != nil {
			return nil, fmt.Errorf("-seeds %q: %w", v, err)
		}
		seeds = append(seeds, s)
	}
	return seeds, nil
}

func joinSeeds(seeds []uint64) string {
	var s []string
	for _, x := range seeds {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ",")
}

func pickFactories(all []sim.Factory, names string) ([]sim.Factory, error) {
	if names == "all" {
		return all, nil
	}
	var out []sim.Factory
	for _, n := range strings.Split(names, ",") {
		found := false
		for _, f := range all {
			if f.Name == strings.TrimSpace(n) {
				out = append(out, f)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown algorithm %q (see -list)", n)
		}
	}
	return out, nil
}

// writeSVGs writes one plot per scenario: to path itself when there is one
// scenario, else to path with "-SCENARIO" before its extension.
func writeSVGs(path string, scs []sim.Scenario, results []*sim.Result) error {
	for _, sc := range scs {
		p := path
		if len(scs) > 1 {
			ext := filepath.Ext(path)
			p = strings.TrimSuffix(path, ext) + "-" + sc.Name + ext
		}
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		err = sim.WriteSVG(f, sc, results)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
